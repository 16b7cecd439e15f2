package ram

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/hugepages"
)

// Limits of a Spec.
const (
	MinChunkBytes = 4 << 10
	MaxChunkBytes = 64 << 20
	// MaxChunks bounds the chunk count so a chunk id fits in uint32.
	MaxChunks = 1<<32 - 1
)

// ErrNoSpace is returned by Alloc when fewer chunks are free than asked.
var ErrNoSpace = errors.New("ram tier: not enough free chunks")

// Spec is a validated plain description of an arena.
type Spec struct {
	CapacityBytes uint64 // total bytes; rounded down to whole chunks
	ChunkBytes    uint64 // bytes per chunk: a multiple of 4 KiB in [4 KiB, 64 MiB]
	Prefault      bool   // fault the whole arena in at creation
	// Hugepages says whether the memfd must, may or must not be backed by
	// 2 MiB hugetlb pages (hugepages.Mode; the zero value is Off). It does
	// not change ChunkBytes or the capacity.
	Hugepages hugepages.Mode
	// Progress, when set, hears how far the pre-fault got (bytes done of
	// total), from New's goroutine; see hugepages.Spec.Progress.
	Progress func(done, total uint64)
	// Tag says what the blocks' domain numbers mean (a fingerprint of the
	// tenant domains, in order; 0 without tenants). It is written in the
	// ledger, and a handed-over tier of another Tag is refused.
	Tag uint64
	// Handed, when set, is a RAM tier a predecessor made: New adopts it
	// (adopt.go) instead of making a new one, and falls back to a new,
	// empty tier when it does not fit (Arena.Adoption says why).
	Handed *Handed
}

// Validate checks the limits of s; every field out of range is a
// *limit.Error naming it.
func (s Spec) Validate() error {
	mode := limit.Check(s.Hugepages == hugepages.Off || s.Hugepages == hugepages.Prefer || s.Hugepages == hugepages.Require,
		"ram.Hugepages", s.Hugepages, "off, prefer or require")
	if s.ChunkBytes < MinChunkBytes || s.ChunkBytes > MaxChunkBytes || s.ChunkBytes%4096 != 0 {
		return errors.Join(&limit.Error{Field: "ram.ChunkBytes", Value: s.ChunkBytes,
			Want: fmt.Sprintf("a multiple of 4KiB in %s..%s", limit.Size(MinChunkBytes), limit.Size(MaxChunkBytes))}, mode)
	}
	var capacity error
	switch {
	case s.CapacityBytes < s.ChunkBytes:
		capacity = &limit.Error{Field: "ram.CapacityBytes", Value: s.CapacityBytes, Want: "at least one chunk (" + limit.Size(s.ChunkBytes) + ")"}
	case s.CapacityBytes/s.ChunkBytes > MaxChunks:
		capacity = &limit.Error{Field: "ram.CapacityBytes", Value: s.CapacityBytes,
			Want: fmt.Sprintf("at most %d chunks of %s: %s (a larger --ram-chunk-bytes allows more)", uint64(MaxChunks), limit.Size(s.ChunkBytes), limit.AtMost(MaxChunks*s.ChunkBytes))}
	case s.CapacityBytes > hugepages.MaxBytes:
		capacity = &limit.Error{Field: "ram.CapacityBytes", Value: s.CapacityBytes, Want: "at most " + limit.Size(hugepages.MaxBytes)}
	}
	return errors.Join(capacity, mode)
}

// Arena is a mapped, pre-faulted memfd carved into chunks.
type Arena struct {
	spec     Spec
	mem      *hugepages.Arena
	ledger   *ledger  // which chunks hold which sealed blocks (ledger.go)
	base     []byte   // mem.Bytes(), valid until Close
	free     []uint32 // stack of free chunk ids
	total    uint32
	adoption Adoption // what New adopted from Spec.Handed
	// stopMap and mapped (nil unless adopted with Prefault) stop and
	// report the background mapping of an adopted arena's pages.
	stopMap, mapped chan struct{}
}

// New creates the memfd ("orbitkv-ram-tier") through hugepages.New, sizes
// it and maps it shared. With Prefault it populates every page now (this
// takes about a second per few GiB on 4 KiB pages and commits the memory:
// the tier's capacity is a promise). A hugetlb arena is faulted in 2 MiB
// pages, which are never split, and its pages are allocated at New even
// without Prefault (see the hugepages package). Errors: Validate's; a
// *limit.Refused naming ram.Hugepages (Require mode, wrapping
// hugepages.ErrUnavailable, which names the shortfall) or
// ram.CapacityBytes (an ordinary memfd larger than MemAvailable less
// hugepages.MemReserve, wrapping hugepages.ErrNoMemory); an errno from
// creating or mapping the memfd.
//
// With Spec.Handed, New adopts that tier instead (adopt.go): the blocks
// its ledger holds whose bytes match their seal checksums are allocated
// and listed by Adoption; a tier that does not fit this Spec is refused
// (Adoption().Refused says why) and a new one made as above.
func New(s Spec) (*Arena, error) {
	if err := s.Validate(); err != nil {
		if s.Handed != nil {
			s.Handed.Close()
		}
		return nil, err
	}
	var refused error
	if h := s.Handed; h != nil {
		if h.Arena == nil || h.Ledger == nil {
			h.Close()
			refused = errNoHanded
		} else if a, err := adopt(s, *h); err == nil {
			return a, nil
		} else {
			refused = err
		}
	}
	n := s.CapacityBytes / s.ChunkBytes
	mem, err := hugepages.New(s.memory())
	if err != nil {
		return nil, s.refused(err)
	}
	l, err := newLedger(s)
	if err != nil {
		mem.Close()
		return nil, err
	}
	a := &Arena{spec: s, mem: mem, ledger: l, base: mem.Bytes(), total: uint32(n), free: make([]uint32, n)}
	a.adoption.Refused = refused
	for i := range a.free {
		a.free[i] = uint32(n) - 1 - uint32(i) // pop order 0, 1, 2, ...
	}
	return a, nil
}

// Adoption is what New did with Spec.Handed (zero without one).
func (a *Arena) Adoption() *Adoption { return &a.adoption }

// Files are the arena's and the ledger's memfds, owned by the Arena (valid
// until Close): what a successor adopts (Spec.Handed).
func (a *Arena) Files() Handed { return Handed{Arena: a.mem.File(), Ledger: a.ledger.mem.File()} }

// Dup is duplicates of Files, the caller's to close: what a successor is
// handed, outliving Close.
func (a *Arena) Dup() (Handed, error) {
	arena, err := a.mem.Dup()
	if err != nil {
		return Handed{}, err
	}
	ledger, err := a.ledger.mem.Dup()
	if err != nil {
		arena.Close()
		return Handed{}, err
	}
	return Handed{Arena: arena, Ledger: ledger}, nil
}

// Close closes h's files (those set).
func (h Handed) Close() {
	for _, f := range []*os.File{h.Arena, h.Ledger} {
		if f != nil {
			f.Close()
		}
	}
}

// Seal records in the ledger that chunks now hold the sealed block m
// (with a checksum of its bytes, taken now), so that a successor adopts
// it. Call it once the block's bytes are complete. It reports false for
// a block the ledger cannot describe (over 65535 chunks or layers), which
// then does not outlive this process.
func (a *Arena) Seal(chunks []uint32, m BlockMeta) bool { return a.ledger.write(a, chunks, m) }

// memory is the hugepages arena of s: the capacity in whole chunks.
func (s Spec) memory() hugepages.Spec {
	return hugepages.Spec{Bytes: s.CapacityBytes / s.ChunkBytes * s.ChunkBytes, Mode: s.Hugepages, Name: ArenaName,
		Prefault: s.Prefault, Progress: s.Progress}
}

// refused names the field of s a hugepages error is about: a
// *limit.Refused naming ram.CapacityBytes (too little available memory)
// or ram.Hugepages (Require mode without enough hugepages), its text
// ending with the largest size that would be accepted (limit.AtMost).
func (s Spec) refused(err error) error {
	// The largest size that fits, as a value the flags take.
	if se := (*hugepages.ShortError)(nil); errors.As(err, &se) {
		err = fmt.Errorf("%w; %s", err, limit.AtMost(se.Room))
	}
	switch {
	case errors.Is(err, hugepages.ErrNoMemory):
		return &limit.Refused{Field: "ram.CapacityBytes", Value: s.CapacityBytes, Err: err}
	case errors.Is(err, hugepages.ErrUnavailable) && s.Hugepages == hugepages.Require:
		return &limit.Refused{Field: "ram.Hugepages", Value: s.Hugepages, Err: err}
	}
	return fmt.Errorf("ram tier: %w", err)
}

// Check runs New's checks of the host without committing memory
// (hugepages.Check): the errors New would return before it allocates.
func Check(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if err := hugepages.Check(s.memory()); err != nil {
		return s.refused(err)
	}
	return nil
}

// Huge reports whether the tier is backed by 2 MiB hugetlb pages.
func (a *Arena) Huge() bool { return a.mem.Huge() }

// Fallback is why the tier is not hugetlb-backed ("" when Huge); see
// hugepages.Arena.Fallback.
func (a *Arena) Fallback() string { return a.mem.Fallback() }

// ChunkBytes is the chunk size in bytes.
func (a *Arena) ChunkBytes() uint64 { return a.spec.ChunkBytes }

// Chunks is the arena's chunk count.
func (a *Arena) Chunks() uint32 { return a.total }

// Free is the number of free chunks.
func (a *Arena) Free() uint32 { return uint32(len(a.free)) }

// CapacityBytes is the usable capacity: Chunks() * ChunkBytes().
func (a *Arena) CapacityBytes() uint64 { return uint64(a.total) * a.spec.ChunkBytes }

// ChunksFor is how many chunks a block of n bytes occupies.
func (a *Arena) ChunksFor(n uint64) uint32 {
	return uint32((n + a.spec.ChunkBytes - 1) / a.spec.ChunkBytes)
}

// Alloc appends k free chunk ids to dst and returns it, or ErrNoSpace
// (nothing taken).
func (a *Arena) Alloc(dst []uint32, k uint32) ([]uint32, error) {
	if uint32(len(a.free)) < k {
		return dst, ErrNoSpace
	}
	top := uint32(len(a.free)) - k
	for i := uint32(len(a.free)); i > top; i-- {
		dst = append(dst, a.free[i-1])
	}
	a.free = a.free[:top]
	return dst, nil
}

// Release returns chunks to the free list, cleared in the ledger first.
// The caller guarantees no copy still touches them.
func (a *Arena) Release(ids []uint32) {
	a.ledger.clear(ids)
	a.free = append(a.free, ids...)
}

// Addr is the address of the first byte of chunk id, for the copy engine.
func (a *Arena) Addr(id uint32) uintptr {
	return uintptr(unsafe.Pointer(&a.base[0])) + uintptr(uint64(id)*a.spec.ChunkBytes)
}

// Mem is the whole arena mapping, every chunk in id order (valid until
// Close): what a transfer engine registers as destination memory
// (gocore/transfer's RegisterLocalMemory), so bytes from a peer land in
// the frames directly.
func (a *Arena) Mem() []byte { return a.base[:uint64(a.total)*a.spec.ChunkBytes] }

// Chunk is chunk id's bytes (valid until Close).
func (a *Arena) Chunk(id uint32) []byte {
	off := uint64(id) * a.spec.ChunkBytes
	return a.base[off : off+a.spec.ChunkBytes : off+a.spec.ChunkBytes]
}

// Close unmaps and closes the memfd (hugetlb pages go back to the pool).
// No copy may be in flight. A second Close returns nil.
func (a *Arena) Close() error {
	if a.mapped != nil {
		close(a.stopMap)
		<-a.mapped
		a.mapped = nil
	}
	a.base = nil
	return errors.Join(a.mem.Close(), a.ledger.mem.Close())
}
