package channel

import (
	"io"
	"slices"
	"strings"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

// Subjects of the channel suite, in report order.
const (
	subjectOrbitKV = "orbitkv_ping"
	subjectOKVIox2 = "orbitkv_ping_iceoryx2"
	subjectShmSpin = "shm_spin"
	subjectFutex   = "futex"
	subjectUDS     = "uds"
	subjectIox2Raw = "iceoryx2_raw"
	subjectGRPC    = "grpc"
)

var allSubjects = []string{subjectOrbitKV, subjectOKVIox2, subjectShmSpin, subjectFutex, subjectUDS, subjectIox2Raw, subjectGRPC}

// iox2Subjects need the iceoryx2 transport (pingpong.Iceoryx2Built); a build
// without it leaves them out of the default --subjects and refuses them by
// name.
var iox2Subjects = []string{subjectOKVIox2, subjectIox2Raw}

// defaultSubjects is --subjects' default: every subject this build can run.
func defaultSubjects() []string {
	if pingpong.Iceoryx2Built {
		return allSubjects
	}
	return slices.DeleteFunc(slices.Clone(allSubjects), func(s string) bool { return slices.Contains(iox2Subjects, s) })
}

// perMsPeriod is the period of the per_ms cadence.
const perMsPeriod = time.Millisecond

var pollModes = []string{"spin", "adaptive", "park"}

// ChannelConfig is the parsed, validated flag set of `orbitkv-bench channel`.
type ChannelConfig struct {
	suite.Common
	socket      string        // running Manager's bootstrap socket; "" = start one
	PollMode    string        // --poll-mode passed to a Manager the bench starts
	N           int           // back-to-back round trips per subject
	PerMsN      int           // per-ms round trips per subject
	warmup      int           // untimed back-to-back round trips first
	perMsWarmup int           // untimed per-ms round trips first
	Subjects    []string      // selected subjects, in report order
	idle        time.Duration // idle-session window for idle_cpu_percent; 0 = skip
	peerIdle    time.Duration // a peer exits after this long without a request
	clientSpin  time.Duration // okv_connect_options.spin_ns; 0 = library default
}

func (c *ChannelConfig) has(subject string) bool { return slices.Contains(c.Subjects, subject) }

// needsManager reports whether the run talks to a Manager at all.
func (c *ChannelConfig) needsManager() bool { return c.has(subjectOrbitKV) }

func channelFlags(cfg *ChannelConfig, subjects *string, idleSeconds *float64, out io.Writer) *suite.Flags {
	fs := suite.NewFlags("channel", &cfg.Common, out,
		"Round-trip latency of a 64-byte Ping through liborbitkv and the Manager, beside",
		"raw baselines in the same run: shm spin, futex and Unix-socket ping-pong with a",
		"peer process, and a gRPC health Check on loopback. Two cadences: back-to-back,",
		"and one round trip per millisecond. Then the Manager's CPU use with 4 idle",
		"sessions. Method: bench/channel/README.md.")
	fs.ManagerFlags()
	fs.StringVar(&cfg.socket, "socket", "", "bootstrap socket `file` of a running Manager (default: start bin/orbitkv-manager on a temporary socket)")
	fs.StringVar(&cfg.PollMode, "poll-mode", "adaptive", "the `mode` a Manager the bench starts polls in (its --poll-mode): spin, adaptive or park")
	fs.IntVar(&cfg.N, "round-trips", 100000, "`N` back-to-back round trips timed per subject")
	fs.IntVar(&cfg.N, "n", 100000, "--round-trips under its deprecated name")
	_ = fs.MarkDeprecated("n", "use --round-trips")
	fs.IntVar(&cfg.PerMsN, "per-ms-n", 2000, "`N` round trips timed per subject at one per millisecond")
	fs.IntVar(&cfg.warmup, "warmup", 0, "`N` untimed back-to-back round trips before timing (default: a tenth of --round-trips, at most 10000)")
	fs.IntVar(&cfg.perMsWarmup, "per-ms-warmup", 50, "`N` untimed per-ms round trips before timing")
	fs.PlotFlag("latency CDFs of every subject, back to back and per ms")
	fs.StringVar(subjects, "subjects", strings.Join(defaultSubjects(), ","), "comma-separated `subjects`: "+strings.Join(allSubjects, ", ")+" ("+strings.Join(iox2Subjects, ", ")+" only in a build with the iceoryx2 transport)")
	fs.DurationVar(&cfg.idle, "idle", 3*time.Second, "how long 4 idle orbitkv sessions stay open while the Manager's CPU time is read (0 = skip)")
	fs.Float64Var(idleSeconds, "idle-seconds", 3, "--idle in seconds, without a unit (deprecated)")
	_ = fs.MarkDeprecated("idle-seconds", "use --idle with a unit, e.g. --idle 3s")
	fs.DurationVar(&cfg.clientSpin, "client-spin", 0, "how long okv_ping spins before it parks (0 = liborbitkv's default, 50µs)")
	fs.DurationVar(&cfg.peerIdle, "peer-idle", 30*time.Second, "a baseline peer process exits after this long without a request")
	// The cold-wake target is the median of at least this many interleaved
	// repeats.
	fs.DefaultRepeatsOf(coldWakeRepeats)
	return fs
}

// parseChannelFlags parses and validates the channel suite's arguments.
// Errors are *suite.UsageError (or pflag.ErrHelp).
func parseChannelFlags(args []string, out io.Writer) (ChannelConfig, error) {
	var cfg ChannelConfig
	var subjects string
	var idleSeconds float64
	fs := channelFlags(&cfg, &subjects, &idleSeconds, out)
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	err := suite.FirstError(
		suite.AtLeast(roundTripsFlag(fs), cfg.N, 1),
		suite.AtLeast("per-ms-n", cfg.PerMsN, 0),
		suite.AtLeast("per-ms-warmup", cfg.perMsWarmup, 0),
		suite.AtLeast("warmup", cfg.warmup, 0),
		suite.Between("idle", cfg.idle, 0, time.Hour),
		suite.Between("client-spin", cfg.clientSpin, 0, time.Second),
		suite.AtLeast("peer-idle", cfg.peerIdle, time.Second))
	if err != nil {
		return cfg, err
	}
	if fs.IsSet("idle-seconds") {
		if err := suite.Between("idle-seconds", idleSeconds, 0, 3600); err != nil {
			return cfg, err
		}
		cfg.idle = time.Duration(idleSeconds * float64(time.Second))
	}
	if !slices.Contains(pollModes, cfg.PollMode) {
		return cfg, suite.Usagef("--poll-mode must be one of %s, got %q", strings.Join(pollModes, ", "), cfg.PollMode)
	}
	if err := fs.RefuseWithSocket(cfg.socket, "manager-bin", "manager-args", "poll-mode"); err != nil {
		return cfg, err
	}
	if !fs.IsSet("warmup") {
		cfg.warmup = min(cfg.N/10, 10000)
	}

	picked, err := suite.ParseList(suite.ListFlag{Name: "subjects", Noun: "subject", QuoteRepeats: true}, subjects, func(s string) (string, error) {
		if !slices.Contains(allSubjects, s) {
			return "", suite.Usagef("--subjects: unknown subject %q (want %s)", s, strings.Join(allSubjects, ", "))
		}
		if slices.Contains(iox2Subjects, s) && !pingpong.Iceoryx2Built {
			return "", suite.Usagef("--subjects: %s: %v", s, pingpong.ErrNoIceoryx2)
		}
		return s, nil
	})
	if err != nil {
		return cfg, err
	}
	for _, s := range allSubjects {
		if slices.Contains(picked, s) {
			cfg.Subjects = append(cfg.Subjects, s)
		}
	}
	return cfg, nil
}

// roundTripsFlag is the name the round-trip count was given under:
// round-trips, or its deprecated alias n.
func roundTripsFlag(fs *suite.Flags) string {
	if fs.IsSet("n") {
		return "n"
	}
	return "round-trips"
}
