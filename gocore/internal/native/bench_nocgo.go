//go:build !cgo

package native

import (
	"fmt"
	"os"
	"time"
)

// BenchKind names one raw round-trip baseline; see bench.go.
type BenchKind int

// The raw baselines; see bench.go.
const (
	BenchShmSpin BenchKind = 1
	BenchFutex   BenchKind = 2
	BenchUDS     BenchKind = 3
)

// String returns the subject name ("shm_spin", "futex", "uds").
func (k BenchKind) String() string {
	switch k {
	case BenchShmSpin:
		return "shm_spin"
	case BenchFutex:
		return "futex"
	case BenchUDS:
		return "uds"
	}
	return fmt.Sprintf("BenchKind(%d)", int(k))
}

// ParseBenchKind is the inverse of String.
func ParseBenchKind(s string) (BenchKind, error) {
	for _, k := range []BenchKind{BenchShmSpin, BenchFutex, BenchUDS} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown bench baseline %q (want shm_spin, futex or uds)", s)
}

// BenchPingPong is unavailable without cgo.
type BenchPingPong struct{}

// NewBenchPingPong returns ErrNoCgo.
func NewBenchPingPong(BenchKind) (*BenchPingPong, *os.File, error) { return nil, nil, ErrNoCgo }

// Kind returns 0.
func (*BenchPingPong) Kind() BenchKind { return 0 }

// Measure returns ErrNoCgo.
func (*BenchPingPong) Measure(int, time.Duration, []uint64) error { return ErrNoCgo }

// Close does nothing.
func (*BenchPingPong) Close() error { return nil }

// BenchPeer returns ErrNoCgo.
func BenchPeer(BenchKind, int, int, time.Duration) error { return ErrNoCgo }

// BenchPing returns ErrNoCgo.
func BenchPing(*Client, uint64, int, time.Duration, []uint64) error { return ErrNoCgo }

// ClockTicksPerSecond returns 100 (USER_HZ on Linux).
func ClockTicksPerSecond() int { return 100 }

// BenchRole is OKV_ROLE_BENCH.
const BenchRole = uint32(4)
