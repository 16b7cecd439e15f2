package limit

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSizeReadsEverySpelling(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint64
	}{
		{"a plain number is bytes", "65536", 65536},
		{"B after a number is bytes", "4096B", 4096},
		{"4GiB is binary", "4GiB", 4 << 30},
		{"4gib in lower case is binary too", "4gib", 4 << 30},
		{"4GIB in upper case is binary too", "4GIB", 4 << 30},
		{"4Gi as Kubernetes writes it is binary", "4Gi", 4 << 30},
		{"64KiB is binary", "64KiB", 64 << 10},
		{"512MiB is binary", "512MiB", 512 << 20},
		{"2TiB is binary", "2TiB", 2 << 40},
		{"1PiB is binary", "1PiB", 1 << 50},
		{"a fraction that comes to whole bytes is allowed", "1.5GiB", 3 << 29},
		{"one space before the unit is allowed (as the logs print sizes)", "4 GiB", 4 << 30},
		{"surrounding spaces are ignored", " 16KiB ", 16 << 10},
		{"zero is a size (the limit decides whether it is allowed)", "0", 0},
		{"the largest 64-bit size parses", "18446744073709551615", 1<<64 - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSizeRefusesWhatIsAmbiguousOrWrong(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"4G is ambiguous and names both readings", "4G", `ambiguous unit "G": 4G could mean 4294967296 bytes (binary, as Redis reads it) or 4000000000 bytes (decimal); write 4GiB, or the byte count`},
		{"4GB is ambiguous", "4GB", `4GB could mean 4294967296 bytes`},
		{"4gb is ambiguous (Redis reads it as GiB)", "4gb", "write 4GiB"},
		{"4g is ambiguous", "4g", "write 4GiB"},
		{"64k is ambiguous", "64k", "64k could mean 65536 bytes (binary, as Redis reads it) or 64000 bytes (decimal); write 64KiB"},
		{"64kB is ambiguous", "64kB", "write 64KiB"},
		{"512MB is ambiguous", "512MB", "write 512MiB"},
		{"2TB is ambiguous", "2TB", "write 2TiB"},
		{"1.5G is ambiguous and keeps the fraction", "1.5G", "1.5G could mean 1610612736 bytes (binary, as Redis reads it) or 1500000000 bytes"},
		{"a word is not a size", "lots", "not a size"},
		{"an empty value is not a size", "", "not a size"},
		{"a negative size is refused", "-1GiB", "not a size"},
		{"an unknown unit is named", "4XiB", `unknown unit "XiB"`},
		{"a fraction of a byte is refused", "1.1KiB", "not a whole number of bytes (1.1KiB is 1126.400 bytes)"},
		{"a fraction of bytes is refused", "1.5", "not a whole number of bytes"},
		{"two dots are refused", "1.2.3GiB", "not a size"},
		{"a trailing dot is refused", "4.GiB", "not a size"},
		{"a size past 64 bits is refused", "16384PiB", "too large"},
		{"two spaces before the unit are refused", "4  GiB", "unknown unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseSize(%q) = %d, %v; want an error containing %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSizeNamesTheFieldAndTheAcceptedForms(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      uint64
		err       string // "" = parses
		ambiguous bool
	}{
		{"0 parses (the caller's limit decides)", "0", 0, "", false},
		{"4GiB is 4·2³⁰ bytes", "4GiB", 4 << 30, "", false},
		{"1.5GiB comes to whole bytes", "1.5GiB", 3 << 29, "", false},
		{"the largest 64-bit count parses", "18446744073709551615", 1<<64 - 1, "", false},
		{"4G names both readings and what to write", "4G", 0, `--sizes "4G": ambiguous unit "G": 4G could mean 4294967296 bytes (binary, as Redis reads it) or 4000000000 bytes (decimal); write 4GiB, or the byte count`, true},
		{"1MB is ambiguous", "1MB", 0, `--sizes "1MB": ambiguous unit "MB"`, true},
		{"an empty value names the accepted forms", "", 0, `--sizes "": not a size (want ` + SizeForms + ")", false},
		{"a negative size is not a size", "-1", 0, `--sizes "-1": not a size (want a byte count`, false},
		{"one past 64 bits is too large", "18446744073709551616", 0, `--sizes "18446744073709551616": too large (at most 18446744073709551615 bytes)`, false},
		{"16EiB in PiB is too large", "16384PiB", 0, "too large", false},
		{"a lone unit is not a size", "GiB", 0, "not a size", false},
		{"a lone dot is not a size", ".", 0, "not a size", false},
		{"a hex number is refused", "0x10", 0, `unknown unit "x10"`, false},
		{"an exponent is refused", "1e9", 0, `unknown unit "e9"`, false},
		{"a fraction of a byte is refused", "0.5", 0, "not a whole number of bytes", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSize("--sizes", tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) || le.Field != "--sizes" || le.Value != tc.in || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParseSize(%q) = %d, %v; want an *Error for --sizes containing %q", tc.in, got, err, tc.err)
			}
			if errors.Is(err, ErrAmbiguousUnit) != tc.ambiguous {
				t.Errorf("errors.Is(err, ErrAmbiguousUnit) = %v, want %v", !tc.ambiguous, tc.ambiguous)
			}
		})
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4GiB", "1.5GiB", "4G", "", "-1", "18446744073709551616", "1.2.3", "4 GiB", "0.5KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize("--x", s)
		if err != nil {
			var le *Error
			if !errors.As(err, &le) || le.Field != "--x" || le.Err == nil {
				t.Fatalf("ParseSize(%q): %v is not an *Error with a reason", s, err)
			}
			return
		}
		// What parses writes back (Size) to a text that parses to the same count.
		if m, err := ParseSize("--x", strings.Replace(Size(n), " bytes", "", 1)); err != nil || m != n {
			t.Fatalf("ParseSize(%q) = %d, but Size writes %q, which reads %d, %v", s, n, Size(n), m, err)
		}
	})
}

// AtMost names a size the flags take that fits the room: rounded down, in
// the largest unit that keeps it within 16 of the next (TiB from 16 TiB).
func TestAtMostNamesAnAcceptedSizeWithinTheRoom(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{21<<30 + 900<<20, "at most 21GiB would be accepted"},
		{63<<40 + 1023<<30, "at most 63TiB would be accepted"},
		{15<<40 + 5<<30, "at most 15365GiB would be accepted"},
		{700<<20 + 5, "at most 700MiB would be accepted"},
		{3<<10 + 1, "at most 3KiB would be accepted"},
		{1023, "nothing would be accepted"},
	} {
		if got := AtMost(tc.n); got != tc.want {
			t.Errorf("AtMost(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if s, ok := strings.CutPrefix(AtMost(tc.n), "at most "); ok {
			n, err := ParseSize("size", strings.TrimSuffix(s, " would be accepted"))
			if err != nil || n > tc.n {
				t.Errorf("AtMost(%d) names %q: parses to %d, %v; want at most %d", tc.n, s, n, err, tc.n)
			}
		}
	}
}
