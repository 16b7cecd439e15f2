package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// maxReplayNodes bounds --nodes: node k serves on 127.0.0.(k+1).
const maxReplayNodes = 16

// clusterAdvertiseInterval is the --advertise-interval of the bench's
// Managers: a turn of a conversation often lands on another node a few
// requests after the previous turn was published there, so the catalog's
// batches are written as often as it allows.
const clusterAdvertiseInterval = 10 * time.Millisecond

// clusterReport is the one JSON object `orbitkv-bench replay --nodes N
// --json` prints (bench/cluster/README.md describes every field): the same
// trace replayed on N Managers with the peer tier (an etcd catalog, peer
// control, the transfer engine), on N Managers without it, and on one
// Manager holding the RAM of all N, in one run.
type clusterReport struct {
	suite.Head
	Nodes                int           `json:"nodes"`
	HitRatio             float64       `json:"hit_ratio"`               // N nodes with the peer tier
	HitRatioWithoutPeers float64       `json:"hit_ratio_without_peers"` // N nodes, each alone
	HitRatioSingleNode   float64       `json:"hit_ratio_single_node"`   // one node with the N nodes' RAM
	BoundHitRatio        float64       `json:"bound_hit_ratio"`
	PeerHitBlocks        uint64        `json:"peer_hit_blocks"`
	Mismatches           uint64        `json:"mismatches"` // over all three runs
	TransferGBps         float64       `json:"transfer_gbps"`
	TransferredBytes     uint64        `json:"transferred_bytes"`
	RemoteRestoreRTT     rttStats      `json:"remote_restore_rtt_ns"`
	RAMPerNodeBytes      uint64        `json:"ram_per_node_bytes"`
	Clients              int           `json:"clients"`
	PerNode              []nodeFigures `json:"per_node"` // the peer-tier run, summed over the repeats
	Route                string        `json:"route"`    // how requests were assigned to nodes (--route)

	WithPeers    *replayReport `json:"with_peers"`
	WithoutPeers *replayReport `json:"without_peers"`
	SingleNode   *replayReport `json:"single_node"`
}

// nodeFigures are one node's lookup counts by tier (its /metrics).
type nodeFigures struct {
	Node         string  `json:"node"`
	Clients      int     `json:"clients"`
	RAMHit       uint64  `json:"ram_hit_blocks"`
	RAMMiss      uint64  `json:"ram_miss_blocks"`
	PeerHit      uint64  `json:"peer_hit_blocks"`
	PeerMiss     uint64  `json:"peer_miss_blocks"`
	Fetches      uint64  `json:"peer_fetches"`
	FetchFails   uint64  `json:"peer_fetch_failures"`
	FetchedBytes uint64  `json:"peer_fetched_bytes"`
	FetchSeconds float64 `json:"peer_fetch_seconds"`
	Replicas     uint64  `json:"replica_blocks"`
}

// runClusterReplay is `orbitkv-bench replay --nodes N`: each repeat
// replays the plan three times, each on fresh Managers: one Manager with
// --ram-capacity, N without peers with a share of it each, and N in a
// cluster with an etcd (bin/orbitkv-etcd) and certificates made for the
// run; clients spread over the nodes (client i on node i mod N).
func runClusterReplay(cfg *replayConfig, plan *replayPlan, stdout, stderr io.Writer) error {
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	prog := suite.StartProgress(cfg.Progress, stderr, "replay", "requests", int64(3*cfg.Repeats*len(plan.requests)))
	defer prog.Finish()
	// The three runs replay one request order (order.go).
	cfg.ordered = true
	var with, without, single []*replayReport
	per := make([]nodeFigures, cfg.nodes)
	for i := range per {
		per[i] = nodeFigures{Node: nodeName(i), Clients: (cfg.clients - i + cfg.nodes - 1) / cfg.nodes}
	}
	for i := range cfg.Repeats {
		say := func(what string) {
			if !cfg.Json {
				fmt.Fprintf(stderr, "repeat %d of %d: %s: %d requests of %s with %d clients ...\n",
					i+1, cfg.Repeats, what, len(plan.requests), plan.tracePath, cfg.clients)
			}
		}
		say("one Manager")
		rep, err := replayOnce(cfg, plan, stderr, prog)
		if err != nil {
			return err
		}
		single = append(single, rep)
		say(fmt.Sprintf("%d Managers without peers", cfg.nodes))
		if rep, err = replayNodes(cfg, plan, stderr, prog, nil); err != nil {
			return err
		}
		without = append(without, rep)
		say(fmt.Sprintf("%d Managers with the peer tier", cfg.nodes))
		if rep, err = replayNodes(cfg, plan, stderr, prog, per); err != nil {
			return err
		}
		with = append(with, rep)
	}
	out := &clusterReport{Route: cfg.route, Nodes: cfg.nodes, Clients: cfg.clients, RAMPerNodeBytes: cfg.ramCapacity / uint64(cfg.nodes),
		WithPeers: combineReplays(with), WithoutPeers: combineReplays(without), SingleNode: combineReplays(single), PerNode: per}
	out.HitRatio, out.HitRatioWithoutPeers, out.HitRatioSingleNode = out.WithPeers.HitRatio, out.WithoutPeers.HitRatio, out.SingleNode.HitRatio
	out.BoundHitRatio = out.WithPeers.BoundHitRatio
	out.Mismatches = out.WithPeers.Mismatches + out.WithoutPeers.Mismatches + out.SingleNode.Mismatches
	var secs float64
	for _, n := range per {
		out.PeerHitBlocks += n.PeerHit
		out.TransferredBytes += n.FetchedBytes
		secs += n.FetchSeconds
	}
	if secs > 0 {
		out.TransferGBps = float64(out.TransferredBytes) / secs / 1e9
	}
	if h := out.WithPeers.remoteHist; h != nil {
		st := h.Stats()
		out.RemoteRestoreRTT = rttStats{P50: st.P50, P99: st.P99, P999: st.P999, N: st.N}
	}
	in := suite.ValidityInput{HotUnchecked: "the replay has no hot phase"}
	cfg.Finish(&out.Head, mon, in, clusterFigures(out, with, without))
	emitErr := cfg.Emit(stdout, stderr, out, func(w io.Writer) error { return writeClusterTable(w, out) })
	if emitErr != nil && !errors.As(emitErr, new(*suite.InvalidRunError)) {
		return emitErr
	}
	if out.Mismatches != 0 {
		return fmt.Errorf("%d restored bytes differ from what was published", out.Mismatches)
	}
	for _, r := range []*replayReport{out.WithPeers, out.WithoutPeers, out.SingleNode} {
		if r.idleViolation != "" {
			return fmt.Errorf("a Manager is not idle after the clients exited: %s", r.idleViolation)
		}
	}
	return emitErr
}

func nodeName(i int) string { return "node" + strconv.Itoa(i+1) }

// nodeIP is node i's loopback address, 127.0.0.(i+1).
func nodeIP(i int) string { return fmt.Sprintf("127.0.0.%d", i+1) }

// replayNodes replays the plan on cfg.nodes fresh Managers, each with a
// share of --ram-capacity; with per non-nil they form a cluster (an etcd,
// certificates, peer control and transfer listeners on each node's own
// loopback address) and each node's lookup counts are added to per.
func replayNodes(cfg *replayConfig, plan *replayPlan, stderr io.Writer, prog *suite.Progress, per []nodeFigures) (*replayReport, error) {
	share := cfg.ramCapacity / uint64(cfg.nodes)
	var extra [][]string
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	if per != nil {
		dir, err := os.MkdirTemp("", "orbitkv-cluster-")
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		etcd, endpoint, err := startEtcd(cfg, dir)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { etcd.Stop(managerproc.StopGrace) })
		certs, err := writeCerts(dir, cfg.nodes)
		if err != nil {
			return nil, err
		}
		for i := range cfg.nodes {
			extra = append(extra, append([]string{"--node-id", nodeName(i), "--etcd-endpoints", endpoint,
				"--peer-listen", nodeIP(i) + ":0", "--transfer-listen", nodeIP(i) + ":0",
				"--advertise-interval", clusterAdvertiseInterval.String()}, certs[i]...))
		}
	}
	var events []string
	if cfg.route == routeEvents {
		dir, remove, err := eventsDir()
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, remove)
		for i := range cfg.nodes {
			events = append(events, eventEndpoint(dir, i))
		}
	}
	nodes := make([]*managerproc.Manager, cfg.nodes)
	for i := range nodes {
		args := []string{}
		if extra != nil {
			args = extra[i]
		}
		if events != nil {
			args = append([]string{"--kv-events", events[i]}, args...)
		}
		m, err := managerproc.Launch(managerproc.RAMSpec(cfg.ManagerBin, share, append(args, cfg.ManagerArgs...)))
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", nodeName(i), err)
		}
		nodes[i] = m
		cleanup = append(cleanup, m.Stop)
	}
	run := &replayRun{cfg: *cfg, plan: plan, manager: nodes[0], nodes: nodes, stderr: stderr, progress: prog,
		salt: fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano())}
	run.cfg.ramCapacity = share
	if events != nil {
		run.events, run.recordTokens = events, cfg.recordTok
	}
	defer managerproc.StopOnSignal("replay", nodes[0], stderr, func() {
		run.killWorkers()
		for _, m := range nodes[1:] {
			m.Stop()
		}
	})()
	rep, err := run.execute()
	if err != nil {
		return nil, err
	}
	for i, m := range nodes {
		if per == nil {
			break
		}
		f, err := managerproc.ScrapeMetrics(m.Http, parseNodeFigures)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nodeName(i), err)
		}
		n := &per[i]
		n.RAMHit += f.RAMHit
		n.RAMMiss += f.RAMMiss
		n.PeerHit += f.PeerHit
		n.PeerMiss += f.PeerMiss
		n.Fetches += f.Fetches
		n.FetchFails += f.FetchFails
		n.FetchedBytes += f.FetchedBytes
		n.FetchSeconds += f.FetchSeconds
		n.Replicas = f.Replicas
	}
	return rep, nil
}

// etcdBin finds orbitkv-etcd: --etcd-bin, else next to this binary, else
// bin/orbitkv-etcd.
func etcdBin(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	tried := []string{}
	if self, err := os.Executable(); err == nil {
		tried = append(tried, filepath.Join(filepath.Dir(self), "orbitkv-etcd"))
	}
	tried = append(tried, filepath.Join("bin", "orbitkv-etcd"))
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no etcd binary (tried %s); build it (make go) or pass --etcd-bin", strings.Join(tried, ", "))
}

// startEtcd starts a one-member etcd (bin/orbitkv-etcd) with its data in
// dir on free loopback ports and returns it with its client endpoint. It
// does not fsync its log (a throw-away catalog: on this VM's disk an fsync
// per batch of advertisements delays them by milliseconds).
func startEtcd(cfg *replayConfig, dir string) (*launch.Process, string, error) {
	bin, err := etcdBin(cfg.etcdBin)
	if err != nil {
		return nil, "", err
	}
	client, err := launch.FreeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	peerAddr, err := launch.FreeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := launch.StartProcess(launch.ProcessSpec{Path: bin, Dir: dir,
		Args: []string{"--data-dir", filepath.Join(dir, "etcd"), "--listen-client", client, "--listen-peer", peerAddr, "--unsafe-no-fsync"}})
	if err != nil {
		return nil, "", err
	}
	if err := p.WaitOutput("orbitkv-etcd serving", 30*time.Second); err != nil {
		p.Stop(managerproc.StopGrace)
		return nil, "", fmt.Errorf("etcd did not serve: %w\n%s", err, p.Tail(2000))
	}
	return p, client, nil
}

// writeCerts makes a cluster CA and one certificate per node (named
// nodeName(i), dialled at nodeIP(i)) in dir and returns each node's
// --peer-ca, --peer-cert and --peer-key flags.
func writeCerts(dir string, n int) ([][]string, error) {
	now := time.Now()
	caCert, caKey, err := peer.NewCA("orbitkv-bench cluster CA", 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, caCert, 0o600); err != nil {
		return nil, err
	}
	var out [][]string
	for i := range n {
		cert, key, err := peer.NewNodeCert(caCert, caKey, peer.NodeCertSpec{Name: nodeName(i),
			IPs: []net.IP{net.ParseIP(nodeIP(i))}, Validity: 24 * time.Hour}, now)
		if err != nil {
			return nil, err
		}
		cf, kf := filepath.Join(dir, nodeName(i)+".pem"), filepath.Join(dir, nodeName(i)+".key")
		if err := errors.Join(os.WriteFile(cf, cert, 0o600), os.WriteFile(kf, key, 0o600)); err != nil {
			return nil, err
		}
		out = append(out, []string{"--peer-ca", ca, "--peer-cert", cf, "--peer-key", kf})
	}
	return out, nil
}

// parseNodeFigures reads a node's lookup and peer series from its
// /metrics (Prometheus text format).
func parseNodeFigures(r io.Reader) (nodeFigures, error) {
	var f nodeFigures
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return f, fmt.Errorf("metrics line %q: %w", line, err)
		}
		u := uint64(v)
		switch series {
		case `orbitkv_lookup_blocks_total{result="hit",tier="ram"}`:
			f.RAMHit = u
		case `orbitkv_lookup_blocks_total{result="miss",tier="ram"}`:
			f.RAMMiss = u
		case `orbitkv_lookup_blocks_total{result="hit",tier="peer"}`:
			f.PeerHit = u
		case `orbitkv_lookup_blocks_total{result="miss",tier="peer"}`:
			f.PeerMiss = u
		case "orbitkv_peer_fetches_total":
			f.Fetches = u
		case "orbitkv_peer_fetch_failures_total":
			f.FetchFails = u
		case "orbitkv_peer_fetched_bytes_total":
			f.FetchedBytes = u
		case "orbitkv_peer_fetch_seconds_total":
			f.FetchSeconds = v
		case "orbitkv_ram_replica_blocks":
			f.Replicas = u
		}
	}
	return f, sc.Err()
}

// clusterFigures are the headline figures: the two cluster hit ratios.
func clusterFigures(out *clusterReport, with, without []*replayReport) []suite.Figure {
	each := func(reps []*replayReport) []float64 {
		var v []float64
		for _, r := range reps {
			v = append(v, r.HitRatio)
		}
		return v
	}
	return []suite.Figure{
		suite.NewFigure("hit_ratio", "fraction", suite.HigherIsBetter, out.HitRatio, each(with)),
		suite.NewFigure("hit_ratio_without_peers", "fraction", suite.HigherIsBetter, out.HitRatioWithoutPeers, each(without)),
	}
}

// writeClusterTable prints the cluster run: the three hit ratios, the
// peer tier's figures, and hits per node and per tier.
func writeClusterTable(w io.Writer, out *clusterReport) error {
	spread := fmt.Sprintf("client i on node i mod %d", out.Nodes)
	if out.Route == routeEvents {
		spread = "each request on the node whose KV events show its longest prefix"
	}
	fmt.Fprintf(w, "orbitkv-bench replay --nodes %d: %d clients spread over the nodes (%s), %s RAM per node (%s in all)\n\n",
		out.Nodes, out.Clients, spread, humanize.IBytes(out.RAMPerNodeBytes), humanize.IBytes(out.RAMPerNodeBytes*uint64(out.Nodes)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "hit ratio, %d nodes with the peer tier\t%.4f\t\n", out.Nodes, out.HitRatio)
	fmt.Fprintf(tw, "hit ratio, %d nodes without peers\t%.4f\t\n", out.Nodes, out.HitRatioWithoutPeers)
	fmt.Fprintf(tw, "hit ratio, one node with all the RAM\t%.4f\ttarget: with peers ≥ 0.99 × this = %.4f (%s)\n", out.HitRatioSingleNode,
		0.99*out.HitRatioSingleNode, pass(out.HitRatio >= 0.99*out.HitRatioSingleNode))
	fmt.Fprintf(tw, "bound hit ratio\t%.4f\tinfinite cache\n", out.BoundHitRatio)
	fmt.Fprintf(tw, "peer-hit blocks\t%d\t%s fetched from peers\n", out.PeerHitBlocks, humanize.IBytes(out.TransferredBytes))
	fmt.Fprintf(tw, "transfer\t%.2f GB/s\tfetched bytes over the fetches' time, lookup to seal\n", out.TransferGBps)
	fmt.Fprintf(tw, "remote restore round trip\tp50 %s µs, p99 %s µs\t%d queries that waited for a peer fetch, first ask to lease\n",
		suite.Us(out.RemoteRestoreRTT.P50), suite.Us(out.RemoteRestoreRTT.P99), out.RemoteRestoreRTT.N)
	fmt.Fprintf(tw, "mismatched bytes\t%d\tmust be 0 (all three runs)\n", out.Mismatches)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tclients\tram hit\tram miss\tpeer hit\tpeer miss\tfetches\tfailed\treplicas\t")
	for _, n := range out.PerNode {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", n.Node, n.Clients, n.RAMHit, n.RAMMiss, n.PeerHit, n.PeerMiss, n.Fetches, n.FetchFails, n.Replicas)
	}
	return tw.Flush()
}

func pass(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
