package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/hosttest"
)

// --check runs the start's checks of the host without starting: it passes
// on the defaults (on a temporary socket and a free HTTP port, as another
// Manager of this host may hold the default ones) and names each failure
// by its flag, with the exit status of its class.
func TestCheckRunsTheStartChecksWithoutStarting(t *testing.T) {
	ob := hosttest.New(t)
	tooMuchRAM, taken, live := ob.TooMuchRAM, ob.TakenTCP, ob.LiveSocket
	sock := func() []string {
		return []string{"--check", "--bootstrap-socket", filepath.Join(t.TempDir(), "m.sock"), "--http-addr", "127.0.0.1:0"}
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string // each a regexp of one line of stdout
		wantErr  []string // each a regexp of one line of stderr
	}{
		{"the defaults pass", sock(), 0,
			[]string{`^ok      configuration: every setting within its limits$`, `^ok      http port: 127\.0\.0\.1:0 free$`,
				`^ok      bootstrap socket: .*/m\.sock: directory safe and writable, no live process on the path$`,
				`^ok      operator socket: .*/m\.sock\.operator: `, `^ok      ram tier: 4\.0 GiB fits \(hugepages prefer\)$`, `^all checks passed$`}, nil},
		{"a RAM tier of 1PiB is a configuration error naming --ram-capacity", append(sock(), "--ram-capacity", "1PiB"), exitConfig,
			[]string{`^failed  configuration: --ram-capacity 1PiB: want at most 4294967295 chunks of 16KiB: at most 63TiB would be accepted`, `^the host was not checked`},
			[]string{`^orbitkv-manager: --ram-capacity 1PiB: want at most`}},
		{"a RAM tier above the available memory is a resource error naming --ram-capacity and what would pass", append(sock(), "--ram-capacity", tooMuchRAM, "--hugepages", "off"), exitResource,
			[]string{`^failed  ram tier: --ram-capacity ` + tooMuchRAM + `: not enough available memory: .*; at most [0-9]+[GM]iB would be accepted$`, `^ok      http port`},
			[]string{`^orbitkv-manager: --ram-capacity ` + tooMuchRAM + `: not enough available memory`}},
		{"an HTTP port in use is an address error naming --http-addr", append(sock(), "--http-addr", taken), exitAddress,
			[]string{`^failed  http port: --http-addr "` + regexp.QuoteMeta(taken) + `": listen tcp ` + regexp.QuoteMeta(taken) + `: bind: address already in use$`, `^ok      ram tier`},
			[]string{`^orbitkv-manager: --http-addr "` + regexp.QuoteMeta(taken) + `": `}},
		{"a live socket is an address error naming --bootstrap-socket", append(sock(), "--bootstrap-socket", live), exitAddress,
			[]string{`^failed  bootstrap socket: --bootstrap-socket "` + regexp.QuoteMeta(live) + `": socket path is served by a live process`}, nil},
		{"an SSD directory on tmpfs is a resource error naming --ssd-dir", append(sock(), "--ssd-dir", "/dev/shm", "--ssd-capacity", "64MiB", "--ssd-slot-bytes", "1MiB"), exitResource,
			[]string{`^failed  ssd tier: --ssd-dir "/dev/shm": on a memory-backed filesystem`}, nil},
		{"every failure is named, the first one's class is the status", append(sock(), "--http-addr", taken, "--ram-capacity", tooMuchRAM, "--hugepages", "off"), exitAddress,
			[]string{`^failed  http port: --http-addr`, `^failed  ram tier: --ram-capacity`}, []string{`^orbitkv-manager: --http-addr`, `^orbitkv-manager: --ram-capacity`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runMain(t, nil, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, errOut)
			}
			for _, c := range []struct {
				name, text string
				want       []string
			}{{"stdout", out, tc.wantOut}, {"stderr", errOut, tc.wantErr}} {
				for _, w := range c.want {
					if !regexp.MustCompile("(?m)" + w).MatchString(c.text) {
						t.Errorf("%s has no line matching %s:\n%s", c.name, w, c.text)
					}
				}
			}
			if strings.Contains(out+errOut, "serving") || strings.Contains(out+errOut, "level=") {
				t.Errorf("--check started something or logged:\n%s%s", out, errOut)
			}
		})
	}
	if _, _, code := runMain(t, nil, "--check", "--bootstrap-socket", live, "--http-addr", taken, "--print-config"); code != 0 {
		t.Errorf("--print-config with --check: exit %d, want 0 (--print-config is a printout and wins)", code)
	}
}

// The JSON log writes a duration as a string with its unit and the epoch
// as a decimal string (a number above 2^53 would be rounded by readers
// that hold numbers as float64); other values keep their JSON types.
func TestTheJSONLogWritesDurationsAndTheEpochAsStrings(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: jsonAttr}))
	const epoch = uint64(1)<<63 | 12345
	log.Info("x", slog.Duration("took", 1500*time.Millisecond), slog.Uint64("epoch", epoch), slog.Uint64("bytes", 4096),
		slog.Group("g", slog.Duration("wait", 50*time.Microsecond)))
	var rec map[string]any
	if err := json.Unmarshal([]byte(b.String()), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["took"] != "1.5s" || rec["epoch"] != fmt.Sprint(epoch) || rec["bytes"] != float64(4096) {
		t.Errorf("took %#v, epoch %#v, bytes %#v; want \"1.5s\", %q, 4096", rec["took"], rec["epoch"], rec["bytes"], fmt.Sprint(epoch))
	}
	if g, _ := rec["g"].(map[string]any); g["wait"] != "50µs" {
		t.Errorf("a grouped duration %#v, want \"50µs\"", rec["g"])
	}
}
