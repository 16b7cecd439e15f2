package integration

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/internal/etcdtest"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// The fault scenarios of a cluster of Manager binaries: a real
// etcd (internal/etcdtest, in this process), a CA and node certificates
// made for the test, Managers started as processes and killed with
// SIGKILL. The failpoint build's hold point transfer-serve holds a remote
// restore open mid-transfer: the source has pinned the blocks and the
// requester's READs wait for their DATA.

// clusterFetchTimeout is every requester's --peer-fetch-timeout: a fetch
// that cannot finish is a miss this long after it started.
const clusterFetchTimeout = 2 * time.Second

// clusterEnv is one test's etcd and certificates.
type clusterEnv struct {
	etcd *etcdtest.Cluster
	eps  []string // --etcd-endpoints, host:port
	dir  string
	ca   []byte
	key  []byte
}

func newClusterEnv(t *testing.T, members int) *clusterEnv {
	t.Helper()
	e := &clusterEnv{etcd: etcdtest.Start(t, members), dir: t.TempDir()}
	for _, m := range e.etcd.Members {
		e.eps = append(e.eps, m.ClientURL.Host)
	}
	ca, key, err := peer.NewCA("integration cluster CA", 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.ca, e.key = ca, key
	if err := os.WriteFile(filepath.Join(e.dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// certFlags writes node name's certificate (for ip) and returns its
// --peer-ca, --peer-cert and --peer-key.
func (e *clusterEnv) certFlags(t *testing.T, name, ip string) []string {
	t.Helper()
	cert, key, err := peer.NewNodeCert(e.ca, e.key, peer.NodeCertSpec{Name: name, IPs: []net.IP{net.ParseIP(ip)}, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(e.dir, name+".pem"), filepath.Join(e.dir, name+".key")
	if err := errors.Join(os.WriteFile(cf, cert, 0o600), os.WriteFile(kf, key, 0o600)); err != nil {
		t.Fatal(err)
	}
	return []string{"--peer-ca", filepath.Join(e.dir, "ca.pem"), "--peer-cert", cf, "--peer-key", kf}
}

// nodeArgs are the flags of a cluster node named name on ip reaching etcd
// at eps.
func (e *clusterEnv) nodeArgs(t *testing.T, name, ip string, eps []string) []string {
	return append([]string{"--ram-capacity", "64MiB", "--hugepages", "off",
		"--node-id", name, "--etcd-endpoints", strings.Join(eps, ","),
		"--peer-listen", ip + ":0", "--transfer-listen", ip + ":0",
		"--advertise-interval", "10ms", "--catalog-lease-ttl", "2s",
		"--peer-fetch-timeout", clusterFetchTimeout.String(), "--peer-transfer-lease", "3s"},
		e.certFlags(t, name, ip)...)
}

// clusterNode is a Manager process of the cluster with its socket and
// loopback HTTP address.
type clusterNode struct {
	p    *proc
	sock string
	http string
}

// start starts node name from binary bin (orbitkv-manager or the
// failpoint build) on 127.0.0.1.
func (e *clusterEnv) start(t *testing.T, bin, name string, extra ...string) *clusterNode {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "okv.sock")
	addr := freeLoopbackAddr(t)
	p := startManagerBin(t, bin, sock, addr, 20*time.Second, append(e.nodeArgs(t, name, "127.0.0.1", e.eps), extra...)...)
	return &clusterNode{p: p, sock: sock, http: addr}
}

// metric reads one sample (name with its labels as /metrics prints them).
func (n *clusterNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	return metricValue(t, n.http, name)
}

// waitMetric waits up to d until ok holds for the sample name.
func (n *clusterNode) waitMetric(t *testing.T, name string, d time.Duration, what string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := n.metric(t, name)
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s is %v after %v; output:\n%s", what, name, v, d, n.p.Tail(30))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// control sends a failpoint request to n (the failpoint build).
func (n *clusterNode) control(t *testing.T, method, path string) {
	t.Helper()
	(&fpManager{p: n.p, sock: n.sock, http: n.http}).control(t, method, path)
}

// sigkill kills n's process and waits for it.
func (n *clusterNode) sigkill(t *testing.T) {
	t.Helper()
	if err := n.p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.p.wait(t, 10*time.Second)
}

// chain is the hashes of tags.
func chain(tags []uint64) []client.BlockHash {
	hs := make([]client.BlockHash, len(tags))
	for i, tag := range tags {
		hs[i] = bh(tag)
	}
	return hs
}

func tagRange(first, n uint64) ([]uint64, []uint32) {
	tags, pages := make([]uint64, n), make([]uint32, n)
	for i := range tags {
		tags[i], pages[i] = first+uint64(i), uint32(i)
	}
	return tags, pages
}

// queryUntilAnswered asks for hashes until the answer is not Loading, for
// at most d; it returns the lease and how long the answer took.
func queryUntilAnswered(t *testing.T, e *engine, ns client.Namespace, hashes []client.BlockHash, d time.Duration) (client.Lease, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		l, err := e.c.Query(ns, hashes)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Code == client.CodePending {
			if time.Since(start) > d {
				t.Fatalf("still Loading after %v", d)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("query: %v after %v", err, time.Since(start))
		}
		return l, time.Since(start)
	}
}

// noFramesLeft fails unless n holds no RAM chunk, operation or pin (it
// held no block of its own before the fetch).
func noFramesLeft(t *testing.T, n *clusterNode) {
	t.Helper()
	for _, m := range []string{"orbitkv_ram_used_bytes", "orbitkv_ram_blocks", "orbitkv_operations_in_progress", "orbitkv_block_pins", "orbitkv_leases"} {
		if v := n.metric(t, m); v != 0 {
			t.Errorf("%s is %v after the failed fetch, want 0 (frames or pins leaked)", m, v)
		}
	}
}

// holdTransfer publishes tags on the failpoint node src, holds its
// transfer READs, has dst ask for them and waits until a READ is held:
// src has opened the transfer and pinned the blocks.
func holdTransfer(t *testing.T, src, dst *clusterNode, dstEngine *engine, ns client.Namespace, tags []uint64, pages []uint32) chan struct{} {
	t.Helper()
	a := newEngine(t, src.sock, "publisher")
	a.publish(t, ns, tags, pages)
	dst.waitMetric(t, "orbitkv_catalog_indexed_entries", 10*time.Second, "the requester sees the source's advertisements", func(v float64) bool { return v >= float64(len(tags)) })
	src.control(t, "POST", "/debug/failpoints/hold?name=transfer-serve&on=1")
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		// The first answer is Loading: the fetch runs in the background.
		_, err := dstEngine.c.Query(ns, chain(tags))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != client.CodePending {
			t.Errorf("first query: %v, want Loading", err)
		}
	}()
	src.control(t, "GET", "/debug/failpoints/held?name=transfer-serve&timeout=10s")
	<-asked
	if v := src.metric(t, "orbitkv_transfer_pinned_blocks"); v != float64(len(tags)) {
		t.Fatalf("source pins %v blocks mid-transfer, want %d", v, len(tags))
	}
	return asked
}

func TestClusterSourceSIGKILLedMidTransferIsAMissWithinTheDeadline(t *testing.T) {
	env := newClusterEnv(t, 1)
	a := env.start(t, "orbitkv-manager-fp", "a")
	b := env.start(t, "orbitkv-manager", "b")
	ns := namespace(t, "cluster-kill-source")
	eb := newEngine(t, b.sock, "requester")
	tags, pages := tagRange(1, 8)
	holdTransfer(t, a, b, eb, ns, tags, pages)
	a.sigkill(t)
	l, took := queryUntilAnswered(t, eb, ns, chain(tags), clusterFetchTimeout+3*time.Second)
	t.Logf("the requester answered %d hits %v after the source died (%v fetches, %v failed)", l.Hits, took,
		b.metric(t, "orbitkv_peer_fetches_total"), b.metric(t, "orbitkv_peer_fetch_failures_total"))
	if l.Hits != 0 {
		t.Fatalf("query after the source died: %d hits, want a miss", l.Hits)
	}
	// A failed peer is not asked again for a second (peerBackoff): a few
	// fetches at most, never one per poll until the catalog drops it.
	if v := b.metric(t, "orbitkv_peer_fetch_failures_total"); v < 1 || v > 5 {
		t.Errorf("orbitkv_peer_fetch_failures_total %v, want the failed fetch counted and at most 5", v)
	}
	noFramesLeft(t, b)

	// The restarted source has a new epoch: it pins nothing, its old
	// epoch's advertisements go, and the requester never asks it for them.
	a2 := env.start(t, "orbitkv-manager", "a")
	a2.waitMetric(t, "orbitkv_catalog_registered", 10*time.Second, "the restarted source registers", func(v float64) bool { return v == 1 })
	b.waitMetric(t, "orbitkv_catalog_indexed_entries", 10*time.Second, "the old epoch's advertisements go", func(v float64) bool { return v == 0 })
	fetches := b.metric(t, "orbitkv_peer_fetches_total")
	if l, _ := queryUntilAnswered(t, eb, ns, chain(tags), 5*time.Second); l.Hits != 0 {
		t.Fatalf("query after the restart: %d hits, want a miss", l.Hits)
	}
	if v := b.metric(t, "orbitkv_peer_fetches_total"); v != fetches {
		t.Errorf("the requester fetched %v times after the restart, want none", v-fetches)
	}
	for _, m := range []string{"orbitkv_transfer_pins", "orbitkv_transfer_pinned_blocks", "orbitkv_peer_transfers_opened_total", "orbitkv_peer_epoch_mismatches_total"} {
		if v := a2.metric(t, m); v != 0 {
			t.Errorf("restarted source: %s is %v, want 0", m, v)
		}
	}
	noFramesLeft(t, b)
}

func TestClusterRequesterSIGKILLedMidTransferReleasesTheSourcesPins(t *testing.T) {
	env := newClusterEnv(t, 1)
	a := env.start(t, "orbitkv-manager-fp", "a")
	b := env.start(t, "orbitkv-manager", "b")
	ns := namespace(t, "cluster-kill-requester")
	eb := newEngine(t, b.sock, "requester")
	tags, pages := tagRange(1, 8)
	holdTransfer(t, a, b, eb, ns, tags, pages)
	if v := a.metric(t, "orbitkv_transfer_pins"); v != 1 {
		t.Fatalf("source serves %v transfers, want 1", v)
	}
	start := time.Now()
	b.sigkill(t)
	// The peer connection drops at once; the transfer lease (3 s) bounds
	// it otherwise.
	a.waitMetric(t, "orbitkv_transfer_pins", 6*time.Second, "the source's transfer goes", func(v float64) bool { return v == 0 })
	t.Logf("the source's pins went %v after the requester died (dropped %v, expired %v)", time.Since(start),
		a.metric(t, `orbitkv_peer_transfers_ended_total{how="dropped"}`), a.metric(t, `orbitkv_peer_transfers_ended_total{how="expired"}`))
	for _, m := range []string{"orbitkv_transfer_pinned_blocks", "orbitkv_block_pins", "orbitkv_peer_transfers_open", "orbitkv_transfer_segments", "orbitkv_peer_control_conns"} {
		if v := a.metric(t, m); v != 0 {
			t.Errorf("source: %s is %v after the requester died, want 0", m, v)
		}
	}
	a.control(t, "POST", "/debug/failpoints/hold?name=transfer-serve&on=0")
	if v := a.metric(t, "orbitkv_ram_blocks"); v != float64(len(tags)) {
		t.Errorf("source holds %v blocks, want its %d own", v, len(tags))
	}
}

// roundTrips times n QueryBundle round trips of hashes on e (each leases
// and releases) and returns the median and the slowest.
func roundTrips(t *testing.T, e *engine, ns client.Namespace, hashes []client.BlockHash, n int) (median, worst time.Duration) {
	t.Helper()
	took := make([]time.Duration, n)
	for i := range took {
		start := time.Now()
		l, err := e.c.Query(ns, hashes)
		if err != nil || l.Hits != uint32(len(hashes)) {
			t.Fatalf("local query: %+v, %v", l, err)
		}
		if err := e.c.Release(l.ID); err != nil {
			t.Fatal(err)
		}
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[n/2], took[n-1]
}

// localBound is a generous bound on one local QueryBundle round trip on a
// loaded VM (2 cores shared by several builds: a descheduled client or
// dispatcher costs tens of milliseconds); one that waited on etcd would
// take the catalog's dial timeout (catalog.DefaultDialTimeout, 3 s) or
// its request timeout.
const localBound = time.Second

// checkLocal runs n local round trips on e and fails past localBound.
func checkLocal(t *testing.T, e *engine, ns client.Namespace, hashes []client.BlockHash, n int, what string) {
	t.Helper()
	median, worst := roundTrips(t, e, ns, hashes, n)
	t.Logf("%s: %d local round trips, median %v, slowest %v", what, n, median, worst)
	if worst > localBound {
		t.Errorf("%s: slowest local round trip %v, want ≤ %v", what, worst, localBound)
	}
}

func TestClusterServesLocallyWithEtcdDownAndAdvertisesOnceItIsBack(t *testing.T) {
	env := newClusterEnv(t, 3)
	a := env.start(t, "orbitkv-manager", "a")
	b := env.start(t, "orbitkv-manager", "b")
	ns := namespace(t, "cluster-etcd-down")
	ea, eb := newEngine(t, a.sock, "a"), newEngine(t, b.sock, "b")
	indexed := func(n int, what string) {
		b.waitMetric(t, "orbitkv_catalog_indexed_entries", 20*time.Second, what, func(v float64) bool { return v >= float64(n) })
	}
	tags, pages := tagRange(1, 4)
	ea.publish(t, ns, tags, pages)
	indexed(4, "b sees a's blocks")

	t.Run("with one member of three down, advertisements still reach the peers", func(t *testing.T) {
		env.etcd.Stop(0)
		tags, pages := tagRange(11, 4)
		ea.publish(t, ns, tags, pages)
		indexed(8, "b sees the blocks a published with one member down")
		checkLocal(t, ea, ns, chain(tags), 20, "one member down")
	})
	t.Run("with all of etcd down, local serving goes on and peers miss at once", func(t *testing.T) {
		env.etcd.Stop(1, 2)
		tags, pages := tagRange(21, 4)
		ea.publish(t, ns, tags, pages)
		checkLocal(t, ea, ns, chain(tags), 50, "etcd down")
		l, took := queryUntilAnswered(t, eb, ns, chain(tags), 2*time.Second)
		if l.Hits != 0 || took > localBound {
			t.Errorf("b's query of blocks etcd never heard of: %d hits after %v, want a miss within %v", l.Hits, took, localBound)
		}
	})
	t.Run("once etcd is back, the advertisements made meanwhile reach the peers", func(t *testing.T) {
		env.etcd.StartMembers(0, 1, 2)
		env.etcd.WaitReady(0, 1, 2)
		indexed(12, "b sees the blocks a published with etcd down")
		tags, _ := tagRange(21, 4)
		l, took := queryUntilAnswered(t, eb, ns, chain(tags), 5*time.Second)
		if l.Hits != 4 {
			t.Fatalf("b's query once etcd is back: %d hits after %v, want 4 from a", l.Hits, took)
		}
		eb.c.Release(l.ID)
	})
}

// netnsName is the network namespace (and the veth names' stem) of this
// test process.
func netnsName() string { return "okvit" + strconv.Itoa(os.Getpid()%100000) }

// ipCmd runs ip(8) with args and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// forward accepts on ln and copies each connection both ways to target
// until ln closes.
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { io.Copy(u, c); u.Close() }()
			io.Copy(c, u)
		}()
	}
}

func TestClusterPeerBehindADroppedLinkIsAMissNotAHang(t *testing.T) {
	ns := netnsName()
	if _, err := ipCmd("netns", "add", ns); err != nil {
		t.Skipf("network namespaces cannot be made here: %v", err)
	}
	hostIf, nsIf := ns+"h", ns+"n"
	t.Cleanup(func() { ipCmd("netns", "del", ns) }) // removes the veth pair too
	base := fmt.Sprintf("10.%d.%d.", 200+os.Getpid()%50, os.Getpid()%250)
	hostIP, nsIP := base+"1", base+"2"
	for _, args := range [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", ns},
		{"addr", "add", hostIP + "/24", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", ns, "addr", "add", nsIP + "/24", "dev", nsIf},
		{"-n", ns, "link", "set", nsIf, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if _, err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	env := newClusterEnv(t, 1)
	// The node in the namespace reaches etcd through a forwarder on the
	// host's end of the link, so the partition cuts it off etcd too.
	ln, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go forward(ln, env.eps[0])

	sockA := filepath.Join(t.TempDir(), "okv.sock")
	args := append([]string{"netns", "exec", ns, filepath.Join(binDir, "orbitkv-manager"),
		"--bootstrap-socket", sockA, "--http-addr", "", "--channel-transport", *channelTransport},
		env.nodeArgs(t, "a", nsIP, []string{ln.Addr().String()})...)
	a := startSpec(t, launch.ProcessSpec{Path: "/usr/sbin/ip", Args: args})
	a.waitOutput(t, launch.ReadyLine, 20*time.Second)
	b := env.start(t, "orbitkv-manager", "b")
	nsp := namespace(t, "cluster-partition")
	ea, eb := newEngine(t, sockA, "a"), newEngine(t, b.sock, "b")
	tags, pages := tagRange(1, 8)
	ea.publish(t, nsp, tags, pages)
	b.waitMetric(t, "orbitkv_catalog_indexed_entries", 10*time.Second, "b sees the blocks of the node behind the link", func(v float64) bool { return v >= 8 })
	// Across the link the path works: the first four come from a.
	l, took := queryUntilAnswered(t, eb, nsp, chain(tags[:4]), 5*time.Second)
	if l.Hits != 4 {
		t.Fatalf("fetch across the link: %d hits after %v, want 4", l.Hits, took)
	}
	eb.c.Release(l.ID)
	used := b.metric(t, "orbitkv_ram_used_bytes")

	if _, err := ipCmd("-n", ns, "link", "set", nsIf, "down"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		// One fetch may start before b learns that a is gone, and a second
		// once it was refused: two deadlines at most.
		l, took := queryUntilAnswered(t, eb, nsp, chain(tags), 2*clusterFetchTimeout+3*time.Second)
		t.Logf("query %d with the link down: %d hits after %v (%v fetches, %v failed)", i+1, l.Hits, took,
			b.metric(t, "orbitkv_peer_fetches_total"), b.metric(t, "orbitkv_peer_fetch_failures_total"))
		if l.Hits != 4 {
			t.Fatalf("query with the link down: %d hits, want the 4 replicas and a miss past them", l.Hits)
		}
		eb.c.Release(l.ID)
	}
	for _, m := range []string{"orbitkv_operations_in_progress", "orbitkv_block_pins", "orbitkv_leases"} {
		if v := b.metric(t, m); v != 0 {
			t.Errorf("%s is %v after the partition, want 0", m, v)
		}
	}
	if v := b.metric(t, "orbitkv_ram_used_bytes"); v != used {
		t.Errorf("orbitkv_ram_used_bytes %v after the failed fetches, want %v (the 4 replicas): frames leaked", v, used)
	}
	a.Signal(syscall.SIGKILL)
}
