package chart

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// DecodePlot decodes the PNG at path and checks it is Width ×
// Height.
func DecodePlot(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != Width || b.Dy() != Height {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), Width, Height)
	}
	return img
}

// hasColor reports whether some pixel of img is exactly c (the lines are
// drawn antialiased, but their middle pixels keep the palette colour).
func hasColor(img image.Image, c color.Color) bool {
	r0, g0, b0, _ := c.RGBA()
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r == r0 && g == g0 && bl == b0 {
				return true
			}
		}
	}
	return false
}

func TestChartsWriteAPNGWithEveryLine(t *testing.T) {
	tests := []struct {
		name  string
		chart Line
	}{
		{"a throughput chart draws one line per subject on a log2 axis", Throughput("t.png", "throughput", []uint64{256 << 10, 1 << 20, 2 << 20},
			[]ThroughputSubject{{Name: "Publish", GBps: []float64{10, 12, 11}}, {Name: "memcpy", GBps: []float64{13, 14, 12}, Reference: true}})},
		{"a throughput chart draws the repeats' spread as bars", Throughput("s.png", "throughput", []uint64{256 << 10, 2 << 20},
			[]ThroughputSubject{{Name: "Restore", GBps: []float64{10, 12}, lo: []float64{8, 11}, hi: []float64{13, 12}}, {Name: "memcpy", GBps: []float64{13, 14}, lo: []float64{12, 14}, hi: []float64{13, 16}, Reference: true}})},
		{"a latency CDF draws one line per subject on a log ns axis", CDF("c.png", "cdf", "round trip",
			[]CDFSubject{{Name: "orbitkv_ping", Points: []latency.CDFPoint{{Ns: 250, Fraction: 0.1}, {Ns: 300, Fraction: 0.5}, {Ns: 2000, Fraction: 0.99}, {Ns: 9000, Fraction: 1}}},
				{Name: "uds", Points: []latency.CDFPoint{{Ns: 40000, Fraction: 0.2}, {Ns: 50000, Fraction: 0.9}, {Ns: 1.2e6, Fraction: 1}}}})},
		{"a hit ratio chart draws a bound under a line that reaches it", Line{File: "h.png", Title: "hit ratio", XLabel: "capacity (%)", YLabel: "hit ratio",
			YFromZero: true, Glyphs: true, Series: []Series{{Name: "bound", Xs: []float64{5, 50}, Ys: []float64{0.3, 0.3}, Bound: true},
				{Name: "optimum", Xs: []float64{5, 25, 50}, Ys: []float64{0.2, 0.3, 0.3}, Reference: true}, {Name: "lru", Xs: []float64{5, 50}, Ys: []float64{0.1, 0.2}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, err := tt.chart.write(dir, "2 CPUs (test), commit 0123456789ab")
			if err != nil {
				t.Fatal(err)
			}
			if path != filepath.Join(dir, tt.chart.File) {
				t.Errorf("path = %s, want %s", path, filepath.Join(dir, tt.chart.File))
			}
			img := DecodePlot(t, path)
			for i, s := range tt.chart.Series {
				if !hasColor(img, seriesColor(s, i)) {
					t.Errorf("series %q: no pixel of its colour %v: the line is not drawn", s.Name, seriesColor(s, i))
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%s holds %d entries, want the PNG alone (a temporary file is left)", dir, len(entries))
			}
		})
	}
}

func TestChartsRefuseWhatTheyCannotDraw(t *testing.T) {
	ok := Series{Name: "ok", Xs: []float64{1, 2}, Ys: []float64{1, 2}}
	tests := []struct {
		name   string
		logX   bool
		series []Series
		want   string
	}{
		{"a chart without series", false, nil, "--plot: x.png: no series to draw"},
		{"a series without points", false, []Series{ok, {Name: "empty"}}, `--plot: x.png: series "empty" has no points`},
		{"a series with more x than y values", false, []Series{{Name: "short", Xs: []float64{1, 2}, Ys: []float64{1}}}, `series "short" has 2 x values and 1 y values`},
		{"a value that is not a number", false, []Series{{Name: "nan", Xs: []float64{1}, Ys: []float64{math.NaN()}}}, `series "nan" point 0 (1, NaN) is not finite`},
		{"a spread shorter than the series", false, []Series{{Name: "bars", Xs: []float64{1, 2}, Ys: []float64{1, 2}, Lo: []float64{1}, Hi: []float64{1, 2}}}, `series "bars" has 2 y values and a spread of 1 and 2`},
		{"a spread that does not hold its value", false, []Series{{Name: "bars", Xs: []float64{1}, Ys: []float64{5}, Lo: []float64{1}, Hi: []float64{4}}}, `series "bars" point 0: y = 5 lies outside its spread [1, 4]`},
		{"a zero on a log axis", true, []Series{{Name: "zero", Xs: []float64{0, 1}, Ys: []float64{1, 1}}}, `series "zero" point 0 has x = 0, which a log axis cannot show`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := Line{File: "x.png", logX: tt.logX, Series: tt.series}
			_, err := c.write(dir, "host")
			if !errors.Is(err, errPlot) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want errPlot containing %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused chart left %d files in %s", len(entries), dir)
			}
		})
	}
}

func TestThroughputChartRefusesASubjectMissingASize(t *testing.T) {
	c := Throughput("t.png", "t", []uint64{1 << 20, 2 << 20}, []ThroughputSubject{{Name: "transfer", GBps: []float64{3}}})
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), `series "transfer" has 2 x values and 1 y values`) {
		t.Errorf("err = %v, want the mismatch named", err)
	}
}

func TestPlotHostNamesTheMachineAndTheCommit(t *testing.T) {
	tests := []struct {
		name string
		head suite.Head
		want string
	}{
		{"a full commit is cut to 12 digits", suite.Head{Meta: suite.Meta{Cores: 2, CPUModel: "AMD EPYC", Commit: "6e7afaf5d547a79ea11b4bdc1ee70f7defc8f5d5"}, Validity: suite.Validity{Valid: true}},
			"2 CPUs (AMD EPYC), commit 6e7afaf5d547"},
		{"a dirty tree keeps its suffix", suite.Head{Meta: suite.Meta{Cores: 16, CPUModel: "Xeon", Commit: "6e7afaf5d547a79ea11b4bdc1ee70f7defc8f5d5-dirty"}, Validity: suite.Validity{Valid: true}},
			"16 CPUs (Xeon), commit 6e7afaf5d547-dirty"},
		{"no CPU model and an unknown commit stay readable", suite.Head{Meta: suite.Meta{Cores: 4, Commit: "unknown"}, Validity: suite.Validity{Valid: true}}, "4 CPUs, commit unknown"},
		{"an invalid run says so", suite.Head{Meta: suite.Meta{Cores: 2, Commit: "abc"}, Validity: suite.Validity{Reasons: []string{"steal", "parked"}}},
			"2 CPUs, commit abc; INVALID RUN (2 reasons in the report)"},
		{"an invalid run of one reason says so in the singular", suite.Head{Meta: suite.Meta{Cores: 2, Commit: "abc"}, Validity: suite.Validity{Reasons: []string{"steal"}}},
			"2 CPUs, commit abc; INVALID RUN (1 reason in the report)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plotHost(&tt.head); got != tt.want {
				t.Errorf("plotHost = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLatencyTicksLabelAsManyValuesAsFit(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		want   []string
	}{
		{"a span of two decades is labelled 1-2-5", 150, 25000, []string{"200ns", "500ns", "1µs", "2µs", "5µs", "10µs", "20µs"}},
		{"a span of six decades is labelled once per decade", 60, 1.5e8, []string{"100ns", "1µs", "10µs", "100µs", "1ms", "10ms", "100ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var labels []string
			for _, tk := range (latencyTicks{}).Ticks(tt.lo, tt.hi) {
				if tk.Value < tt.lo || tk.Value > tt.hi {
					t.Errorf("tick %v lies outside [%v, %v]", tk.Value, tt.lo, tt.hi)
				}
				if tk.Label != "" {
					labels = append(labels, tk.Label)
				}
			}
			if !slices.Equal(labels, tt.want) {
				t.Errorf("labels = %v, want %v", labels, tt.want)
			}
		})
	}
}
