//go:build !cgo

package native

import (
	"os"
	"time"
)

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

// DiscoverMode is a subject of BenchDiscover.
type DiscoverMode int

// Subjects of BenchDiscover.
const (
	DiscoverLocalMode DiscoverMode = 0
	DiscoverRTTMode   DiscoverMode = 1
	DiscoverEmptyMode DiscoverMode = 2
)

// BenchDiscover returns ErrNoCgo.
func BenchDiscover(*Client, Namespace, []BlockHash, uint32, DiscoverMode, int, time.Duration, []uint64) error {
	return ErrNoCgo
}

// BenchCgoNoop returns ErrNoCgo.
func BenchCgoNoop(x uint64) (uint64, error) { return x, ErrNoCgo }
