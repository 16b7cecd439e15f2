package abi

import (
	"strings"
	"testing"
)

// testLimits is the session view most cases check against: descriptor area
// [4096, 4096+DefaultDescBytes), last accepted generation 9.
var testLimits = RequestLimits{Epoch: 77, DescOffset: SlotDescOffset, DescCapacity: DefaultDescBytes, LastGen: 9}

// validRequest returns a Ping that passes ValidateRequest(testLimits).
func validRequest() Message {
	return Message{Magic: MsgMagic, ABIVersion: Version, Code: uint16(CmdPing), RequestID: 1,
		Epoch: testLimits.Epoch, Generation: testLimits.LastGen + 2}
}

func TestValidateRequest(t *testing.T) {
	end := uint32(SlotDescOffset + DefaultDescBytes)
	tests := []struct {
		name   string
		limits RequestLimits // zero value: testLimits
		edit   func(m *Message)
		status Status // StatusOK: valid
		field  Field
		detail string // substring of the detail, naming value or limit
	}{
		{name: "a plain ping is valid", edit: func(m *Message) {}},
		{name: "every known command is valid", edit: func(m *Message) { m.Code = uint16(CmdShutdown) }},
		{name: "a descriptor filling the whole area is valid",
			edit: func(m *Message) { m.DescOffset, m.DescLength = SlotDescOffset, DefaultDescBytes }},
		{name: "a one-byte descriptor at the last byte is valid",
			edit: func(m *Message) { m.DescOffset, m.DescLength = end-1, 1 }},
		{name: "a generation exactly MaxGenerationStep ahead is valid",
			edit: func(m *Message) { m.Generation = testLimits.LastGen + MaxGenerationStep }},
		{name: "the first request of a fresh slot is valid", limits: RequestLimits{Epoch: 77, DescOffset: SlotDescOffset, DescCapacity: 4096, LastGen: 0},
			edit: func(m *Message) { m.Generation = 1 }},

		{name: "wrong magic is Invalid naming magic", edit: func(m *Message) { m.Magic = 0x31564B4E },
			status: StatusInvalid, field: FieldMagic, detail: "0x31564b4e"},
		{name: "wrong ABI version is Invalid naming abi_version", edit: func(m *Message) { m.ABIVersion = Version + 1 },
			status: StatusInvalid, field: FieldABIVersion, detail: "want exactly 3"},
		{name: "another epoch is StaleSession", edit: func(m *Message) { m.Epoch = 76 },
			status: StatusStaleSession, field: FieldEpoch, detail: "Manager epoch is 77"},
		{name: "an even generation is StaleGeneration", edit: func(m *Message) { m.Generation = 12 },
			status: StatusStaleGeneration, field: FieldGeneration, detail: "even"},
		{name: "a repeated generation is StaleGeneration", edit: func(m *Message) { m.Generation = 9 },
			status: StatusStaleGeneration, field: FieldGeneration, detail: "last accepted 9"},
		{name: "an older generation is StaleGeneration", edit: func(m *Message) { m.Generation = 3 },
			status: StatusStaleGeneration, field: FieldGeneration, detail: "last accepted 9"},
		{name: "a generation more than MaxGenerationStep ahead is StaleGeneration",
			edit:   func(m *Message) { m.Generation = testLimits.LastGen + MaxGenerationStep + 2 },
			status: StatusStaleGeneration, field: FieldGeneration, detail: "jumps more than"},
		{name: "a generation near 2^64 after a small one is StaleGeneration",
			edit:   func(m *Message) { m.Generation = ^uint64(0) },
			status: StatusStaleGeneration, field: FieldGeneration, detail: "jumps"},
		{name: "command zero is Invalid naming code", edit: func(m *Message) { m.Code = 0 },
			status: StatusInvalid, field: FieldCode, detail: "commands are 1..10"},
		{name: "an unknown command is Invalid naming code", edit: func(m *Message) { m.Code = 11 },
			status: StatusInvalid, field: FieldCode, detail: "11"},
		{name: "nonzero reserved is Invalid naming reserved", edit: func(m *Message) { m.Reserved = 1 },
			status: StatusInvalid, field: FieldReserved, detail: "must be zero"},
		{name: "a descriptor offset without a length is Invalid naming desc_offset",
			edit:   func(m *Message) { m.DescOffset = SlotDescOffset },
			status: StatusInvalid, field: FieldDescOffset, detail: "desc_length 0"},
		{name: "a descriptor inside the control page is Invalid naming desc_offset",
			edit:   func(m *Message) { m.DescOffset, m.DescLength = 64, 8 },
			status: StatusInvalid, field: FieldDescOffset, detail: "outside the descriptor area"},
		{name: "a descriptor starting at the area end is Invalid naming desc_offset",
			edit:   func(m *Message) { m.DescOffset, m.DescLength = end, 1 },
			status: StatusInvalid, field: FieldDescOffset, detail: "outside"},
		{name: "a descriptor running past the area end is Invalid naming desc_length",
			edit:   func(m *Message) { m.DescOffset, m.DescLength = end-8, 9 },
			status: StatusInvalid, field: FieldDescLength, detail: "passes the area end"},
		{name: "a descriptor length that wraps 32 bits is Invalid naming desc_length",
			edit:   func(m *Message) { m.DescOffset, m.DescLength = SlotDescOffset, ^uint32(0) },
			status: StatusInvalid, field: FieldDescLength, detail: "passes"},
		{name: "magic is checked before the epoch",
			edit:   func(m *Message) { m.Magic, m.Epoch = 0, 1 },
			status: StatusInvalid, field: FieldMagic},
		{name: "the epoch is checked before the generation",
			edit:   func(m *Message) { m.Epoch, m.Generation = 1, 2 },
			status: StatusStaleSession, field: FieldEpoch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.limits
			if l == (RequestLimits{}) {
				l = testLimits
			}
			m := validRequest()
			tc.edit(&m)
			rerr := m.ValidateRequest(l)
			if tc.status == StatusOK && tc.field == FieldNone {
				if rerr != nil {
					t.Fatalf("ValidateRequest(%+v) = %v, want nil", m, rerr)
				}
				return
			}
			if rerr == nil {
				t.Fatalf("ValidateRequest(%+v) = nil, want %v naming %v", m, tc.status, tc.field)
			}
			if rerr.Status != tc.status || rerr.Field != tc.field {
				t.Errorf("got status %v field %v, want %v field %v (%v)", rerr.Status, rerr.Field, tc.status, tc.field, rerr)
			}
			if !strings.Contains(rerr.Error(), tc.field.String()) {
				t.Errorf("error %q does not name the field %q", rerr.Error(), tc.field)
			}
			if !strings.Contains(rerr.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", rerr.Detail, tc.detail)
			}
		})
	}
}

func TestResponseEchoesTheRequest(t *testing.T) {
	m := validRequest()
	m.RequestID, m.Arg0 = 42, 5
	r := m.Response(99, StatusInvalid, uint64(FieldCode), 7)
	want := Message{Magic: MsgMagic, ABIVersion: Version, Code: uint16(StatusInvalid), RequestID: 42,
		Epoch: 99, Generation: m.Generation + 1, Arg0: uint64(FieldCode), Arg1: 7}
	if r != want {
		t.Fatalf("Response = %+v, want %+v", r, want)
	}
}

func TestNamesOfCodes(t *testing.T) {
	tests := []struct{ got, want string }{
		{CmdPing.String(), "Ping"}, {CmdShutdown.String(), "Shutdown"}, {Command(0).String(), "Command(0)"},
		{Command(11).String(), "Command(11)"}, {StatusOK.String(), "Ok"}, {StatusUnsupported.String(), "Unsupported"},
		{Status(11).String(), "Status(11)"}, {FieldDescOffset.String(), "desc_offset"}, {Field(9).String(), "desc_magic"}, {Field(22).String(), "revision"}, {Field(25).String(), "record"}, {Field(26).String(), "Field(26)"},
		{RoleBench.String(), "bench"}, {Role(5).String(), "Role(5)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestDecodeMessageRefusesOtherLengths(t *testing.T) {
	for _, n := range []int{0, 63, 65, 128} {
		if _, err := DecodeMessage(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "want exactly 64") {
			t.Errorf("DecodeMessage(%d bytes) error = %v, want one naming the 64-byte limit", n, err)
		}
	}
}

// The dispatcher validates every request on its hot path: a valid request
// must not allocate.
func TestValidateRequestAllocs(t *testing.T) {
	m := validRequest()
	m.DescOffset, m.DescLength = SlotDescOffset, 128
	l := testLimits
	allocs := testing.AllocsPerRun(1000, func() {
		if rerr := m.ValidateRequest(l); rerr != nil {
			t.Fatal(rerr)
		}
	})
	if allocs != 0 {
		t.Fatalf("ValidateRequest of a valid request allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkValidateRequest(b *testing.B) {
	m := validRequest()
	b.ReportAllocs()
	for b.Loop() {
		if m.ValidateRequest(testLimits) != nil {
			b.Fatal("invalid")
		}
	}
}
