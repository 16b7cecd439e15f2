package latency

import ()

// CDFPoint is one point of a latency CDF: the fraction of samples at or
// below a latency.
type CDFPoint struct {
	Ns       float64 // latency, ns (> 0)
	Fraction float64 // in [0, 1]
}
