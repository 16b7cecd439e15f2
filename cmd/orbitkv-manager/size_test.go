package main

import (
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
