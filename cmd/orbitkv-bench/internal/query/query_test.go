package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/internal/launch"
)

func TestQueryFlagsNameTheBadFlag(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		flag string
	}{
		{"a hash count of 0 is refused", []string{"--hashes", "0"}, "--hashes"},
		{"a hash count beyond the descriptor limit is refused", []string{"--hashes", "2000000"}, "--hashes"},
		{"a hash count named twice is refused", []string{"--hashes", "32,1,32"}, "named twice"},
		{"a hash count that is not a number is refused", []string{"--hashes", "1,lots"}, "--hashes"},
		{"an empty hash list is refused", []string{"--hashes", ","}, "--hashes"},
		{"more hashes than resident blocks are refused", []string{"--hashes", "1,20000", "--resident-blocks", "10000"}, "--resident-blocks"},
		{"0 iterations are refused", []string{"--iters", "0"}, "--iters"},
		{"a hash budget of 0 is refused", []string{"--hash-budget", "0"}, "--hash-budget"},
		{"a cold gap over a second is refused", []string{"--cold-gap", "2s"}, "--cold-gap"},
		{"a Manager without metrics is refused", []string{"--manager-args", "--http-addr="}, "--http-addr"},
		{"a stray argument is refused", []string{"extra"}, "unexpected argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseQueryFlags(c.args, &bytes.Buffer{})
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.flag) {
				t.Errorf("%v: got %v, want a usage error naming %s", c.args, err, c.flag)
			}
		})
	}
}

func TestQueryFlagsDefaultToTheIssueRows(t *testing.T) {
	cfg, err := parseQueryFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.hashes, []int{1, 32, 1000, 10000}) || cfg.residentBlocks != 1000000 {
		t.Errorf("defaults: hashes %v, resident blocks %d; want [1 32 1000 10000] and 1000000", cfg.hashes, cfg.residentBlocks)
	}
	if cfg, err = parseQueryFlags([]string{"--hashes", "1000, 1,32"}, &bytes.Buffer{}); err != nil || !slices.Equal(cfg.hashes, []int{1, 32, 1000}) {
		t.Errorf("--hashes \"1000, 1,32\": got %v, %v; want the counts in ascending order", cfg.hashes, err)
	}
}

func TestQueryManagerArgsFitTheLargestRow(t *testing.T) {
	cfg := QueryConfig{hashes: []int{1, 32, 10000}, residentBlocks: 1000000}
	args, capacity := cfg.queryManagerArgs("127.0.0.1:1")
	if capacity < 1000000*QueryChunkBytes || capacity%(2<<20) != 0 {
		t.Errorf("capacity %d: want ≥ 1M 4 KiB chunks, a multiple of 2 MiB", capacity)
	}
	for flag, want := range map[string]string{
		"ram-chunk-bytes": "4096",
		"desc-bytes":      "163840", // 64 + 16 × 10000 bytes, rounded up to 4 KiB
		"lease-budget":    "640000", // 10000 blocks of 64 bytes
		"http-addr":       "127.0.0.1:1",
	} {
		if got, ok := launch.LastFlagValue(args, flag); !ok || got != want {
			t.Errorf("--%s = %q (set %v), want %q", flag, got, ok, want)
		}
	}
}

func TestParseQueryCountersReadsBothCounters(t *testing.T) {
	text := "# HELP orbitkv_query_hashes_total Hashes.\n# TYPE orbitkv_query_hashes_total counter\n" +
		"orbitkv_query_hashes_total 1.5e+06\norbitkv_query_server_seconds_total 0.5\norbitkv_sessions 1\n"
	c, err := parseQueryCounters(strings.NewReader(text))
	if err != nil || c.hashes != 1.5e6 || c.nanos != 5e8 {
		t.Errorf("got %+v, %v; want 1.5e6 hashes, 5e8 ns (0.5 s)", c, err)
	}
	if _, err := parseQueryCounters(strings.NewReader("orbitkv_sessions 1\n")); err == nil || !strings.Contains(err.Error(), metricQuerySeconds) {
		t.Errorf("without the counters: got %v, want an error naming them", err)
	}
}

// The suite against a real Manager, with the resident blocks published in
// hash order and with --scattered (shuffled): the same checks hold, and
// the report says which.
func TestQueryRunsAgainstARealManager(t *testing.T) {
	dir := benchtest.Binaries(t)
	for _, scattered := range []bool{false, true} {
		t.Run(fmt.Sprintf("scattered=%v", scattered), func(t *testing.T) { queryRunAgainstARealManager(t, dir, scattered) })
	}
}

func queryRunAgainstARealManager(t *testing.T, dir string, scattered bool) {
	args := []string{"query", "--resident-blocks", "5000", "--hashes", "1,32,1000", "--iters", "200", "--cold-iters", "5", "--json"}
	if scattered {
		args = append(args, "--scattered")
	}
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orbitkv-bench query: %v\n%s", err, stderr.String())
	}
	// The keys bench/README.md documents, decoded without the suite's own types.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatalf("decoding %q: %v", stdout.String(), err)
	}
	for _, k := range []string{"resident_blocks", "server_ns_per_hash", "rows", "poll_rtt_ns", "ping_rtt_ns", "probe_ns_per_key", "probe_serial_ns_per_key", "server_per_probe"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, stdout.String())
		}
	}
	var rep struct {
		ResidentBlocks  int     `json:"resident_blocks"`
		ServerNsPerHash float64 `json:"server_ns_per_hash"`
		Rows            []struct {
			Hashes          int                `json:"hashes"`
			RTT             map[string]float64 `json:"rtt_ns"`
			ColdRTT         map[string]float64 `json:"cold_rtt_ns"`
			ServerNsPerHash float64            `json:"server_ns_per_hash"`
			ServerHashes    uint64             `json:"server_hashes"`
		} `json:"rows"`
		PollRTT       map[string]float64 `json:"poll_rtt_ns"`
		PingRTT       map[string]float64 `json:"ping_rtt_ns"`
		ManagerBlocks uint64             `json:"manager_blocks"`
		ProbeNs       float64            `json:"probe_ns_per_key"`
		ProbeSerialNs float64            `json:"probe_serial_ns_per_key"`
		PerProbe      float64            `json:"server_per_probe"`
		Scattered     bool               `json:"scattered"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %q: %v", stdout.String(), err)
	}
	if rep.Scattered != scattered {
		t.Errorf("report says scattered %v, want %v", rep.Scattered, scattered)
	}
	if rep.ResidentBlocks != 5000 || rep.ManagerBlocks != 5000 {
		t.Errorf("resident blocks %d, Manager blocks %d; want 5000", rep.ResidentBlocks, rep.ManagerBlocks)
	}
	positive := func(what string, rtt map[string]float64) {
		t.Helper()
		if rtt["p50"] <= 0 || rtt["p99"] < rtt["p50"] {
			t.Errorf("%s %v: want p50 > 0 and p99 ≥ p50", what, rtt)
		}
	}
	var counts []int
	for _, r := range rep.Rows {
		counts = append(counts, r.Hashes)
		positive("rtt_ns", r.RTT)
		positive("cold_rtt_ns", r.ColdRTT)
		// Every timed query (and its warmup) carried r.Hashes hashes.
		if r.ServerHashes < 200*uint64(r.Hashes) || r.ServerNsPerHash <= 0 {
			t.Errorf("row of %d hashes: server %v ns/hash from %d hashes; want a positive figure from ≥ %d hashes",
				r.Hashes, r.ServerNsPerHash, r.ServerHashes, 200*r.Hashes)
		}
	}
	if !slices.Equal(counts, []int{1, 32, 1000}) {
		t.Errorf("rows %v, want 1, 32, 1000", counts)
	}
	if last := rep.Rows[len(rep.Rows)-1]; rep.ServerNsPerHash != last.ServerNsPerHash {
		t.Errorf("server_ns_per_hash %v, want the largest row's %v", rep.ServerNsPerHash, last.ServerNsPerHash)
	}
	if rep.ProbeNs <= 0 || rep.ProbeSerialNs <= 0 || math.Abs(rep.PerProbe-rep.ServerNsPerHash/rep.ProbeNs) > 1e-9*rep.PerProbe {
		t.Errorf("probe %v ns/key, serial %v, server_per_probe %v: want positive figures and the ratio server_ns_per_hash / probe_ns_per_key (%v)",
			rep.ProbeNs, rep.ProbeSerialNs, rep.PerProbe, rep.ServerNsPerHash/rep.ProbeNs)
	}
	positive("poll_rtt_ns", rep.PollRTT)
	positive("ping_rtt_ns", rep.PingRTT)
}

func TestQueryTableNamesEveryRowAndTarget(t *testing.T) {
	rep := &QueryReport{ResidentBlocks: 1000000, ServerNsPerHash: 40, ProbeNsPerKey: 32, ServerPerProbe: 1.25,
		Rows: []QueryRow{
			{Hashes: 32, RTT: latency.RTT{P50: 1500, P99: 3000}, ServerNsPerHash: 60, ServerNsPerQuery: 1920},
			{Hashes: 1000, RTT: latency.RTT{P50: 45000, P99: 60000}, ServerNsPerHash: 40, ServerNsPerQuery: 40000},
		},
		PollRTT: latency.RTT{P50: 400, P99: 600}, PingRTT: latency.RTT{P50: 300, P99: 500}}
	var b bytes.Buffer
	if err := writeQueryTable(&b, "header", rep); err != nil {
		t.Fatal(err)
	}
	// The targets footer aligns its columns (writeTargets): runs of spaces
	// are read as one two-space column gap.
	table := regexp.MustCompile(` {2,}`).ReplaceAllString(b.String(), "  ")
	for _, want := range []string{"poll (pending)", "1.50", "QueryBundle of 32 resident hashes, hot p50 ≤ 5µs  1.50 µs  ok",
		"server time per hash, 1000 hashes (1000000 resident blocks) ≤ 1.5x the bare probe  40.0 ns / 32.0 ns = 1.25x  ok",
		"server time per hash, 1000 hashes (1000000 resident blocks) ≤ 50 ns where the probe is ≤ 33 ns  40.0 ns  ok",
		"linear: server ns/hash never rises > 1.25x to the next row  60.0, 40.0  ok",
		"hot p50 ≤ ping + 1µs  0.40 µs vs ping 0.30 µs (+0.10 µs)  ok"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestMain(m *testing.M) { os.Exit(benchtest.Main(m)) }
