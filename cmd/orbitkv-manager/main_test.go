package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/channel"
)

// noEnv is an empty environment.
func noEnv(string) (string, bool) { return "", false }

// iox2Want is what validating --channel-transport iceoryx2 says in this
// build: nothing where it has the transport, else the reason it has not.
var iox2Want = iox2Or("")

// iox2Or is want in a build with the iceoryx2 transport, else the refusal
// of --channel-transport iceoryx2 naming the missing Rust toolchain.
func iox2Or(want string) string {
	if channel.Iceoryx2Built {
		return want
	}
	return "--channel-transport iceoryx2: want shm: built without the iceoryx2 transport"
}

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
		{"a buffer budget over 64 TiB is refused", []string{"--max-buffer-bytes", "100TiB"}, "--max-buffer-bytes 100TiB: want 4KiB..64TiB"},
		{"a zero buffer budget is refused (0 is not the default here)", []string{"--max-buffer-bytes", "0"}, "--max-buffer-bytes 0: want 4KiB..64TiB"},
		{"an empty eviction policy is refused", []string{"--eviction", ""}, `--eviction "": want one of`},
		{"a zero hello timeout names the limit once", []string{"--hello-timeout", "0s"}, "--hello-timeout 0s: want 1ms..1m"},
		{"a limit message never offers 0 where the flag refuses it", []string{"--max-ops", "-1"}, "--max-ops -1: want 1..1048576"},
		{"an HTTP address off loopback is refused", []string{"--http-addr", "0.0.0.0:7471"}, `--http-addr "0.0.0.0:7471": want a loopback host:port`},
		{"an empty HTTP address disables the endpoints", []string{"--http-addr", ""}, ""},
		{"zero operations per session are refused", []string{"--max-ops-per-session", "0"}, "--max-ops-per-session 0: want 1..1048576"},
		{"an expiry over a day is refused", []string{"--op-expiry", "25h"}, "--op-expiry 25h0m0s: want 1s..24h"},
		{"a relative SSD directory is refused", []string{"--ssd-dir", "ssd"}, `--ssd-dir "ssd": want an absolute path`},
		{"a bad SSD size is refused even without --ssd-dir", []string{"--ssd-capacity", "lots"}, `--ssd-capacity "lots"`},
		{"an unknown SSD admission rule is refused", []string{"--ssd-dir", "/var/okv", "--ssd-admission", "third"}, `--ssd-admission "third": want "all" or "second-hit"`},
		{"too many SSD I/O workers are refused", []string{"--ssd-dir", "/var/okv", "--ssd-io-workers", "300"}, "--ssd-io-workers 300: want 1..256"},
		{"a chunk that is not whole pages is refused", []string{"--ram-chunk-bytes", "5000"}, "--ram-chunk-bytes 5000: want a multiple of 4KiB in 4KiB..64MiB"},
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
		{"an unknown channel transport is refused", []string{"--channel-transport", "zmq"}, `--channel-transport "zmq": want shm or iceoryx2`},
		{"the iceoryx2 transport is valid only in a build that has it", []string{"--channel-transport", "iceoryx2"}, iox2Want},
		{"a service prefix with a space is refused naming the flag", []string{"--channel-transport", "iceoryx2", "--channel-service", "a b"}, iox2Or("--channel-service \"a b\": want 1..190 bytes of printable ASCII without spaces")},
		{"a service prefix is not checked on the shm transport", []string{"--channel-service", "a b"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if err := o.layer(noEnv, nil); err != nil {
				t.Fatalf("layer: %v", err)
			}
			_, err = validate(o, slog.Default())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validate: %v, want ok", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Every field out of its limit is reported, each as its flag, once.
func TestValidateReportsEveryFlagOutOfLimit(t *testing.T) {
	o, err := parse([]string{"--max-sessions", "0", "--copy-workers", "99", "--spin-window", "3s", "--desc-bytes", "lots", "--max-ops", "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.layer(noEnv, nil); err != nil {
		t.Fatal(err)
	}
	_, err = validate(o, slog.Default())
	if err == nil {
		t.Fatal("validate = nil")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{`--desc-bytes "lots": not a size (examples: 64KiB, 1MiB; KiB = 1024 bytes; G, GB, kB and the like are refused as ambiguous)`,
		"--max-ops 0: want 1..1048576", "--max-sessions 0: want 1..4095", "--spin-window 3s: want 0..1s", "--copy-workers 99: want 1..64"}
	if len(lines) != len(want) {
		t.Fatalf("validate = %q, want the %d lines %q", lines, len(want), want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

func TestAStrayArgumentIsRefused(t *testing.T) {
	if _, err := parse([]string{"serve"}); err == nil || !strings.Contains(err.Error(), `unexpected argument "serve"`) {
		t.Fatalf("parse(serve) = %v", err)
	}
}
