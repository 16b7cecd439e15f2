package channel

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
	"github.com/spf13/pflag"
)

func TestParseChannelFlagsDefaults(t *testing.T) {
	cfg, err := parseChannelFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.N != 100000 || cfg.PerMsN != 2000 || cfg.idle != 3*time.Second || cfg.PollMode != "adaptive" ||
		cfg.warmup != 10000 || cfg.Json || cfg.socket != "" {
		t.Errorf("defaults = %+v", cfg)
	}
	// Every subject this build can run: all of them with the iceoryx2
	// transport, all but the iceoryx2 ones without it.
	want := allSubjects
	if !pingpong.Iceoryx2Built {
		want = []string{subjectOrbitKV, subjectShmSpin, subjectFutex, subjectUDS, subjectGRPC}
	}
	if !slices.Equal(cfg.Subjects, want) {
		t.Errorf("default subjects = %v, want %v (iceoryx2 built: %v)", cfg.Subjects, want, pingpong.Iceoryx2Built)
	}
	if !cfg.needsManager() {
		t.Error("the default run does not start a Manager")
	}
}

func TestParseChannelFlagsAccepts(t *testing.T) {
	cfg, err := parseChannelFlags([]string{"--subjects", " uds,shm_spin ", "--n", "50", "--json",
		"--idle-seconds", "0.5", "--manager-args", "--listen 127.0.0.1:0  --x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"shm_spin", "uds"}; !slices.Equal(cfg.Subjects, want) {
		t.Errorf("subjects = %v, want %v (report order)", cfg.Subjects, want)
	}
	if cfg.warmup != 5 {
		t.Errorf("warmup = %d, want n/10 = 5", cfg.warmup)
	}
	if cfg.idle != 500*time.Millisecond || !cfg.Json {
		t.Errorf("idle = %v json = %v", cfg.idle, cfg.Json)
	}
	if want := []string{"--listen", "127.0.0.1:0", "--x"}; !slices.Equal(cfg.ManagerArgs, want) {
		t.Errorf("managerArgs = %q, want %q", cfg.ManagerArgs, want)
	}
	if cfg.needsManager() {
		t.Error("a baseline-only run starts a Manager")
	}
}

func TestParseChannelFlagsTakeTheNamesAndTheDeprecatedOnes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		n      int
		idle   time.Duration
		notice string
	}{
		{"--round-trips and --idle with a unit", []string{"--round-trips", "50", "--idle", "1.5s"}, 50, 1500 * time.Millisecond, ""},
		{"--idle 0 skips the idle measurement", []string{"--idle", "0"}, 100000, 0, ""},
		{"the deprecated --n parses, with a notice", []string{"--n", "70"}, 70, 3 * time.Second, "--n has been deprecated, use --round-trips"},
		{"the deprecated --idle-seconds parses, with a notice", []string{"--idle-seconds", "0.25"}, 100000, 250 * time.Millisecond, "--idle-seconds has been deprecated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			cfg, err := parseChannelFlags(tc.args, &out)
			if err != nil || cfg.N != tc.n || cfg.idle != tc.idle {
				t.Fatalf("N = %d, idle = %v, err = %v; want %d, %v", cfg.N, cfg.idle, err, tc.n, tc.idle)
			}
			if !strings.Contains(out.String(), tc.notice) {
				t.Errorf("output %q lacks %q", out.String(), tc.notice)
			}
		})
	}
	var help strings.Builder
	if _, err := parseChannelFlags([]string{"--help"}, &help); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if h := help.String(); strings.Contains(h, "--idle-seconds") || strings.Contains(h, "--n ") || !strings.Contains(h, "--idle duration") || !strings.Contains(h, "--round-trips N") {
		t.Errorf("help shows a deprecated name or lacks a new one:\n%s", h)
	}
}

func TestParseChannelFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown subject", []string{"--subjects", "orbitkv_ping,iceoryx"}, `unknown subject "iceoryx"`},
		{"a subject named twice", []string{"--subjects", "uds,uds"}, `"uds" named twice`},
		{"no subject", []string{"--subjects", " , "}, "names no subject"},
		{"zero iterations", []string{"--round-trips", "0"}, "--round-trips must be at least 1"},
		{"zero iterations under the deprecated name", []string{"--n", "0"}, "--n must be at least 1"},
		{"a negative idle time", []string{"--idle", "-1s"}, "--idle must be between 0s and 1h0m0s, got -1s"},
		{"an idle time without a unit", []string{"--idle", "3"}, `invalid argument "3" for "--idle" flag`},
		{"negative per-ms iterations", []string{"--per-ms-n", "-1"}, "--per-ms-n must be at least 0"},
		{"a negative warmup", []string{"--warmup", "-2"}, "--warmup must be at least 0"},
		{"negative idle seconds", []string{"--idle-seconds", "-1"}, "--idle-seconds must be between"},
		{"an unknown poll mode", []string{"--poll-mode", "busy"}, `--poll-mode must be one of spin, adaptive, park, got "busy"`},
		{"a poll mode for an external Manager", []string{"--socket", "/tmp/x.sock", "--poll-mode", "spin"}, "--poll-mode configures a Manager the bench starts"},
		{"a Manager binary for an external Manager", []string{"--socket", "/tmp/x.sock", "--manager-bin", "m"}, "--manager-bin configures"},
		{"a stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"an unknown flag", []string{"--fast"}, "unknown flag: --fast"},
		{"a malformed number", []string{"--n", "many"}, `invalid argument "many" for "--n" flag`},
		{"a short peer idle", []string{"--peer-idle", "10ms"}, "--peer-idle must be at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseChannelFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseChannelFlagsHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseChannelFlags([]string{"--help"}, &out)
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("err = %v, want pflag.ErrHelp", err)
	}
	for _, want := range []string{"usage: orbitkv-bench channel", "--subjects subjects", "--per-ms-n N", "--idle duration", "bench/channel/README.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestHelpGoesToHelpAndADeprecationNoticeToTheOtherWriter(t *testing.T) {
	var stdout, stderr strings.Builder
	_, err := parseChannelFlags([]string{"--n", "70", "--help"}, suite.Output{Writer: &stderr, Help: &stdout})
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("err = %v, want pflag.ErrHelp", err)
	}
	if h := stdout.String(); !strings.HasPrefix(h, "usage: orbitkv-bench channel") || !strings.Contains(h, "--round-trips N") || strings.Contains(h, "deprecated") {
		t.Errorf("Help got %q; want the usage text and no notice", h)
	}
	if e := stderr.String(); !strings.Contains(e, "--n has been deprecated, use --round-trips") || strings.Contains(e, "usage:") {
		t.Errorf("Writer got %q; want the notice and no usage text", e)
	}
}
