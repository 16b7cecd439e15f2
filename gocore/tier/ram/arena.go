package ram

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
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
	Prefault      bool   // MAP_POPULATE the whole arena at creation
}

// Validate names the field and limit that s violates.
func (s Spec) Validate() error {
	switch {
	case s.ChunkBytes < MinChunkBytes || s.ChunkBytes > MaxChunkBytes || s.ChunkBytes%4096 != 0:
		return fmt.Errorf("ram tier: chunk bytes %d, want a multiple of 4096 in [%d, %d]", s.ChunkBytes, MinChunkBytes, MaxChunkBytes)
	case s.CapacityBytes < s.ChunkBytes:
		return fmt.Errorf("ram tier: capacity %d bytes is less than one chunk (%d bytes)", s.CapacityBytes, s.ChunkBytes)
	case s.CapacityBytes/s.ChunkBytes > MaxChunks:
		return fmt.Errorf("ram tier: capacity %d bytes is more than %d chunks of %d bytes", s.CapacityBytes, uint64(MaxChunks), s.ChunkBytes)
	}
	return nil
}

// Arena is a mapped, pre-faulted memfd carved into chunks.
type Arena struct {
	spec  Spec
	file  *os.File
	mem   []byte
	free  []uint32 // stack of free chunk ids
	total uint32
}

// New creates the memfd ("orbitkv-ram-tier"), sizes it and maps it shared.
// With Prefault it populates every page now (this takes about a second per
// few GiB and commits the memory: the tier's capacity is a promise).
func New(s Spec) (*Arena, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	n := s.CapacityBytes / s.ChunkBytes
	size := n * s.ChunkBytes
	fd, err := unix.MemfdCreate("orbitkv-ram-tier", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ram tier: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "orbitkv-ram-tier")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("ram tier: ftruncate %d bytes: %w", size, err)
	}
	flags := unix.MAP_SHARED
	if s.Prefault {
		flags |= unix.MAP_POPULATE
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ram tier: mmap %d bytes: %w", size, err)
	}
	a := &Arena{spec: s, file: f, mem: mem, total: uint32(n), free: make([]uint32, n)}
	for i := range a.free {
		a.free[i] = uint32(n) - 1 - uint32(i) // pop order 0, 1, 2, ...
	}
	return a, nil
}

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

// Release returns chunks to the free list. The caller guarantees no copy
// still touches them.
func (a *Arena) Release(ids []uint32) {
	a.free = append(a.free, ids...)
}

// Addr is the address of the first byte of chunk id, for the copy engine.
func (a *Arena) Addr(id uint32) uintptr {
	return uintptr(unsafe.Pointer(&a.mem[0])) + uintptr(uint64(id)*a.spec.ChunkBytes)
}

// Chunk is chunk id's bytes (valid until Close).
func (a *Arena) Chunk(id uint32) []byte {
	off := uint64(id) * a.spec.ChunkBytes
	return a.mem[off : off+a.spec.ChunkBytes : off+a.spec.ChunkBytes]
}

// Close unmaps and closes the memfd. No copy may be in flight.
func (a *Arena) Close() error {
	if a.mem == nil {
		return nil
	}
	err := unix.Munmap(a.mem)
	a.mem = nil
	if cerr := a.file.Close(); err == nil {
		err = cerr
	}
	return err
}
