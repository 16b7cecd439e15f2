// Command hostileclient is a misbehaving same-uid session for the
// integration tests: it connects like any engine process, then abuses the
// one piece of shared memory every session of a Manager can write, the
// doorbell (native/include/orbitkv/abi.h, struct okv_doorbell), the way an
// attacker on the host would: it finds the doorbell memfd among its own fds
// and maps it.
//
//	hostileclient SOCKET erase DURATION    zero every pending word, the summary and the
//	                                       park flag in a loop for DURATION, so other
//	                                       sessions' rings are lost
//	hostileclient SOCKET scribble-header   overwrite the doorbell's header line (magic,
//	                                       version, max_sessions, epoch) and exit
//
// It prints "mapped" once the doorbell is mapped and "done passes=N" at the
// end; exit status 1 on any failure to get that far.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// Doorbell offsets (abi.h; checked against C by gocore/abi's layout test).
const (
	offParked  = 128
	offSummary = 192
	offPending = 256
	words      = 64
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: hostileclient SOCKET erase DURATION | scribble-header")
		os.Exit(2)
	}
	c, err := client.Connect(client.Options{SocketPath: os.Args[1], InstanceID: "hostileclient"})
	if err != nil {
		fail("connect", err)
	}
	defer c.Close()
	db, err := mapDoorbell()
	if err != nil {
		fail("mapping the doorbell", err)
	}
	fmt.Println("mapped")
	switch os.Args[2] {
	case "erase":
		if len(os.Args) != 4 {
			fail("erase", fmt.Errorf("needs DURATION"))
		}
		d, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fail("erase", err)
		}
		n := erase(db, d)
		fmt.Printf("done passes=%d\n", n)
	case "scribble-header":
		for i := 0; i < 64; i++ {
			db[i] = 0xA5
		}
		fmt.Println("done passes=1")
	default:
		fail("mode", fmt.Errorf("unknown mode %q", os.Args[2]))
	}
}

// mapDoorbell finds the doorbell memfd the bootstrap reply passed to this
// process (its /proc/self/fd link names "orbitkv-doorbell") and maps it
// read-write, as the client library does.
func mapDoorbell() ([]byte, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.Contains(target, "orbitkv-doorbell") {
			continue
		}
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil {
			continue
		}
		return unix.Mmap(fd, 0, abi.DoorbellSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	return nil, fmt.Errorf("no fd of this process links to orbitkv-doorbell")
}

// erase zeroes the doorbell's pending words, summary and park flag until d
// has passed; returns the number of passes.
func erase(db []byte, d time.Duration) uint64 {
	u64 := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&db[off])) }
	parked := (*uint32)(unsafe.Pointer(&db[offParked]))
	var passes uint64
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 1000; i++ {
			for w := 0; w < words; w++ {
				atomic.StoreUint64(u64(offPending+8*w), 0)
			}
			atomic.StoreUint64(u64(offSummary), 0)
			atomic.StoreUint32(parked, 0)
			passes++
		}
	}
	return passes
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "hostileclient: %s: %v\n", what, err)
	os.Exit(1)
}
