package main

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// decodePlot decodes the PNG at path and checks it is plotWidth ×
// plotHeight.
func decodePlot(t *testing.T, path string) image.Image {
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
	if b := img.Bounds(); b.Dx() != plotWidth || b.Dy() != plotHeight {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), plotWidth, plotHeight)
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
		chart lineChart
	}{
		{"a throughput chart draws one line per subject on a log2 axis", throughputChart("t.png", "throughput", []uint64{256 << 10, 1 << 20, 2 << 20},
			[]throughputSubject{{name: "Publish", gbps: []float64{10, 12, 11}}, {name: "memcpy", gbps: []float64{13, 14, 12}, reference: true}})},
		{"a throughput chart draws the repeats' spread as bars", throughputChart("s.png", "throughput", []uint64{256 << 10, 2 << 20},
			[]throughputSubject{{name: "Restore", gbps: []float64{10, 12}, lo: []float64{8, 11}, hi: []float64{13, 12}}, {name: "memcpy", gbps: []float64{13, 14}, lo: []float64{12, 14}, hi: []float64{13, 16}, reference: true}})},
		{"a latency CDF draws one line per subject on a log ns axis", cdfChart("c.png", "cdf", "round trip",
			[]cdfSubject{{name: "orbitkv_ping", points: []cdfPoint{{250, 0.1}, {300, 0.5}, {2000, 0.99}, {9000, 1}}},
				{name: "uds", points: []cdfPoint{{40000, 0.2}, {50000, 0.9}, {1.2e6, 1}}}})},
		{"a hit ratio chart draws a bound under a line that reaches it", lineChart{file: "h.png", title: "hit ratio", xLabel: "capacity (%)", yLabel: "hit ratio",
			yFromZero: true, glyphs: true, series: []plotSeries{{name: "bound", xs: []float64{5, 50}, ys: []float64{0.3, 0.3}, bound: true},
				{name: "optimum", xs: []float64{5, 25, 50}, ys: []float64{0.2, 0.3, 0.3}, reference: true}, {name: "lru", xs: []float64{5, 50}, ys: []float64{0.1, 0.2}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, err := tt.chart.write(dir, "2 CPUs (test), commit 0123456789ab")
			if err != nil {
				t.Fatal(err)
			}
			if path != filepath.Join(dir, tt.chart.file) {
				t.Errorf("path = %s, want %s", path, filepath.Join(dir, tt.chart.file))
			}
			img := decodePlot(t, path)
			for i, s := range tt.chart.series {
				if !hasColor(img, seriesColor(s, i)) {
					t.Errorf("series %q: no pixel of its colour %v: the line is not drawn", s.name, seriesColor(s, i))
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%s holds %d entries, want the PNG alone (a temporary file is left)", dir, len(entries))
			}
		})
	}
}

func TestChartsRefuseWhatTheyCannotDraw(t *testing.T) {
	ok := plotSeries{name: "ok", xs: []float64{1, 2}, ys: []float64{1, 2}}
	tests := []struct {
		name   string
		logX   bool
		series []plotSeries
		want   string
	}{
		{"a chart without series", false, nil, "--plot: x.png: no series to draw"},
		{"a series without points", false, []plotSeries{ok, {name: "empty"}}, `--plot: x.png: series "empty" has no points`},
		{"a series with more x than y values", false, []plotSeries{{name: "short", xs: []float64{1, 2}, ys: []float64{1}}}, `series "short" has 2 x values and 1 y values`},
		{"a value that is not a number", false, []plotSeries{{name: "nan", xs: []float64{1}, ys: []float64{math.NaN()}}}, `series "nan" point 0 (1, NaN) is not finite`},
		{"a spread shorter than the series", false, []plotSeries{{name: "bars", xs: []float64{1, 2}, ys: []float64{1, 2}, lo: []float64{1}, hi: []float64{1, 2}}}, `series "bars" has 2 y values and a spread of 1 and 2`},
		{"a spread that does not hold its value", false, []plotSeries{{name: "bars", xs: []float64{1}, ys: []float64{5}, lo: []float64{1}, hi: []float64{4}}}, `series "bars" point 0: y = 5 lies outside its spread [1, 4]`},
		{"a zero on a log axis", true, []plotSeries{{name: "zero", xs: []float64{0, 1}, ys: []float64{1, 1}}}, `series "zero" point 0 has x = 0, which a log axis cannot show`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := lineChart{file: "x.png", logX: tt.logX, series: tt.series}
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
	c := throughputChart("t.png", "t", []uint64{1 << 20, 2 << 20}, []throughputSubject{{name: "transfer", gbps: []float64{3}}})
	if err := c.check(); err == nil || !strings.Contains(err.Error(), `series "transfer" has 2 x values and 1 y values`) {
		t.Errorf("err = %v, want the mismatch named", err)
	}
}

func TestPlotDirIsCheckedWhenTheFlagsAreParsed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want string // "" = accepted
	}{
		{"a missing directory is made", filepath.Join(t.TempDir(), "a", "b"), ""},
		{"a directory below a regular file is refused", filepath.Join(file, "sub"), "--plot " + filepath.Join(file, "sub") + ": cannot make the directory"},
		{"a directory nobody can write is refused", "/proc", "--plot /proc: the directory is not writable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePolicyFlags([]string{"--plot", tt.dir}, &bytes.Buffer{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(tt.dir); err != nil || !fi.IsDir() {
					t.Errorf("--plot %s was not made: %v", tt.dir, err)
				}
				if entries, _ := os.ReadDir(tt.dir); len(entries) != 0 {
					t.Errorf("the writability probe left %d files", len(entries))
				}
				return
			}
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestPlotHostNamesTheMachineAndTheCommit(t *testing.T) {
	tests := []struct {
		name string
		head reportHead
		want string
	}{
		{"a full commit is cut to 12 digits", reportHead{Meta: reportMeta{Cores: 2, CPUModel: "AMD EPYC", Commit: "6e7afaf5d547a79ea11b4bdc1ee70f7defc8f5d5"}, Validity: validity{Valid: true}},
			"2 CPUs (AMD EPYC), commit 6e7afaf5d547"},
		{"a dirty tree keeps its suffix", reportHead{Meta: reportMeta{Cores: 16, CPUModel: "Xeon", Commit: "6e7afaf5d547a79ea11b4bdc1ee70f7defc8f5d5-dirty"}, Validity: validity{Valid: true}},
			"16 CPUs (Xeon), commit 6e7afaf5d547-dirty"},
		{"no CPU model and an unknown commit stay readable", reportHead{Meta: reportMeta{Cores: 4, Commit: "unknown"}, Validity: validity{Valid: true}}, "4 CPUs, commit unknown"},
		{"an invalid run says so", reportHead{Meta: reportMeta{Cores: 2, Commit: "abc"}, Validity: validity{Reasons: []string{"steal", "parked"}}},
			"2 CPUs, commit abc; INVALID RUN (2 reasons in the report)"},
		{"an invalid run of one reason says so in the singular", reportHead{Meta: reportMeta{Cores: 2, Commit: "abc"}, Validity: validity{Reasons: []string{"steal"}}},
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

func TestPolicyChartShowsTheReportsRowsInCapacityOrder(t *testing.T) {
	rep := &policyReport{Requests: 10, UniqueBlocks: 100, DefaultPolicy: "slru", BoundHitRatio: 0.4,
		policies: []string{evict.NameLRU, "slru"}, fractions: []float64{0.5, 0.1}}
	for _, r := range []struct {
		f    float64
		p    string
		hits float64
	}{{0.5, "lru", 0.3}, {0.5, "slru", 0.32}, {0.5, optimumName, 0.38}, {0.1, "lru", 0.1}, {0.1, "slru", 0.15}, {0.1, optimumName, 0.25}} {
		rep.Rows = append(rep.Rows, policyRow{CapacityFraction: r.f, Policy: r.p, HitRatio: r.hits})
	}
	c := policyCharts(rep)[0]
	want := map[string][]float64{"lru": {0.1, 0.3}, "slru": {0.15, 0.32}, "optimum (offline)": {0.25, 0.38}, "infinite-cache bound 0.4000": {0.4, 0.4}}
	if len(c.series) != len(want) {
		t.Fatalf("%d series, want %d", len(c.series), len(want))
	}
	for _, s := range c.series {
		if !slices.Equal(s.ys, want[s.name]) || !slices.Equal(s.xs, []float64{10, 50}) {
			t.Errorf("series %q = %v at %v, want %v at [10 50]", s.name, s.ys, s.xs, want[s.name])
		}
	}
}

func TestCopyChartBarsSpanTheRepeatsOfEachFigure(t *testing.T) {
	rep := &copyReport{Blocks: 8, Layers: 4, Iters: 3, Sizes: []copySize{{BlockBytes: 256 << 10, PublishGBps: 10, RestoreGBps: 11, MemcpyGBps: 12}, {BlockBytes: 1 << 20, PublishGBps: 20, RestoreGBps: 21, MemcpyGBps: 22}}}
	for _, size := range []string{"256 KiB", "1.0 MiB"} {
		for _, f := range []string{"publish_gbps", "restore_gbps", "memcpy_gbps"} {
			base := map[string]float64{"256 KiB": 10, "1.0 MiB": 20}[size] + map[string]float64{"publish_gbps": 0, "restore_gbps": 1, "memcpy_gbps": 2}[f]
			rep.Figures = append(rep.Figures, newFigure(size+"/"+f, "GB/s", higherIsBetter, base, []float64{base - 1, base, base + 0.5}))
		}
	}
	tests := []struct {
		name    string
		repeats int
		lo, hi  map[string][]float64 // by series name; nil = no bars
	}{
		{"three repeats give each point the range of its figure", 3,
			map[string][]float64{"Publish": {9, 19}, "Restore": {10, 20}, "memcpy (baseline)": {11, 21}},
			map[string][]float64{"Publish": {10.5, 20.5}, "Restore": {11.5, 21.5}, "memcpy (baseline)": {12.5, 22.5}}},
		{"one repeat draws no bars", 1, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep.Meta.Repeats = tt.repeats
			c := copyCharts(rep)[0]
			if err := c.check(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(c.title, "bars: min to max of 3 repeats"); got != (tt.lo != nil) {
				t.Errorf("title %q: names the bars = %v, want %v", c.title, got, tt.lo != nil)
			}
			for _, s := range c.series {
				if !slices.Equal(s.lo, tt.lo[s.name]) || !slices.Equal(s.hi, tt.hi[s.name]) {
					t.Errorf("%s: spread [%v, %v], want [%v, %v]", s.name, s.lo, s.hi, tt.lo[s.name], tt.hi[s.name])
				}
			}
		})
	}
}

func TestSSDChartsAreOnePerMemoryKind(t *testing.T) {
	rep := &ssdReport{IOWorkers: 4, Iters: 3, Sizes: []ssdSize{
		{BlockBytes: 256 << 10, Memory: "4k", ReadGBps: 1, WriteGBps: 2, BaselineGBps: 3, ReusedBufferGBps: 4},
		{BlockBytes: 256 << 10, Memory: "thp", ReadGBps: 5, WriteGBps: 6, BaselineGBps: 7, ReusedBufferGBps: 8},
		{BlockBytes: 2 << 20, Memory: "4k", ReadGBps: 9, WriteGBps: 10, BaselineGBps: 11, ReusedBufferGBps: 12},
		{BlockBytes: 2 << 20, Memory: "thp", ReadGBps: 13, WriteGBps: 14, BaselineGBps: 15, ReusedBufferGBps: 16},
	}}
	want := map[string][][]float64{
		"ssd-throughput-4k.png":  {{1, 9}, {2, 10}, {3, 11}, {4, 12}},
		"ssd-throughput-thp.png": {{5, 13}, {6, 14}, {7, 15}, {8, 16}},
	}
	charts := ssdCharts(rep)
	if len(charts) != len(want) {
		t.Fatalf("%d charts, want %d", len(charts), len(want))
	}
	for _, c := range charts {
		w, ok := want[c.file]
		if !ok || len(c.series) != len(w) {
			t.Fatalf("chart %s with %d series is not expected", c.file, len(c.series))
		}
		for i, s := range c.series {
			if !slices.Equal(s.ys, w[i]) || !slices.Equal(s.xs, []float64{256 << 10, 2 << 20}) {
				t.Errorf("%s: series %q = %v at %v, want %v", c.file, s.name, s.ys, s.xs, w[i])
			}
		}
	}
}

// runBench runs bin/orbitkv-bench (built with the Manager by binaries) with
// args; the error carries its output.
func runBench(t *testing.T, args ...string) error {
	cmd := exec.Command(filepath.Join(binaries(t), "orbitkv-bench"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New(err.Error() + ": " + string(out))
	}
	return nil
}

func TestLatencyChartsDrawEverySubjectsHistogram(t *testing.T) {
	chRep := &Report{hists: map[string]*latencyHist{
		"back_to_back/orbitkv_ping": histOf(250, 300, 300, 900), "back_to_back/uds": histOf(40000, 41000),
		"per_ms/orbitkv_ping": histOf(8000), "per_ms/uds": histOf(60000, 70000, 80000),
	}}
	qRep := &queryReport{ResidentBlocks: 100, Rows: []queryRow{{Hashes: 1}, {Hashes: 32}}, hists: map[string]*latencyHist{
		"query 1/hot": histOf(2000), "query 32/hot": histOf(3000, 4000), "ping/hot": histOf(300), "poll/hot": histOf(500),
		"query 1/cold": histOf(9000), "query 32/cold": histOf(10000), "ping/cold": histOf(8000), "poll/cold": histOf(8500, 9500),
	}}
	tests := []struct {
		name   string
		charts []lineChart
		want   map[string][]string // file → series names, in order
		points map[string]int      // "file/series" → points (distinct values)
	}{
		{"the channel suite draws each subject at each cadence", channelCharts(chRep, &channelConfig{n: 4, perMsN: 3, subjects: []string{"orbitkv_ping", "uds"}, pollMode: "adaptive"}),
			map[string][]string{"channel-cdf-back-to-back.png": {"orbitkv_ping", "uds"}, "channel-cdf-per-ms.png": {"orbitkv_ping", "uds"}},
			map[string]int{"channel-cdf-back-to-back.png/orbitkv_ping": 3, "channel-cdf-per-ms.png/uds": 3}},
		{"the channel suite without per-ms round trips draws one chart", channelCharts(chRep, &channelConfig{n: 4, subjects: []string{"uds"}}),
			map[string][]string{"channel-cdf-back-to-back.png": {"uds"}}, map[string]int{"channel-cdf-back-to-back.png/uds": 2}},
		{"the query suite draws every row, Ping and Poll in each phase", queryCharts(qRep, &queryConfig{coldGap: 1e6}),
			map[string][]string{"query-cdf-hot.png": {"QueryBundle of 1 hash", "QueryBundle of 32 hashes", "Ping", "Poll of a pending ticket"},
				"query-cdf-cold.png": {"QueryBundle of 1 hash", "QueryBundle of 32 hashes", "Ping", "Poll of a pending ticket"}},
			map[string]int{"query-cdf-hot.png/QueryBundle of 32 hashes": 2, "query-cdf-cold.png/Poll of a pending ticket": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.charts) != len(tt.want) {
				t.Fatalf("%d charts, want %d", len(tt.charts), len(tt.want))
			}
			for _, c := range tt.charts {
				var names []string
				for _, s := range c.series {
					names = append(names, s.name)
					if n, ok := tt.points[c.file+"/"+s.name]; ok && len(s.xs) != n {
						t.Errorf("%s: %q has %d points, want %d", c.file, s.name, len(s.xs), n)
					}
					if len(s.ys) > 0 && s.ys[len(s.ys)-1] != 1 {
						t.Errorf("%s: %q ends at %v, want 1", c.file, s.name, s.ys[len(s.ys)-1])
					}
				}
				if !slices.Equal(names, tt.want[c.file]) {
					t.Errorf("%s: series %v, want %v", c.file, names, tt.want[c.file])
				}
				if err := c.check(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestALatencyChartRefusesASubjectWithoutItsHistogram(t *testing.T) {
	c := channelCharts(&Report{hists: map[string]*latencyHist{"back_to_back/uds": histOf(1000)}}, &channelConfig{n: 1, subjects: []string{"uds", "futex"}})[0]
	if err := c.check(); err == nil || !strings.Contains(err.Error(), `--plot: channel-cdf-back-to-back.png: series "futex" has no points`) {
		t.Errorf("err = %v, want the subject named", err)
	}
}

// plotFiles lists the PNG files in dir.
func plotFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestSuitesWithPlotWriteTheirPNGs(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, dir string) error
		want []string
	}{
		{"the policy suite writes its hit ratio chart", func(t *testing.T, dir string) error {
			return runPolicy([]string{"--trace", testTrace, "--limit", "300", "--fractions", "0.1,0.5", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, []string{"policy-hit-ratio.png"}},
		{"the ssd suite writes a throughput chart for its memory kind", func(t *testing.T, dir string) error {
			return runSSD([]string{"--dir", directTestDir(t), "--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "1", "--warmup", "0", "--memory", "4k", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, []string{"ssd-throughput-4k.png"}},
		{"the copy suite writes its throughput chart", func(t *testing.T, dir string) error {
			return runBench(t, "copy", "--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--plot", dir, "--json")
		}, []string{"copy-throughput.png"}},
		{"the transfer suite writes its throughput chart", func(t *testing.T, dir string) error {
			return runTransfer([]string{"--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--repeats", "1", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, []string{"transfer-throughput.png"}},
		{"the channel suite writes a CDF per cadence (baselines only: no Manager to start)", func(t *testing.T, dir string) error {
			return runBench(t, "channel", "--subjects", "futex,uds", "--n", "300", "--per-ms-n", "20", "--plot", dir, "--json")
		}, []string{"channel-cdf-back-to-back.png", "channel-cdf-per-ms.png"}},
		{"the query suite writes a CDF per phase", func(t *testing.T, dir string) error {
			return runBench(t, "query", "--resident-blocks", "2000", "--hashes", "1,32", "--iters", "200", "--cold-iters", "10", "--cold-gap", "100us", "--plot", dir, "--json")
		}, []string{"query-cdf-cold.png", "query-cdf-hot.png"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.run(t, dir); err != nil {
				t.Fatal(err)
			}
			if got := plotFiles(t, dir); !slices.Equal(got, tt.want) {
				t.Fatalf("PNGs = %v, want %v", got, tt.want)
			}
			for _, f := range tt.want {
				decodePlot(t, filepath.Join(dir, f))
			}
		})
	}
}

func TestAPlotThatCannotBeWrittenStillLeavesTheReport(t *testing.T) {
	dir := t.TempDir()
	// A directory where the PNG should go: the directory passes the check
	// at parse time, the rename onto it fails after the run.
	if err := os.Mkdir(filepath.Join(dir, "policy-hit-ratio.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runPolicy([]string{"--trace", testTrace, "--limit", "200", "--fractions", "0.5", "--plot", dir, "--json"}, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--plot: writing "+filepath.Join(dir, "policy-hit-ratio.png")) {
		t.Errorf("err = %v, want the failed plot named", err)
	}
	if !strings.Contains(out.String(), `"rows"`) {
		t.Errorf("stdout = %q, want the JSON report printed before the plot failed", out.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the directory in the way (a temporary file is left)", dir, len(entries))
	}
}
