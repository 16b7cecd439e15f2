package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/trace"
	"github.com/spf13/pflag"
)

// page returns an 8-byte aligned page of n bytes (n a multiple of 8).
func page(n int) []byte {
	w := make([]uint64, n/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

func TestFillThenVerifyCountsEveryDifferingByte(t *testing.T) {
	seed := content.Seed(0x1122334455667788, 42, 3)
	p := page(64 << 10)
	content.FillPage(p, seed)
	if bad := content.VerifyPage(p, seed); bad != 0 {
		t.Fatalf("a freshly filled page has %d mismatched bytes", bad)
	}
	tests := []struct {
		name    string
		offsets []int
		want    uint64
	}{
		{"one flipped byte is counted once", []int{12345}, 1},
		{"two flipped bytes in one word count twice", []int{8, 15}, 2},
		{"the first and last byte of the page count", []int{0, 64<<10 - 1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := page(len(p))
			copy(q, p)
			for _, off := range tt.offsets {
				q[off] ^= 0x40
			}
			if got := content.VerifyPage(q, seed); got != tt.want {
				t.Errorf("verifyPage = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestContentDependsOnNamespaceHashAndLayer(t *testing.T) {
	base := content.Seed(1, 2, 3)
	p := page(4096)
	content.FillPage(p, base)
	for _, other := range []struct {
		name string
		seed uint64
	}{
		{"another namespace", content.Seed(9, 2, 3)},
		{"another hash id", content.Seed(1, 9, 3)},
		{"another layer", content.Seed(1, 2, 9)},
	} {
		t.Run(other.name+" gives other bytes", func(t *testing.T) {
			// Random bytes match with probability 1/256.
			if bad := content.VerifyPage(p, other.seed); bad < 4096*9/10 {
				t.Errorf("only %d of 4096 bytes differ", bad)
			}
		})
	}
}

func TestBlockHashIsHashIDThenTag(t *testing.T) {
	h := content.BlockHash(0x0102030405060708)
	want := []byte{8, 7, 6, 5, 4, 3, 2, 1, 'o', 'r', 'b', 'i', 't', 'r', 'p', 'l'}
	if !bytes.Equal(h[:], want) {
		t.Errorf("blockHash = % x, want % x", h[:], want)
	}
}

func BenchmarkFillPage(b *testing.B) {
	for _, n := range []int{16 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", n>>10), func(b *testing.B) {
			p := page(n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for i := range b.N {
				content.FillPage(p, uint64(i))
			}
		})
	}
}

func BenchmarkVerifyPage(b *testing.B) {
	p := page(64 << 10)
	content.FillPage(p, 7)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for range b.N {
		if content.VerifyPage(p, 7) != 0 {
			b.Fatal("mismatch")
		}
	}
}

func TestFillAndVerifyDoNotAllocate(t *testing.T) {
	p := page(16 << 10)
	if n := testing.AllocsPerRun(10, func() { content.FillPage(p, 1); content.VerifyPage(p, 1) }); n != 0 {
		t.Errorf("fill + verify allocate %v times", n)
	}
}

func TestPartitionDealsRequestsRoundRobinInTraceOrder(t *testing.T) {
	var reqs []trace.Request
	for i := range 10 {
		reqs = append(reqs, trace.Request{HashIDs: []uint64{uint64(i)}})
	}
	want := [][]uint64{{0, 3, 6, 9}, {1, 4, 7}, {2, 5, 8}}
	for i, w := range want {
		var got []uint64
		for _, ids := range partition(reqs, i, 3) {
			got = append(got, ids[0])
		}
		if !slices.Equal(got, w) {
			t.Errorf("client %d of 3 replays %v, want %v", i, got, w)
		}
	}
	if got := partition(reqs[:2], 2, 3); len(got) != 0 {
		t.Errorf("a client beyond the requests replays %v", got)
	}
}

func TestParseReplayFlagsDefaults(t *testing.T) {
	cfg, err := ParseReplayFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.clients != 4 || cfg.blockBytes != 64<<10 || cfg.layers != 4 || cfg.ramCapacity != 4<<30 ||
		cfg.limit != 0 || cfg.Json || cfg.socket != "" || cfg.tracePath != "" || cfg.pageBytes() != 16<<10 {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestParseReplayFlagsAccepts(t *testing.T) {
	cfg, err := ParseReplayFlags([]string{"--clients", "2", "--block-bytes", "16KiB", "--layers", "2",
		"--ram-capacity", "64MiB", "--limit", "300", "--json", "--manager-args", "--copy-workers 1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.clients != 2 || cfg.blockBytes != 16<<10 || cfg.layers != 2 || cfg.ramCapacity != 64<<20 ||
		cfg.limit != 300 || !cfg.Json || !slices.Equal(cfg.ManagerArgs, []string{"--copy-workers", "1"}) {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestParseReplayFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero clients", []string{"--clients", "0"}, "--clients must be between 1 and 64, got 0"},
		{"too many clients", []string{"--clients", "65"}, "--clients must be between 1 and 64"},
		{"zero layers", []string{"--layers", "0"}, "--layers must be between 1 and 256, got 0"},
		{"a block not divisible by the layers", []string{"--block-bytes", "64KiB", "--layers", "3"}, "--block-bytes 64 KiB (65536 bytes) is not divisible by --layers 3"},
		{"pages not a multiple of 64 bytes", []string{"--block-bytes", "4000", "--layers", "4"}, "1000 bytes per page, which must be a multiple of 64"},
		{"a block of 0 bytes", []string{"--block-bytes", "0"}, "--block-bytes must be between 1 byte and 1GiB"},
		{"a block size that is not a size", []string{"--block-bytes", "big"}, `--block-bytes "big": not a size (want a byte count or a number with a binary unit`},
		{"an ambiguous block size", []string{"--block-bytes", "64K"}, `--block-bytes "64K": ambiguous unit "K": 64K could mean 65536 bytes (binary, as Redis reads it) or 64000 bytes (decimal); write 64KiB, or the byte count`},
		{"a capacity below one block", []string{"--ram-capacity", "1KiB"}, "--ram-capacity 1.0 KiB is smaller than one block"},
		{"a negative limit", []string{"--limit", "-1"}, "--limit must be at least 0"},
		{"a capacity for an external Manager", []string{"--socket", "/tmp/x.sock", "--ram-capacity", "1GiB"}, "--ram-capacity configures a Manager the bench starts"},
		{"Manager arguments for an external Manager", []string{"--socket", "/tmp/x.sock", "--manager-args", "-x"}, "--manager-args configures"},
		{"a stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"too many nodes", []string{"--nodes", "17"}, "--nodes must be between 0 and 16, got 17"},
		{"nodes with a running Manager", []string{"--nodes", "2", "--socket", "/tmp/x.sock"}, "--nodes starts its own Managers: it does not take --socket"},
		{"fewer clients than nodes", []string{"--nodes", "3", "--clients", "2"}, "--clients 2 is fewer than --nodes 3"},
		{"less than a block per node", []string{"--nodes", "4", "--ram-capacity", "128KiB", "--block-bytes", "64KiB"}, "less than one block per node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseReplayFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseReplayFlagsHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := ParseReplayFlags([]string{"--help"}, &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("err = %v, want pflag.ErrHelp", err)
	}
	for _, want := range []string{"usage: orbitkv-bench replay", "--clients N", "--block-bytes size", "--ram-capacity size", "--limit N"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLoadPlanNamesTheMalformedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	body := `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}
{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [0, -3]}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadPlan(&replayConfig{tracePath: path})
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want it to name %s and line 2", err, path)
	}
}

func TestLoadPlanLimitsAndBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	body := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0, 1, 2]}
{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [0, 1, 5, 6]}
{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [0, 7]}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := loadPlan(&replayConfig{tracePath: path, limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.requests) != 2 || p.bound.Blocks != 7 || p.bound.HitBlocks != 2 || p.unique != 5 || p.maxBlocks != 4 {
		t.Errorf("plan = %d requests, bound %+v, %d unique, longest %d; want 2, {7 2}, 5, 4",
			len(p.requests), p.bound, p.unique, p.maxBlocks)
	}
}

func TestFindTraceNamesAMissingFile(t *testing.T) {
	_, err := suite.FindTrace("/nonexistent/trace.jsonl.gz")
	if err == nil || !strings.Contains(err.Error(), "--trace /nonexistent/trace.jsonl.gz") {
		t.Errorf("err = %v, want it to name the flag and the path", err)
	}
}

// fixtureReport is a replay report with round numbers.
func fixtureReport() *replayReport {
	return &replayReport{
		header: "orbitkv-bench replay: fixture", Trace: "bench/traces/mooncake-conversation.jsonl.gz",
		Requests: 12031, Blocks: 288500, HitBlocks: 105700, HitRatio: 105700.0 / 288500,
		BoundBlocks: 288500, BoundHitBlocks: 105710, BoundHitRatio: 105710.0 / 288500,
		WorkingSetBytes: 182790 * 64 << 10, StoredBlocks: 182790, PresentBlocks: 10,
		RestoredBytes: 105700 * 64 << 10, PublishedBytes: 182790 * 64 << 10,
		RTT: map[string]rttStats{
			"query":   {P50: 4200, P99: 12000, P999: 40000, N: 12031},
			"publish": {P50: 900000, P99: 4000000, P999: 9000000, N: 11000},
			"restore": {P50: 700000, P99: 3000000, P999: 8000000, N: 6000},
			"release": {P50: 3100, P99: 9000, P999: 30000, N: 6000},
		},
		RestoreGBps: 6.5, PublishGBps: 4.25, WallS: 61.5, Clients: 4, BlockBytes: 64 << 10, Layers: 4,
		RAMCapacityBytes: 16 << 30, ManagerBlocks: 182790, ManagerRAMUsedBytes: 182790 * 64 << 10, IdleInvariant: "ok",
	}
}

func TestReplayJSONHasTheFieldsOfTheIssue(t *testing.T) {
	var out bytes.Buffer
	if err := (&suite.Common{Json: true}).Emit(&out, io.Discard, fixtureReport(), nil); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(bytes.TrimSpace(out.Bytes()), []byte("\n")); n != 0 {
		t.Errorf("the JSON report spans %d lines, want one object on one line", n+1)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requests", "blocks", "hit_blocks", "hit_ratio", "bound_hit_ratio", "mismatches",
		"rtt_ns", "restore_gbps", "publish_gbps", "wall_s", "clients", "block_bytes", "ram_capacity_bytes", "unadmitted"} {
		if _, ok := got[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	rtt, _ := got["rtt_ns"].(map[string]any)
	for _, op := range opNames {
		st, _ := rtt[op].(map[string]any)
		for _, p := range []string{"p50", "p99", "p999"} {
			if _, ok := st[p].(float64); !ok {
				t.Errorf("rtt_ns.%s.%s missing or not a number (rtt_ns = %v)", op, p, rtt)
			}
		}
	}
	if got["requests"] != 12031.0 || got["rtt_ns"].(map[string]any)["query"].(map[string]any)["p50"] != 4200.0 {
		t.Errorf("values did not survive: %s", out.String())
	}
}

func TestReplayTableMatchesGolden(t *testing.T) {
	var got bytes.Buffer
	if err := writeReplayTable(&got, fixtureReport()); err != nil {
		t.Fatal(err)
	}
	benchtest.CheckGolden(t, "replay_table.golden", got.Bytes())
}

func TestReplayTargets(t *testing.T) {
	rep := fixtureReport()
	rep.Clients = 1
	if ts := replayTargets(rep); len(ts) != 2 || ts[1].Ok {
		t.Errorf("1 client 10 blocks under the bound: targets %+v, want the exact target missed", ts)
	}
	rep.Clients = 4
	if ts := replayTargets(rep); len(ts) != 2 || !ts[1].Ok {
		t.Errorf("4 clients 0.00003 under the bound: targets %+v, want within 0.01 ok", ts)
	}
	rep.RAMCapacityBytes = 4 << 30
	if ts := replayTargets(rep); len(ts) != 1 {
		t.Errorf("capacity below the working set: targets %+v, want no bound target", ts)
	}
}

func TestMain(m *testing.M) { os.Exit(benchtest.Main(m)) }

// replayE2E runs bin/orbitkv-bench replay --json with args and decodes the report.
func replayE2E(t *testing.T, args ...string) (*replayReport, []trace.Request) {
	t.Helper()
	dir := benchtest.Binaries(t)
	reqs, err := trace.Load(benchtest.TestTrace)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), append([]string{"replay", "--trace", benchtest.TestTrace, "--json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orbitkv-bench replay %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	rep := &replayReport{}
	if err := json.Unmarshal(stdout.Bytes(), rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, stdout.String())
	}
	return rep, reqs
}

func TestReplayTwoClientsUnderCapacityPressureVerifiesEveryByte(t *testing.T) {
	rep, _ := replayE2E(t, "--limit", "300", "--clients", "2", "--block-bytes", "16KiB", "--ram-capacity", "64MiB", "--repeats", "1")
	if rep.Requests != 300 || rep.Mismatches != 0 {
		t.Errorf("requests %d mismatches %d, want 300 and 0", rep.Requests, rep.Mismatches)
	}
	if rep.IdleInvariant != "ok" {
		t.Errorf("idle invariant: %s", rep.IdleInvariant)
	}
	if rep.HitBlocks == 0 || rep.RestoredBytes != rep.HitBlocks*16<<10 {
		t.Errorf("hit blocks %d restored bytes %d: want hits, each restored", rep.HitBlocks, rep.RestoredBytes)
	}
	for _, op := range opNames {
		if rep.RTT[op].N == 0 {
			t.Errorf("no %s round trips timed", op)
		}
	}
}

// Three repeats (the default), each against a fresh Manager: the counts
// are summed over them, and each repeat reaches the bound exactly, so the
// hit ratio's spread is zero.
func TestReplayOneClientAboveTheWorkingSetReachesTheBoundExactly(t *testing.T) {
	rep, reqs := replayE2E(t, "--limit", "300", "--clients", "1", "--block-bytes", "16KiB", "--ram-capacity", "256MiB")
	bound := trace.InfiniteCacheBound(reqs[:300])
	if rep.WorkingSetBytes > 256<<20 {
		t.Fatalf("the working set %d bytes does not fit the capacity: the test is wrong", rep.WorkingSetBytes)
	}
	if rep.Meta.Repeats != 3 || rep.Blocks != 3*bound.Blocks || rep.HitBlocks != 3*bound.HitBlocks || rep.HitRatio != bound.HitRatio() {
		t.Errorf("%d repeats hit %d of %d blocks (%v), bound %d of %d (%v) per repeat: want 3 repeats, each equal",
			rep.Meta.Repeats, rep.HitBlocks, rep.Blocks, rep.HitRatio, bound.HitBlocks, bound.Blocks, bound.HitRatio())
	}
	i := slices.IndexFunc(rep.Figures, func(f suite.Figure) bool { return f.Name == "hit_ratio" })
	if i < 0 || len(rep.Figures[i].Repeats) != 3 || rep.Figures[i].Min != bound.HitRatio() || rep.Figures[i].Max != bound.HitRatio() {
		t.Errorf("hit_ratio figure = %+v, want 3 repeats all at the bound %v", rep.Figures, bound.HitRatio())
	}
	if len(rep.Validity.Checks) == 0 {
		t.Errorf("the report has no validity checks: %+v", rep.Validity)
	}
	if rep.BoundHitRatio != bound.HitRatio() || rep.Mismatches != 0 || rep.Unadmitted != 0 || rep.IdleInvariant != "ok" {
		t.Errorf("bound %v mismatches %d unadmitted %d idle %q", rep.BoundHitRatio, rep.Mismatches, rep.Unadmitted, rep.IdleInvariant)
	}
}

func TestReplayRefusesAMalformedTraceBeforeStarting(t *testing.T) {
	dir := benchtest.Binaries(t)
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, []byte("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n{oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "orbitkv-bench"), "replay", "--trace", path, "--manager-bin", "/nonexistent").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "line 2") || strings.Contains(string(out), "Manager") {
		t.Errorf("err %v, output %q: want an error naming line 2, before any Manager is started", err, out)
	}
}
