package peers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/discover"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func peersTestConfig(t *testing.T, args ...string) peersConfig {
	t.Helper()
	cfg, err := parsePeersFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("parsePeersFlags(%q): %v", args, err)
	}
	return cfg
}

func TestPeersFlags(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"a size that is not a multiple of 1 KiB is refused", "--sizes", []string{"--sizes", "1000"}},
		{"a chain of 0 blocks is refused", "--chains", []string{"--chains", "32,0"}},
		{"a chain named twice is refused", "--chains", []string{"--chains", "32,32"}},
		{"too few lookups are refused", "--lookups", []string{"--lookups", "3"}},
		{"a stray argument is refused", "unexpected argument", []string{"extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePeersFlags(tc.args, io.Discard)
			if !errors.As(err, new(*suite.UsageError)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error naming %s", err, tc.want)
			}
		})
	}
	t.Run("the defaults batch at most 64 MiB and 16 blocks of each size", func(t *testing.T) {
		cfg := peersTestConfig(t)
		want := []int{16, 16, 16, 16, 2}
		for i, s := range cfg.sizes {
			if cfg.blocks[i] != want[i] || s*uint64(cfg.blocks[i]) > peersMaxBatchBytes {
				t.Errorf("size %d: %d blocks, want %d", s, cfg.blocks[i], want[i])
			}
		}
		if cfg.sizes[len(cfg.sizes)-1] != peersChunkBytes {
			t.Errorf("last default size %d, want LMCache's chunk %d", cfg.sizes[len(cfg.sizes)-1], peersChunkBytes)
		}
		// chains 1,288 x 64 KiB (80.5 MiB) + 11 batches of 1+4+16+32+64 MiB
		// (1,287 MiB), over the 0.8 watermark: 1,709 MiB, so 2 GiB.
		if cfg.l1GiB != 2 {
			t.Errorf("cache %v GiB, want 2", cfg.l1GiB)
		}
	})
}

func TestQuantilesOf(t *testing.T) {
	s := make([]int64, 200)
	for i := range s {
		s[len(s)-1-i] = int64(i + 1) // 200..1, unsorted
	}
	q := quantilesOf(s)
	if q.P50 != 100 || q.P99 != 198 || q.Samples != 200 {
		t.Fatalf("quantiles of 1..200 = %+v, want p50 100 p99 198 (nearest rank)", q)
	}
	if (quantilesOf(nil) != peerQuantiles{}) {
		t.Fatalf("quantiles of nothing are not zero")
	}
}

// peersSample is a report of two chains and two sizes with LMCache's side
// filed from a driver report as the driver prints it.
func peersSample(t *testing.T, withLMCache bool) *peersReport {
	t.Helper()
	cfg := peersTestConfig(t, "--sizes", "64KiB,2MiB", "--chains", "32,1000")
	r := newPeersReport(&cfg)
	parks := uint64(3)
	r.Lookup[peerOrbitKV]["32"] = peerQuantiles{P50: 4000, P99: 8000, ManagerParks: &parks}
	r.Lookup[peerOrbitKV]["1000"] = peerQuantiles{P50: 40000, P99: 90000}
	r.addTransfer(peerOrbitKV, peerTransfer{BlockBytes: 65536, Blocks: 16, StoreGBps: 8, RetrieveGBps: 12, StoreColdGBps: 2, RetrieveColdGBps: 3})
	r.addTransfer(peerOrbitKV, peerTransfer{BlockBytes: 2 << 20, Blocks: 16, StoreGBps: 10, RetrieveGBps: 11, StoreColdGBps: 5, RetrieveColdGBps: 6})
	if withLMCache {
		out := `lmcache says hello
{"version": "0.5.6", "server_argv": ["server"], "chunk_tokens": 256,
 "lookup_rtt_ns": {"32": {"p50": 2000000, "p99": 9000000, "samples": 200}, "1000": {"p50": 8000000, "p99": 9000000, "samples": 200}},
 "sizes": [{"block_bytes": 65536, "blocks": 16, "batch_bytes": 1048576, "verified_retrieves": 11, "store_gbps": 0.1, "retrieve_gbps": 0.08, "store_cold_gbps": 0.05, "retrieve_cold_gbps": 0.06},
           {"block_bytes": 2097152, "blocks": 16, "batch_bytes": 33554432, "verified_retrieves": 11, "store_gbps": 5, "retrieve_gbps": 11, "store_cold_gbps": 1, "retrieve_cold_gbps": 2}]}`
		lm, err := parseDriverOutput(&cfg, []byte(strings.ReplaceAll(out, "\n ", " ")), nil, "")
		if err != nil {
			t.Fatalf("parseDriverOutput: %v", err)
		}
		r.addLMCache(lm)
	}
	r.finish()
	return r
}

func TestPeersReport(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }
	t.Run("ratios are LMCache's latency over OrbitKV's and OrbitKV's GB/s over LMCache's", func(t *testing.T) {
		r := peersSample(t, true)
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"lookup p50 of 32", r.Ratios.LookupP50["32"], 500},
			{"lookup p99 of 1000", r.Ratios.LookupP99["1000"], 100},
			{"store of 64 KiB", r.Ratios.Store["65536"], 80},
			{"retrieve of 2 MiB", r.Ratios.Retrieve["2097152"], 1},
			{"cold store of 2 MiB", r.Ratios.StoreCold["2097152"], 5},
		} {
			if !near(c.got, c.want) {
				t.Errorf("%s: ratio %v, want %v", c.name, c.got, c.want)
			}
		}
	})
	t.Run("targets hold or miss by the ratio measured", func(t *testing.T) {
		r := peersSample(t, true)
		met := map[string]bool{}
		for _, tg := range r.Targets {
			met[tg.Name] = tg.Met
		}
		if !met["lookup of 32 blocks, p50: LMCache / OrbitKV"] || !met["store of 2.0 MiB blocks, warm: OrbitKV / LMCache GB/s"] ||
			met["retrieve of 2.0 MiB blocks, warm: OrbitKV / LMCache GB/s"] {
			t.Fatalf("targets %+v: want lookup and 2 MiB store met (500x, 2x), 2 MiB retrieve missed (1x)", r.Targets)
		}
	})
	t.Run("the JSON has the issue's keys with block bytes and chain lengths as keys", func(t *testing.T) {
		var buf bytes.Buffer
		if err := writePeersJSON(&buf, peersSample(t, true)); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Lookup   map[string]map[string]map[string]float64 `json:"lookup_rtt_ns"`
			Store    map[string]map[string]float64            `json:"store_gbps"`
			Retrieve map[string]map[string]float64            `json:"retrieve_gbps"`
		}
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		for _, sys := range []string{peerOrbitKV, peerLMCache} {
			for _, k := range []string{"32", "1000"} {
				if _, ok := got.Lookup[sys][k]["p50"]; !ok {
					t.Errorf("lookup_rtt_ns.%s.%s has no p50", sys, k)
				}
				if _, ok := got.Lookup[sys][k]["p99"]; !ok {
					t.Errorf("lookup_rtt_ns.%s.%s has no p99", sys, k)
				}
			}
			for _, k := range []string{"65536", "2097152"} {
				if got.Store[sys][k] <= 0 || got.Retrieve[sys][k] <= 0 {
					t.Errorf("store/retrieve_gbps.%s.%s missing", sys, k)
				}
			}
		}
		if strings.Contains(buf.String(), `"discover_local_ns"`) {
			t.Errorf("a report without discovery carries discover_local_ns")
		}
	})
	t.Run("without LMCache there are no LMCache figures, ratios or met targets, and the error is kept", func(t *testing.T) {
		r := peersSample(t, false)
		r.LMCacheError = "the LMCache driver failed: RuntimeError: boom"
		r.finish()
		if len(r.Lookup[peerLMCache]) != 0 || len(r.Ratios.Store) != 0 || len(r.Ratios.LookupP50) != 0 {
			t.Fatalf("LMCache figures or ratios without LMCache: %+v %+v", r.Lookup[peerLMCache], r.Ratios)
		}
		for _, tg := range r.Targets {
			if tg.Met || tg.Ratio != nil {
				t.Fatalf("target %+v met without LMCache", tg)
			}
		}
		var buf bytes.Buffer
		if err := writePeersTable(&buf, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "LMCache did not run: the LMCache driver failed: RuntimeError: boom") ||
			!strings.Contains(buf.String(), "Manager parks") {
			t.Fatalf("table does not carry the error:\n%s", buf.String())
		}
	})
}

func TestPeersDiscover(t *testing.T) {
	r := peersSample(t, true)
	r.addDiscover(&discover.DiscoverFigures{
		Local: map[string]discover.DiscoverQuantiles{"32": {P50: 100, P99: 200}, "1000": {P50: 2000, P99: 3000}},
		RTT:   map[string]discover.DiscoverQuantiles{"32": {P50: 1000, P99: 5000}, "1000": {P50: 10000, P99: 20000}},
	})
	r.finish()
	t.Run("discovery ratios are the round trip's and LMCache's lookup p50 over the local p50", func(t *testing.T) {
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"round trip / local of 32", r.Ratios.DiscoverVsRTT["32"], 10},
			{"round trip / local of 1000", r.Ratios.DiscoverVsRTT["1000"], 5},
			{"LMCache / local of 32", r.Ratios.DiscoverVsLMCache["32"], 20000},
			{"LMCache / local of 1000", r.Ratios.DiscoverVsLMCache["1000"], 4000},
		} {
			if c.got != c.want {
				t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
			}
		}
	})
	t.Run("the JSON carries discover_local_ns and discover_rtt_ns by chain", func(t *testing.T) {
		var buf bytes.Buffer
		if err := writePeersJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		var got map[string]map[string]map[string]float64
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		got = map[string]map[string]map[string]float64{}
		for _, k := range []string{"discover_local_ns", "discover_rtt_ns"} {
			var m map[string]map[string]float64
			if err := json.Unmarshal(raw[k], &m); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			got[k] = m
		}
		if got["discover_local_ns"]["32"]["p50"] != 100 || got["discover_rtt_ns"]["1000"]["p99"] != 20000 {
			t.Fatalf("discover keys: %v", got)
		}
		var tbl bytes.Buffer
		if err := writePeersTable(&tbl, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(tbl.String(), "discovery of") {
			t.Fatalf("table without discovery rows:\n%s", tbl.String())
		}
	})
}

func TestParseDriverOutput(t *testing.T) {
	cfg := peersTestConfig(t, "--sizes", "64KiB", "--chains", "32")
	good := `{"version": "0.5.6", "lookup_rtt_ns": {"32": {"p50": 1, "p99": 2}}, "sizes": [{"block_bytes": 65536, "blocks": 16}]}`
	for _, tc := range []struct {
		name, out, want string
		runErr          error
	}{
		{"a driver error is quoted exactly", `{"error": "RuntimeError: lmcache server exited with status 1"}`, "RuntimeError: lmcache server exited with status 1", errors.New("exit status 1")},
		{"an exit without a report names the status and the stderr", "", "exit status 2; its stderr ends:\nusage", errors.New("exit status 2")},
		{"a report without a chain asked for is refused", strings.Replace(good, `"32"`, `"31"`, 1), "no lookup of 32 blocks", nil},
		{"a report of other sizes is refused", strings.Replace(good, "65536", "65537", 1), "want 16 of 65536", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDriverOutput(&cfg, []byte(tc.out), tc.runErr, "usage: lmcache_driver.py")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("a good report after log lines is read", func(t *testing.T) {
		lm, err := parseDriverOutput(&cfg, []byte("log\n"+good+"\n"), nil, "")
		if err != nil || lm.Version != "0.5.6" || lm.Lookup["32"].P99 != 2 {
			t.Fatalf("got %+v, %v", lm, err)
		}
	})
}

func TestDriverArgs(t *testing.T) {
	cfg := peersTestConfig(t, "--sizes", "64KiB,32MiB", "--chains", "32,256", "--iters", "3")
	got := strings.Join(driverArgs(&cfg, "d.py"), " ")
	want := "d.py --sizes 65536,33554432 --blocks 16,2 --chains 32,256 --lookup-block-bytes 65536 --lookups 200 --iters 3 --warmup 2 --l1-size-gb 1"
	// 18 MiB of chains + 6 x 65 MiB = 408 MiB over 0.8: 1 GiB.
	if got != want {
		t.Fatalf("driver args\n got %s\nwant %s", got, want)
	}
}
