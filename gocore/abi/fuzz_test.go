package abi

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzDecodeMessage: DecodeMessage/AppendTo round trip exactly; ValidateRequest
// never panics, and a nil result implies every documented rule holds.
func FuzzDecodeMessage(f *testing.F) {
	v := validRequest()
	f.Add(v.AppendTo(nil), testLimits.Epoch, testLimits.LastGen, uint32(DefaultDescBytes))
	d := v
	d.DescOffset, d.DescLength = SlotDescOffset, 100
	f.Add(d.AppendTo(nil), testLimits.Epoch, testLimits.LastGen, uint32(4096))
	bad := v
	bad.Reserved, bad.Code = 1, 99
	f.Add(bad.AppendTo(nil), uint64(1), uint64(0), uint32(4096))
	f.Add(make([]byte, 63), uint64(1), uint64(0), uint32(4096))
	f.Fuzz(func(t *testing.T, b []byte, epoch, lastGen uint64, capacity uint32) {
		m, err := DecodeMessage(b)
		if len(b) != MessageSize {
			if err == nil {
				t.Fatalf("DecodeMessage accepted %d bytes", len(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeMessage(64 bytes): %v", err)
		}
		if got := m.AppendTo(nil); !bytes.Equal(got, b) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, b)
		}
		l := RequestLimits{Epoch: epoch, DescOffset: SlotDescOffset, DescCapacity: capacity, LastGen: lastGen}
		rerr := m.ValidateRequest(l)
		if rerr != nil {
			if rerr.Field == FieldNone || !strings.Contains(rerr.Error(), rerr.Field.String()) {
				t.Fatalf("refusal %v does not name a field", rerr)
			}
			switch rerr.Status {
			case StatusInvalid, StatusStaleSession, StatusStaleGeneration:
			default:
				t.Fatalf("refusal status %v", rerr.Status)
			}
			return
		}
		end := uint64(l.DescOffset) + uint64(l.DescCapacity)
		switch {
		case m.Magic != MsgMagic, m.ABIVersion != Version, m.Epoch != epoch, m.Reserved != 0:
			t.Fatalf("accepted a bad header: %+v", m)
		case m.Generation&1 == 0 || m.Generation <= lastGen || m.Generation-lastGen > MaxGenerationStep:
			t.Fatalf("accepted generation %d after %d", m.Generation, lastGen)
		case m.Code < uint16(CmdPing) || m.Code > uint16(CmdShutdown):
			t.Fatalf("accepted command %d", m.Code)
		case m.DescLength == 0 && m.DescOffset != 0:
			t.Fatalf("accepted offset %d without length", m.DescOffset)
		case m.DescLength != 0 && (uint64(m.DescOffset) < uint64(l.DescOffset) || uint64(m.DescOffset)+uint64(m.DescLength) > end):
			t.Fatalf("accepted descriptor [%d,+%d) outside [%d,%d)", m.DescOffset, m.DescLength, l.DescOffset, end)
		}
		r := m.Response(epoch, StatusOK, m.Arg0, 0)
		if r.Generation != m.Generation+1 || r.RequestID != m.RequestID || r.Reserved != 0 {
			t.Fatalf("response %+v does not answer %+v", r, m)
		}
	})
}

// FuzzDecodeHello: never panics; success implies the invariants; round trip.
func FuzzDecodeHello(f *testing.F) {
	f.Add(validHello().AppendTo(nil))
	h := validHello()
	h.Role = 9
	f.Add(h.AppendTo(nil))
	h = validHello()
	h.InstanceID[50] = 1
	f.Add(h.AppendTo(nil))
	f.Add([]byte("OKVB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHello(b)
		if err != nil {
			he, ok := err.(*HelloError)
			if !ok || he.Field == "" || he.Status == BootOK {
				t.Fatalf("error %v is not a *HelloError naming a field with a refusal status", err)
			}
			return
		}
		switch {
		case len(b) != HelloSize:
			t.Fatalf("accepted %d bytes", len(b))
		case h.Magic != BootstrapMagic, h.ProtocolVersion != BootstrapVersion, h.ABIVersion != Version:
			t.Fatalf("accepted header %+v", h)
		case h.Role > RoleBench, h.Reserved != [2]uint64{}:
			t.Fatalf("accepted role %d reserved %v", h.Role, h.Reserved)
		}
		id := h.InstanceIDString()
		for i := 0; i < len(id); i++ {
			if id[i] < 0x20 || id[i] > 0x7e {
				t.Fatalf("accepted instance id byte %#x", id[i])
			}
		}
		if rest := h.InstanceID[len(id):]; bytes.IndexFunc(rest, func(r rune) bool { return r != 0 }) >= 0 {
			t.Fatalf("accepted bytes after the NUL padding: %q", rest)
		}
		if got := h.AppendTo(nil); !bytes.Equal(got, b) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, b)
		}
	})
}
