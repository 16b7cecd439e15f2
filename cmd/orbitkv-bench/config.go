package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"time"
)

// Subjects of the channel suite, in report order.
const (
	subjectOrbitKV = "orbitkv_ping"
	subjectShmSpin = "shm_spin"
	subjectFutex   = "futex"
	subjectUDS     = "uds"
	subjectGRPC    = "grpc"
)

var allSubjects = []string{subjectOrbitKV, subjectShmSpin, subjectFutex, subjectUDS, subjectGRPC}

// perMsPeriod is the period of the per_ms cadence.
const perMsPeriod = time.Millisecond

var pollModes = []string{"spin", "adaptive", "park"}

// channelConfig is the parsed, validated flag set of `orbitkv-bench channel`.
type channelConfig struct {
	socket      string        // running Manager's bootstrap socket; "" = start one
	managerBin  string        // Manager binary; "" = next to this binary, then bin/
	managerArgs []string      // extra Manager arguments
	pollMode    string        // --poll-mode passed to a Manager the bench starts
	n           int           // back-to-back round trips per subject
	perMsN      int           // per-ms round trips per subject
	warmup      int           // untimed back-to-back round trips first
	perMsWarmup int           // untimed per-ms round trips first
	json        bool          // print the JSON report instead of the table
	subjects    []string      // selected subjects, in report order
	idle        time.Duration // idle-session window for idle_cpu_percent; 0 = skip
	peerIdle    time.Duration // a peer exits after this long without a request
	clientSpin  time.Duration // okv_connect_options.spin_ns; 0 = library default
}

func (c *channelConfig) has(subject string) bool { return slices.Contains(c.subjects, subject) }

// needsManager reports whether the run talks to a Manager at all.
func (c *channelConfig) needsManager() bool { return c.has(subjectOrbitKV) }

func channelFlags(cfg *channelConfig, subjects *string, idleSeconds *float64, out io.Writer) *suiteFlags {
	fs := newSuiteFlags("channel", out,
		"Round-trip latency of a 64-byte Ping through liborbitkv and the Manager, beside",
		"raw baselines in the same run: shm spin, futex and Unix-socket ping-pong with a",
		"peer process, and a gRPC health Check on loopback. Two cadences: back-to-back,",
		"and one round trip per millisecond. Then the Manager's CPU use with 4 idle",
		"sessions. Method: bench/channel/README.md.")
	fs.StringVar(&cfg.socket, "socket", "", "bootstrap socket of a running Manager (default: start bin/orbitkv-manager on a temporary socket)")
	fs.StringVar(&cfg.pollMode, "poll-mode", "adaptive", "--poll-mode of a Manager the bench starts: spin, adaptive or park")
	fs.IntVar(&cfg.n, "n", 100000, "back-to-back round trips timed per subject")
	fs.IntVar(&cfg.perMsN, "per-ms-n", 2000, "round trips timed per subject at one per millisecond")
	fs.IntVar(&cfg.warmup, "warmup", 0, "untimed back-to-back round trips before timing (default: n/10, at most 10000)")
	fs.IntVar(&cfg.perMsWarmup, "per-ms-warmup", 50, "untimed per-ms round trips before timing")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	fs.StringVar(subjects, "subjects", strings.Join(allSubjects, ","), "comma-separated subjects: "+strings.Join(allSubjects, ", "))
	fs.Float64Var(idleSeconds, "idle-seconds", 3, "seconds 4 idle orbitkv sessions stay open while the Manager's CPU time is read (0 = skip)")
	fs.DurationVar(&cfg.clientSpin, "client-spin", 0, "how long okv_ping spins before it parks (0 = liborbitkv's default, 50µs)")
	fs.DurationVar(&cfg.peerIdle, "peer-idle", 30*time.Second, "a baseline peer process exits after this long without a request")
	return fs
}

// parseChannelFlags parses and validates the channel suite's arguments.
// Errors are *usageError (or flag.ErrHelp).
func parseChannelFlags(args []string, out io.Writer) (channelConfig, error) {
	var cfg channelConfig
	var subjects string
	var idleSeconds float64
	fs := channelFlags(&cfg, &subjects, &idleSeconds, out)
	if err := fs.parse(args); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.managerBin, cfg.managerArgs = fs.manager()

	switch {
	case cfg.n < 1:
		return cfg, usagef("--n must be at least 1, got %d", cfg.n)
	case cfg.perMsN < 0:
		return cfg, usagef("--per-ms-n must be at least 0, got %d", cfg.perMsN)
	case cfg.perMsWarmup < 0:
		return cfg, usagef("--per-ms-warmup must be at least 0, got %d", cfg.perMsWarmup)
	case set["warmup"] && cfg.warmup < 0:
		return cfg, usagef("--warmup must be at least 0, got %d", cfg.warmup)
	case idleSeconds < 0 || idleSeconds > 3600:
		return cfg, usagef("--idle-seconds must be between 0 and 3600, got %v", idleSeconds)
	case cfg.clientSpin < 0 || cfg.clientSpin > time.Second:
		return cfg, usagef("--client-spin must be between 0 and 1s, got %v", cfg.clientSpin)
	case cfg.peerIdle < time.Second:
		return cfg, usagef("--peer-idle must be at least 1s, got %v", cfg.peerIdle)
	case !slices.Contains(pollModes, cfg.pollMode):
		return cfg, usagef("--poll-mode must be one of %s, got %q", strings.Join(pollModes, ", "), cfg.pollMode)
	}
	if cfg.socket != "" {
		for _, name := range []string{"manager-bin", "manager-args", "poll-mode"} {
			if set[name] {
				return cfg, usagef("--%s configures a Manager the bench starts; it cannot be used with --socket", name)
			}
		}
	}
	if !set["warmup"] {
		cfg.warmup = min(cfg.n/10, 10000)
	}
	cfg.idle = time.Duration(idleSeconds * float64(time.Second))

	picked := map[string]bool{}
	for _, s := range strings.Split(subjects, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(allSubjects, s) {
			return cfg, usagef("--subjects: unknown subject %q (want %s)", s, strings.Join(allSubjects, ", "))
		}
		if picked[s] {
			return cfg, usagef("--subjects: %q named twice", s)
		}
		picked[s] = true
	}
	if len(picked) == 0 {
		return cfg, usagef("--subjects names no subject")
	}
	for _, s := range allSubjects {
		if picked[s] {
			cfg.subjects = append(cfg.subjects, s)
		}
	}
	return cfg, nil
}
