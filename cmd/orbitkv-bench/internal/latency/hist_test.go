package latency

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
)

func TestHistogramPercentilesRoundTheRankHalfUp(t *testing.T) {
	tests := []struct {
		name    string
		samples []uint64
		q       float64
		want    uint64
	}{
		{"an empty histogram gives zero", nil, 50, 0},
		{"one sample is every percentile", []uint64{7}, 99.9, 7},
		{"p50 of 1..100 is the 50th value", benchtest.Seq(1, 100), 50, 50},
		{"p99 of 1..100 is the 99th value", benchtest.Seq(1, 100), 99, 99},
		{"p99.9 of 1..100 is the 100th value", benchtest.Seq(1, 100), 99.9, 100},
		{"p99.9 of 1..1000 is the 999th value (rank 999.5 rounds down)", benchtest.Seq(1, 1000), 99.9, 999},
		{"p50 of two samples is the lower one", []uint64{3, 9}, 50, 3},
		{"p99 of two samples is the higher one", []uint64{3, 9}, 99, 9},
		{"p50 of three samples is the middle one", []uint64{1, 2, 3}, 50, 2},
		{"order of recording does not matter", []uint64{500, 100, 300, 200, 400}, 50, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.samples...).Quantile(tt.q); got != tt.want {
				t.Errorf("quantile(%v) = %d, want %d", tt.q, got, tt.want)
			}
		})
	}
}

func TestHistogramKeepsThreeSignificantDigits(t *testing.T) {
	tests := []struct {
		name string
		ns   uint64
	}{
		{"a microsecond", 1000},
		{"3.8 µs, the query suite's hot p50", 3_812},
		{"58 µs", 58_123},
		{"a millisecond and a bit", 1_234_567},
		{"ten seconds", 10_000_000_007},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is reported within 1/1024 above itself", func(t *testing.T) {
			got := Of(tt.ns).Quantile(50)
			if got < tt.ns || float64(got-tt.ns) > float64(tt.ns)/1024 {
				t.Errorf("quantile(50) of %d = %d, want in [%d, %d·(1+1/1024)]", tt.ns, got, tt.ns, tt.ns)
			}
		})
	}
	t.Run("a sample above an hour is recorded as an hour and counted", func(t *testing.T) {
		h := Of(uint64(2 * time.Hour))
		if got := h.Quantile(50); got < uint64(time.Hour) || got > uint64(time.Hour)+uint64(time.Hour)/1024 {
			t.Errorf("quantile = %d, want about an hour", got)
		}
		if h.clamped != 1 {
			t.Errorf("clamped = %d, want 1", h.clamped)
		}
	})
}

func TestHistogramStatsAndMerge(t *testing.T) {
	a, b := Of(benchtest.Seq(1, 50)...), Of(benchtest.Seq(51, 100)...)
	a.Merge(b)
	if got, want := a.Stats(), (Stats{P50: 50, P99: 99, P999: 100, N: 100}); got != want {
		t.Errorf("stats of merged 1..50 and 51..100 = %+v, want %+v", got, want)
	}
	if b.Count() != 50 {
		t.Errorf("merge changed its argument: count %d, want 50", b.Count())
	}
	if got := (NewHist()).Stats(); got != (Stats{}) {
		t.Errorf("stats of an empty histogram = %+v, want zero", got)
	}
}

func TestHistogramCDFAscendsToOne(t *testing.T) {
	cdf := Of(10, 10, 20, 40).CDF()
	want := []CDFPoint{{10, 0.5}, {20, 0.75}, {40, 1}}
	if len(cdf) != len(want) {
		t.Fatalf("cdf = %v, want %v", cdf, want)
	}
	for i := range want {
		if cdf[i] != want[i] {
			t.Errorf("cdf[%d] = %v, want %v", i, cdf[i], want[i])
		}
	}
	if Of().CDF() != nil {
		t.Errorf("cdf of an empty histogram is not nil")
	}
}

func TestHistogramEncodingRoundTrips(t *testing.T) {
	h := Of(append(benchtest.Seq(1, 3000), 58_000, 1_000_000, 9_999_999_999)...)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeHist("h", b)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0, 10, 50, 90, 99, 99.9, 100} {
		if got.Quantile(q) != h.Quantile(q) {
			t.Errorf("quantile(%v) after the round trip = %d, want %d", q, got.Quantile(q), h.Quantile(q))
		}
	}
	if got.Count() != h.Count() {
		t.Errorf("count after the round trip = %d, want %d", got.Count(), h.Count())
	}
}

func TestDecodeLatencyHistRefusesForeignInput(t *testing.T) {
	twoDigits := hdrhistogram.New(1, int64(time.Hour), 2)
	_ = twoDigits.RecordValue(5)
	foreign, err := twoDigits.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"empty input is refused", nil, "not an HdrHistogram"},
		{"text that is not base64 is refused", []byte("not base64!"), "not an HdrHistogram"},
		{"input over the limit is refused naming it", make([]byte, MaxEncodedHist+1), "limit 1048576"},
		{"a histogram of another precision is refused naming both", foreign, "at 2 digits, want 1..3600000000000 at 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeHist("histograms.query", tt.input)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "histograms.query: ") {
				t.Errorf("err = %v, want it to start with the field and contain %q", err, tt.want)
			}
		})
	}
}

// encodedHist is the V2 compressed encoding of a histogram of the given
// geometry holding count samples of value v.
func encodedHist(t *testing.T, lowest, highest int64, digits int, v, count int64) []byte {
	t.Helper()
	h := hdrhistogram.New(lowest, highest, digits)
	if count > 0 {
		if err := h.RecordValues(v, count); err != nil {
			t.Fatal(err)
		}
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeLatencyHistBoundsHostileInput(t *testing.T) {
	t.Run("a tiny encoding of a huge geometry is refused without allocating its counts", func(t *testing.T) {
		// 1..MaxInt64 at 5 digits: a counts array of about 50 MB behind
		// an encoding of a few dozen bytes.
		hostile := encodedHist(t, 1, math.MaxInt64, 5, 0, 0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := DecodeHist("histograms.query", hostile)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "want 1..3600000000000 at 3") {
			t.Errorf("err = %v, want the geometry refused naming ours", err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
			t.Errorf("decoding allocated %d bytes, want under 4 MiB (our own geometry's counts are 264 KiB)", got)
		}
	})
	t.Run("a histogram of more samples than a worker can time is refused naming the limit", func(t *testing.T) {
		_, err := DecodeHist("histograms.query", encodedHist(t, histLowestNS, HistHighestNS, HistSigFigs, 1000, math.MaxInt64/2))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("limit %d", MaxHistSamples)) {
			t.Errorf("err = %v, want the sample limit named", err)
		}
	})
	t.Run("a histogram at the sample limit is accepted and 64 of them merge without overflow", func(t *testing.T) {
		h, err := DecodeHist("histograms.query", encodedHist(t, histLowestNS, HistHighestNS, HistSigFigs, 1000, MaxHistSamples))
		if err != nil {
			t.Fatal(err)
		}
		merged := NewHist()
		for range 64 {
			merged.Merge(h)
		}
		if got, want := merged.Count(), int64(64*MaxHistSamples); got != want || merged.Quantile(50) < 1000 {
			t.Errorf("merged count = %d, p50 = %d; want %d samples at about 1000 ns", got, merged.Quantile(50), want)
		}
	})
}
