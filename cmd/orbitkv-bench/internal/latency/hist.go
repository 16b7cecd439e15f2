package latency

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The geometry of every latency histogram of the bench. One fixed geometry
// lets any two histograms merge without loss and lets a decoder refuse
// anything else.
const (
	// histLowestNS is the smallest value told apart from 0: 1 ns.
	histLowestNS = 1
	// HistHighestNS is the largest value recorded as itself: one hour.
	// A longer duration is recorded as one hour (and counted in clamped);
	// no operation a suite times comes near it (the longest bound is a
	// 10 s restore wait).
	HistHighestNS = int64(time.Hour)
	// HistSigFigs is the precision: 3 significant decimal digits, so a
	// recorded value is reported at most 1/1024 (under 0.1%) above
	// itself. The counts array of this geometry is 33,792 int64 (264 KiB).
	HistSigFigs = 3
)

// Hist is an HDR histogram of durations in nanoseconds, the one
// way the bench summarises timed round trips: suites record each sample
// into it instead of keeping and sorting the samples, replay workers send
// it to the parent (encode, decodeLatencyHist) and the parent merges.
//
// Percentiles (quantile) follow hdrhistogram-go's ValueAtPercentile: the
// sample of rank r = ⌊q·n + 0.5⌋ (q·n rounded half up), clamped to 1..n,
// in ascending order, reported as the highest value equivalent to it at
// histSigFigs digits. So a percentile is never below the sample of that
// rank and at most 1/1024 above it. Examples (hist_test.go pins them): p50
// of 1..100 is 50 (rank 50.5 → 50), p99 of 1..100 is 99, p99.9 of 1..1000
// is 999 (rank 999.5 → 999), p50 of {3, 9} is 3 (rank 1.5 → 1). This is
// the nearest-rank percentile the suites used before (rank ⌈q·n⌉) except
// that the rank rounds instead of rising: they differ only where q·n has a
// fractional part below one half, by one rank.
//
// A latencyHist is not safe for concurrent use.
type Hist struct {
	H       *hdrhistogram.Histogram
	clamped int64 // samples above histHighestNS, recorded as histHighestNS
}

// NewHist returns an empty histogram of the bench's geometry.
func NewHist() *Hist {
	return &Hist{H: hdrhistogram.New(histLowestNS, HistHighestNS, HistSigFigs)}
}

// Record adds one sample of ns nanoseconds.
func (l *Hist) Record(ns uint64) {
	v := int64(HistHighestNS)
	if ns < uint64(HistHighestNS) {
		v = int64(ns)
	} else if ns > uint64(HistHighestNS) {
		l.clamped++
	}
	// In range by construction: RecordValue fails only above the highest.
	_ = l.H.RecordValue(v)
}

// RecordDuration adds one sample of d (a negative d counts as 0).
func (l *Hist) RecordDuration(d time.Duration) { l.Record(uint64(max(d, 0))) }

// RecordAll adds every sample of samples, in ns.
func (l *Hist) RecordAll(samples []uint64) {
	for _, s := range samples {
		l.Record(s)
	}
}

// Merge adds every sample of o to l; o is unchanged.
func (l *Hist) Merge(o *Hist) {
	l.H.Merge(o.H) // same geometry: nothing is dropped
	l.clamped += o.clamped
}

// Count is the number of samples recorded.
func (l *Hist) Count() int64 { return l.H.TotalCount() }

// Quantile is the percentile q (0..100) in ns as the type comment defines
// it; 0 for an empty histogram.
func (l *Hist) Quantile(q float64) uint64 { return uint64(l.H.ValueAtPercentile(q)) }

// maxNS is the largest sample's highest equivalent value, ns (0 if empty).
func (l *Hist) maxNS() uint64 {
	if l.Count() == 0 {
		return 0
	}
	return uint64(l.H.Max())
}

// CountAbove is the number of samples above ns (at the histogram's
// precision: a sample within 1/1024 of ns may count either way).
func (l *Hist) CountAbove(ns uint64) int64 {
	var n int64
	for _, b := range l.H.Distribution() {
		if b.From > int64(ns) {
			n += b.Count
		}
	}
	return n
}

// Stats is the report summary of the histogram: p50, p99, p99.9 and the
// count. An empty histogram gives the zero Stats.
func (l *Hist) Stats() Stats {
	return Stats{P50: l.Quantile(50), P99: l.Quantile(99), P999: l.Quantile(99.9), N: int(l.Count())}
}

// CDF returns the cumulative distribution (CDFPoints, cdf.go), one point
// per distinct recorded value (its highest equivalent value; a 0 ns sample
// at 1 ns, the lowest value the histogram tells apart, so a log axis can
// draw it), ascending; nil if empty. It is what a latency CDF plot draws.
func (l *Hist) CDF() []CDFPoint {
	n := l.Count()
	if n == 0 {
		return nil
	}
	var out []CDFPoint
	var seen int64
	for _, b := range l.H.Distribution() {
		if b.Count == 0 {
			continue
		}
		seen += b.Count
		out = append(out, CDFPoint{Ns: float64(max(b.To, histLowestNS)), Fraction: float64(seen) / float64(n)})
	}
	return out
}

// Encode returns the histogram in the HdrHistogram V2 compressed encoding
// (base64 text, a few hundred bytes for a typical run): what a replay
// worker sends its parent. The clamped count is not part of it; a worker
// sends it beside.
func (l *Hist) Encode() ([]byte, error) {
	return l.H.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
}

// MaxEncodedHist bounds one encoded histogram from outside the process:
// the V2 encoding of the bench's geometry with every counter distinct and
// large is about 300 KiB before compression, far below.
const MaxEncodedHist = 1 << 20

// DecodeHist decodes one histogram of encode from outside bytes
// (a worker's message); field names it in errors. It refuses input over
// maxEncodedHist bytes, anything hdrhistogram-go cannot decode, a
// histogram of any geometry but the bench's own (which could not be
// merged without loss; refused from its header, before hdrhistogram-go
// allocates the counts array the header asks for) and one of more than
// maxHistSamples samples.
func DecodeHist(field string, b []byte) (*Hist, error) {
	if len(b) > MaxEncodedHist {
		return nil, fmt.Errorf("%s: %d bytes, limit %d", field, len(b), MaxEncodedHist)
	}
	if err := checkEncodedGeometry(field, b); err != nil {
		return nil, err
	}
	h, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: not an HdrHistogram V2 compressed encoding: %w", field, err)
	}
	if h.LowestTrackableValue() != histLowestNS || h.HighestTrackableValue() != HistHighestNS || h.SignificantFigures() != HistSigFigs {
		return nil, fmt.Errorf("%s: histogram of %d..%d at %d digits, want %d..%d at %d", field,
			h.LowestTrackableValue(), h.HighestTrackableValue(), h.SignificantFigures(), histLowestNS, HistHighestNS, HistSigFigs)
	}
	if h.TotalCount() < 0 || h.TotalCount() > MaxHistSamples {
		return nil, fmt.Errorf("%s: %d samples, limit %d", field, h.TotalCount(), MaxHistSamples)
	}
	return &Hist{H: h}, nil
}

// MaxHistSamples bounds the samples of one histogram from outside the
// process: 2^40 (about 1.1·10^12), more round trips than a worker times in
// days. It keeps the parent's merge of up to 64 workers (--clients) far
// from int64's limit, where a wrapped total would make every percentile
// wrong.
const MaxHistSamples = 1 << 40

// checkEncodedGeometry reads the geometry from the header of b, a V2
// compressed encoding, and refuses any but the bench's own. The header
// is 40 bytes at the start of the zlib stream (cookie, payload length,
// index offset, significant digits int32; lowest, highest int64, big
// endian); hdrhistogram-go allocates the counts array of whatever
// geometry it names before reading the payload, about 50 MB for
// 1..MaxInt64 at 5 digits, so a few bytes of outside input must not reach
// it unchecked. Input it cannot read the header of passes on to
// hdrhistogram.Decode, which names what is wrong with it.
func checkEncodedGeometry(field string, b []byte) error {
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(raw, b)
	if err != nil || n < 8 {
		return nil
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[8:n]))
	if err != nil {
		return nil
	}
	defer z.Close()
	var hdr [40]byte
	if _, err := io.ReadFull(z, hdr[:]); err != nil {
		return nil
	}
	digits := int32(binary.BigEndian.Uint32(hdr[12:16]))
	lowest := int64(binary.BigEndian.Uint64(hdr[16:24]))
	highest := int64(binary.BigEndian.Uint64(hdr[24:32]))
	// hdrhistogram-go reads a lowest below 1 as 1 (streams of its v1.0.0).
	if max(lowest, 1) != histLowestNS || highest != HistHighestNS || digits != HistSigFigs {
		return fmt.Errorf("%s: histogram of %d..%d at %d digits, want %d..%d at %d", field,
			lowest, highest, digits, histLowestNS, HistHighestNS, HistSigFigs)
	}
	return nil
}

// Of is a histogram of samples (ns each), for fixtures and tests.
func Of(samples ...uint64) *Hist {
	h := NewHist()
	h.RecordAll(samples)
	return h
}
