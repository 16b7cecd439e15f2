package pingpong

import (
	"os"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// Kind names a raw baseline; see native.BenchKind.
type Kind = native.BenchKind

// The raw baselines.
const (
	ShmSpin = native.BenchShmSpin
	Futex   = native.BenchFutex
	UDS     = native.BenchUDS
	// Iceoryx2 is a bare iceoryx2 request-response ping-pong
	// (native.BenchIceoryx2); only where Iceoryx2Built.
	Iceoryx2 = native.BenchIceoryx2
)

// Iceoryx2Built reports whether this binary carries the iceoryx2 transport
// (native.Iceoryx2Built).
const Iceoryx2Built = native.Iceoryx2Built

// ErrNoIceoryx2 is what the iceoryx2 subjects return in a build without
// the transport (native.ErrNoIceoryx2).
var ErrNoIceoryx2 = native.ErrNoIceoryx2

// ParseKind parses "shm_spin", "futex", "uds" or "iceoryx2_raw".
func ParseKind(s string) (Kind, error) { return native.ParseBenchKind(s) }

// Baseline is the parent's end of a raw baseline; see native.BenchPingPong.
type Baseline = native.BenchPingPong

// NewBaseline creates a baseline's shared resource and returns the parent's
// end and the file to hand to the peer process (exec.Cmd.ExtraFiles); see
// native.NewBenchPingPong.
func NewBaseline(k Kind) (*Baseline, *os.File, error) { return native.NewBenchPingPong(k) }

// Peer runs the echoing side of a baseline on fd until stopped, orphaned or
// idle for idle; see native.BenchPeer.
func Peer(k Kind, fd int, parentPID int, idle time.Duration) error {
	return native.BenchPeer(k, fd, parentPID, idle)
}

// RoleBench is the hello role of bench sessions (OKV_ROLE_BENCH).
const RoleBench = native.BenchRole

// Ping times okv_ping round trips of c: warmup untimed, then len(out) timed
// into out (nanoseconds); period 0 is back-to-back, else one per period.
// See native.BenchPing.
func Ping(c *client.Client, first uint64, warmup int, period time.Duration, out []uint64) error {
	return native.BenchPing(c, first, warmup, period, out)
}

// ClockTicksPerSecond is sysconf(_SC_CLK_TCK), the unit of /proc/PID/stat
// times.
func ClockTicksPerSecond() int { return native.ClockTicksPerSecond() }

// CgoNoop makes one cgo call to an empty C function and returns x+1 (the
// wake suite's cgo_call probe; native.BenchCgoNoop). In a build without
// cgo it makes no call and returns x and native.ErrNoCgo.
func CgoNoop(x uint64) (uint64, error) { return native.BenchCgoNoop(x) }
