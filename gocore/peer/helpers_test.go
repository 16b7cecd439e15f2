package peer

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// testCA is a cluster CA written into a test's temporary directory.
type testCA struct {
	dir           string
	name          string
	certPEM, keyP []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	c, k, err := NewCA(name, 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca.crt"), c, 0o644)
	writeFile(t, filepath.Join(dir, "ca.key"), k, 0o600)
	return &testCA{dir: dir, name: name, certPEM: c, keyP: k}
}

func writeFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

// node makes a node certificate for 127.0.0.1 and returns its files.
func (c *testCA) node(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	cert, key, err := NewNodeCert(c.certPEM, c.keyP, NodeCertSpec{Name: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(c.dir, name+".crt"), filepath.Join(c.dir, name+".key")
	writeFile(t, certFile, cert, 0o644)
	writeFile(t, keyFile, key, 0o600)
	return certFile, keyFile
}

// tls is LoadTLS of a new node certificate of c.
func (c *testCA) tls(t *testing.T, name string) (server, client *tls.Config) {
	t.Helper()
	cf, kf := c.node(t, name)
	server, client, err := LoadTLS(filepath.Join(c.dir, "ca.crt"), cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// memSource is a test double of Source. The real Source is the Manager's
// dispatcher (gocore/manager wires it through channel.Dispatcher.Do), which
// these tests cannot start without a whole Manager; the double keeps blocks
// in plain memory, hands them out as chunks of chunkBytes as the RAM tier
// does, and records every pin so a test can see each one go exactly once.
type memSource struct {
	t          *testing.T
	chunkBytes int
	// breakRun, when set, rewrites the run Pin returns (a Source that
	// breaks its contract).
	breakRun func([]PinnedBlock) []PinnedBlock
	// gate, when set, holds every Pin (whatever its ctx) until it is
	// closed, after sending on pinning: a Source slow to answer.
	gate, pinning chan struct{}

	mu       sync.Mutex
	blocks   map[abi.BlockHash][]byte
	ns       abi.Namespace
	next     uint64
	live     map[uint64]int // pin token → blocks it holds
	pinCalls int
	unpinned chan uint64 // every Unpin, in order
}

func newMemSource(t *testing.T, ns abi.Namespace) *memSource {
	return &memSource{t: t, chunkBytes: 4096, blocks: map[abi.BlockHash][]byte{}, ns: ns, live: map[uint64]int{}, unpinned: make(chan uint64, 1024)}
}

// put adds a block of n bytes whose content depends on its hash.
func (m *memSource) put(h abi.BlockHash, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ h[0] ^ byte(i>>8)
	}
	m.mu.Lock()
	m.blocks[h] = b
	m.mu.Unlock()
	return b
}

// Pin pins the resident leading run of hashes, at most maxBytes.
func (m *memSource) Pin(ctx context.Context, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (uint64, []PinnedBlock, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if m.gate != nil {
		m.pinning <- struct{}{}
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pinCalls++
	var run []PinnedBlock
	var total uint64
	for _, h := range hashes {
		b, ok := m.blocks[h]
		if ns != m.ns || !ok || total+uint64(len(b)) > maxBytes {
			break
		}
		var bufs [][]byte
		for off := 0; off < len(b); off += m.chunkBytes {
			bufs = append(bufs, b[off:min(off+m.chunkBytes, len(b))])
		}
		run = append(run, PinnedBlock{Hash: h, Length: uint64(len(b)), Layers: uint32(len(b)%61 + 1), Bufs: bufs})
		total += uint64(len(b))
	}
	if m.breakRun != nil {
		run = m.breakRun(run)
	}
	m.next++
	m.live[m.next] = len(run)
	return m.next, run, nil
}

// Unpin drops a pin; a token not live fails the test (unpinned twice).
func (m *memSource) Unpin(pin uint64) {
	m.mu.Lock()
	_, ok := m.live[pin]
	delete(m.live, pin)
	m.mu.Unlock()
	if !ok {
		m.t.Errorf("Unpin(%d) of a token that is not pinned (twice, or never)", pin)
	}
	m.unpinned <- pin
}

// livePins is how many pins are held.
func (m *memSource) livePins() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

func (m *memSource) pins() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinCalls
}

// waitUnpin waits at most bound for the next Unpin.
func (m *memSource) waitUnpin(t *testing.T, bound time.Duration, what string) {
	t.Helper()
	select {
	case <-m.unpinned:
	case <-time.After(bound):
		t.Fatalf("%s: no Unpin within %v (%d pins live)", what, bound, m.livePins())
	}
}

// hash is a test block hash.
func hash(i int) abi.BlockHash {
	var h abi.BlockHash
	copy(h[:], fmt.Sprintf("block-%010d", i))
	return h
}

func hashBytes(i int) []byte {
	h := hash(i)
	return h[:]
}
