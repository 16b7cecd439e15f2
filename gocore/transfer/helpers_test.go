package transfer

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the run when the tests leave descriptors open or
// goroutines running (every Server and Engine a test makes is closed).
func TestMain(m *testing.M) {
	code := fdcheck.Run(m, "transfer", 2*time.Second, nil)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("transfer test: goroutines left running: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// pattern is n bytes drawn from seed: two different seeds give different
// bytes, so a block read from the wrong place is caught.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newServer(t *testing.T, s ServerSpec) *Server {
	t.Helper()
	if s.Addr == "" {
		s.Addr = "127.0.0.1:0"
	}
	srv, err := Listen(s)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// source is a segment of blocks, each block one or more chunks of bufs.
type source struct {
	blocks [][]byte // each block's bytes, contiguous (the expected content)
	offs   []uint64 // each block's offset in the segment
	bufs   [][]byte // what was registered: every block cut into chunks
	id     uint64
	cap    Capability
}

// newSource registers blocks of the given sizes, each cut into chunks of
// at most chunk bytes, as one segment of srv.
func newSource(t *testing.T, srv *Server, sizes []int, chunk int, deadline time.Time) *source {
	t.Helper()
	src := &source{}
	var off uint64
	for i, n := range sizes {
		b := pattern(n, uint64(i)+1)
		src.blocks, src.offs = append(src.blocks, b), append(src.offs, off)
		for c := 0; c < n; c += chunk {
			src.bufs = append(src.bufs, b[c:min(c+chunk, n)])
		}
		off += uint64(n)
	}
	var err error
	if src.id, src.cap, err = srv.RegisterSegment(src.bufs, deadline); err != nil {
		t.Fatalf("RegisterSegment: %v", err)
	}
	return src
}
