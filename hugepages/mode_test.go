package hugepages_test

import (
	"errors"
	"testing"

	"github.com/orbitkv/orbitkv/hugepages"
)

func TestParseModeReadsTheFlagSpelling(t *testing.T) {
	tests := []struct {
		in   string
		want hugepages.Mode
		ok   bool
	}{
		{"require", hugepages.Require, true},
		{"prefer", hugepages.Prefer, true},
		{"off", hugepages.Off, true},
		{"", 0, false},
		{"on", 0, false},
		{"Require", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			m, err := hugepages.ParseMode(tc.in)
			switch {
			case tc.ok && (err != nil || m != tc.want):
				t.Fatalf("ParseMode(%q) = %v, %v; want %v", tc.in, m, err, tc.want)
			case !tc.ok && !errors.Is(err, hugepages.ErrBadMode):
				t.Fatalf("ParseMode(%q) = %v, %v; want ErrBadMode", tc.in, m, err)
			case tc.ok && m.String() != tc.in:
				t.Fatalf("%v.String() = %q, want %q", m, m.String(), tc.in)
			}
		})
	}
	if var0 := (hugepages.Spec{}).Mode; var0 != hugepages.Off {
		t.Fatalf("the zero Mode is %v, want off", var0)
	}
}

func TestSpecValidateNamesTheFieldAndTheLimit(t *testing.T) {
	tests := []struct {
		name string
		spec hugepages.Spec
		want string
	}{
		{"zero bytes are refused", hugepages.Spec{}, "bytes 0"},
		{"more than MaxBytes is refused", hugepages.Spec{Bytes: hugepages.MaxBytes + 1}, "want 1..70368744177664"},
		{"an unknown mode is refused", hugepages.Spec{Bytes: 1, Mode: 7}, "mode 7: want require, prefer or off"},
		{"a name over 249 bytes is refused", hugepages.Spec{Bytes: 1, Name: string(make([]byte, 250))}, "name is 250 bytes"},
		{"a NUL in the name is refused", hugepages.Spec{Bytes: 1, Name: "a\x00b"}, "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := hugepages.New(tc.spec); err == nil {
				t.Fatal("New accepted the spec")
			}
		})
	}
}
