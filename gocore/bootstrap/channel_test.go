package bootstrap_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/channel"
)

// Each bad request goes on a fresh session (the dispatcher rate-limits its
// refusal log to one line per session per second), is answered with the
// right status and field, is logged naming the field, and leaves that
// session and another one serving.
func TestChannelRequestIsRefused(t *testing.T) {
	h := newHarness(t)
	other := connect(t, h.path)
	tests := []struct {
		name   string
		edit   func(_ *testing.T, rc *rawClient, m *abi.Message)
		status abi.Status
		field  abi.Field
	}{
		{"wrong magic is Invalid naming magic",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Magic = abi.BootstrapMagic }, abi.StatusInvalid, abi.FieldMagic},
		{"wrong ABI version is Invalid naming abi_version",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.ABIVersion = abi.Version + 1 }, abi.StatusInvalid, abi.FieldABIVersion},
		{"a stale epoch is StaleSession naming epoch",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Epoch = testEpoch - 2 }, abi.StatusStaleSession, abi.FieldEpoch},
		{"an even generation is StaleGeneration",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Generation++ }, abi.StatusStaleGeneration, abi.FieldGeneration},
		{"an older generation is StaleGeneration",
			func(t *testing.T, rc *rawClient, m *abi.Message) {
				rc.ping(t, 1) // accepted: now the older one is stale
				m.Generation = rc.reply.InitialGeneration
			}, abi.StatusStaleGeneration, abi.FieldGeneration},
		{"a generation below the slot's initial one is StaleGeneration",
			func(_ *testing.T, rc *rawClient, m *abi.Message) { m.Generation = rc.reply.InitialGeneration - 2 }, abi.StatusStaleGeneration, abi.FieldGeneration},
		{"a generation jump beyond MaxGenerationStep is StaleGeneration",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Generation += abi.MaxGenerationStep + 2 }, abi.StatusStaleGeneration, abi.FieldGeneration},
		{"a descriptor offset inside the control page is Invalid naming desc_offset",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.DescOffset, m.DescLength = 64, 16 }, abi.StatusInvalid, abi.FieldDescOffset},
		{"a descriptor offset past the slot is Invalid naming desc_offset",
			func(_ *testing.T, rc *rawClient, m *abi.Message) { m.DescOffset, m.DescLength = rc.reply.SlotBytes, 1 }, abi.StatusInvalid, abi.FieldDescOffset},
		{"a descriptor offset without a length is Invalid naming desc_offset",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.DescOffset = abi.SlotDescOffset }, abi.StatusInvalid, abi.FieldDescOffset},
		{"a descriptor length past the slot end is Invalid naming desc_length",
			func(_ *testing.T, rc *rawClient, m *abi.Message) {
				m.DescOffset, m.DescLength = abi.SlotDescOffset, rc.reply.DescCapacity+1
			}, abi.StatusInvalid, abi.FieldDescLength},
		{"nonzero reserved is Invalid naming reserved",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Reserved = 1 << 63 }, abi.StatusInvalid, abi.FieldReserved},
		{"an unknown command is Invalid naming code",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Code = 0x7777 }, abi.StatusInvalid, abi.FieldCode},
		{"command zero is Invalid naming code",
			func(_ *testing.T, _ *rawClient, m *abi.Message) { m.Code = 0 }, abi.StatusInvalid, abi.FieldCode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := connect(t, h.path)
			invalidBefore := h.disp.Invalid()
			mark := h.logs.mark()
			m := rc.request(abi.CmdPing, 99)
			tc.edit(t, rc, &m)
			rc.post(m)
			r, err := rc.await(m.Generation + 1)
			if err != nil {
				t.Fatal(err)
			}
			if abi.Status(r.Code) != tc.status || abi.Field(r.Arg0) != tc.field {
				t.Errorf("answered %v arg0 %v, want %v naming %v", abi.Status(r.Code), abi.Field(r.Arg0), tc.status, tc.field)
			}
			if r.Epoch != testEpoch || r.RequestID != m.RequestID || r.Reserved != 0 {
				t.Errorf("refusal %+v does not carry the Manager epoch and the request id", r)
			}
			if got := h.disp.Invalid() - invalidBefore; got != 1 {
				t.Errorf("Dispatcher.Invalid grew by %d, want 1", got)
			}
			h.waitLine(t, mark, "channel request refused", fmt.Sprintf("slot=%d", rc.reply.SlotIndex),
				"field="+tc.field.String(), "status="+tc.status.String())
			// A refused request moves nothing: the session's next valid
			// generation is still accepted, and another session is unaffected.
			rc.ping(t, 5)
			other.ping(t, 6)
		})
		h.waitSessions(t, 1)
	}
}

// Without a cache service (this harness has none) the cache commands are
// known, so they are answered Unsupported, not Invalid, and not logged as
// refused.
func TestKnownButUnservedCommandIsUnsupported(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	for c := abi.CmdQueryBundle; c <= abi.CmdRelease; c++ {
		r := rc.call(t, rc.request(c, 0))
		if abi.Status(r.Code) != abi.StatusUnsupported {
			t.Errorf("%v answered %v, want Unsupported", c, abi.Status(r.Code))
		}
	}
	if r := rc.call(t, rc.request(abi.CmdShutdown, 0)); abi.Status(r.Code) != abi.StatusOK {
		t.Errorf("Shutdown answered %v, want Ok", abi.Status(r.Code))
	}
	if n := h.disp.Invalid(); n != 0 {
		t.Errorf("%d requests counted invalid", n)
	}
	rc.ping(t, 1)
}

// A repeated ring of a generation the Manager already answered is not a new
// request: the server deduplicates it (server.c collect) and the old
// response stays in the line.
func TestRepeatedRingOfAnAnsweredGenerationIsIgnored(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	m := rc.request(abi.CmdPing, 11)
	rc.call(t, m)
	before := h.disp.Requests()
	m2 := m
	m2.Arg0 = 12
	rc.post(m2)
	rc.ping(t, 13) // a later request is answered, so the repeat was seen and skipped
	if got := h.disp.Requests() - before; got != 1 {
		t.Errorf("%d requests handled, want 1 (the repeat must not count)", got)
	}
}

// Pings from two sessions in every poll mode: the Go ring above wakes a
// parked dispatcher, and responses are never lost or crossed.
func TestPingInEveryPollMode(t *testing.T) {
	for _, mode := range []channel.PollMode{channel.PollPark, channel.PollAdaptive, channel.PollSpin} {
		t.Run(fmt.Sprintf("mode=%v serves two sessions", mode), func(t *testing.T) {
			h := newHarness(t, func(o *harnessOptions) { o.pollMode = mode })
			a, b := connect(t, h.path), connect(t, h.path)
			for i := range uint64(300) {
				a.ping(t, i)
				b.ping(t, i<<32)
			}
			if got := h.disp.Requests(); got != 600 {
				t.Errorf("Dispatcher.Requests = %d, want 600", got)
			}
		})
	}
}

// Slot reuse: a new session on a reused slot index starts beyond every
// generation the earlier session used (docs/design.md §5.2), so a late response
// or request of the old session can never match the new one.
func TestReusedSlotStartsBeyondEarlierGenerations(t *testing.T) {
	h := newHarness(t)
	first := connect(t, h.path)
	first.ping(t, 1)
	// Jump far ahead (allowed: under MaxGenerationStep).
	first.nextGen += 1 << 20
	first.ping(t, 2)
	last := first.nextGen - 2
	idx := first.reply.SlotIndex
	first.close()
	h.waitSessions(t, 0)

	second := connect(t, h.path)
	if second.reply.SlotIndex != idx {
		t.Fatalf("second session got slot %d, want the reused %d", second.reply.SlotIndex, idx)
	}
	if g := second.reply.InitialGeneration; g <= last+1 || g&1 != 1 {
		t.Fatalf("initial generation %d on the reused slot, want odd and beyond %d (last request %d, its response %d)",
			g, last+1, last, last+1)
	}
	if g := binary.LittleEndian.Uint64(second.slot[32:]); g != second.reply.InitialGeneration {
		t.Fatalf("slot header initial_generation %d, reply %d", g, second.reply.InitialGeneration)
	}
	// The old session's generations are stale on the new one.
	m := second.request(abi.CmdPing, 0)
	m.Generation = last
	rc := second
	rc.post(m)
	if r, err := rc.await(m.Generation + 1); err != nil || abi.Status(r.Code) != abi.StatusStaleGeneration {
		t.Fatalf("old generation on the new session: %+v, %v; want StaleGeneration", r, err)
	}
	second.ping(t, 3)
}
