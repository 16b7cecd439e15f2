package channel

import (
	"io"
	"log/slog"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
)

func newTestDispatcher(t *testing.T) *Dispatcher {
	t.Helper()
	d, err := New(Spec{Epoch: 9, MaxSessions: 4, PollMode: PollPark, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Skipf("no dispatcher (needs cgo): %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func ping(gen uint64) abi.Message {
	return abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(abi.CmdPing),
		RequestID: 5, Epoch: 9, Generation: gen, Arg0: 42}
}

func TestHandleAnswersPingAndAdvancesTheGeneration(t *testing.T) {
	d := newTestDispatcher(t)
	st := &session.Session{Limits: abi.RequestLimits{Epoch: 9, DescOffset: abi.SlotDescOffset, DescCapacity: 4096}}
	m := ping(1)
	r, _ := d.handle(st, &m)
	if abi.Status(r.Code) != abi.StatusOK || r.Arg0 != 42 || r.Generation != 2 || r.RequestID != 5 || r.Epoch != 9 {
		t.Fatalf("response %+v, want Ok echoing arg0 42 at generation 2", r)
	}
	if st.Limits.LastGen != 1 {
		t.Errorf("LastGen = %d, want 1", st.Limits.LastGen)
	}
	again, _ := d.handle(st, &m) // the same generation again is stale
	if abi.Status(again.Code) != abi.StatusStaleGeneration || abi.Field(again.Arg0) != abi.FieldGeneration {
		t.Errorf("replayed generation answered %v field %v, want StaleGeneration/generation", abi.Status(again.Code), abi.Field(again.Arg0))
	}
	if d.Invalid() != 1 {
		t.Errorf("Invalid() = %d, want 1", d.Invalid())
	}
}

func TestHandleDoesNotAllocateOnTheHotPath(t *testing.T) {
	d := newTestDispatcher(t)
	st := &session.Session{Limits: abi.RequestLimits{Epoch: 9, DescOffset: abi.SlotDescOffset, DescCapacity: 4096}}
	gen := uint64(1)
	allocs := testing.AllocsPerRun(1000, func() {
		m := ping(gen)
		gen += 2
		if r, _ := d.handle(st, &m); abi.Status(r.Code) != abi.StatusOK {
			t.Fatalf("status %v", abi.Status(r.Code))
		}
	})
	if allocs != 0 {
		t.Errorf("handle allocates %.1f times per Ping, want 0", allocs)
	}
}

func TestSpecValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"a zero epoch", Spec{MaxSessions: 1}},
		{"too many sessions", Spec{Epoch: 1, MaxSessions: abi.MaxSessions}},
		{"a negative spin window", Spec{Epoch: 1, MaxSessions: 1, SpinWindow: -1}},
		{"a batch of one", Spec{Epoch: 1, MaxSessions: 1, MaxBatch: 1}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			if err := tc.spec.Validate(); err == nil {
				t.Fatal("Validate() = nil")
			}
		})
	}
}
