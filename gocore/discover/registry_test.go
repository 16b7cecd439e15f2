package discover

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// inline runs f at once: the tests are the dispatcher goroutine.
func inline(f func()) error { f(); return nil }

func seal(idx *index.Index, k index.Key) *index.Block {
	b := idx.Insert(k, 4096, 1, 0, []uint32{0})
	idx.Seal(b)
	return b
}

func TestRegistry(t *testing.T) {
	idx := index.New(evict.NewLRU())
	r, err := New(Spec{Bytes: 3 * TableBytes(1024), MaxBlocks: 1024}, inline)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Attach(idx)
	a, b := testNS(1), testNS(2)
	seal(idx, index.Key{NS: a, Hash: hashOf(1)})
	pub := idx.Insert(index.Key{NS: a, Hash: hashOf(2)}, 4096, 1, 0, []uint32{1}) // publishing: invisible
	seal(idx, index.Key{NS: b, Hash: hashOf(3)})

	ta, err := r.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a new table starts from the namespace's sealed blocks", func(t *testing.T) {
		if p, _ := ta.Contains(hashOf(1)); !p {
			t.Fatal("sealed block of the namespace missing")
		}
		if p, _ := ta.Contains(hashOf(2)); p {
			t.Fatal("a publishing block is visible")
		}
	})
	t.Run("a table holds nothing of another namespace", func(t *testing.T) {
		if p, _ := ta.Contains(hashOf(3)); p || ta.Entries() != 1 {
			t.Fatalf("present %v, entries %d", p, ta.Entries())
		}
	})
	t.Run("a seal after the table exists shows at once", func(t *testing.T) {
		idx.Seal(pub)
		if p, _ := ta.Contains(hashOf(2)); !p {
			t.Fatal("sealed block not visible")
		}
	})
	t.Run("an eviction shows at once", func(t *testing.T) {
		for idx.Evict() != nil {
		}
		if ta.Entries() != 0 {
			t.Fatalf("entries %d after evicting everything", ta.Entries())
		}
		if p, _ := ta.Contains(hashOf(1)); p {
			t.Fatal("evicted block still present")
		}
	})
	t.Run("a second Open of a namespace returns the same table", func(t *testing.T) {
		again, err := r.Open(a)
		if err != nil || again != ta {
			t.Fatalf("Open again: %p %v, want %p", again, err, ta)
		}
	})
	t.Run("tables past the budget are refused naming the flag", func(t *testing.T) {
		if _, err := r.Open(b); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Open(testNS(3)); err != nil {
			t.Fatal(err)
		}
		_, err := r.Open(testNS(4))
		if !errors.Is(err, ErrBudget) {
			t.Fatalf("err %v, want ErrBudget", err)
		}
		t.Log(err)
		if st := r.Stats(); st.Tables != 3 || st.Bytes != 3*TableBytes(1024) {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("the all-zero namespace is refused", func(t *testing.T) {
		if _, err := r.Open([16]byte{}); !errors.Is(err, ErrNamespace) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestRegistryDisabled(t *testing.T) {
	r, err := New(Spec{MaxBlocks: 64, Disabled: true}, inline)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open(testNS(1)); !errors.Is(err, ErrDisabled) {
		t.Fatalf("err %v, want ErrDisabled", err)
	}
}

func TestSpecLimits(t *testing.T) {
	if _, err := New(Spec{Bytes: 1, MaxBlocks: 64}, inline); err == nil {
		t.Fatal("a 1-byte budget was accepted")
	}
	if _, err := New(Spec{MaxBlocks: 0}, inline); err == nil {
		t.Fatal("MaxBlocks 0 was accepted")
	}
	t.Run("a budget smaller than one table is refused naming the field and the table size", func(t *testing.T) {
		// 4,096 blocks: 4,096 buckets, 262,208 bytes a table.
		_, err := New(Spec{Bytes: 64 << 10, MaxBlocks: 4096}, inline)
		var le *limit.Error
		if !errors.As(err, &le) || le.Field != "discover.Bytes" || !strings.Contains(err.Error(), "262208 bytes") {
			t.Fatalf("err %v, want a *limit.Error naming discover.Bytes and the 262208-byte table", err)
		}
		if _, err := New(Spec{Bytes: TableBytes(4096), MaxBlocks: 4096}, inline); err != nil {
			t.Fatalf("a budget of exactly one table: %v", err)
		}
	})
}

// TestTheTableCountIsBounded: each table keeps a descriptor open, so their
// number is bounded apart from their bytes (Spec.MaxTables), and a
// released table makes room again.
func TestTheTableCountIsBounded(t *testing.T) {
	r, err := New(Spec{MaxBlocks: 64, MaxTables: 2}, inline)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 2 {
		if _, err := r.Open(testNS(byte(i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = r.Open(testNS(3))
	if !errors.Is(err, ErrTables) || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Fatalf("a third table with MaxTables 2: %v, want ErrTables naming RLIMIT_NOFILE", err)
	}
	if _, err := r.Open(testNS(1)); err != nil {
		t.Fatalf("a namespace with a table was refused at the limit: %v", err)
	}
	r.Release(testNS(2))
	if _, err := r.Open(testNS(3)); err != nil {
		t.Fatalf("after a table was retired: %v", err)
	}
	if n := DefaultMaxTables(); n < 16 || n > MaxTablesCap {
		t.Fatalf("DefaultMaxTables %d outside 16..%d", n, MaxTablesCap)
	}
}

func TestTablesCarryTheCompleteFlagOfTheirManager(t *testing.T) {
	for _, complete := range []bool{false, true} {
		r, err := New(Spec{MaxBlocks: 64, Complete: complete}, inline)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := r.Open(testNS(1))
		if err != nil {
			t.Fatal(err)
		}
		if got := tb.Flags()&FlagComplete != 0; got != complete {
			t.Errorf("Complete %v: table flags %#x", complete, tb.Flags())
		}
		r.Close()
	}
}

// TestReleaseRetiresTheTableWithItsLastReference: a table lives while an
// Open is not yet released; the last Release sets FlagRetired where a
// client still mapping the memfd reads it, and gives the bytes back.
func TestReleaseRetiresTheTableWithItsLastReference(t *testing.T) {
	r, err := New(Spec{Bytes: TableBytes(1024), MaxBlocks: 1024}, inline)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := testNS(1)
	ta, err := r.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open(a); err != nil { // a second session of the same namespace
		t.Fatal(err)
	}
	// A client's mapping: it outlives the Manager's.
	fd, err := unix.Dup(int(ta.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, int(ta.Bytes()), unix.PROT_READ, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	flags := func() uint16 { return binary.LittleEndian.Uint16(mem[6:8]) }
	if _, err := r.Open(testNS(2)); !errors.Is(err, ErrBudget) {
		t.Fatalf("a second table in a budget of one: err %v, want ErrBudget", err)
	}
	t.Run("a table stays live while a reference remains", func(t *testing.T) {
		r.Release(a)
		if st := r.Stats(); st.Tables != 1 || flags()&FlagRetired != 0 {
			t.Fatalf("after one of two releases: stats %+v, flags %#x", st, flags())
		}
		if p, ok := ta.Contains(hashOf(1)); p || !ok {
			t.Fatalf("a live table's reader: present %v ok %v", p, ok)
		}
	})
	t.Run("the last release retires it and gives its bytes back", func(t *testing.T) {
		r.Release(a)
		if flags()&FlagRetired == 0 {
			t.Fatalf("flags %#x after the last release, want FlagRetired", flags())
		}
		if st := r.Stats(); st.Tables != 0 || st.Bytes != 0 {
			t.Fatalf("stats %+v after the last release, want no tables and no bytes", st)
		}
		if _, err := r.Open(testNS(2)); err != nil {
			t.Fatalf("the budget did not come back: %v", err)
		}
	})
	t.Run("a release without an open does nothing", func(t *testing.T) {
		r.Release(testNS(9))
		if st := r.Stats(); st.Tables != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("namespace A maps again as a fresh, live table", func(t *testing.T) {
		r.Release(testNS(2))
		tb, err := r.Open(a)
		if err != nil {
			t.Fatal(err)
		}
		if tb == ta || tb.Flags()&FlagRetired != 0 {
			t.Fatalf("got the retired table back (%p, flags %#x)", tb, tb.Flags())
		}
		r.Release(a)
	})
}
