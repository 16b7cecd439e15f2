package native

import "fmt"

// BenchKind names one raw round-trip baseline of orbitkv-bench channel
// (native/bench/pingpong.h; bench/channel/README.md states the method).
type BenchKind int

// The raw baselines. Values equal enum okvb_kind (TestEnumsMatchC).
const (
	// BenchShmSpin: a 64-byte message each way on two cache lines of a
	// shared memfd; both sides spin with a pause hint.
	BenchShmSpin BenchKind = 1
	// BenchFutex: the same mapping; both sides sleep in FUTEX_WAIT on shared
	// futexes and wake each other with FUTEX_WAKE, never spinning.
	BenchFutex BenchKind = 2
	// BenchUDS: blocking send/read of 64 bytes on a SOCK_SEQPACKET socketpair.
	BenchUDS BenchKind = 3
	// BenchIceoryx2: a bare iceoryx2 request-response service (the Rust
	// library native/iox2); each side polls its receive for 50 µs, yielding
	// the CPU between polls, then sleeps on the iceoryx2 event the other
	// notifies. Only where the
	// library was built (Iceoryx2Built); elsewhere NewBenchPingPong
	// returns ErrNoIceoryx2.
	BenchIceoryx2 BenchKind = 4
)

// String returns the subject name used by orbitkv-bench ("shm_spin",
// "futex", "uds", "iceoryx2_raw").
func (k BenchKind) String() string {
	switch k {
	case BenchShmSpin:
		return "shm_spin"
	case BenchFutex:
		return "futex"
	case BenchUDS:
		return "uds"
	case BenchIceoryx2:
		return "iceoryx2_raw"
	}
	return fmt.Sprintf("BenchKind(%d)", int(k))
}

// ParseBenchKind is the inverse of String.
func ParseBenchKind(s string) (BenchKind, error) {
	for _, k := range []BenchKind{BenchShmSpin, BenchFutex, BenchUDS, BenchIceoryx2} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown bench baseline %q (want shm_spin, futex, uds or iceoryx2_raw)", s)
}
