package replay

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
)

func TestParseNodeFiguresReadsTheLookupAndPeerSeries(t *testing.T) {
	text := `# HELP orbitkv_lookup_blocks_total Blocks looked up.
# TYPE orbitkv_lookup_blocks_total counter
orbitkv_lookup_blocks_total{result="hit",tier="peer"} 12
orbitkv_lookup_blocks_total{result="miss",tier="peer"} 3
orbitkv_lookup_blocks_total{result="hit",tier="ram"} 40
orbitkv_lookup_blocks_total{result="miss",tier="ram"} 9
orbitkv_lookup_blocks_total{result="hit",tier="ssd"} 7
orbitkv_peer_fetches_total 5
orbitkv_peer_fetch_failures_total 1
orbitkv_peer_fetched_bytes_total 786432
orbitkv_peer_fetch_seconds_total 0.25
orbitkv_ram_replica_blocks 2
`
	f, err := parseNodeFigures(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := nodeFigures{RAMHit: 40, RAMMiss: 9, PeerHit: 12, PeerMiss: 3, Fetches: 5, FetchFails: 1, FetchedBytes: 786432, FetchSeconds: 0.25, Replicas: 2}
	if f != want {
		t.Fatalf("figures %+v, want %+v", f, want)
	}
	if _, err := parseNodeFigures(strings.NewReader("orbitkv_peer_fetches_total many\n")); err == nil {
		t.Fatal("a value that is not a number was accepted")
	}
}

// Two nodes, each with a client: the peer tier serves blocks the other
// node published, every restored byte is checked, and the report carries
// the fields.
func TestReplayOnTwoNodesFetchesFromPeersAndVerifiesEveryByte(t *testing.T) {
	dir := benchtest.Binaries(t)
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), "replay", "--trace", benchtest.TestTrace, "--json", "--nodes", "2", "--clients", "2",
		"--limit", "1000", "--block-bytes", "16KiB", "--ram-capacity", "128MiB", "--repeats", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orbitkv-bench replay --nodes 2: %v\nstderr:\n%s", err, stderr.String())
	}
	var raw map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodes", "hit_ratio", "hit_ratio_without_peers", "peer_hit_blocks", "mismatches", "transfer_gbps", "remote_restore_rtt_ns"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	rtt, _ := raw["remote_restore_rtt_ns"].(map[string]any)
	for _, p := range []string{"p50", "p99"} {
		if _, ok := rtt[p].(float64); !ok {
			t.Errorf("remote_restore_rtt_ns.%s missing (%v)", p, rtt)
		}
	}
	var rep clusterReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Nodes != 2 || rep.Mismatches != 0 || len(rep.PerNode) != 2 {
		t.Fatalf("nodes %d mismatches %d per-node rows %d", rep.Nodes, rep.Mismatches, len(rep.PerNode))
	}
	if rep.PeerHitBlocks == 0 || rep.HitRatio <= rep.HitRatioWithoutPeers {
		t.Errorf("peer hits %d, hit ratio %.4f with peers, %.4f without: the peer tier served nothing", rep.PeerHitBlocks, rep.HitRatio, rep.HitRatioWithoutPeers)
	}
	for _, r := range []*replayReport{rep.WithPeers, rep.WithoutPeers, rep.SingleNode} {
		if r == nil || r.IdleInvariant != "ok" || r.Requests != 1000 {
			t.Errorf("a run: %+v", r)
		}
	}
}

// A short routing comparison: the same plan on three nodes, requests
// assigned round-robin and then by the nodes' KV events; routing by
// events must find clearly more of each request's prefix on the node it
// chose (local hits only: hit_ratio_without_peers). The full comparison
// is bench/cluster/README.md's.
func TestRoutingByKVEventsFindsMoreLocalHitsThanRoundRobin(t *testing.T) {
	dir := benchtest.Binaries(t)
	ratio := map[string]float64{}
	for _, route := range []string{routeRR, routeEvents} {
		cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), "replay", "--trace", benchtest.TestTrace, "--json", "--nodes", "3", "--clients", "3",
			"--limit", "1000", "--block-bytes", "16KiB", "--ram-capacity", "48MiB", "--repeats", "1", "--route", route)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("orbitkv-bench replay --route %s: %v\nstderr:\n%s", route, err, stderr.String())
		}
		var rep clusterReport
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Route != route || rep.Mismatches != 0 {
			t.Fatalf("--route %s: report route %q, %d mismatches", route, rep.Route, rep.Mismatches)
		}
		ratio[route] = rep.HitRatioWithoutPeers
		t.Logf("--route %s: hit_ratio_without_peers %.4f, hit_ratio %.4f, single node %.4f", route, rep.HitRatioWithoutPeers, rep.HitRatio, rep.HitRatioSingleNode)
	}
	if ratio[routeEvents] < 1.2*ratio[routeRR] {
		t.Fatalf("local hit ratio %.4f routed by events, %.4f round-robin: want events ≥ 1.2× round-robin", ratio[routeEvents], ratio[routeRR])
	}
}

// --kv-events compare replays with events off and on: the bench's own
// subscriber decodes the events, and the ratios are reported.
func TestEventsCompareReportsRatiosAndReceivesEvents(t *testing.T) {
	dir := benchtest.Binaries(t)
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), "replay", "--trace", benchtest.TestTrace, "--json", "--clients", "2",
		"--limit", "300", "--block-bytes", "16KiB", "--ram-capacity", "16MiB", "--repeats", "1", "--kv-events", "compare", "--record-tokens", "16")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orbitkv-bench replay --kv-events compare: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep eventsReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.EventsReceived == 0 || rep.ThroughputRatio <= 0 || rep.QueryP50Ratio <= 0 || rep.Off == nil || rep.On == nil ||
		rep.On.Requests != 300 || rep.Off.Requests != 300 || rep.On.Mismatches != 0 {
		t.Fatalf("report %+v", rep)
	}
	// The store events cover what was stored: every stored block is in a
	// BlockStored (events merge chains, so there are at most as many).
	if rep.EventsReceived > 2*rep.On.StoredBlocks+2 {
		t.Fatalf("%d events for %d stored blocks", rep.EventsReceived, rep.On.StoredBlocks)
	}
}
