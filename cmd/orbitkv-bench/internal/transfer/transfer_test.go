package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestParseTransferFlagsDefaults(t *testing.T) {
	cfg, err := parseTransferFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{64 << 10, 256 << 10, 1 << 20, 4 << 20}; !slices.Equal(cfg.sizes, want) {
		t.Errorf("sizes = %v, want %v", cfg.sizes, want)
	}
	if cfg.blocks != 32 || cfg.engine.Rails != 0 || cfg.engine.SliceBytes != 0 || cfg.engine.Window != 0 {
		t.Errorf("defaults = %+v, want 32 blocks and the engine's own defaults", cfg)
	}
}

func TestParseTransferFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a slice below 4KiB", []string{"--slice-bytes", "1KiB"}, "--slice-bytes 1024: want 4KiB..16MiB"},
		{"a slice that is not a size", []string{"--slice-bytes", "big"}, `--slice-bytes "big": not a size`},
		{"a slice in decimal megabytes", []string{"--slice-bytes", "1MB"}, `--slice-bytes "1MB": ambiguous unit "MB"`},
		{"a slice beyond the wire's bound", []string{"--slice-bytes", "32MiB"}, "at most 16MiB"},
		{"too many rails", []string{"--rails", "65"}, "--rails 65: want 1..64"},
		{"a negative window", []string{"--window", "-1"}, "--window -1: want 1..64"},
		{"zero blocks", []string{"--blocks", "0"}, "--blocks must be between 1 and 4096"},
		{"a Manager binary (the suite starts none, so has no such flag)", []string{"--manager-bin", "/bin/true"}, "unknown flag: --manager-bin"},
		{"a batch over 2GiB", []string{"--sizes", "256MiB", "--blocks", "9"}, "more than 2GiB per batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a usage error naming the flag", func(t *testing.T) {
			_, err := parseTransferFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestTransferReportsEveryRowAndSubject(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--sizes", "64KiB,256KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--repeats", "1", "--json"}
	if err := Run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.Bytes(), err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	for i, row := range rep.Rows {
		if row["block_bytes"] != float64([]int{64 << 10, 256 << 10}[i]) {
			t.Errorf("row %d: block_bytes %v", i, row["block_bytes"])
		}
		for _, k := range []string{"orbitkv_gbps", "tcp_stream_gbps", "one_slice_gbps"} {
			if v, ok := row[k].(float64); !ok || v <= 0 {
				t.Errorf("row %d: %s = %v, want a positive GB/s", i, k, row[k])
			}
		}
		if _, ok := row["mooncake_gbps"]; ok {
			t.Errorf("row %d has mooncake_gbps before anything measures it", i)
		}
	}
}

func TestTransferTableStatesTheTargets(t *testing.T) {
	rep := &transferReport{SliceBytes: 256 << 10, Baseline: transferBaseline, Rows: []transferSize{
		{BlockBytes: 64 << 10, BatchBytes: 2 << 20, OrbitKVGBps: 1, TCPStreamGBps: 2, OneSliceGBps: 1, StreamRatio: 0.5, OneSliceRatio: 1},
		{BlockBytes: 1 << 20, BatchBytes: 32 << 20, OrbitKVGBps: 3, TCPStreamGBps: 3, OneSliceGBps: 1, StreamRatio: 1, OneSliceRatio: 3},
		{BlockBytes: 4 << 20, BatchBytes: 128 << 20, OrbitKVGBps: 2, TCPStreamGBps: 3, OneSliceGBps: 1, StreamRatio: 0.67, OneSliceRatio: 2},
	}}
	var out bytes.Buffer
	if err := writeTransferTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1.0 MiB orbitkv ≥ 0.90x tcp stream        1.00x  ok",
		"1.0 MiB orbitkv ≥ 3x one slice in flight  3.00x  ok",
		"4.0 MiB orbitkv ≥ 0.90x tcp stream        0.67x  MISSED",
		"4.0 MiB orbitkv ≥ 3x one slice in flight  2.00x  MISSED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "64 KiB orbitkv ≥") {
		t.Error("a target is stated for 64 KiB blocks; the targets are for 1-4 MiB")
	}
}

// mooncakeBenchPath is the wheel's transfer_engine_bench in the locked
// environment engines/deps.sh mooncake makes (part of make deps).
var mooncakeBenchPath = benchtest.Path("build/venv/mooncake/lib/python3.11/site-packages/mooncake/transfer_engine_bench")

func TestParseTransferFlagsRejectsBadMooncakeFlags(t *testing.T) {
	dir := t.TempDir()
	notExec := dir + "/transfer_engine_bench"
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a Mooncake binary that does not exist", []string{"--mooncake-bench", dir + "/missing"}, "--mooncake-bench \"" + dir + "/missing\": no such file or directory"},
		{"a Mooncake binary that is a directory", []string{"--mooncake-bench", dir}, "not a regular file"},
		{"a Mooncake binary that is not executable", []string{"--mooncake-bench", notExec}, "not executable"},
		{"a Mooncake duration below a second", []string{"--mooncake-bench", "/bin/true", "--mooncake-duration", "500ms"}, "--mooncake-duration 500ms: want whole seconds, 1s..1m0s"},
		{"a Mooncake duration of a fraction of seconds", []string{"--mooncake-bench", "/bin/true", "--mooncake-duration", "1500ms"}, "--mooncake-duration 1.5s: want whole seconds"},
		{"no Mooncake threads", []string{"--mooncake-bench", "/bin/true", "--mooncake-threads", "0"}, "--mooncake-threads must be between 1 and 64"},
		{"a Mooncake buffer over 4GiB", []string{"--mooncake-bench", "/bin/true", "--sizes", "4MiB", "--mooncake-threads", "64"}, "--mooncake-threads 64: 4.0 MiB blocks × 32 blocks × 64 threads is a 8.0 GiB buffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a usage error naming the flag", func(t *testing.T) {
			_, err := parseTransferFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseMooncakeOutput(t *testing.T) {
	// Lines as transfer_engine_bench 0.3.13.post1 writes them (glog).
	listening := []struct {
		name, line, want string
		ok               bool
	}{
		{"the handshake listener's line gives the segment name", "I1201 20:58:00.384397  2998 transfer_engine_impl.cpp:183] Transfer Engine RPC using P2P handshake, listening on 127.0.0.1:15289", "127.0.0.1:15289", true},
		{"the TCP transport's own port is not the segment", "I1201 20:58:00.387290  2998 tcp_transport.cpp:391] TcpTransport: listen on port 15306", "", false},
	}
	for _, tt := range listening {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMooncakeListening(tt.line)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseMooncakeListening = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	completed := []struct {
		name, line string
		want       mooncakeResult
		ok         bool
	}{
		{"the final line gives duration and batches", "I1201 20:58:10.951090  3277 transfer_engine_bench.cpp:569] Test completed: duration 3.01, batch count 329, throughput 0.23 GB/s", mooncakeResult{seconds: 3.01, batches: 329}, true},
		{"a zero duration is refused", "Test completed: duration 0.00, batch count 0, throughput 0 GB/s", mooncakeResult{}, false},
		{"a worker's line is not the result", "I1201 20:58:10.947499  3288 transfer_engine_bench.cpp:440] Worker 0 stopped!", mooncakeResult{}, false},
	}
	for _, tt := range completed {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMooncakeCompleted(tt.line)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseMooncakeCompleted = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	t.Run("GB/s is the batches' bytes over the duration, in 10^9 bytes per second", func(t *testing.T) {
		// 329 batches of 32 × 64 KiB in 3.01 s: the 0.23 GB/s Mooncake printed.
		if got := (mooncakeResult{seconds: 3.01, batches: 329}).gbps(32 << 16); got < 0.2285 || got > 0.2295 {
			t.Errorf("gbps = %.4f, want 0.229", got)
		}
	})
}

func TestTransferWithAMooncakeBinaryThatFailsSaysSo(t *testing.T) {
	args := []string{"--sizes", "64KiB", "--blocks", "4", "--iters", "1", "--warmup", "0", "--repeats", "1", "--json", "--mooncake-bench", "/bin/false"}
	err := Run(args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the Mooncake target exited before logging its handshake address") {
		t.Errorf("err = %v, want the Mooncake target's failure", err)
	}
}

func TestTransferFillsMooncakeFromTheRealWheel(t *testing.T) {
	if _, err := os.Stat(mooncakeBenchPath); err != nil {
		t.Skipf("no Mooncake environment (%v): `engines/deps.sh mooncake` (make deps) installs it", err)
	}
	var out bytes.Buffer
	args := []string{"--sizes", "64KiB,1MiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--repeats", "1", "--json",
		"--mooncake-bench", mooncakeBenchPath, "--mooncake-duration", "1s"}
	if err := Run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, pid := range suite.Descendants(os.Getpid())[1:] {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.HasPrefix(string(comm), "transfer_engine") {
			t.Errorf("Mooncake process %d (%s) outlived the run", pid, strings.TrimSpace(string(comm)))
		}
	}
	var rep struct {
		Mooncake struct {
			Threads int `json:"threads"`
		} `json:"mooncake"`
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.Bytes(), err)
	}
	if rep.Mooncake.Threads != 1 || len(rep.Rows) != 2 {
		t.Fatalf("mooncake %+v, %d rows; want 1 thread and 2 rows", rep.Mooncake, len(rep.Rows))
	}
	for i, row := range rep.Rows {
		mc, ok := row["mooncake_gbps"].(float64)
		if !ok || mc <= 0 {
			t.Errorf("row %d: mooncake_gbps = %v, want a positive GB/s", i, row["mooncake_gbps"])
			continue
		}
		want := row["orbitkv_gbps"].(float64) / mc
		if r, ok := row["orbitkv_over_mooncake"].(float64); !ok || r < want*0.999 || r > want*1.001 {
			t.Errorf("row %d: orbitkv_over_mooncake = %v, want orbitkv_gbps / mooncake_gbps = %v", i, row["orbitkv_over_mooncake"], want)
		}
	}
}

func TestTransferTableStatesTheMooncakeTarget(t *testing.T) {
	low, high := 0.5, 2.0
	rep := &transferReport{SliceBytes: 256 << 10, Baseline: transferBaseline, Mooncake: &transferMooncake{Threads: 1}, Rows: []transferSize{
		{BlockBytes: 64 << 10, BatchBytes: 2 << 20, OrbitKVGBps: 1, TCPStreamGBps: 2, OneSliceGBps: 1, StreamRatio: 0.5, OneSliceRatio: 1, MooncakeGBps: &high, MooncakeRatio: &low},
		{BlockBytes: 4 << 20, BatchBytes: 128 << 20, OrbitKVGBps: 1, TCPStreamGBps: 1, OneSliceGBps: 1, StreamRatio: 1, OneSliceRatio: 1, MooncakeGBps: &low, MooncakeRatio: &high},
	}}
	var out bytes.Buffer
	if err := writeTransferTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orbitkv / mooncake", "64 KiB orbitkv ≥ 1.0x mooncake (TCP)", "0.50x  MISSED", "4.0 MiB orbitkv ≥ 1.0x mooncake (TCP)", "2.00x  ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
