package main

import (
	"strings"
	"testing"
)

func TestValidateNamesTheFlagAndTheLimit(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of the error; "" = valid
	}{
		{"the defaults are valid", nil, ""},
		{"an unknown poll mode is refused", []string{"--poll-mode", "fast"}, "--poll-mode"},
		{"an unknown hugepages mode is refused", []string{"--hugepages", "yes"}, "--hugepages"},
		{"an unknown eviction policy is refused", []string{"--eviction", "random"}, "--eviction \"random\": want one of"},
		{"a RAM capacity that is not a size is refused", []string{"--ram-capacity", "lots"}, "--ram-capacity \"lots\": not a size"},
		{"a RAM tier smaller than a chunk is refused", []string{"--ram-capacity", "4KiB"}, "--ram-capacity 4KiB"},
		{"zero copy workers are refused", []string{"--copy-workers", "0"}, "--copy-workers 0: want 1..64"},
		{"a buffer budget over 64 TiB is refused", []string{"--max-buffer-bytes", "100TiB"}, "--max-buffer-bytes 100TiB: want 1GiB..64TiB"},
		{"a negative spin window is refused", []string{"--spin-window", "-1us"}, "--spin-window -1µs: want 0..1s"},
		{"a spin window over a second is refused", []string{"--spin-window", "2s"}, "want 0..1s"},
		{"zero sessions are refused", []string{"--max-sessions", "0"}, "--max-sessions 0: want 1..4095"},
		{"a session count past 32 bits does not wrap", []string{"--max-sessions", "4294967297"}, "want 1..4095"},
		{"a size that is not a size is refused", []string{"--desc-bytes", "lots"}, `--desc-bytes "lots": not a size`},
		{"a descriptor area that is not whole pages is refused", []string{"--desc-bytes", "3KiB"}, "multiple of 4KiB"},
		{"a descriptor area over 64 MiB is refused", []string{"--desc-bytes", "128MiB"}, "4KiB..64MiB"},
		{"a zero hello timeout is refused", []string{"--hello-timeout", "0s"}, "--hello-timeout"},
		{"a bad listen address is refused", []string{"--listen", "nohost"}, "--listen"},
		{"a socket path over 107 bytes is refused", []string{"--bootstrap-socket", "/" + strings.Repeat("a", 120)}, "limit for a Unix socket is 107"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseFlags(tc.args)
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			_, err = validate(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validate: %v, want ok", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAStrayArgumentIsRefused(t *testing.T) {
	if _, _, err := parseFlags([]string{"serve"}); err == nil || !strings.Contains(err.Error(), `unexpected argument "serve"`) {
		t.Fatalf("parseFlags(serve) = %v", err)
	}
}
