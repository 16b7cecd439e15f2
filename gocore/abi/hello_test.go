package abi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func validHello() Hello {
	h := Hello{Magic: BootstrapMagic, ProtocolVersion: BootstrapVersion, ABIVersion: Version, PID: 4242, Role: RoleWorker}
	copy(h.InstanceID[:], "engine-0")
	return h
}

func TestDecodeHello(t *testing.T) {
	tests := []struct {
		name   string
		bytes  func() []byte
		status BootStatus
		field  string // "" = valid
	}{
		{name: "a worker hello is accepted", bytes: func() []byte { return validHello().AppendTo(nil) }},
		{name: "a 64-byte instance id without NUL is accepted", bytes: func() []byte {
			h := validHello()
			copy(h.InstanceID[:], strings.Repeat("a", InstanceIDBytes))
			return h.AppendTo(nil)
		}},
		{name: "an empty instance id is accepted", bytes: func() []byte {
			h := validHello()
			h.InstanceID = [InstanceIDBytes]byte{}
			return h.AppendTo(nil)
		}},
		{name: "a short hello names the length", bytes: func() []byte { return validHello().AppendTo(nil)[:95] },
			status: BootBadField, field: "length"},
		{name: "a long hello names the length", bytes: func() []byte { return append(validHello().AppendTo(nil), 0) },
			status: BootBadField, field: "length"},
		{name: "wrong magic is BadMagic", bytes: func() []byte { h := validHello(); h.Magic = MsgMagic; return h.AppendTo(nil) },
			status: BootBadMagic, field: "magic"},
		{name: "protocol version 1 is BadVersion", bytes: func() []byte { h := validHello(); h.ProtocolVersion = 1; return h.AppendTo(nil) },
			status: BootBadVersion, field: "protocol_version"},
		{name: "ABI version 1 is BadVersion", bytes: func() []byte { h := validHello(); h.ABIVersion = 1; return h.AppendTo(nil) },
			status: BootBadVersion, field: "abi_version"},
		{name: "an unknown role is BadField", bytes: func() []byte { h := validHello(); h.Role = 5; return h.AppendTo(nil) },
			status: BootBadField, field: "role"},
		{name: "nonzero reserved is BadField", bytes: func() []byte { h := validHello(); h.Reserved[1] = 1; return h.AppendTo(nil) },
			status: BootBadField, field: "reserved"},
		{name: "a control byte in the instance id is BadField", bytes: func() []byte {
			h := validHello()
			h.InstanceID[2] = '\n'
			return h.AppendTo(nil)
		}, status: BootBadField, field: "instance_id"},
		{name: "a byte after the NUL padding is BadField", bytes: func() []byte {
			h := validHello()
			h.InstanceID[40] = 'x'
			return h.AppendTo(nil)
		}, status: BootBadField, field: "instance_id"},
		{name: "a non-ASCII instance id is BadField", bytes: func() []byte {
			h := validHello()
			copy(h.InstanceID[:], "m\xc3\xbcnchen")
			return h.AppendTo(nil)
		}, status: BootBadField, field: "instance_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bytes()
			h, err := DecodeHello(b)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("DecodeHello: %v", err)
				}
				if got := h.AppendTo(nil); !bytes.Equal(got, b) {
					t.Fatalf("round trip differs:\n got %x\nwant %x", got, b)
				}
				return
			}
			var he *HelloError
			if !errors.As(err, &he) {
				t.Fatalf("DecodeHello error = %v, want *HelloError", err)
			}
			if he.Status != tc.status || he.Field != tc.field {
				t.Errorf("got status %d field %q, want %d %q", he.Status, he.Field, tc.status, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestInstanceIDString(t *testing.T) {
	h := validHello()
	if got := h.InstanceIDString(); got != "engine-0" {
		t.Fatalf("InstanceIDString = %q", got)
	}
	copy(h.InstanceID[:], strings.Repeat("z", InstanceIDBytes))
	if got := h.InstanceIDString(); len(got) != InstanceIDBytes {
		t.Fatalf("full id has %d bytes", len(got))
	}
}

func TestHelloReplyEncoding(t *testing.T) {
	r := RefusedReply(BootBadMagic, strings.Repeat("e", 500))
	b := r.AppendTo(nil)
	if len(b) != HelloReplySize {
		t.Fatalf("reply encodes to %d bytes, want %d", len(b), HelloReplySize)
	}
	if b[6] != byte(BootBadMagic) {
		t.Errorf("status byte %d", b[6])
	}
	if b[HelloReplySize-1] != 0 {
		t.Error("refused reply error text is not NUL-terminated when truncated")
	}
	ok := HelloReply{Magic: BootstrapMagic, ProtocolVersion: BootstrapVersion, Epoch: 1, ClientToken: 0x1122334455667788,
		InitialGeneration: 3, SlotIndex: 9, SlotBytes: 4096 + 65536, ManagerPID: 77}
	b = ok.AppendTo(nil)
	if len(b) != HelloReplySize || b[32] != 0x88 || b[48] != 9 || b[68] != 77 {
		t.Errorf("reply fields at the wrong offsets: %x", b[:80])
	}
}
