package ebpf

import (
	"math"
	"testing"
	"time"
)

func TestHistogram(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots map[int]uint64
		count uint64
		max   time.Duration
	}{
		{"an empty histogram has no samples and no maximum", nil, 0, 0},
		{"a sample in slot 10 is below 2048 ns", map[int]uint64{10: 3}, 3, 2048},
		{"the highest non-empty slot bounds the maximum", map[int]uint64{3: 1, 20: 2}, 3, 1 << 21},
		{"the last slot is unbounded", map[int]uint64{Slots - 1: 1}, 1, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s [Slots]uint64
			for i, v := range tc.slots {
				s[i] = v
			}
			var h Histogram
			h.add(s, 100)
			if h.Count() != tc.count || h.Max() != tc.max || h.Sum != 100 {
				t.Errorf("count %d, max %v, sum %v; want %d, %v, 100ns", h.Count(), h.Max(), h.Sum, tc.count, tc.max)
			}
		})
	}
}

func TestUpperBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		slot int
		want float64
	}{
		{"slot 0 ends at 2 ns", 0, 2e-9},
		{"slot 9 ends at 1024 ns", 9, 1024e-9},
		{"the last slot ends at infinity", Slots - 1, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UpperBound(tc.slot); got != tc.want {
				t.Errorf("UpperBound(%d) = %g, want %g", tc.slot, got, tc.want)
			}
		})
	}
}
