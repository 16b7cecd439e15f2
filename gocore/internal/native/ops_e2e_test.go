//go:build cgo

package native_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/discover"
	"github.com/orbitkv/orbitkv/gocore/identity"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

const e2eEpoch = 0x0e2e0000cafe0001

// managerEnv, when set to a socket path, makes the test binary run an
// in-process Manager there instead of tests, until its stdin closes. The
// cache tests talk to it in a child process so that the allocations they
// count are the client's alone.
const managerEnv = "OKV_NATIVE_TEST_MANAGER"

// managerDiscoverEnv, when set, is the child Manager's --discover-bytes.
const managerDiscoverEnv = "OKV_NATIVE_TEST_DISCOVER_BYTES"

// TestMain runs the child Manager when asked to, and otherwise fails the
// package when a test leaves a file descriptor open (CONTRIBUTING.md habit 15):
// buffers own memfds, clients sockets, eventfds and pidfds, the copy engine
// its own.
func TestMain(m *testing.M) {
	if path := os.Getenv(managerEnv); path != "" {
		var discoverBytes uint64
		if v := os.Getenv(managerDiscoverEnv); v != "" {
			discoverBytes, _ = strconv.ParseUint(v, 10, 64)
		}
		os.Exit(runManager(path, discoverBytes))
	}
	os.Exit(fdcheck.Run(m, "native", 0, nil))
}

// runManager serves a Manager (session table, dispatcher with the cache
// service, bootstrap server) on path until stdin reaches EOF.
func runManager(path string, discoverBytes uint64) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := manager.New(manager.Spec{Epoch: e2eEpoch, Logger: log,
		Session:   session.Spec{MaxSessions: 4, DescCapacity: 64 << 10},
		Channel:   channel.Spec{MaxSessions: 4, PollMode: channel.PollPark},
		Cache:     &cache.Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 8 << 20, ChunkBytes: 4096}}, CopyWorkers: 1},
		Discover:  discover.Spec{Bytes: discoverBytes},
		Bootstrap: bootstrap.Config{Path: path}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	srv := m.Server
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	<-served
	<-m.StopDispatcher()
	m.Free()
	return 0
}

// startManager starts the child Manager and returns its socket path; the
// test's cleanup stops it.
func startManager(t testing.TB) string {
	t.Helper()
	path, _ := startManagerWith(t)
	return path
}

// startManagerWith starts the child Manager with extra environment
// (managerDiscoverEnv) and returns its socket path and a function that
// stops it and waits for its exit (also run by the test's cleanup).
func startManagerWith(t testing.TB, env ...string) (string, func()) {
	t.Helper()
	// Not t.TempDir: long test names overflow sun_path.
	dir, err := os.MkdirTemp("", "okvn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "m.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), managerEnv+"="+path), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("child Manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child Manager did not start: %q %v", line, err)
	}
	return path, stop
}

func code(err error) int {
	var ce *native.ClientError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func hashes(first, n int) []native.BlockHash {
	out := make([]native.BlockHash, n)
	for i := range out {
		out[i][0] = byte(first + i)
		out[i][15] = 0xEE
	}
	return out
}

// TestCacheRoundTripThroughTheManager publishes pages of one buffer, leases
// them back, restores them into another buffer and checks the bytes.
func TestCacheRoundTripThroughTheManager(t *testing.T) {
	path := startManager(t)
	c, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := identity.Spec{ModelID: "m", BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1}.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	ns := native.Namespace(id)
	src, err := native.AllocBuffer(2, 4096, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	dst, err := native.AllocBuffer(2, 4096, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	for l := uint32(0); l < 2; l++ {
		for p := uint64(0); p < 8; p++ {
			for i := range src.Page(l, p) {
				src.Page(l, p)[i] = byte(int(l)*31 + int(p)*7 + i)
			}
		}
	}
	srcID, err := c.RegisterBuffer(src)
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := c.RegisterBuffer(dst)
	if err != nil {
		t.Fatal(err)
	}
	if srcID != 0 || dstID != 1 {
		t.Errorf("buffer ids %d, %d; want 0, 1", srcID, dstID)
	}

	hs := hashes(0, 4)
	t.Run("publish stores new blocks and skips resident ones", func(t *testing.T) {
		r, err := c.Publish(ns, srcID, hs, []uint32{0, 1, 2, 3})
		if err != nil || r != (native.PublishResult{Stored: 4}) {
			t.Fatalf("first publish: %+v %v", r, err)
		}
		r, err = c.Publish(ns, srcID, hs, []uint32{0, 1, 2, 3})
		if err != nil || r != (native.PublishResult{Present: 4}) {
			t.Fatalf("second publish: %+v %v", r, err)
		}
	})
	t.Run("publish refuses an unregistered buffer and mismatched lengths", func(t *testing.T) {
		if _, err := c.Publish(ns, 7, hs, []uint32{0, 1, 2, 3}); code(err) != -int(syscall.EINVAL) {
			t.Errorf("buffer 7: %v, want -EINVAL", err)
		}
		if _, err := c.Publish(ns, srcID, hs, []uint32{0}); err == nil {
			t.Error("4 hashes with 1 page accepted")
		}
	})
	t.Run("a leased prefix restores into another buffer", func(t *testing.T) {
		q := append(hs[:4:4], hashes(100, 2)...)
		l, err := c.Query(ns, q)
		if err != nil {
			t.Fatal(err)
		}
		if l.Hits != 4 || l.ID == 0 || l.BlockBytes != 2*4096 {
			t.Fatalf("lease %+v, want 4 hits of 8192-byte blocks", l)
		}
		ents := []native.RestoreEntry{{Block: 0, Page: 7}, {Block: 1, Page: 6}, {Block: 2, Page: 5}, {Block: 3, Page: 4}}
		op, err := c.Restore(l.ID, dstID, ents)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RestoreWait(op, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for layer := uint32(0); layer < 2; layer++ {
				if !bytes.Equal(dst.Page(layer, uint64(e.Page)), src.Page(layer, uint64(e.Block))) {
					t.Errorf("layer %d page %d differs from source page %d", layer, e.Page, e.Block)
				}
			}
		}
		if _, err := c.RestorePoll(op); code(err) != native.CodeInvalid {
			t.Errorf("second poll of a consumed restore: %v, want CodeInvalid", err)
		}
		if _, err := c.Restore(l.ID, dstID, []native.RestoreEntry{{Block: 4, Page: 0}}); code(err) != native.CodeInvalid {
			t.Errorf("block outside the lease: %v, want CodeInvalid", err)
		}
		if err := c.Release(l.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(l.ID); code(err) != native.CodeInvalid {
			t.Errorf("second release: %v, want CodeInvalid", err)
		}
	})
	t.Run("a miss has no lease", func(t *testing.T) {
		l, err := c.Query(ns, hashes(200, 3))
		if err != nil || l != (native.Lease{}) {
			t.Errorf("miss: %+v %v", l, err)
		}
	})
	t.Run("too many hashes is Code2Big", func(t *testing.T) {
		if _, err := c.Query(ns, make([]native.BlockHash, c.MaxQueryHashes()+1)); code(err) != native.Code2Big {
			t.Errorf("%v, want Code2Big", err)
		}
	})
	t.Run("the hot calls allocate nothing", func(t *testing.T) {
		q := hashes(0, 2)
		pages := []uint32{0, 1}
		ents := []native.RestoreEntry{{Block: 0, Page: 0}, {Block: 1, Page: 1}}
		allocs := testing.AllocsPerRun(50, func() {
			l, err := c.Query(ns, q)
			if err != nil || l.Hits != 2 {
				t.Fatalf("query: %+v %v", l, err)
			}
			op, err := c.Restore(l.ID, dstID, ents)
			if err != nil {
				t.Fatal(err)
			}
			for {
				done, err := c.RestorePoll(op)
				if err != nil {
					t.Fatal(err)
				}
				if done {
					break
				}
			}
			if err := c.Release(l.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Publish(ns, srcID, q, pages); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%.1f allocations per query+restore+poll+release+publish, want 0", allocs)
		}
	})
}

// BenchmarkQuery times one leased read of n resident blocks plus its
// release against the child Manager.
func BenchmarkQuery(b *testing.B) {
	path := startManager(b)
	c, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf, err := native.AllocBuffer(1, 4096, 1024)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		b.Fatal(err)
	}
	ns := native.Namespace{0xB}
	for _, n := range []int{1, 64, 1024} {
		hs := hashes(0, n)
		for i := range hs {
			hs[i][1], hs[i][2] = byte(i), byte(i>>8)
		}
		pages := make([]uint32, n)
		for i := range pages {
			pages[i] = uint32(i)
		}
		if _, err := c.Publish(ns, id, hs, pages); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("hashes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.Query(ns, hs)
				if err != nil || l.Hits != uint32(n) {
					b.Fatalf("query: %+v %v", l, err)
				}
				if err := c.Release(l.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
