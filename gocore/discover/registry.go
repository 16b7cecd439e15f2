package discover

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// DefaultBytes is Spec.Bytes's default: 256 MiB of tables (16 namespaces
// on the default 4 GiB RAM tier of 16 KiB chunks, 16 MiB each).
const DefaultBytes = 256 << 20

// BytesRange is the limit of Spec.Bytes (0: DefaultBytes).
var BytesRange = limit.Range[uint64]{Field: "discover.Bytes", Min: 64 << 10, Max: 64 << 30, Bytes: true,
	Zero: limit.Size(DefaultBytes), Note: "memory of all discovery indexes together"}

// Spec configures a Registry; a plain value.
type Spec struct {
	// Bytes bounds the memory of all tables together (--discover-bytes;
	// 0: DefaultBytes). A table takes TableBytes(BucketsFor(MaxBlocks)).
	Bytes uint64
	// MaxBlocks is the most blocks the RAM tier can hold at once (its
	// chunk count: a block takes one chunk at least); it sizes each table.
	MaxBlocks uint64
	// MaxTables bounds the number of tables at once (each keeps a file
	// descriptor open); 0: DefaultMaxTables.
	MaxTables int
	// Disabled serves no table: Open answers ErrDisabled.
	Disabled bool
	// Complete: the Manager serves from its RAM tier only (no SSD tier, no
	// cluster), so tables carry FlagComplete and a local miss is final.
	// The Manager fills it in.
	Complete bool
}

// Validate checks the limits of s the user sets (Bytes); New also needs
// MaxBlocks, which the Manager fills in from the RAM tier.
func (s Spec) Validate() error { return BytesRange.Check(s.Bytes) }

// Errors of Open.
var (
	// ErrBudget: another table would pass Spec.Bytes.
	ErrBudget = errors.New("discovery index budget exhausted")
	// ErrTables: another table would pass the table count limit
	// (Spec.MaxTables).
	ErrTables = errors.New("discovery index table limit reached")
	// ErrDisabled: the Manager serves no discovery indexes.
	ErrDisabled = errors.New("discovery indexes are disabled on this Manager")
	// ErrNamespace: the all-zero namespace, which is never valid.
	ErrNamespace = errors.New("the all-zero namespace is never valid")
)

// Registry holds the tables by namespace and keeps them current as an
// index.Observer. Sealed and Removed run on the dispatcher goroutine (the
// Index's owner); Open runs anywhere and reaches the tables through do,
// which runs a function on the dispatcher (channel.Dispatcher.Do).
type Registry struct {
	spec    Spec
	buckets uint64
	do      func(func()) error
	idx     *index.Index // set by Attach; dispatcher-owned
	// maxTables bounds len(tables) plus the tables being made.
	maxTables int
	making    int // tables being made off the dispatcher; dispatcher only

	tables map[abi.Namespace]*Table // dispatcher only
	refs   map[abi.Namespace]int    // Opens not yet Released, per table; dispatcher only
	used   uint64                   // bytes of tables and reservations; dispatcher only

	closeOnce sync.Once
}

// New returns a Registry for spec whose tables are reached through do.
func New(spec Spec, do func(func()) error) (*Registry, error) {
	if spec.Bytes == 0 {
		spec.Bytes = DefaultBytes
	}
	if err := errors.Join(spec.Validate(),
		limit.Check(spec.MaxBlocks > 0, "discover.MaxBlocks", spec.MaxBlocks, "nonzero (the RAM tier's chunk count)")); err != nil {
		return nil, err
	}
	buckets := BucketsFor(spec.MaxBlocks)
	if tb := TableBytes(buckets); spec.Bytes < tb {
		return nil, limit.Check(false, "discover.Bytes", limit.Size(spec.Bytes),
			fmt.Sprintf("at least one table of %s (64 bytes per RAM-tier chunk, %d chunks rounded up to %d buckets, and a 64-byte header), or 0 to serve none",
				limit.Size(tb), spec.MaxBlocks, buckets))
	}
	r := &Registry{spec: spec, buckets: buckets, do: do, maxTables: spec.MaxTables,
		tables: map[abi.Namespace]*Table{}, refs: map[abi.Namespace]int{}}
	if r.maxTables == 0 {
		r.maxTables = DefaultMaxTables()
	}
	return r, nil
}

// MaxTablesCap is the most tables a Registry keeps at once, whatever
// RLIMIT_NOFILE allows.
const MaxTablesCap = 4096

// DefaultMaxTables is Spec.MaxTables's default: a quarter of the process's
// soft RLIMIT_NOFILE (each table keeps its memfd open; the rest is for
// sessions, whose slot, eventfd, doorbell and socket take 4 each, engine
// buffers and the SSD tier), at least 16 and at most MaxTablesCap.
func DefaultMaxTables() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return MaxTablesCap
	}
	return int(min(max(rl.Cur/4, 16), MaxTablesCap))
}

// Attach makes r the observer of idx, whose blocks later tables start
// from. It must run on idx's goroutine or before that goroutine starts.
func (r *Registry) Attach(idx *index.Index) {
	r.idx = idx
	idx.SetObserver(r)
}

// Capacity is the most tables r keeps at once: the table count limit, or
// as many tables as Spec.Bytes holds when that is fewer.
func (r *Registry) Capacity() int {
	return int(min(uint64(r.maxTables), r.spec.Bytes/TableBytes(r.buckets)))
}

// TableBytes is the size of each table r makes.
func (r *Registry) TableBytes() uint64 { return TableBytes(r.buckets) }

// Sealed implements index.Observer: k becomes visible.
func (r *Registry) Sealed(k index.Key) {
	if t := r.tables[k.NS]; t != nil {
		t.Insert(k.Hash)
	}
}

// Removed implements index.Observer: k left the index.
func (r *Registry) Removed(k index.Key) {
	if t := r.tables[k.NS]; t != nil {
		t.Remove(k.Hash)
	}
}

// Open returns the table of ns, making it on first use from the blocks of
// ns the index holds, and takes a reference to it: the returned file is the
// table's memfd (owned by the Registry: send it, do not close it; it stays
// open until the reference is given back). Every successful Open must be
// matched by one Release(ns) (the bootstrap server releases a session's
// namespaces when the session closes). Errors: ErrNamespace, ErrDisabled,
// ErrBudget (wrapped with the sizes and the flag), ErrTables (wrapped with
// the count and the limit), the dispatcher's
// ErrStopped, or a system error making the memfd.
func (r *Registry) Open(ns abi.Namespace) (*Table, error) { return r.OpenAs(ns, ns) }

// OpenAs is Open of the table of the index's namespace ns whose readers
// know it as as: its header names as and its digests are keyed by as
// (DigestKey), so a session that asked for as reads it, while the table
// follows the blocks the index keys by ns. The two differ for a session
// of a tenant, whose namespaces the Manager keys mixed with the tenant's
// domain (gocore/tenant); a domain's as and ns are one to one. Release
// takes ns.
func (r *Registry) OpenAs(ns, as abi.Namespace) (*Table, error) {
	if ns == (abi.Namespace{}) || as == (abi.Namespace{}) {
		return nil, ErrNamespace
	}
	if r.spec.Disabled {
		return nil, ErrDisabled
	}
	size := r.TableBytes()
	var t *Table
	var budgetErr error
	if err := r.do(func() {
		if t = r.tables[ns]; t != nil {
			r.refs[ns]++
			return
		}
		if len(r.tables)+r.making >= r.maxTables {
			budgetErr = fmt.Errorf("%d tables are open, the limit (each keeps a file descriptor; a quarter of RLIMIT_NOFILE, at most %d): %w",
				len(r.tables)+r.making, MaxTablesCap, ErrTables)
			return
		}
		if r.used+size > r.spec.Bytes {
			budgetErr = fmt.Errorf("a table of %d bytes on top of %d bytes for %d namespaces passes --discover-bytes %s: %w",
				size, r.used, len(r.tables), limit.Size(r.spec.Bytes), ErrBudget)
			return
		}
		r.used += size // reserved while the memfd is made off the dispatcher
		r.making++
	}); err != nil {
		return nil, err
	}
	if t != nil || budgetErr != nil {
		return t, budgetErr
	}
	var flags uint16
	if r.spec.Complete {
		flags = FlagComplete
	}
	nt, err := NewTable(as, r.buckets, flags)
	if err != nil {
		r.do(func() { r.used -= size; r.making-- })
		return nil, err
	}
	if err := r.do(func() {
		r.making--
		if t = r.tables[ns]; t != nil { // another Open made it meanwhile
			r.used -= size
			r.refs[ns]++
			return
		}
		if r.idx != nil {
			for _, b := range r.idx.Matching(func(n abi.Namespace) bool { return n == ns }) {
				if r.idx.Lookup(b.Key) == b { // sealed: visible to lookups
					nt.Insert(b.Key.Hash)
				}
			}
		}
		r.tables[ns], t = nt, nt
		r.refs[ns] = 1
	}); err != nil {
		nt.Close()
		return nil, err
	}
	if t != nt {
		nt.Close()
	}
	return t, nil
}

// Release gives back one reference Open took to the table of ns. The last
// one retires the table: FlagRetired is set in its header (a client that
// still maps the memfd then reads "unknown" and takes the round trip or
// maps the namespace again, getting a fresh table that is kept current),
// the Manager's mapping and memfd are closed and its bytes go back to the
// budget. A Release without an Open is a no-op; after the dispatcher
// stopped it does nothing (Close frees every table).
func (r *Registry) Release(ns abi.Namespace) {
	var retired *Table
	r.do(func() {
		n, ok := r.refs[ns]
		if !ok {
			return
		}
		if n > 1 {
			r.refs[ns] = n - 1
			return
		}
		retired = r.tables[ns]
		delete(r.refs, ns)
		delete(r.tables, ns)
		retired.Retire() // on the dispatcher: no update of it can follow
		r.used -= retired.Bytes()
	})
	if retired != nil {
		retired.Close() // off the dispatcher: munmap of a large table takes a while
	}
}

// Stats are the registry's figures.
type Stats struct {
	Tables int    // namespaces with a table
	Bytes  uint64 // their memory
	Budget uint64 // Spec.Bytes
}

// Stats returns the figures; dispatcher goroutine only.
func (r *Registry) Stats() Stats {
	return Stats{Tables: len(r.tables), Bytes: r.used, Budget: r.spec.Bytes}
}

// Close closes every table; call it after the dispatcher stopped.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		for ns, t := range r.tables {
			t.Retire()
			t.Close()
			delete(r.tables, ns)
			delete(r.refs, ns)
		}
		r.used = 0
	})
}
