package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

// startCacheManager starts a Manager with a RAM tier of capacity.
func startCacheManager(t *testing.T, capacity string) (*proc, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--ram-capacity", capacity, "--hugepages", "off")
	return m, sock
}

func connectClient(t *testing.T, sock, name string) *client.Client {
	t.Helper()
	c, err := client.Connect(client.Options{SocketPath: sock, InstanceID: name})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(c.Close)
	return c
}

const (
	itLayers    = 4
	itPageBytes = 16 << 10
	itPages     = 16
)

type engine struct {
	c   *client.Client
	buf *client.Buffer
	id  uint32
}

func newEngine(t *testing.T, sock, name string) *engine {
	t.Helper()
	c := connectClient(t, sock, name)
	buf, err := client.AllocBuffer(itLayers, itPageBytes, itPages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free) // after c.Close (cleanups run last-in first-out)
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		t.Fatal(err)
	}
	return &engine{c: c, buf: buf, id: id}
}

func namespace(t *testing.T, model string) client.Namespace {
	t.Helper()
	ns, err := client.Fingerprint(client.NamespaceSpec{ModelID: model, Dtype: "bfloat16", BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func bh(i uint64) client.BlockHash {
	var h client.BlockHash
	binary.LittleEndian.PutUint64(h[:], i)
	h[15] = 0xb7
	return h
}

func (e *engine) fill(page uint32, tag uint64) {
	for l := uint32(0); l < itLayers; l++ {
		p := e.buf.Page(l, uint64(page))
		for w := 0; w < len(p)/8; w++ {
			binary.LittleEndian.PutUint64(p[8*w:], tag*1000003+uint64(l)<<40+uint64(w))
		}
	}
}

func (e *engine) check(t *testing.T, page uint32, tag uint64) {
	t.Helper()
	for l := uint32(0); l < itLayers; l++ {
		p := e.buf.Page(l, uint64(page))
		for w := 0; w < len(p)/8; w++ {
			if got, want := binary.LittleEndian.Uint64(p[8*w:]), tag*1000003+uint64(l)<<40+uint64(w); got != want {
				t.Fatalf("page %d layer %d word %d: %#x, want %#x (block %d)", page, l, w, got, want, tag)
			}
		}
	}
}

func (e *engine) publish(t *testing.T, ns client.Namespace, tags []uint64, pages []uint32) client.PublishResult {
	t.Helper()
	hashes := make([]client.BlockHash, len(tags))
	for i, tag := range tags {
		e.fill(pages[i], tag)
		hashes[i] = bh(tag)
	}
	r, err := e.c.Publish(ns, e.id, hashes, pages)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return r
}

func (e *engine) restore(t *testing.T, lease uint64, entries []client.RestoreEntry) {
	t.Helper()
	op, err := e.c.Restore(lease, e.id, entries)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := e.c.RestoreWait(op, 10*time.Second); err != nil {
		t.Fatalf("restore wait: %v", err)
	}
}

func TestPublishThenRestoreRoundTripsBytesAcrossSessions(t *testing.T) {
	_, sock := startCacheManager(t, "64MiB")
	nsA, nsB := namespace(t, "model-a"), namespace(t, "model-b")
	a := newEngine(t, sock, "engine-a")
	tags := []uint64{1, 2, 3, 4, 5, 6}
	if r := a.publish(t, nsA, tags, []uint32{0, 1, 2, 3, 4, 5}); r.Stored != 6 || r.Present != 0 {
		t.Fatalf("publish stored %d present %d", r.Stored, r.Present)
	}
	b := newEngine(t, sock, "engine-b")
	chain := []client.BlockHash{bh(1), bh(2), bh(3), bh(4), bh(99), bh(5)}
	l, err := b.c.Query(nsA, chain)
	if err != nil {
		t.Fatal(err)
	}
	if l.Hits != 4 || l.ID == 0 || l.BlockBytes != itLayers*itPageBytes || l.Bytes != 4*itLayers*itPageBytes {
		t.Fatalf("query: %+v, want the 4-block prefix before the gap", l)
	}
	b.restore(t, l.ID, []client.RestoreEntry{{Block: 0, Page: 10}, {Block: 1, Page: 11}, {Block: 2, Page: 12}, {Block: 3, Page: 13}})
	for i := uint32(0); i < 4; i++ {
		b.check(t, 10+i, tags[i])
	}
	if err := b.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	// Another namespace never sees those blocks, even with the same hashes.
	if l, err := b.c.Query(nsB, chain); err != nil || l.Hits != 0 || l.ID != 0 {
		t.Fatalf("namespace B query: %+v %v", l, err)
	}
	// Publishing them under namespace B stores new blocks.
	if r := b.publish(t, nsB, tags[:2], []uint32{0, 1}); r.Stored != 2 {
		t.Fatalf("publish in namespace B stored %d", r.Stored)
	}
	a.c.Close()
	b.c.Close()
	if h := assertIdle(t, sock); h.Blocks != 8 {
		t.Errorf("blocks %d, want 8", h.Blocks)
	}
}

func TestEvictionNeverTouchesALeasedBlock(t *testing.T) {
	// 64 blocks of 64 KiB fit; publish 400 more while one is leased.
	_, sock := startCacheManager(t, "4MiB")
	ns := namespace(t, "evict")
	e := newEngine(t, sock, "evictor")
	e.publish(t, ns, []uint64{7}, []uint32{0})
	l, err := e.c.Query(ns, []client.BlockHash{bh(7)})
	if err != nil || l.Hits != 1 {
		t.Fatalf("query: %+v %v", l, err)
	}
	for i := uint64(0); i < 400; i += 8 {
		tags := []uint64{1000 + i, 1001 + i, 1002 + i, 1003 + i, 1004 + i, 1005 + i, 1006 + i, 1007 + i}
		e.publish(t, ns, tags, []uint32{1, 2, 3, 4, 5, 6, 7, 8})
	}
	e.fill(9, 0) // scribble over the destination first
	e.restore(t, l.ID, []client.RestoreEntry{{Block: 0, Page: 9}})
	e.check(t, 9, 7)
	h, err := e.c.Health() // this session's own lease
	if err != nil {
		t.Fatal(err)
	}
	if m := healthOf(t, sock); m.Evictions < 300 || m.Pins != 1 || m.Leases != 1 || h.Pins != 1 || h.Leases != 1 {
		t.Fatalf("evictions %d pins %d leases %d (session: pins %d leases %d); want ≥ 300 evictions with the one lease pinned",
			m.Evictions, m.Pins, m.Leases, h.Pins, h.Leases)
	}
	e.c.Release(l.ID)
	e.c.Close()
	assertIdle(t, sock)
}

func TestBadCacheRequestsAreRefusedNamingTheField(t *testing.T) {
	_, sock := startCacheManager(t, "16MiB")
	ns := namespace(t, "bad")
	a := newEngine(t, sock, "a")
	b := newEngine(t, sock, "b")
	a.publish(t, ns, []uint64{1, 2}, []uint32{0, 1})
	l, err := a.c.Query(ns, []client.BlockHash{bh(1), bh(2)})
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v", l, err)
	}
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"a restore from another session's lease", func() error {
			_, err := b.c.Restore(l.ID, b.id, []client.RestoreEntry{{Block: 0, Page: 0}})
			return err
		}, "lease_id"},
		{"a release of a lease that was never issued", func() error { return a.c.Release(l.ID + 1000) }, "lease_id"},
		{"a restore of a block outside the lease", func() error {
			_, err := a.c.Restore(l.ID, a.id, []client.RestoreEntry{{Block: 2, Page: 0}})
			return err
		}, "block"},
		{"a restore into a page out of range", func() error {
			_, err := a.c.Restore(l.ID, a.id, []client.RestoreEntry{{Block: 0, Page: itPages}})
			return err
		}, "page"},
		{"a publish from a page out of range", func() error {
			_, err := a.c.Publish(ns, a.id, []client.BlockHash{bh(3)}, []uint32{itPages + 5})
			return err
		}, "page"},
		{"a poll of an unknown restore", func() error { _, err := a.c.RestorePoll(424242); return err }, "op_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != client.CodeInvalid || !strings.Contains(ce.Error(), c.field) {
				t.Fatalf("got %v, want Invalid naming %q", err, c.field)
			}
		})
	}
	// Nothing changed: the lease still restores the right bytes.
	a.restore(t, l.ID, []client.RestoreEntry{{Block: 1, Page: 5}})
	a.check(t, 5, 2)
	a.c.Close()
	b.c.Close()
	if h := assertIdle(t, sock); h.Blocks != 2 {
		t.Errorf("blocks %d, want 2", h.Blocks)
	}
}

// SIGKILL clients in the middle of publish and restore loops of 16 MiB
// copies; afterwards the idle invariant holds and every visible block of
// their ranges has exactly the bytes it was published with.
func TestKilledClientsLeaveNoHalfPublishedBlock(t *testing.T) {
	_, sock := startCacheManager(t, "256MiB")
	tc := filepath.Join(binDir, "testclient")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const count = 1024 // 1 GiB of 1 MiB blocks through a 256 MiB tier: every publish copies
	for round := 0; round < 4; round++ {
		first := fmt.Sprint(round * 1000)
		p := start(t, "testclient", "loop", sock, first, fmt.Sprint(count))
		p.waitOutput(t, "running", 20*time.Second)
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		p.Signal(syscall.SIGKILL)
		p.wait(t, 5*time.Second)
		if strings.Contains(p.Output(), "testclient:") {
			t.Fatalf("round %d: the client failed before it was killed:\n%s", round, p.Output())
		}
	}
	assertIdle(t, sock)
	visible := 0
	for round := 0; round < 4; round++ {
		out, err := exec.Command(tc, "verify", sock, fmt.Sprint(round*1000), fmt.Sprint(count)).CombinedOutput()
		if err != nil {
			t.Fatalf("verify round %d: %v\n%s", round, err, out)
		}
		if !strings.Contains(string(out), "mismatched 0") {
			t.Fatalf("verify round %d:\n%s", round, out)
		}
		t.Logf("round %d: %s", round, strings.TrimSpace(string(out)))
		var v, bad int
		fmt.Sscanf(string(out)[strings.LastIndex(string(out), "visible"):], "visible %d mismatched %d", &v, &bad)
		visible += v
	}
	if visible == 0 {
		t.Fatal("no block of the killed clients was visible: the check verified nothing")
	}
	assertIdle(t, sock)
}

// SIGKILL the Manager while clients publish through a small RAM tier onto
// the SSD tier, start a new one on the same --ssd-dir, and check that the
// demoted blocks are served again with the bytes they were published with.
func TestSSDBlocksSurviveAManagerKill(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	defer os.RemoveAll(dir)
	httpAddr := freeLoopbackAddr(t)
	args := []string{"--hugepages", "off", "--ram-capacity", "16MiB",
		"--ssd-dir", dir, "--ssd-capacity", "512MiB", "--ssd-slot-bytes", "1MiB"}
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, httpAddr, 10*time.Second, args...)
	const count = 256 // 256 MiB of 1 MiB blocks through a 16 MiB RAM tier
	p := start(t, "testclient", "loop", sock, "0", fmt.Sprint(count))
	p.waitOutput(t, "running", 20*time.Second)
	time.Sleep(1500 * time.Millisecond)
	m.Signal(syscall.SIGKILL) // mid-demotion, most likely
	m.wait(t, 5*time.Second)
	p.wait(t, 10*time.Second) // the client sees the Manager die

	m2 := startManagerBin(t, "orbitkv-manager", sock, httpAddr, 10*time.Second, args...)
	if !strings.Contains(m2.Output(), "recovered_blocks=") || strings.Contains(m2.Output(), "recovered_blocks=0 ") {
		t.Fatalf("the restarted Manager recovered no SSD blocks:\n%s", m2.Output())
	}
	out, err := exec.Command(filepath.Join(binDir, "testclient"), "verify", sock, "0", fmt.Sprint(count)).CombinedOutput()
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	var visible, bad int
	fmt.Sscanf(string(out)[strings.LastIndex(string(out), "visible"):], "visible %d mismatched %d", &visible, &bad)
	if bad != 0 || visible <= 16 {
		t.Fatalf("after the restart %d blocks visible (want more than the 16 a RAM tier holds), %d mismatched:\n%s", visible, bad, out)
	}
	t.Logf("after the restart: %s", strings.TrimSpace(string(out)))
	assertIdle(t, sock)
}
