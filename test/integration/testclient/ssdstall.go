package main

// The stall mode of the shutdown test (test/integration/shutdown_test.go):
//
//	testclient ssdstall SOCKET COUNT   publish blocks 0..COUNT-1 (1 MiB each, so a small RAM
//	                                   tier demotes most of them to SSD), wait until a Discover
//	                                   query finds the chain starting with at least COUNT/2 blocks
//	                                   durable on SSD, print "ready", wait for a line on stdin, then submit
//	                                   a wait_for_full_prefix ticket for the whole chain (the
//	                                   Manager prefetches the SSD part), print "loading" once it
//	                                   answers Loading, and poll until the session ends
//
// The test throttles the Manager's reads between "ready" and the line it
// writes, so the prefetch reads stall in the kernel. Exit status: 0 when
// the session ended while the ticket was Loading (printed "session ended:
// ERROR"), 1 for any other failure, 5 when the ticket resolved (the reads
// did not stall).
//
// main.go's switch owns the other modes; this mode takes over in init,
// before main parses its arguments, so that file stays untouched.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

func init() {
	if len(os.Args) >= 2 && os.Args[1] == "ssdstall" {
		os.Exit(ssdStall(os.Args[2:]))
	}
}

func ssdStall(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testclient ssdstall SOCKET COUNT")
		return 2
	}
	count, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil || count == 0 || count%batch != 0 {
		fmt.Fprintf(os.Stderr, "COUNT must be a positive multiple of %d\n", batch)
		return 2
	}
	c, err := client.Connect(client.Options{SocketPath: args[0], InstanceID: "testclient-ssdstall"})
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
	hashes := make([]client.BlockHash, count)
	pages := make([]uint32, batch)
	for i := range pages {
		pages[i] = uint32(i)
	}
	for base := uint64(0); base < count; base += batch {
		for i := range uint64(batch) {
			hashes[base+i] = hashOf(base + i)
			fill(buf, int(i), base+i)
		}
		if _, err := c.Publish(ns, id, hashes[base:base+batch], pages); err != nil {
			fail("publish", err)
		}
	}
	bh, err := client.NewBlockHashes(hashes)
	if err != nil {
		fail("block hashes", err)
	}
	defer bh.Free()

	// Demotion is write-behind: wait until the chain starts with a run of
	// at least half the blocks durable on SSD (Discover counts the RAM
	// prefix, none here, then the SSD run after it), so the ticket below
	// reads more blocks than the SSD tier has I/O workers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		t, ans, err := c.Submit(client.QuerySpec{NS: ns, Hashes: bh, Flags: client.QueryDiscover})
		if err != nil {
			fail("discover", err)
		}
		c.FreeTicket(t)
		if ans.RAMHits == 0 && ans.Hits >= uint32(count/2) {
			fmt.Printf("ready: the first %d blocks are on SSD\n", ans.Hits)
			break
		}
		if time.Now().After(deadline) {
			fail("discover", fmt.Errorf("after 30 s %d leading blocks in RAM, %d held locally; want none in RAM and at least %d", ans.RAMHits, ans.Hits, count/2))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail("waiting for the go-ahead on stdin", err)
	}

	t, ans, err := c.Submit(client.QuerySpec{NS: ns, Hashes: bh, Flags: client.QueryWaitForFullPrefix, RequestID: 1})
	announced := false
	for err == nil && t.Live() {
		if !announced {
			fmt.Printf("loading: %d of %d blocks in RAM\n", ans.RAMHits, count)
			announced = true
		}
		time.Sleep(5 * time.Millisecond)
		ans, err = c.Poll(t)
	}
	if err != nil && !announced {
		fail("ticket", err) // the Manager answered before any read could stall
	}
	if err != nil {
		// Whatever the client library makes of the Manager going away
		// mid-poll (session closed, Manager exited, no reply): the test
		// reads this line, and the Manager's log, for what happened.
		fmt.Printf("session ended: %v\n", err)
		return 0
	}
	fmt.Printf("resolved: status %d, %d hits: the SSD reads did not stall\n", ans.Status, ans.Hits)
	return 5
}
