package main

// The soak mode of the load soak (test/integration/loadsoak_test.go):
//
//	testclient soak SOCKET SESSIONS NAME   open SESSIONS separate sessions (one okv_client
//	                                       each, on its own goroutine) and run mixed
//	                                       operations on all of them until SIGTERM or SIGKILL
//
// Each session loops over ping, publish, a query with a ticket, a restore
// of the leased prefix with a check of every byte, and release, on hashes
// of one key space shared by every session of every process (so sessions
// restore what others published, and blocks get evicted). Block content is
// a function of the hash alone (soakWord), so any session can check any
// block. The process prints "soak ready" once every session is connected,
// then a cumulative "soak stats k=v ..." line every 250 ms and a last one
// marked "final" after SIGTERM, when every session has released its lease,
// closed its client and freed its buffer. An unexpected error ends the
// process with "testclient: ..." and exit status 1; a byte mismatch is
// counted (mismatch=N) and printed, and also ends it with status 1 after
// the final stats. Unadmitted answers (operation bounds full) are counted
// and retried.
//
// main.go's switch owns the other modes; this mode takes over in init,
// before main parses its arguments, so that file stays untouched.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

const (
	soakLayers    = 2
	soakPageBytes = 8 << 10 // 16 KiB blocks: one RAM-tier chunk each
	soakPages     = 8       // the longest chain one operation moves
	soakKeys      = 8192    // hashes in the shared key space: 128 MiB of blocks
	soakModel     = "integration-soak"
)

func init() {
	if len(os.Args) >= 2 && os.Args[1] == "soak" {
		os.Exit(soakMain(os.Args[2:]))
	}
}

// soakCounters are one process's operation counts, summed over its sessions.
type soakCounters struct {
	ping, publish, publishedBlocks, query, hits, restore, restoredBlocks, release, unadmitted, mismatch atomic.Uint64
}

func (c *soakCounters) line(final bool) string {
	s := fmt.Sprintf("soak stats ping=%d publish=%d published_blocks=%d query=%d hits=%d restore=%d restored_blocks=%d release=%d unadmitted=%d mismatch=%d",
		c.ping.Load(), c.publish.Load(), c.publishedBlocks.Load(), c.query.Load(), c.hits.Load(), c.restore.Load(),
		c.restoredBlocks.Load(), c.release.Load(), c.unadmitted.Load(), c.mismatch.Load())
	if final {
		s += " final"
	}
	return s
}

var soakOut sync.Mutex // one line at a time on stdout

func soakPrintln(s string) {
	soakOut.Lock()
	defer soakOut.Unlock()
	fmt.Println(s)
}

func soakMain(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testclient soak SOCKET SESSIONS NAME")
		return 2
	}
	sock, name := args[0], args[2]
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 || n > 1024 {
		fmt.Fprintln(os.Stderr, "SESSIONS must be an integer in 1..1024")
		return 2
	}
	ns, err := client.Fingerprint(client.NamespaceSpec{ModelID: soakModel, BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1})
	if err != nil {
		fail("fingerprint", err)
	}
	var stop atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; stop.Store(true) }()

	sessions := make([]*soakSession, n)
	for i := range sessions {
		s, err := newSoakSession(sock, fmt.Sprintf("soak-%s-%d", name, i), ns)
		if err != nil {
			fail(fmt.Sprintf("session %d", i), err)
		}
		sessions[i] = s
	}
	soakPrintln(fmt.Sprintf("soak ready sessions=%d", n))

	var cnt soakCounters
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(&cnt, &stop, uint64(i))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			soakPrintln(cnt.line(false))
		case <-done:
			running = false
		}
	}
	for _, s := range sessions {
		s.close()
	}
	soakPrintln(cnt.line(true))
	if cnt.mismatch.Load() > 0 {
		return 1
	}
	return 0
}

// soakSession is one session: its own client, buffer and registration.
type soakSession struct {
	c   *client.Client
	buf *client.Buffer
	id  uint32
	ns  client.Namespace
}

func newSoakSession(sock, instance string, ns client.Namespace) (*soakSession, error) {
	c, err := client.Connect(client.Options{SocketPath: sock, InstanceID: instance, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	buf, err := client.AllocBuffer(soakLayers, soakPageBytes, soakPages)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("alloc: %w", err)
	}
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		c.Close()
		buf.Free()
		return nil, fmt.Errorf("register: %w", err)
	}
	return &soakSession{c: c, buf: buf, id: id, ns: ns}, nil
}

func (s *soakSession) close() {
	s.c.Close()
	s.buf.Free()
}

func soakHash(h uint64) client.BlockHash {
	var b client.BlockHash
	binary.LittleEndian.PutUint64(b[:], h)
	binary.LittleEndian.PutUint64(b[8:], 0x6b616f73676e6f6c)
	return b
}

func soakWord(h uint64, layer, w int) uint64 {
	z := h*0x9e3779b97f4a7c15 + uint64(layer)<<56 + uint64(w) + 0x5eed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	return z ^ z>>27
}

func (s *soakSession) fill(page int, h uint64) {
	for l := 0; l < soakLayers; l++ {
		p := s.buf.Page(uint32(l), uint64(page))
		for w := 0; w < len(p)/8; w++ {
			binary.LittleEndian.PutUint64(p[8*w:], soakWord(h, l, w))
		}
	}
}

func (s *soakSession) mismatches(page int, h uint64) int {
	bad := 0
	for l := 0; l < soakLayers; l++ {
		p := s.buf.Page(uint32(l), uint64(page))
		for w := 0; w < len(p)/8; w++ {
			if binary.LittleEndian.Uint64(p[8*w:]) != soakWord(h, l, w) {
				bad++
			}
		}
	}
	return bad
}

func unadmitted(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == client.CodeUnadmitted
}

// run loops until stop: each round pings, publishes a chain of 1..8
// blocks, then queries a chain that starts at a random key (often one
// another session published) with a ticket and restores, checks and
// releases what it leased.
func (s *soakSession) run(cnt *soakCounters, stop *atomic.Bool, seed uint64) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), seed))
	pages := make([]uint32, soakPages)
	for i := range pages {
		pages[i] = uint32(i)
	}
	for round := uint64(0); !stop.Load(); round++ {
		if _, err := s.c.Ping(round); err != nil {
			fail("ping", err)
		}
		cnt.ping.Add(1)

		n := 1 + rng.IntN(soakPages)
		base := rng.Uint64N(soakKeys - uint64(n))
		hashes := make([]client.BlockHash, n)
		for i := range hashes {
			hashes[i] = soakHash(base + uint64(i))
			s.fill(i, base+uint64(i))
		}
		switch r, err := s.c.Publish(s.ns, s.id, hashes, pages[:n]); {
		case unadmitted(err):
			cnt.unadmitted.Add(1)
		case err != nil:
			fail("publish", err)
		default:
			cnt.publish.Add(1)
			cnt.publishedBlocks.Add(uint64(r.Stored))
		}

		// Query a chain near the one just published, or anywhere.
		if rng.IntN(2) == 0 {
			base = rng.Uint64N(soakKeys - soakPages)
		}
		n = 1 + rng.IntN(soakPages)
		s.queryRestore(cnt, rng, base, n)
	}
}

// queryRestore leases hashes base..base+n with a ticket, restores the
// leased prefix into shuffled pages (cleared first), checks every byte and
// releases the lease.
func (s *soakSession) queryRestore(cnt *soakCounters, rng *rand.Rand, base uint64, n int) {
	hashes := make([]client.BlockHash, n)
	for i := range hashes {
		hashes[i] = soakHash(base + uint64(i))
	}
	bh, err := client.NewBlockHashes(hashes)
	if err != nil {
		fail("block hashes", err)
	}
	defer bh.Free()
	t, ans, err := s.c.Submit(client.QuerySpec{NS: s.ns, Hashes: bh, RequestID: base})
	deadline := time.Now().Add(30 * time.Second)
	for err == nil && t.Live() { // Loading: the lease budget is full for now
		if time.Now().After(deadline) {
			fail("ticket", fmt.Errorf("still pending after 30 s"))
		}
		time.Sleep(time.Millisecond)
		ans, err = s.c.Poll(t)
	}
	if t != nil {
		s.c.FreeTicket(t)
	}
	switch {
	case unadmitted(err):
		cnt.unadmitted.Add(1)
		return
	case err != nil:
		fail("ticket", err)
	}
	cnt.query.Add(1)
	if ans.Status != client.StatusOK || ans.Hits == 0 || ans.LeaseID == 0 {
		return // a miss: nothing leased
	}
	cnt.hits.Add(uint64(ans.Hits))
	perm := rng.Perm(soakPages)
	entries := make([]client.RestoreEntry, ans.Hits)
	for i := range entries {
		entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(perm[i])}
		for l := 0; l < soakLayers; l++ {
			clear(s.buf.Page(uint32(l), uint64(perm[i])))
		}
	}
	op, err := s.c.Restore(ans.LeaseID, s.id, entries)
	switch {
	case unadmitted(err):
		cnt.unadmitted.Add(1)
	case err != nil:
		fail("restore", err)
	default:
		if err := s.c.RestoreWait(op, 30*time.Second); err != nil {
			fail("restore wait", err)
		}
		cnt.restore.Add(1)
		cnt.restoredBlocks.Add(uint64(ans.Hits))
		for i := range entries {
			if bad := s.mismatches(perm[i], base+uint64(i)); bad > 0 {
				cnt.mismatch.Add(1)
				soakPrintln(fmt.Sprintf("MISMATCH block %d (page %d): %d words", base+uint64(i), perm[i], bad))
			}
		}
	}
	if err := s.c.Release(ans.LeaseID); err != nil {
		fail("release", err)
	}
	cnt.release.Add(1)
}
