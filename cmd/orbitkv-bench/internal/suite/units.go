package suite

import ()

// GBps is bytes per nanosecond, i.e. GB/s (10^9 bytes), or 0 without time.
func GBps(bytes, ns uint64) float64 {
	if ns == 0 {
		return 0
	}
	return float64(bytes) / float64(ns)
}
