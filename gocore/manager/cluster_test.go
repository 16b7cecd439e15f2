package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/internal/etcdtest"
)

const (
	cLayers    = 2
	cPageBytes = 64 << 10
	cPages     = 64
	cBlock     = cLayers * cPageBytes
)

// clusterCerts writes a cluster CA and node certificates for names (all
// dialled at 127.0.0.1) into a temporary directory and loads them.
func clusterCerts(t testing.TB, names ...string) map[string][2]*tls.Config {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey, err := peer.NewCA("orbitkv test CA", 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caCert, 0o600); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]*tls.Config{}
	for _, n := range names {
		cert, key, err := peer.NewNodeCert(caCert, caKey, peer.NodeCertSpec{Name: n, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 24 * time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cf, kf := filepath.Join(dir, n+".pem"), filepath.Join(dir, n+".key")
		if err := os.WriteFile(cf, cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kf, key, 0o600); err != nil {
			t.Fatal(err)
		}
		srv, cli, err := peer.LoadTLS(caFile, cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = [2]*tls.Config{srv, cli}
	}
	return out
}

// clusterNode is one Manager of a test cluster and a client of it.
type clusterNode struct {
	m   *Manager
	c   *client.Client
	buf *client.Buffer
	bid uint32
}

// startNode serves a Manager named name at epoch in the cluster of etcd
// endpoints, with a 32 MiB RAM tier, and connects a client with one
// registered buffer.
func startNode(t testing.TB, name string, epoch uint64, endpoints []string, certs map[string][2]*tls.Config) *clusterNode {
	t.Helper()
	return startNodeWith(t, name, epoch, endpoints, certs, nil)
}

// startNodeWith is startNode with edit applied to the Spec first.
func startNodeWith(t testing.TB, name string, epoch uint64, endpoints []string, certs map[string][2]*tls.Config, edit func(*Spec)) *clusterNode {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CLUSTER_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
	}
	s := Spec{Epoch: epoch, Logger: log,
		Session: session.Spec{MaxSessions: 4, DescCapacity: 64 << 10},
		Cache: &cache.Spec{CopyWorkers: 1, Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 32 << 20, ChunkBytes: 64 << 10},
			PeerTimeout: 2 * time.Second}},
		Bootstrap: bootstrap.Config{Path: filepath.Join(t.TempDir(), "okv.sock")},
		Cluster: &cluster.Spec{NodeID: name, PeerListen: "127.0.0.1:0", TransferListen: "127.0.0.1:0",
			Catalog:   catalog.Spec{Endpoints: endpoints, BatchInterval: 20 * time.Millisecond, LeaseTTL: 2 * time.Second},
			ServerTLS: certs[name][0], ClientTLS: certs[name][1]},
	}
	if edit != nil {
		edit(&s)
	}
	m := serving(t, s)
	c, err := client.Connect(client.Options{SocketPath: s.Bootstrap.Path, InstanceID: name + "-client"})
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo: no liborbitkv client")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	buf, err := client.AllocBuffer(cLayers, cPageBytes, cPages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	bid, err := c.RegisterBuffer(buf)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterNode{m: m, c: c, buf: buf, bid: bid}
}

func cHash(i int) abi.BlockHash { return abi.BlockHash{byte(i), byte(i >> 8), 0xc1} }

var cNS = abi.Namespace{0xc1, 0x05}

func cFill(n *clusterNode, page int, tag byte) {
	for l := uint32(0); l < cLayers; l++ {
		p := n.buf.Page(l, uint64(page))
		for i := range p {
			p[i] = tag ^ byte(l*13) ^ byte(i*5)
		}
	}
}

func cCheck(t *testing.T, n *clusterNode, page int, tag byte) {
	t.Helper()
	for l := uint32(0); l < cLayers; l++ {
		p := n.buf.Page(l, uint64(page))
		for i := range p {
			if p[i] != tag^byte(l*13)^byte(i*5) {
				t.Fatalf("page %d layer %d byte %d: %#x, want %#x", page, l, i, p[i], tag^byte(l*13)^byte(i*5))
			}
		}
	}
}

// publish publishes blocks first..first+n of the chain from pages 0..n.
func (n *clusterNode) publish(t testing.TB, first, count int) {
	t.Helper()
	hs := make([]abi.BlockHash, count)
	pages := make([]uint32, count)
	for i := range hs {
		hs[i], pages[i] = cHash(first+i), uint32(i)
		cFill(n, i, byte(first+i))
	}
	if _, err := n.c.Publish(cNS, n.bid, hs, pages); err != nil {
		t.Fatal(err)
	}
}

// query asks for the chain 0..count until it is not Loading any more,
// within d; it returns the lease and how long it took.
func (n *clusterNode) query(t *testing.T, count int, d time.Duration) (client.Lease, time.Duration, error) {
	t.Helper()
	hs := make([]abi.BlockHash, count)
	for i := range hs {
		hs[i] = cHash(i)
	}
	start := time.Now()
	for {
		l, err := n.c.Query(cNS, hs)
		var ce *native.ClientError
		if errors.As(err, &ce) && ce.Code == native.CodePending {
			if time.Since(start) > d {
				return l, time.Since(start), fmt.Errorf("still Loading after %v", d)
			}
			time.Sleep(200 * time.Microsecond)
			continue
		}
		return l, time.Since(start), err
	}
}

// waitOwners waits until n's catalog lists an owner of the chain's block i.
func waitOwners(t testing.TB, n *clusterNode, i int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); len(n.m.Catalog().Owners(cNS, cHash(i))) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no owner of block %d advertised after 15 s", i)
		}
	}
}

// framesClean fails unless every used RAM chunk of n belongs to a sealed
// block (no frames of a failed fetch left allocated).
func framesClean(t *testing.T, n *clusterNode) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		st := n.m.Cache.Stats()
		chunks := (uint64(cBlock) + (64<<10 - 1)) / (64 << 10)
		if st.UsedBytes == st.Blocks*chunks*(64<<10) && st.Operations == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("used %d bytes for %d sealed blocks, %d operations: frames leaked", st.UsedBytes, st.Blocks, st.Operations)
		}
	}
}

func etcdEndpoints(t testing.TB) []string {
	t.Helper()
	c := etcdtest.Start(t, 1)
	return []string{c.Members[0].ClientURL.Host}
}

// A block published on node A is restored on node B with A's bytes: B
// answers Loading, fetches the run from A (catalog, peer control,
// transfer engine), seals it as replicas, then leases it.
func TestABlockPublishedOnOneNodeIsRestoredOnAnother(t *testing.T) {
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b")
	a := startNode(t, "a", 11, eps, certs)
	b := startNode(t, "b", 22, eps, certs)
	a.publish(t, 0, 8)
	waitOwners(t, b, 7)
	l, took, err := b.query(t, 8, 5*time.Second)
	if err != nil || l.Hits != 8 {
		t.Fatalf("query on b: %+v, %v after %v; want 8 hits", l, err, took)
	}
	entries := make([]client.RestoreEntry, 8)
	for i := range entries {
		entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(cPages - 8 + i)}
	}
	op, err := b.c.Restore(l.ID, b.bid, entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.c.RestoreWait(op, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		cCheck(t, b, cPages-8+i, byte(i))
	}
	if err := b.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	st := b.m.Cache.Stats()
	if st.Peer.LookupHit != 8 || st.Replicas != 8 {
		t.Fatalf("b: peer hits %d, replicas %d; want 8 and 8", st.Peer.LookupHit, st.Replicas)
	}
	// B does not advertise its replicas: A is their only owner.
	time.Sleep(200 * time.Millisecond)
	for _, o := range a.m.Catalog().Owners(cNS, cHash(0)) {
		t.Fatalf("a sees owner %+v of its own block: b advertised a replica", o)
	}
	// A's transfer pins went at release.
	waitPins(t, a)
}

// waitPins waits until n holds no transfer pins.
func waitPins(t *testing.T, n *clusterNode) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st := n.m.Cache.Stats()
		if st.Transfers == 0 && st.TransferPins == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transfers, %d blocks still pinned after 10 s", st.Transfers, st.TransferPins)
		}
	}
}

// The source dies mid-transfer: the requester answers within its fetch
// deadline (Miss, or Loading then Miss, or the blocks that landed), and
// no frame of the fetch stays allocated.
func TestASourceDyingMidTransferIsAMissWithinTheDeadline(t *testing.T) {
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b")
	a := startNode(t, "a", 11, eps, certs)
	b := startNode(t, "b", 22, eps, certs)
	const n = 48 // 12 MiB
	a.publish(t, 0, n)
	waitOwners(t, b, n-1)
	fetched := make(chan struct{})
	go func() {
		for b.m.Cache.Stats().Peer.Fetches == 0 {
			time.Sleep(20 * time.Microsecond)
		}
		a.m.Close()
		close(fetched)
	}()
	l, took, err := b.query(t, n, 4*time.Second)
	<-fetched
	if err != nil {
		t.Fatalf("query on b after a died: %v after %v", err, took)
	}
	t.Logf("answered %d hits after %v", l.Hits, took)
	if l.Hits > 0 {
		b.c.Release(l.ID)
	}
	framesClean(t, b)
	if err := b.m.Cache.Check(); err != nil {
		t.Fatal(err)
	}
}

// The requester goes away with a transfer open: the source's pins go when
// its connection drops.
func TestARequesterThatGoesAwayReleasesTheSourcesPins(t *testing.T) {
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b")
	a := startNode(t, "a", 11, eps, certs)
	a.publish(t, 0, 4)
	cl, err := peer.Dial(a.m.PeerAddr(), certs["b"][1])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr, err := cl.OpenTransfer(ctx, cNS, []abi.BlockHash{cHash(0), cHash(1), cHash(2), cHash(9)}, 1<<30, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Blocks) != 3 {
		t.Fatalf("the source serves %d blocks, want the 3 resident ones", len(tr.Blocks))
	}
	if st := a.m.Cache.Stats(); st.Transfers != 1 || st.TransferPins != 3 {
		t.Fatalf("a: %d transfers, %d pinned blocks; want 1 and 3", st.Transfers, st.TransferPins)
	}
	cl.Close()
	waitPins(t, a)
}

// fetchAll has b lease and release the chain 0..n a publishes, failing
// unless every block comes back.
func fetchAll(t *testing.T, b *clusterNode, n int) {
	t.Helper()
	l, took, err := b.query(t, n, 5*time.Second)
	if err != nil || l.Hits != uint32(n) {
		t.Fatalf("query on %s: %+v, %v after %v; want %d hits", b.m.spec.Cluster.NodeID, l, err, took, n)
	}
	if err := b.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
}

// With etcd gone, each Manager goes on serving its own blocks (the
// dispatcher never waits for etcd: advertising queues), and once etcd is
// back the advertisements made meanwhile reach the peers.
func TestLocalServingGoesOnWithoutEtcdAndAdvertisingResumes(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	eps := []string{etcd.Members[0].ClientURL.Host}
	certs := clusterCerts(t, "a", "b")
	a := startNode(t, "a", 11, eps, certs)
	b := startNode(t, "b", 22, eps, certs)
	etcd.Stop(0)
	start := time.Now()
	a.publish(t, 0, 4)
	l, _, err := a.query(t, 4, 2*time.Second)
	if err != nil || l.Hits != 4 {
		t.Fatalf("local query on a with etcd down: %+v, %v", l, err)
	}
	a.c.Release(l.ID)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("publishing and querying locally took %v with etcd down", took)
	}
	// b knows no owner yet: a miss at once, never a wait for etcd.
	if l, took, err := b.query(t, 4, 2*time.Second); err != nil || l.Hits != 0 {
		t.Fatalf("query on b with etcd down: %+v, %v after %v; want a miss", l, err, took)
	}
	etcd.StartMembers(0)
	etcd.WaitReady(0)
	waitOwners(t, b, 3)
	fetchAll(t, b, 4)
}

// A restarted Manager has a new epoch and an empty RAM tier: its peers
// drop the advertisements of its old epoch and never ask it for them.
func TestARestartedPeerIsNotAskedForItsOldEpochsBlocks(t *testing.T) {
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b")
	a := startNode(t, "a", 11, eps, certs)
	b := startNode(t, "b", 22, eps, certs)
	a.publish(t, 0, 4)
	waitOwners(t, b, 3)
	a.c.Close()
	a.m.Close()
	a2 := startNode(t, "a", 12, eps, certs)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ms := b.m.Catalog().Members()
		owners := b.m.Catalog().Owners(cNS, cHash(0))
		if len(owners) == 0 && slices.ContainsFunc(ms, func(m catalog.Member) bool { return m.NodeID == "a" && m.Epoch == 12 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a's restart b still lists owners %+v (members %+v)", owners, ms)
		}
	}
	if l, _, err := b.query(t, 4, 3*time.Second); err != nil || l.Hits != 0 {
		t.Fatalf("query on b: %+v, %v; want a miss", l, err)
	}
	if st := b.m.Cache.Stats(); st.Peer.Fetches != 0 {
		t.Fatalf("b fetched %d times from a peer that holds nothing", st.Peer.Fetches)
	}
	// The new epoch's blocks are fetched as before.
	a2.publish(t, 0, 4)
	waitOwners(t, b, 3)
	fetchAll(t, b, 4)
}

// With the eBPF probes loaded, both ends of the transfer engine's data
// connections are measured: the requester's under the source's node id,
// the source's under the requester's host address.
func TestTransferConnectionsAreMeasuredByTheProbes(t *testing.T) {
	if err := ebpf.Check(); err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b")
	probed := func(s *Spec) { s.EBPF, s.HTTPAddr = true, "127.0.0.1:0" }
	a := startNodeWith(t, "a", 11, eps, certs, probed)
	b := startNodeWith(t, "b", 22, eps, certs, probed)
	a.publish(t, 0, 8)
	waitOwners(t, b, 7)
	fetchAll(t, b, 8)
	for _, tc := range []struct {
		name   string
		node   *clusterNode
		metric string
		peer   string
	}{
		{"the requester's receives are counted under the source's node id", b, "orbitkv_ebpf_transfer_receive_seconds", "a"},
		{"the source's sends are counted under the requester's address", a, "orbitkv_ebpf_transfer_send_seconds", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := histogramCount(t, scrape(t, tc.node.m), tc.metric, map[string]string{"peer": tc.peer}); n == 0 {
				t.Errorf("%s{peer=%q}: no samples", tc.metric, tc.peer)
			}
		})
	}
}

// BenchmarkRemoteRestore times the remote restore of the target
// (32 blocks of 64 KiB on loopback): node b queries a chain only node a
// holds (Loading, the fetch, then the lease), restores it into its engine
// buffer and releases it. a holds 192 chains (384 MiB of its 512 MiB); b
// cycles through them, and its 256 MiB keep the replicas of 128 chains
// (replicas are evicted oldest first), so every iteration is a fetch. It
// reports the p50 and p99 of those round trips (rtt-p50-ns, rtt-p99-ns)
// beside ns/op.
func BenchmarkRemoteRestore(b *testing.B) {
	const blocks, size, chains = 32, 64 << 10, 192
	eps := etcdEndpoints(b)
	certs := clusterCerts(b, "a", "b")
	// The dispatchers wait as orbitkv-manager's do by default (adaptive,
	// 50 µs): two spinning dispatchers in one process (the Spec's zero
	// value) take two Ps for good, and on a 2-vCPU machine starve the
	// fetch's own goroutines (gRPC, rails, the CRC32C check).
	poll := func(s *Spec) { s.Channel.PollMode, s.Channel.SpinWindow = channel.PollAdaptive, 50*time.Microsecond }
	na := startNodeWith(b, "a", 11, eps, certs, func(s *Spec) { s.Cache.Tiers.RAM.CapacityBytes = 512 << 20; poll(s) })
	nb := startNodeWith(b, "b", 22, eps, certs, func(s *Spec) { s.Cache.Tiers.RAM.CapacityBytes = 256 << 20; poll(s) })
	bufs := make([]uint32, 2)
	for i, n := range []*clusterNode{na, nb} {
		buf, err := client.AllocBuffer(1, size, blocks)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(buf.Free)
		if bufs[i], err = n.c.RegisterBuffer(buf); err != nil {
			b.Fatal(err)
		}
	}
	pages := make([]uint32, blocks)
	entries := make([]client.RestoreEntry, blocks)
	for i := range pages {
		pages[i], entries[i] = uint32(i), client.RestoreEntry{Block: uint32(i), Page: uint32(i)}
	}
	chain := func(k int) []abi.BlockHash {
		hs := make([]abi.BlockHash, blocks)
		for i := range hs {
			hs[i] = abi.BlockHash{byte(i), byte(k), byte(k >> 8), 0xbe}
		}
		return hs
	}
	for k := range chains {
		if _, err := na.c.Publish(cNS, bufs[0], chain(k), pages); err != nil {
			b.Fatal(err)
		}
	}
	advertised := func() bool {
		for k := range chains {
			for _, h := range chain(k) {
				if len(nb.m.Catalog().Owners(cNS, h)) == 0 {
					return false
				}
			}
		}
		return true
	}
	for deadline := time.Now().Add(15 * time.Second); !advertised(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the chains are not advertised after 15 s")
		}
	}
	var rtts []time.Duration
	b.SetBytes(blocks * size)
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		hs := chain(k % chains)
		start := time.Now()
		var l client.Lease
		for {
			var err error
			l, err = nb.c.Query(cNS, hs)
			var ce *native.ClientError
			if errors.As(err, &ce) && ce.Code == native.CodePending {
				continue
			}
			if err != nil || l.Hits != blocks {
				b.Fatalf("query of chain %d: %+v, %v", k%chains, l, err)
			}
			break
		}
		op, err := nb.c.Restore(l.ID, bufs[1], entries)
		if err == nil {
			err = nb.c.RestoreWait(op, 5*time.Second)
		}
		if err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
		nb.c.Release(l.ID)
	}
	b.StopTimer()
	slices.Sort(rtts)
	b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds()), "rtt-p50-ns")
	b.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds()), "rtt-p99-ns")
	if fetches := nb.m.Cache.Stats().Peer.Fetches; fetches < uint64(b.N) {
		b.Fatalf("%d fetches for %d iterations: some restores were local", fetches, b.N)
	}
}
