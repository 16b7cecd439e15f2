package suite

import (
	"fmt"
)

// Us formats nanoseconds as microseconds with 2 decimals.
func Us(ns uint64) string { return fmt.Sprintf("%.2f", float64(ns)/1000) }

// Ratio formats a/b as "12.34x" ("0.0012x" below 0.01, so a tiny ratio
// does not print as zero), or "-" without a reference.
func Ratio(a, b uint64) string {
	if b == 0 {
		return "-"
	}
	r := float64(a) / float64(b)
	if r < 0.01 {
		return fmt.Sprintf("%.4fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}
