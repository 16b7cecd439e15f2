package ebpf

import (
	"fmt"
	"math"
	"time"
)

// Slots is the number of log2 buckets of every probe's histogram: slot i
// counts samples of [2^i, 2^(i+1)) nanoseconds (slot 0 also 0 ns), the last
// slot every sample of 2^(Slots-1) ns (about 9 minutes) or more. It equals
// HIST_SLOTS in bpf/probes.c; a test checks the generated type.
const Slots = 40

// Histogram is one probe's latency histogram as read from its BPF map.
// Values only grow while the probes are loaded.
type Histogram struct {
	// Buckets[i] counts the samples of slot i (see Slots); not cumulative.
	Buckets [Slots]uint64
	// Sum is the total of all samples.
	Sum time.Duration
}

// Count is the number of samples.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, b := range h.Buckets {
		n += b
	}
	return n
}

// UpperBound is the exclusive upper bound of slot i, seconds: 2^(i+1) ns,
// and +Inf for the last slot.
func UpperBound(i int) float64 {
	if i >= Slots-1 {
		return math.Inf(1)
	}
	return math.Ldexp(1, i+1) / 1e9
}

// Max is the upper bound of the highest non-empty slot (0 when empty): no
// sample took longer, unless it lies in the last, unbounded slot.
func (h Histogram) Max() time.Duration {
	for i := Slots - 1; i >= 0; i-- {
		if h.Buckets[i] != 0 {
			if i == Slots-1 {
				return time.Duration(math.MaxInt64)
			}
			return time.Duration(int64(1) << (i + 1))
		}
	}
	return 0
}

func (h *Histogram) add(slots [Slots]uint64, sumNs uint64) {
	for i, v := range slots {
		h.Buckets[i] += v
	}
	h.Sum += time.Duration(sumNs)
}

// Direction says which end of a Manager's Unix stream socket received the
// sends a Unix socket histogram counts (bpf/probes.c UNIX_TO_MANAGER,
// UNIX_TO_CLIENT): the split keeps the Manager's own delay apart from the
// time a client takes to read what the Manager sent it.
type Direction uint32

const (
	// ToManager: a client's sends, until the Manager's receive.
	ToManager Direction = 0
	// ToClient: the Manager's sends, until the client's receive.
	ToClient Direction = 1
)

// String is the direction's label on /metrics: "to_manager" or
// "to_client" ("direction(N)" for any other value).
func (d Direction) String() string {
	switch d {
	case ToManager:
		return "to_manager"
	case ToClient:
		return "to_client"
	}
	return fmt.Sprintf("direction(%d)", uint32(d))
}
