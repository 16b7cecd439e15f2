package bootstrap_test

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/discover"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// discTableBytes is the size of one table of the discover harness (1 MiB
// tier of 4 KiB chunks: 256 blocks, 256 buckets).
var discTableBytes = discover.TableBytes(discover.BucketsFor(256))

func discNS(i int) abi.Namespace {
	var ns abi.Namespace
	binary.LittleEndian.PutUint64(ns[:8], uint64(i)+1)
	ns[15] = 0xd1
	return ns
}

// retireDeadline bounds the wait for a closed session's teardown (a
// loaded VM under -race can be slow; the wait ends as soon as it is done).
const retireDeadline = 30 * time.Second

// mapDisc sends MapDiscovery for ns and returns the memfd of the reply,
// or nil and the error frame.
func mapDisc(t *testing.T, rc *rawClient, ns abi.Namespace) (*os.File, *lifecyclepb.Error) {
	t.Helper()
	f := rc.frame(t, lifecycle.CodeMapDiscovery, &lifecyclepb.MapDiscoveryRequest{ClientToken: rc.reply.ClientToken, Namespace: ns[:]})
	if f.Header.Code == lifecycle.CodeError {
		var e lifecyclepb.Error
		if err := f.Unmarshal(&e); err != nil {
			t.Fatal(err)
		}
		return nil, &e
	}
	var r lifecyclepb.MapDiscoveryReply
	rc.expectReply(t, f, lifecycle.CodeMapDiscovery, &r)
	if len(f.Files) != 1 || r.GetBytes() != discTableBytes {
		t.Fatalf("MapDiscovery reply %v with %d fds, want %d bytes and one fd", &r, len(f.Files), discTableBytes)
	}
	return f.Files[0], nil
}

// mustMapDisc is mapDisc that fails the test on an error frame.
func mustMapDisc(t *testing.T, rc *rawClient, ns abi.Namespace) *os.File {
	t.Helper()
	f, e := mapDisc(t, rc, ns)
	if e != nil {
		t.Fatalf("MapDiscovery of namespace %x refused: %v", ns[:8], e)
	}
	return f
}

// TestDiscoveryTablesAreBoundedPerSessionAndRetiredWithTheirSessions: one
// session cannot hold more than bootstrap.MaxDiscoveryPerSession tables,
// and the tables a session mapped are retired (flag set for readers still
// mapping them) and their bytes given back to --discover-bytes when it
// closes, so a client that connected and left cannot keep the budget.
func TestDiscoveryTablesAreBoundedPerSessionAndRetiredWithTheirSessions(t *testing.T) {
	const budgetTables = 20
	h := newHarness(t, func(o *harnessOptions) { o.discoverBytes = budgetTables * discTableBytes })
	hog := connect(t, h.path)
	hogFD := -1 // a dup of the hog's first memfd: the frame's own closes with its subtest
	t.Run("a session is refused past 16 namespaces, naming the limit", func(t *testing.T) {
		for i := range bootstrap.MaxDiscoveryPerSession {
			f := mustMapDisc(t, hog, discNS(i))
			if i == 0 {
				var err error
				if hogFD, err = unix.Dup(int(f.Fd())); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, e := mapDisc(t, hog, discNS(100))
		if e == nil {
			t.Fatalf("the %dth namespace of one session was served", bootstrap.MaxDiscoveryPerSession+1)
		}
		if e.GetField() != "namespace" || e.GetStatus() != uint32(abi.StatusInvalid) || !strings.Contains(e.GetMessage(), "limit 16 per session") {
			t.Fatalf("error frame %v, want Invalid naming namespace and the limit of 16 per session", e)
		}
		hog.health(t) // the connection stays
	})
	t.Run("a namespace the session holds is served again without counting twice", func(t *testing.T) {
		mustMapDisc(t, hog, discNS(0))
	})
	other := connect(t, h.path)
	t.Run("past the budget another session is refused", func(t *testing.T) {
		for i := range budgetTables - bootstrap.MaxDiscoveryPerSession {
			mustMapDisc(t, other, discNS(200+i))
		}
		if _, e := mapDisc(t, other, discNS(300)); e == nil || e.GetStatus() != uint32(abi.StatusUnadmitted) {
			t.Fatalf("a table past the budget: error %v, want Unadmitted", e)
		}
	})
	// A reader of the hog's first table, mapped as a client maps it.
	if hogFD < 0 {
		t.Fatal("no table of the hog's to read")
	}
	mem, err := unix.Mmap(hogFD, 0, int(discTableBytes), unix.PROT_READ, unix.MAP_SHARED)
	unix.Close(hogFD)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	flags := func() uint16 { return binary.LittleEndian.Uint16(mem[6:8]) }
	if flags()&discover.FlagRetired != 0 {
		t.Fatalf("a live table reads retired: flags %#x", flags())
	}
	hog.close()
	t.Run("the tables of a closed session are retired and their bytes go back to the budget", func(t *testing.T) {
		// The session's tables are retired one by one as it closes; the
		// bytes of each go back in the same step that retires it.
		deadline := time.Now().Add(retireDeadline)
		for flags()&discover.FlagRetired == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%v after the hog's session closed its table is not marked retired: flags %#x", retireDeadline, flags())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, e := mapDisc(t, other, discNS(300)); e != nil {
			t.Fatalf("a retired table's bytes did not go back to the budget: %v", e)
		}
	})
	t.Run("a namespace another session still maps is not retired", func(t *testing.T) {
		f := mustMapDisc(t, other, discNS(200))
		m, err := unix.Mmap(int(f.Fd()), 0, int(discTableBytes), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if fl := binary.LittleEndian.Uint16(m[6:8]); fl&discover.FlagRetired != 0 {
			t.Fatalf("a table its session still maps reads retired: flags %#x", fl)
		}
	})
}
