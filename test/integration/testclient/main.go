// Command testclient is a cache client for the integration tests: it runs
// publish and restore loops against a Manager so a test can SIGKILL it in
// the middle of a copy, and it verifies every visible block of a hash range.
// Block content is a deterministic function of (hash id, layer, byte), so a
// block that is visible but half-copied shows up as mismatched bytes.
//
//	testclient loop   SOCKET FIRST COUNT   publish FIRST..FIRST+COUNT in batches, then restore them, forever
//	testclient publish SOCKET FIRST COUNT  publish the range in batches once; print "published COUNT"
//	testclient discover SOCKET FIRST COUNT map the namespace's discovery index and print "local N": the
//	                                       leading blocks of the range it lists (no round trip)
//	testclient honest SOCKET FIRST COUNT   publish the range (COUNT = 16), then 50 rounds of: a ticket for it,
//	                                       polled to its answer, restored, checked, released; print
//	                                       "honest queried Q hit H unadmitted U mismatched M"
//	testclient hostile SOCKET FIRST COUNT  publish the range, then take all the Manager lets it: sessions until
//	                                       refused, discovery tables, leases never released, restores never
//	                                       polled; print "hostile sessions S tables T leases L restores R",
//	                                       then "saturated", and hold everything until killed
//	testclient publish1 SOCKET FIRST COUNT publish the range one block per Publish, in order; print
//	                                       "published COUNT"
//	testclient verify SOCKET FIRST COUNT   restore every visible block of the range and check its bytes
//	testclient tickets SOCKET FIRST COUNT  publish the range, lease it with a ticket (wait_for_full_prefix),
//	                                       restore it, check every byte, release; exit 0 when all held,
//	                                       3 when the Manager expired the ticket or restore (Timeout),
//	                                       4 when the Manager died; prints each phase as it starts
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

const (
	layers    = 4
	pageBytes = 256 << 10 // 1 MiB blocks: copies last long enough to be interrupted
	batch     = 16
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: testclient loop|publish|publish1|verify|tickets SOCKET FIRST COUNT")
		os.Exit(2)
	}
	first, err1 := strconv.ParseUint(os.Args[3], 10, 64)
	count, err2 := strconv.ParseUint(os.Args[4], 10, 64)
	if err1 != nil || err2 != nil || count == 0 || count%batch != 0 {
		fmt.Fprintf(os.Stderr, "FIRST and COUNT must be integers, COUNT a positive multiple of %d\n", batch)
		os.Exit(2)
	}
	c, err := client.Connect(client.Options{SocketPath: os.Args[2], InstanceID: "testclient-" + os.Args[1]})
	if err != nil {
		fail("connect", err)
	}
	buf, err := client.AllocBuffer(layers, pageBytes, batch)
	if err != nil {
		fail("alloc", err)
	}
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		fail("register", err)
	}
	ns, err := client.Fingerprint(client.NamespaceSpec{ModelID: "integration-testclient", BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1})
	if err != nil {
		fail("fingerprint", err)
	}
	switch os.Args[1] {
	case "loop":
		loop(c, buf, id, ns, first, count)
	case "tickets":
		tickets(c, buf, id, ns, first, count)
		c.Close()
	case "publish":
		publish(c, buf, id, ns, first, count)
		c.Close()
	case "discover":
		hashes := make([]client.BlockHash, count)
		for i := range hashes {
			hashes[i] = hashOf(first + uint64(i))
		}
		if err := c.DiscoverOpen(ns); err != nil {
			fail("discover open", err)
		}
		n, err := c.DiscoverLocal(ns, hashes)
		if err != nil {
			fail("discover local", err)
		}
		fmt.Printf("local %d\n", n)
		c.Close()
	case "honest":
		honest(c, buf, id, ns, first)
		c.Close()
	case "hostile":
		hostile(c, buf, id, ns, first)
	case "publish1":
		publishEach(c, buf, id, ns, first, count)
		c.Close()
	case "verify":
		bad := verify(c, buf, id, ns, first, count)
		c.Close()
		if bad {
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "testclient: %s: %v\n", what, err)
	os.Exit(1)
}

func hashOf(h uint64) client.BlockHash {
	var b client.BlockHash
	binary.LittleEndian.PutUint64(b[:], h)
	binary.LittleEndian.PutUint64(b[8:], 0x7473657467746e69)
	return b
}

func word(h uint64, layer, w int) uint64 {
	z := h*0x9e3779b97f4a7c15 + uint64(layer)<<56 + uint64(w)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	return z ^ z>>27
}

func fill(buf *client.Buffer, page int, h uint64) {
	for l := 0; l < layers; l++ {
		p := buf.Page(uint32(l), uint64(page))
		for w := 0; w < len(p)/8; w++ {
			binary.LittleEndian.PutUint64(p[8*w:], word(h, l, w))
		}
	}
}

func mismatches(buf *client.Buffer, page int, h uint64) int {
	bad := 0
	for l := 0; l < layers; l++ {
		p := buf.Page(uint32(l), uint64(page))
		for w := 0; w < len(p)/8; w++ {
			if binary.LittleEndian.Uint64(p[8*w:]) != word(h, l, w) {
				bad++
			}
		}
	}
	return bad
}

// loop publishes the range in batches, then restores it batch by batch,
// until killed. It prints "running" once the first publish landed.
func loop(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first, count uint64) {
	pages := make([]uint32, batch)
	for i := range pages {
		pages[i] = uint32(i)
	}
	announced := false
	for round := uint64(0); ; round++ {
		base := first + (round*batch)%count
		hashes := make([]client.BlockHash, batch)
		for i := range hashes {
			hashes[i] = hashOf(base + uint64(i))
			fill(buf, i, base+uint64(i))
		}
		if _, err := c.Publish(ns, id, hashes, pages); err != nil {
			fail("publish", err)
		}
		if !announced {
			fmt.Println("running")
			announced = true
		}
		l, err := c.Query(ns, hashes)
		if err != nil {
			fail("query", err)
		}
		if l.Hits == 0 {
			continue
		}
		entries := make([]client.RestoreEntry, l.Hits)
		for i := range entries {
			entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(i)}
		}
		op, err := c.Restore(l.ID, id, entries)
		if err != nil {
			fail("restore", err)
		}
		if err := c.RestoreWait(op, 10*time.Second); err != nil {
			fail("restore wait", err)
		}
		if err := c.Release(l.ID); err != nil {
			fail("release", err)
		}
	}
}

// publish publishes the range in batches, once.
func publish(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first, count uint64) {
	pages := make([]uint32, batch)
	for i := range pages {
		pages[i] = uint32(i)
	}
	for base := first; base < first+count; base += batch {
		hashes := make([]client.BlockHash, batch)
		for i := range hashes {
			hashes[i] = hashOf(base + uint64(i))
			fill(buf, i, base+uint64(i))
		}
		if _, err := c.Publish(ns, id, hashes, pages); err != nil {
			fail("publish", err)
		}
	}
	fmt.Printf("published %d\n", count)
}

// rangeOf publishes blocks first..first+batch from buf's pages and
// returns their hashes.
func rangeOf(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first uint64) (*client.BlockHashes, []client.BlockHash) {
	hashes := make([]client.BlockHash, batch)
	pages := make([]uint32, batch)
	for i := range hashes {
		pages[i], hashes[i] = uint32(i), hashOf(first+uint64(i))
		fill(buf, i, first+uint64(i))
	}
	if _, err := c.Publish(ns, id, hashes, pages); err != nil {
		fail("publish", err)
	}
	bh, err := client.NewBlockHashes(hashes)
	if err != nil {
		fail("block hashes", err)
	}
	return bh, hashes
}

// isCode reports whether err is a client error of code.
func isCode(err error, code int) bool {
	var ce *client.Error
	return errors.As(err, &ce) && int(ce.Code) == code
}

// honest is a well-behaved tenant: one session, one ticket at a time,
// every lease released.
func honest(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first uint64) {
	bh, _ := rangeOf(c, buf, id, ns, first)
	defer bh.Free()
	var queried, hit, unadmitted, bad int
	for round := range 50 {
		queried += batch
		t, ans, err := c.Submit(client.QuerySpec{NS: ns, Hashes: bh, RequestID: uint64(round)})
		for err == nil && t.Live() {
			time.Sleep(100 * time.Microsecond)
			ans, err = c.Poll(t)
		}
		if t != nil {
			c.FreeTicket(t)
		}
		if isCode(err, int(client.CodeUnadmitted)) {
			unadmitted++
			continue
		}
		if err != nil {
			fail("ticket", err)
		}
		hit += int(ans.Hits)
		if ans.Hits == 0 {
			continue
		}
		for i := range batch {
			clear(buf.Page(0, uint64(i)))
		}
		entries := make([]client.RestoreEntry, ans.Hits)
		for i := range entries {
			entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(i)}
		}
		op, err := c.Restore(ans.LeaseID, id, entries)
		if err == nil {
			err = c.RestoreWait(op, 30*time.Second)
		}
		if err != nil {
			fail("restore", err)
		}
		for i := range entries {
			if mismatches(buf, i, first+uint64(i)) > 0 {
				bad++
			}
		}
		if err := c.Release(ans.LeaseID); err != nil {
			fail("release", err)
		}
	}
	fmt.Printf("honest queried %d hit %d unadmitted %d mismatched %d\n", queried, hit, unadmitted, bad)
}

// hostile takes every resource the Manager grants it and holds it.
func hostile(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first uint64) {
	bh, hashes := rangeOf(c, buf, id, ns, first)
	defer bh.Free()
	sessions := []*client.Client{c}
	for {
		more, err := client.Connect(client.Options{SocketPath: os.Args[2], InstanceID: fmt.Sprintf("hostile-%d", len(sessions))})
		if err != nil {
			fmt.Printf("session %d refused: %v\n", len(sessions)+1, err)
			break
		}
		sessions = append(sessions, more)
	}
	tables, leases, restores := 0, 0, 0
	var held []client.Lease
	for i, s := range sessions {
		for k := 0; ; k++ {
			other, err := client.Fingerprint(client.NamespaceSpec{ModelID: fmt.Sprintf("hostile-%d-%d", i, k), BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1})
			if err != nil {
				fail("fingerprint", err)
			}
			if err := s.DiscoverOpen(other); err != nil {
				break
			}
			tables++
		}
	}
	for _, s := range sessions {
		for {
			l, err := s.Query(ns, hashes)
			if err != nil || l.Hits == 0 {
				break
			}
			if s == c {
				held = append(held, l)
			}
			leases++ // never released
		}
	}
	if len(held) > 0 {
		// Restores whose results are never polled: each holds an
		// operation permit until the Manager expires it.
		for try, page := 0, 0; try < 100000; try, page = try+1, (page+1)%batch {
			_, err := c.Restore(held[0].ID, id, []client.RestoreEntry{{Block: uint32(page), Page: uint32(page)}})
			if isCode(err, int(client.CodeUnadmitted)) {
				break
			}
			if err != nil { // a destination page still busy with an earlier copy
				time.Sleep(time.Millisecond)
				continue
			}
			restores++
		}
	}
	fmt.Printf("hostile sessions %d tables %d leases %d restores %d\n", len(sessions), tables, leases, restores)
	fmt.Println("saturated")
	select {}
}

// publishEach publishes the range one block per Publish, in order.
func publishEach(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first, count uint64) {
	for h := first; h < first+count; h++ {
		fill(buf, 0, h)
		if _, err := c.Publish(ns, id, []client.BlockHash{hashOf(h)}, []uint32{0}); err != nil {
			fail(fmt.Sprintf("publish of block %d", h), err)
		}
	}
	fmt.Printf("published %d\n", count)
}

// queryReady queries one hash, asking again while the Manager answers
// Loading (an SSD prefetch).
func queryReady(c *client.Client, ns client.Namespace, h client.BlockHash) (client.Lease, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := c.Query(ns, []client.BlockHash{h})
		var ce *client.Error
		if err == nil || !errors.As(err, &ce) || ce.Code != client.CodePending || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// verify restores each visible block of the range (one query per block, so
// a gap does not hide later blocks) and counts mismatched words.
func verify(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first, count uint64) bool {
	visible, bad := 0, 0
	for h := first; h < first+count; h++ {
		l, err := queryReady(c, ns, hashOf(h))
		if err != nil {
			fail("query", err)
		}
		if l.Hits == 0 {
			continue
		}
		visible++
		clear(buf.Page(0, 0))
		op, err := c.Restore(l.ID, id, []client.RestoreEntry{{Block: 0, Page: 0}})
		if err != nil {
			fail("restore", err)
		}
		if err := c.RestoreWait(op, 10*time.Second); err != nil {
			fail("restore wait", err)
		}
		if n := mismatches(buf, 0, h); n > 0 {
			fmt.Printf("block %d: %d mismatched words\n", h, n)
			bad++
		}
		if err := c.Release(l.ID); err != nil {
			fail("release", err)
		}
	}
	fmt.Printf("visible %d mismatched %d\n", visible, bad)
	return bad > 0
}

// exitFor ends the process for err: 3 expired, 4 Manager died, else 1.
func exitFor(what string, err error) {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case client.CodeExpired:
			fmt.Printf("expired during %s: %v\n", what, err)
			os.Exit(3)
		case client.CodeManagerDied:
			fmt.Printf("manager died during %s: %v\n", what, err)
			os.Exit(4)
		}
	}
	fail(what, err)
}

// tickets runs one ticketed operation through every Manager pause point:
// publish (copy complete, publish ack), a ticket (admission, reservation),
// a restore (copy submitted, copy complete, notification), then checks the
// restored bytes.
func tickets(c *client.Client, buf *client.Buffer, id uint32, ns client.Namespace, first, count uint64) {
	n := int(min(count, batch))
	pages := make([]uint32, n)
	hashes := make([]client.BlockHash, n)
	for i := range hashes {
		pages[i], hashes[i] = uint32(i), hashOf(first+uint64(i))
		fill(buf, i, first+uint64(i))
	}
	fmt.Println("phase publish")
	if _, err := c.Publish(ns, id, hashes, pages); err != nil {
		exitFor("publish", err)
	}
	bh, err := client.NewBlockHashes(hashes)
	if err != nil {
		fail("block hashes", err)
	}
	defer bh.Free()
	fmt.Println("phase ticket")
	t, ans, err := c.Submit(client.QuerySpec{NS: ns, Hashes: bh, Flags: client.QueryWaitForFullPrefix, RequestID: first})
	deadline := time.Now().Add(30 * time.Second)
	for err == nil && t.Live() { // pending (Loading): poll without resending the hashes
		if time.Now().After(deadline) {
			fail("ticket", fmt.Errorf("still pending after 30 s"))
		}
		time.Sleep(time.Millisecond)
		ans, err = c.Poll(t)
	}
	if err != nil {
		exitFor("ticket", err)
	}
	if t != nil {
		c.FreeTicket(t)
	}
	if ans.Hits != uint32(n) || ans.LeaseID == 0 {
		fail("ticket", fmt.Errorf("answer %+v, want %d hits and a lease", ans, n))
	}
	for i := range pages {
		clear(buf.Page(0, uint64(i)))
	}
	entries := make([]client.RestoreEntry, n)
	for i := range entries {
		entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(n - 1 - i)}
	}
	fmt.Println("phase restore")
	op, err := c.Restore(ans.LeaseID, id, entries)
	if err != nil {
		exitFor("restore", err)
	}
	if err := c.RestoreWait(op, 30*time.Second); err != nil {
		exitFor("restore wait", err)
	}
	for i := 0; i < n; i++ {
		if bad := mismatches(buf, n-1-i, first+uint64(i)); bad > 0 {
			fmt.Printf("block %d: %d mismatched words\n", first+uint64(i), bad)
			os.Exit(1)
		}
	}
	if err := c.Release(ans.LeaseID); err != nil {
		exitFor("release", err)
	}
	fmt.Println("phase done")
}
