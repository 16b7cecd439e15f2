package main

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/channel"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/query"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/ssd"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/transfer"
)

// runBench runs bin/orbitkv-bench (built with the Manager by binaries) with
// args; the error carries its output.
func runBench(t *testing.T, args ...string) error {
	cmd := exec.Command(filepath.Join(benchtest.Binaries(t), "orbitkv-bench"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New(err.Error() + ": " + string(out))
	}
	return nil
}

func TestLatencyChartsDrawEverySubjectsHistogram(t *testing.T) {
	chRep := &channel.Report{Hists: map[string]*latency.Hist{
		"back_to_back/orbitkv_ping": latency.Of(250, 300, 300, 900), "back_to_back/uds": latency.Of(40000, 41000),
		"per_ms/orbitkv_ping": latency.Of(8000), "per_ms/uds": latency.Of(60000, 70000, 80000),
	}}
	qRep := &query.QueryReport{ResidentBlocks: 100, Rows: []query.QueryRow{{Hashes: 1}, {Hashes: 32}}, Hists: map[string]*latency.Hist{
		"query 1/hot": latency.Of(2000), "query 32/hot": latency.Of(3000, 4000), "ping/hot": latency.Of(300), "poll/hot": latency.Of(500),
		"query 1/cold": latency.Of(9000), "query 32/cold": latency.Of(10000), "ping/cold": latency.Of(8000), "poll/cold": latency.Of(8500, 9500),
	}}
	tests := []struct {
		name   string
		charts []chart.Line
		want   map[string][]string // file → series names, in order
		points map[string]int      // "file/series" → points (distinct values)
	}{
		{"the channel suite draws each subject at each cadence", channel.ChannelCharts(chRep, &channel.ChannelConfig{N: 4, PerMsN: 3, Subjects: []string{"orbitkv_ping", "uds"}, PollMode: "adaptive"}),
			map[string][]string{"channel-cdf-back-to-back.png": {"orbitkv_ping", "uds"}, "channel-cdf-per-ms.png": {"orbitkv_ping", "uds"}},
			map[string]int{"channel-cdf-back-to-back.png/orbitkv_ping": 3, "channel-cdf-per-ms.png/uds": 3}},
		{"the channel suite without per-ms round trips draws one chart", channel.ChannelCharts(chRep, &channel.ChannelConfig{N: 4, Subjects: []string{"uds"}}),
			map[string][]string{"channel-cdf-back-to-back.png": {"uds"}}, map[string]int{"channel-cdf-back-to-back.png/uds": 2}},
		{"the query suite draws every row, Ping and Poll in each phase", query.QueryCharts(qRep, &query.QueryConfig{ColdGap: 1e6}),
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
				for _, s := range c.Series {
					names = append(names, s.Name)
					if n, ok := tt.points[c.File+"/"+s.Name]; ok && len(s.Xs) != n {
						t.Errorf("%s: %q has %d points, want %d", c.File, s.Name, len(s.Xs), n)
					}
					if len(s.Ys) > 0 && s.Ys[len(s.Ys)-1] != 1 {
						t.Errorf("%s: %q ends at %v, want 1", c.File, s.Name, s.Ys[len(s.Ys)-1])
					}
				}
				if !slices.Equal(names, tt.want[c.File]) {
					t.Errorf("%s: series %v, want %v", c.File, names, tt.want[c.File])
				}
				if err := c.Check(); err != nil {
					t.Error(err)
				}
			}
		})
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
			return policy.Run([]string{"--trace", benchtest.TestTrace, "--limit", "300", "--fractions", "0.1,0.5", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, []string{"policy-hit-ratio.png"}},
		{"the ssd suite writes a throughput chart for its memory kind", func(t *testing.T, dir string) error {
			return ssd.Run([]string{"--dir", benchtest.DirectTestDir(t), "--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "1", "--warmup", "0", "--memory", "4k", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, []string{"ssd-throughput-4k.png"}},
		{"the copy suite writes its throughput chart", func(t *testing.T, dir string) error {
			return runBench(t, "copy", "--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--plot", dir, "--json")
		}, []string{"copy-throughput.png"}},
		{"the transfer suite writes its throughput chart", func(t *testing.T, dir string) error {
			return transfer.Run([]string{"--sizes", "64KiB,128KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--repeats", "1", "--plot", dir, "--json"}, &bytes.Buffer{}, &bytes.Buffer{})
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

func TestMain(m *testing.M) { os.Exit(benchtest.Main(m)) }

// decodePlot decodes the PNG at path and checks it is chart.Width ×
// chart.Height.
func decodePlot(t *testing.T, path string) {
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
	if b := img.Bounds(); b.Dx() != chart.Width || b.Dy() != chart.Height {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), chart.Width, chart.Height)
	}
}
