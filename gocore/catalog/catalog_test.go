package catalog

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/internal/etcdtest"
)

// testTTL is the membership lease of the tests: etcd's floor with its
// default election timeout is 1.5s.
const testTTL = 2 * time.Second

// waitFor is how long a test waits for a change to cross etcd to another
// catalog; generous, as the VM running the tests is loaded.
const waitFor = 30 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("CATALOG_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// open opens a catalog of node on endpoints with the tests' short
// intervals; edit changes the Spec first. The test's Cleanup closes it.
func open(t *testing.T, endpoints []string, prefix, node string, epoch uint64, edit func(*Spec)) *Catalog {
	t.Helper()
	s := Spec{
		Endpoints: endpoints, Prefix: prefix, Shards: 8,
		Self:     Member{NodeID: node, PeerAddr: "127.0.0.1:7480", Epoch: epoch, CapacityBytes: 1 << 30},
		LeaseTTL: testTTL, BatchInterval: 20 * time.Millisecond, DialTimeout: time.Second, Logger: testLogger(),
	}
	if edit != nil {
		edit(&s)
	}
	c, err := Open(context.Background(), s)
	if err != nil {
		t.Fatalf("Open %s: %v", node, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every 10ms until it holds or within runs out.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func nodes(ms []Member) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, fmt.Sprintf("%s@%d", m.NodeID, m.Epoch))
	}
	return ids
}

func hasNodes(c *Catalog, want ...string) func() bool {
	return func() bool { return slices.Equal(nodes(c.Members()), want) }
}

func ownedBy(c *Catalog, ns abi.Namespace, h abi.BlockHash, want ...string) func() bool {
	return func() bool { return slices.Equal(nodes(c.Owners(ns, h)), want) }
}

func randomHashes(r *rand.Rand, n int) []abi.BlockHash {
	hs := make([]abi.BlockHash, n)
	for i := range hs {
		binary.LittleEndian.PutUint64(hs[i][:], r.Uint64())
		binary.LittleEndian.PutUint64(hs[i][8:], r.Uint64())
	}
	return hs
}

// TestCatalogOnAThreeMemberEtcd runs the catalog's behaviours against one
// real three-member etcd cluster, each subtest under its own prefix.
func TestCatalogOnAThreeMemberEtcd(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	eps := cluster.Endpoints()
	ns := abi.Namespace{0xaa}

	t.Run("Managers on different etcd members list each other", func(t *testing.T) {
		p := "/t-members/"
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, eps[1:2], p, "b", 1, nil)
		c := open(t, eps[2:3], p, "c", 1, nil)
		for _, x := range []*Catalog{a, b, c} {
			eventually(t, waitFor, x.Self().NodeID+" lists a, b and c", hasNodes(x, "a@1", "b@1", "c@1"))
		}
		if m := b.Members()[0]; m != a.Self() {
			t.Fatalf("b lists a as %+v; want %+v", m, a.Self())
		}
	})

	t.Run("a Manager that dies disappears when its lease expires, one that closes at once", func(t *testing.T) {
		p := "/t-expiry/"
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, eps[1:2], p, "b", 1, nil)
		c := open(t, eps[2:3], p, "c", 1, nil)
		eventually(t, waitFor, "b lists a, b and c", hasNodes(b, "a@1", "b@1", "c@1"))
		eventually(t, waitFor, "c lists a, b and c", hasNodes(c, "a@1", "b@1", "c@1"))
		a.crash()
		died := time.Now()
		eventually(t, testTTL+waitFor, "b drops a", hasNodes(b, "b@1", "c@1"))
		gone := time.Since(died)
		eventually(t, waitFor, "c drops a", hasNodes(c, "b@1", "c@1"))
		// The lease was kept alive every TTL/3, so it outlives the crash
		// by at least 2/3 TTL; a revoke would have removed it at once.
		if gone < testTTL/2 {
			t.Fatalf("a was gone %v after its crash; its lease (TTL %v) should have kept it longer", gone, testTTL)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		closed := time.Now()
		eventually(t, waitFor, "b drops c", hasNodes(b, "b@1"))
		if d := time.Since(closed); d >= testTTL/2 {
			t.Fatalf("c was gone %v after Close; the revoke should remove it before its lease could expire", d)
		}
	})

	t.Run("an advertisement and its withdrawal reach another Manager", func(t *testing.T) {
		p := "/t-advertise/"
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, eps[1:2], p, "b", 1, nil)
		c := open(t, eps[2:3], p, "c", 1, nil)
		hs := randomHashes(rand.New(rand.NewPCG(1, 1)), 100)
		a.Advertise(ns, hs)
		c.Advertise(ns, hs[50:])
		for _, h := range hs[:50] {
			eventually(t, waitFor, "b sees a own the first half", ownedBy(b, ns, h, "a@1"))
		}
		for _, h := range hs[50:] {
			eventually(t, waitFor, "b sees a and c own the second half", func() bool {
				got := nodes(b.Owners(ns, h))
				slices.Sort(got)
				return slices.Equal(got, []string{"a@1", "c@1"})
			})
		}
		if got := b.Owners(abi.Namespace{0xbb}, hs[0]); got != nil {
			t.Fatalf("the hash in another namespace has owners %v", got)
		}
		a.Withdraw(ns, hs[:75])
		for _, h := range hs[:50] {
			eventually(t, waitFor, "b sees nobody own the withdrawn first half", ownedBy(b, ns, h))
		}
		for _, h := range hs[50:75] {
			eventually(t, waitFor, "b sees only c own what a withdrew", ownedBy(b, ns, h, "c@1"))
		}
		for _, h := range hs {
			if got := a.Owners(ns, h); slices.ContainsFunc(got, func(m Member) bool { return m.NodeID == "a" }) {
				t.Fatalf("a lists itself among the owners %v", nodes(got))
			}
		}
		if st := a.Stats(); st.AdvertisedBlocks != 25 || st.OverBudgetBlocks != 0 {
			t.Fatalf("a's stats %+v; want 25 advertised blocks", st)
		}
	})

	t.Run("Owners does not allocate when nobody holds the block", func(t *testing.T) {
		p := "/t-allocs/"
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, eps[1:2], p, "b", 1, nil)
		hs := randomHashes(rand.New(rand.NewPCG(2, 2)), 1000)
		a.Advertise(ns, hs)
		eventually(t, waitFor, "b indexes a's blocks", func() bool { return b.Stats().IndexedEntries == 1000 })
		miss := randomHashes(rand.New(rand.NewPCG(3, 3)), 1)[0]
		if n := testing.AllocsPerRun(1000, func() { b.Owners(ns, miss) }); n != 0 {
			t.Fatalf("Owners of an unowned block allocates %v times", n)
		}
	})

	t.Run("a restarted Manager's older epoch is ignored", func(t *testing.T) {
		p := "/t-epoch/"
		old := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, eps[1:2], p, "b", 1, nil)
		r := rand.New(rand.NewPCG(4, 4))
		oldHashes, newHashes := randomHashes(r, 20), randomHashes(r, 20)
		old.Advertise(ns, oldHashes)
		for _, h := range oldHashes {
			eventually(t, waitFor, "b sees a@1 own its blocks", ownedBy(b, ns, h, "a@1"))
		}
		old.crash() // its records stay until its lease expires
		restarted := open(t, eps[2:3], p, "a", 2, nil)
		restarted.Advertise(ns, newHashes)
		eventually(t, waitFor, "b lists a at epoch 2", hasNodes(b, "a@2", "b@1"))
		for _, h := range oldHashes {
			if got := b.Owners(ns, h); got != nil {
				t.Fatalf("b lists %v for a block of a's epoch 1", nodes(got))
			}
		}
		for _, h := range newHashes {
			eventually(t, waitFor, "b sees a@2 own its blocks", ownedBy(b, ns, h, "a@2"))
		}
		// A late write of the old epoch (a zombie of the first process)
		// lands in etcd and in b's index, and Owners still ignores it.
		cli := cluster.Client()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		late := shardedHashes(r, ns, 1, 8, 3)
		k := inventoryKey(p, "a", 1, 1)
		resp, err := cli.Put(ctx, k, string(encodeShard(&shardValue{shards: 8, shard: 1, epoch: 1, groups: []nsGroup{{ns, late}}})))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, waitFor, "b's index reaches the late write", func() bool { return b.Stats().Revision >= resp.Header.Revision })
		for _, h := range late {
			if got := b.Owners(ns, h); got != nil {
				t.Fatalf("b lists %v for a block of a's late epoch-1 write", nodes(got))
			}
		}
		if _, err := cli.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the byte budget bounds what etcd holds, and what is past it is counted", func(t *testing.T) {
		p := "/t-budget/"
		const budget = 4 << 10
		a := open(t, eps[0:1], p, "a", 1, func(s *Spec) { s.AdvertiseBudgetBytes = budget; s.Shards = 4 })
		b := open(t, eps[1:2], p, "b", 1, nil)
		r := rand.New(rand.NewPCG(5, 5))
		hs := randomHashes(r, 1000)
		a.Advertise(ns, hs)
		st := a.Stats()
		if st.AdvertisedBytes > budget || st.AdvertisedBlocks+st.OverBudgetBlocks != 1000 || st.AdvertisedBlocks == 0 {
			t.Fatalf("stats %+v after advertising 1000 blocks on a %d-byte budget", st, budget)
		}
		// Full: not even one more hash of an existing group fits.
		if budget-st.AdvertisedBytes >= hashBytes {
			t.Fatalf("advertising stopped with %d of %d bytes used", st.AdvertisedBytes, budget)
		}
		cli := cluster.Client()
		held := func() (int, map[abi.BlockHash]bool) {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			resp, err := cli.Get(ctx, p+"i/a/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			n, set := 0, map[abi.BlockHash]bool{}
			for _, kv := range resp.Kvs {
				n += len(kv.Key) + len(kv.Value)
				k, err := decodeKey(p, kv.Key)
				if err != nil {
					t.Fatal(err)
				}
				v, err := decodeShard(k, kv.Value)
				if err != nil {
					t.Fatal(err)
				}
				for _, g := range v.groups {
					for _, h := range g.hashes {
						set[h] = true
					}
				}
			}
			return n, set
		}
		eventually(t, waitFor, "a's shards reach etcd", func() bool { n, _ := held(); return uint64(n) == st.AdvertisedBytes })
		_, set := held()
		if uint64(len(set)) != st.AdvertisedBlocks {
			t.Fatalf("etcd holds %d of a's hashes; a counts %d", len(set), st.AdvertisedBlocks)
		}
		for _, h := range hs {
			if set[h] {
				eventually(t, waitFor, "b sees a own an advertised block", ownedBy(b, ns, h, "a@1"))
			} else if got := b.Owners(ns, h); got != nil {
				t.Fatalf("b lists %v for a block past a's budget", nodes(got))
			}
		}
		// Withdrawing makes room again.
		var withdrawn []abi.BlockHash
		for h := range set {
			if withdrawn = append(withdrawn, h); len(withdrawn) == 50 {
				break
			}
		}
		a.Withdraw(ns, withdrawn)
		more := randomHashes(r, 50)
		a.Advertise(ns, more)
		st2 := a.Stats()
		if st2.AdvertisedBytes > budget || st2.AdvertisedBlocks < st.AdvertisedBlocks-5 || st2.OverBudgetBlocks >= st.OverBudgetBlocks+50 {
			t.Fatalf("after withdrawing 50 and advertising 50 more: %+v (before %+v)", st2, st)
		}
		eventually(t, waitFor, "etcd holds a's new set", func() bool { n, _ := held(); return uint64(n) == st2.AdvertisedBytes })
	})

	t.Run("a watcher cut off without a compaction resumes from its revision", func(t *testing.T) {
		p := "/t-resume/"
		proxy := etcdtest.NewProxy(t, eps[1])
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, []string{proxy.URL()}, p, "b", 1, func(s *Spec) { s.LeaseTTL, s.DialTimeout = 30*time.Second, 5*time.Second })
		r := rand.New(rand.NewPCG(8, 8))
		before, after := randomHashes(r, 20), randomHashes(r, 20)
		a.Advertise(ns, before)
		for _, h := range before {
			eventually(t, waitFor, "b sees a's blocks", ownedBy(b, ns, h, "a@1"))
		}
		rebuilds := b.Stats().Rebuilds
		proxy.Cut()
		a.Withdraw(ns, before[:10])
		a.Advertise(ns, after)
		eventually(t, waitFor, "a's changes reach etcd", func() bool { return a.Stats().PendingShards == 0 })
		time.Sleep(200 * time.Millisecond) // b's stream is down meanwhile
		proxy.Restore()
		for _, h := range after {
			eventually(t, waitFor, "b sees a own the blocks advertised while it was cut off", ownedBy(b, ns, h, "a@1"))
		}
		for _, h := range before[:10] {
			eventually(t, waitFor, "b sees the blocks withdrawn while it was cut off go", ownedBy(b, ns, h))
		}
		if st := b.Stats(); st.Rebuilds != rebuilds || st.Compactions != 0 {
			t.Fatalf("b's stats %+v: it should have resumed its Watch, not rebuilt", st)
		}
	})

	t.Run("a watcher behind a compaction rebuilds its index", func(t *testing.T) {
		p := "/t-compact/"
		proxy := etcdtest.NewProxy(t, eps[1])
		a := open(t, eps[0:1], p, "a", 1, nil)
		b := open(t, []string{proxy.URL()}, p, "b", 1, func(s *Spec) { s.LeaseTTL, s.DialTimeout = 30*time.Second, 5*time.Second })
		r := rand.New(rand.NewPCG(6, 6))
		kept, dropped, added := randomHashes(r, 30), randomHashes(r, 30), randomHashes(r, 30)
		a.Advertise(ns, kept)
		a.Advertise(ns, dropped)
		c := open(t, eps[2:3], p, "c", 1, nil)
		c.Advertise(ns, kept[:1])
		for _, h := range dropped {
			eventually(t, waitFor, "b sees a's blocks", ownedBy(b, ns, h, "a@1"))
		}
		eventually(t, waitFor, "b lists a, b and c", hasNodes(b, "a@1", "b@1", "c@1"))
		rebuilds := b.Stats().Rebuilds
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("b's stats when the test failed: %+v (rebuilds before the cut %d)", b.Stats(), rebuilds)
			}
		})

		proxy.Cut() // b's watch falls behind
		a.Withdraw(ns, dropped)
		a.Advertise(ns, added)
		c.Close()
		eventually(t, waitFor, "a's changes reach etcd", func() bool { return a.Stats().PendingShards == 0 })
		cli := cluster.Client()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		cluster.Compact(ctx, cli)
		proxy.Restore()

		eventually(t, waitFor, "b rebuilds after the compaction", func() bool { return b.Stats().Rebuilds > rebuilds })
		if st := b.Stats(); st.Compactions == 0 {
			t.Fatalf("b rebuilt without seeing a compaction: %+v", st)
		}
		eventually(t, waitFor, "b lists a and b only", hasNodes(b, "a@1", "b@1"))
		for _, h := range kept {
			eventually(t, waitFor, "b sees a own the kept blocks", ownedBy(b, ns, h, "a@1"))
		}
		for _, h := range added {
			eventually(t, waitFor, "b sees a own the added blocks", ownedBy(b, ns, h, "a@1"))
		}
		for _, h := range dropped {
			if got := b.Owners(ns, h); got != nil {
				t.Fatalf("b lists %v for a block withdrawn while it was behind", nodes(got))
			}
		}
		if n := b.Stats().IndexedEntries; n != 60 {
			t.Fatalf("b indexes %d entries; want a's 60 (c's went with its lease)", n)
		}
	})
}

func TestOpenDoesNotWaitForAnUnreachableEtcd(t *testing.T) {
	start := time.Now()
	c := open(t, []string{"127.0.0.1:1"}, "/t-unreachable/", "a", 1, nil)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Open took %v against an endpoint that refuses connections", d)
	}
	c.Advertise(abi.Namespace{1}, []abi.BlockHash{{1}})
	if got := c.Owners(abi.Namespace{1}, abi.BlockHash{1}); got != nil {
		t.Fatalf("Owners = %v", got)
	}
	if st := c.Stats(); st.Registered || st.AdvertisedBlocks != 1 || st.PendingShards != 1 {
		t.Fatalf("stats %+v; want unregistered with one block pending", st)
	}
	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// TestEtcdOutages stops one etcd member, then all: the catalog's calls
// never wait on etcd, and advertisements resume when etcd is back.
func TestEtcdOutages(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	eps := cluster.Endpoints()
	ns := abi.Namespace{0xcc}
	const p = "/t-outage/"
	a := open(t, eps, p, "a", 1, nil)
	b := open(t, eps, p, "b", 1, nil)
	r := rand.New(rand.NewPCG(7, 7))
	h1, h2, h3 := randomHashes(r, 10), randomHashes(r, 10), randomHashes(r, 10)
	a.Advertise(ns, h1)
	for _, h := range h1 {
		eventually(t, waitFor, "b sees a own h1", ownedBy(b, ns, h, "a@1"))
	}

	// One member down (the leader, so that a new one is elected).
	leader := cluster.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	cluster.Stop(leader)
	a.Advertise(ns, h2)
	for _, h := range h2 {
		eventually(t, waitFor, "b sees a own h2 with one etcd member down", ownedBy(b, ns, h, "a@1"))
	}

	c := open(t, eps, p, "c", 1, nil)
	eventually(t, waitFor, "b lists a, b and c", hasNodes(b, "a@1", "b@1", "c@1"))
	// b can list c before c holds its lease: register's Put may commit and
	// still fail at the client (its context, one DialTimeout shared with
	// the Grant, can expire after the write committed, as on a loaded
	// machine), and register then revokes that lease and retries. The
	// Close below expects a lease to revoke, so c must have registered
	// before etcd goes down.
	eventually(t, waitFor, "c holds its membership lease", func() bool { return c.Stats().Registered })

	// All members down, for longer than the lease TTL.
	var rest []int
	for i := range cluster.Members {
		if i != leader {
			rest = append(rest, i)
		}
	}
	cluster.Stop(rest...)
	const bound = 200 * time.Millisecond // in-memory calls; generous for GC and a loaded VM
	var slowest time.Duration
	timed := func(what string, f func()) {
		start := time.Now()
		f()
		if d := time.Since(start); d > bound {
			t.Fatalf("%s took %v with etcd down; want under %v", what, d, bound)
		} else if d > slowest {
			slowest = d
		}
	}
	for end := time.Now().Add(testTTL + time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		timed("Advertise", func() { a.Advertise(ns, h3) })
		timed("Withdraw", func() { a.Withdraw(ns, h1) })
		timed("Owners", func() {
			if got := b.Owners(ns, h2[0]); !slices.Equal(nodes(got), []string{"a@1"}) {
				t.Fatalf("with etcd down b lists %v for h2; want the last known a@1", nodes(got))
			}
		})
		timed("Members", func() { b.Members() })
		timed("Stats", func() { a.Stats() })
	}
	t.Logf("slowest call with etcd down: %v", slowest)
	start := time.Now()
	if err := c.Close(); err == nil || !strings.Contains(err.Error(), "revoking") {
		t.Fatalf("Close with etcd down = %v; want the failed revoke", err)
	}
	if d := time.Since(start); d > c.spec.DialTimeout+5*time.Second { // bounded by DialTimeout; slack for a loaded machine
		t.Fatalf("Close with etcd down took %v; DialTimeout is %v", d, c.spec.DialTimeout)
	}

	all := append([]int{leader}, rest...)
	cluster.StartMembers(all...)
	cluster.WaitReady(all...)
	for _, h := range h3 {
		eventually(t, waitFor, "b sees a own h3, advertised while etcd was down", ownedBy(b, ns, h, "a@1"))
	}
	for _, h := range h1 {
		eventually(t, waitFor, "b sees h1 withdrawn while etcd was down", ownedBy(b, ns, h))
	}
	eventually(t, waitFor, "b lists a and b (c's records went at its lease's expiry)", hasNodes(b, "a@1", "b@1"))
	if st := a.Stats(); st.Registrations < 2 || st.LeasesLost < 1 {
		t.Fatalf("a's stats %+v: its lease should have been lost while etcd was down longer than the TTL, and renewed", st)
	}
	// The records of a's first lease expire with it; the re-written ones
	// stay.
	time.Sleep(testTTL + time.Second)
	for _, h := range append(h2, h3...) {
		if got := b.Owners(ns, h); !slices.Equal(nodes(got), []string{"a@1"}) {
			t.Fatalf("after a's old lease expired b lists %v; want a@1", nodes(got))
		}
	}
}

func TestCatalogOverTLS(t *testing.T) {
	certs := etcdtest.NewTLS(t)
	cluster := etcdtest.StartWith(t, 1, etcdtest.Options{TLS: certs})
	eps := cluster.Endpoints()
	ns := abi.Namespace{0xdd}
	const p = "/t-tls/"
	withTLS := func(s *Spec) { s.TLS = certs.Client }
	a := open(t, eps, p, "a", 1, withTLS)
	b := open(t, eps, p, "b", 1, withTLS)
	hs := randomHashes(rand.New(rand.NewPCG(10, 10)), 10)
	a.Advertise(ns, hs)
	for _, h := range hs {
		eventually(t, waitFor, "b sees a's blocks over TLS", ownedBy(b, ns, h, "a@1"))
	}
	t.Run("a Manager without the client certificate is refused and never registers", func(t *testing.T) {
		noCert := certs.Client.Clone()
		noCert.Certificates = nil
		c := open(t, eps, p, "c", 1, func(s *Spec) { s.TLS = noCert })
		eventually(t, waitFor, "c's registration fails", func() bool { return c.Stats().RegisterErrors >= 2 })
		if st := c.Stats(); st.Registered || st.Registrations != 0 {
			t.Fatalf("c registered without a client certificate: %+v", st)
		}
		if got := nodes(b.Members()); !slices.Equal(got, []string{"a@1", "b@1"}) {
			t.Fatalf("b lists %v", got)
		}
	})
}

// TestFlushSplitsTransactionsEtcdRefuses runs etcd with request and
// transaction limits far below the defaults the flusher sizes its
// transactions for: refused transactions are split until they fit.
func TestFlushSplitsTransactionsEtcdRefuses(t *testing.T) {
	cluster := etcdtest.StartWith(t, 1, etcdtest.Options{Config: func(c *embed.Config) {
		c.MaxTxnOps = 2
		c.MaxRequestBytes = 16 << 10
	}})
	eps := cluster.Endpoints()
	ns := abi.Namespace{0xee}
	const p = "/t-split/"
	a := open(t, eps, p, "a", 1, func(s *Spec) { s.AdvertiseBudgetBytes = 1 << 20; s.BatchInterval = 200 * time.Millisecond })
	b := open(t, eps, p, "b", 1, nil)
	hs := randomHashes(rand.New(rand.NewPCG(11, 11)), 4000) // 8 shards of about 8 KiB
	a.Advertise(ns, hs)
	eventually(t, waitFor, "b indexes all of a's blocks", func() bool { return b.Stats().IndexedEntries == 4000 })
	// a counts a transaction once etcd answered it, which can be after b
	// saw its writes.
	eventually(t, waitFor, "a has no shard pending and counts at least 4 transactions of 2", func() bool {
		st := a.Stats()
		return st.PendingShards == 0 && st.Flushes >= 4
	})
	if st := a.Stats(); st.FlushErrors != 0 {
		t.Fatalf("a's stats %+v: every shard should be written, in at least 4 transactions of 2 and none failed", st)
	}
}

// TestTheFirstAdvertisementAfterAnIdleSpellIsWrittenAtOnce: with a batch
// interval far longer than the test, the first advertisement reaches a
// peer at once, and the ones that follow it within the interval wait for
// the next batch.
func TestTheFirstAdvertisementAfterAnIdleSpellIsWrittenAtOnce(t *testing.T) {
	eps := etcdtest.Start(t, 1).Endpoints()
	const p = "/t-idle/"
	const interval = time.Minute
	a := open(t, eps, p, "a", 1, func(s *Spec) { s.BatchInterval = interval })
	b := open(t, eps, p, "b", 1, nil)
	seen := hasNodes(b, "a@1", "b@1")
	eventually(t, waitFor, "a registers and b sees it", func() bool { return a.Stats().Registered && seen() })
	ns := abi.Namespace{0x1d}
	hs := randomHashes(rand.New(rand.NewPCG(5, 5)), 2)
	t.Run("an advertisement after an idle spell reaches the peer without waiting for the interval", func(t *testing.T) {
		a.Advertise(ns, hs[:1]) // a holds its lease: the wake-up writes at once
		took := eventually(t, 20*time.Second, "b lists a for the first block", func() bool { return len(b.Owners(ns, hs[0])) == 1 })
		t.Logf("seen by the peer after %v (batch interval %v)", took, interval)
		// a counts the flush once etcd answered it, which can be after b saw it.
		eventually(t, waitFor, "a counts that flush", func() bool { st := a.Stats(); return st.Flushes >= 1 && st.PendingShards == 0 })
	})
	t.Run("an advertisement within the interval of that flush waits for the next batch", func(t *testing.T) {
		flushes := a.Stats().Flushes
		a.Advertise(ns, hs[1:])
		time.Sleep(300 * time.Millisecond)
		if st := a.Stats(); st.Flushes != flushes || st.PendingShards == 0 || len(b.Owners(ns, hs[1])) != 0 {
			t.Fatalf("a's stats %+v (flushes before %d), b's owners %v: the second advertisement should wait for the batch", st, flushes, b.Owners(ns, hs[1]))
		}
	})
}

// TestAnAdvertisementMadeBeforeRegistrationIsWrittenOnceRegistered: a
// Manager that advertises while etcd is unreachable (no lease yet) has
// those blocks written as soon as it registers, not a batch interval
// later (the flusher's wake-up came while there was no lease to write
// under).
func TestAnAdvertisementMadeBeforeRegistrationIsWrittenOnceRegistered(t *testing.T) {
	eps := etcdtest.Start(t, 1).Endpoints()
	const p = "/t-unregistered/"
	const interval = time.Minute
	proxy := etcdtest.NewProxy(t, eps[0])
	proxy.Cut()
	a := open(t, []string{proxy.URL()}, p, "a", 1, func(s *Spec) { s.BatchInterval = interval })
	b := open(t, eps, p, "b", 1, nil)
	ns := abi.Namespace{0x2e}
	hs := randomHashes(rand.New(rand.NewPCG(12, 12)), 1)
	a.Advertise(ns, hs)
	eventually(t, waitFor, "a's registration fails while etcd is cut off", func() bool { return a.Stats().RegisterErrors >= 1 })
	if st := a.Stats(); st.Registered || st.PendingShards == 0 {
		t.Fatalf("a's stats %+v: a should be unregistered with its advertisement pending", st)
	}
	proxy.Restore()
	took := eventually(t, waitFor, "b lists a for the block advertised before a registered", func() bool { return len(b.Owners(ns, hs[0])) == 1 })
	t.Logf("seen by the peer %v after etcd came back (batch interval %v)", took, interval)
}
