package session

import (
	"os"

	"golang.org/x/sys/unix"
)

// Holes in registered buffers (docs/security.md, "Buffers are allocated
// before they are registered"). RegisterBuffers admits only a memfd that
// is sealed against shrinking and growing, has every page of its size
// allocated and no page beyond it; after that its size cannot change and
// no page can be added beyond it (F_SEAL_GROW refuses fallocate past the
// size, FALLOC_FL_KEEP_SIZE included), so a page short of its size is a
// hole the engine punched (FALLOC_FL_PUNCH_HOLE) after registering. A
// restore's copy would fill such a hole with pages charged to the
// Manager's memory cgroup.

// Unallocated returns how many bytes of b's memfd have no page: its size
// less the bytes of its allocated pages (fstat(2) st_blocks, which counts
// shmem pages in memory, fallocated or swapped out), 0 when none is
// missing, and the memfd's size in bytes. A buffer without a file (CUDA
// memory, or a test's mapping whose fd is closed) reports 0. It costs one
// fstat(2) (about 0.3 µs) and allocates nothing. Errors are fstat's.
func (b *Buffer) Unallocated() (missing, size uint64, err error) {
	if b.File == nil {
		return 0, 0, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(b.File.Fd()), &st); err != nil {
		return 0, 0, &os.PathError{Op: "fstat", Path: b.File.Name(), Err: err}
	}
	size = uint64(st.Size)
	if alloc := uint64(st.Blocks) * 512; alloc < size {
		return size - alloc, size, nil
	}
	return 0, size, nil
}

// FirstHole finds the first run of pages without a page in the buffer's
// region [Offset, Offset+Bytes) of its memfd, in bytes from the region's
// start: [off, off+n). found is false when the region has none (the hole
// lies elsewhere in the memfd) or when the kernel lacks cachestat(2)
// (Linux 6.5). It reads the page cache with cachestat(2), which counts a
// fallocated page not yet written and a swapped-out page as present,
// unlike mincore(2) and SEEK_HOLE. It costs O(log pages) calls over
// ranges that shrink by halves, O(pages of the region) in the kernel
// (milliseconds for GiB regions): only for a refusal's log line.
func (b *Buffer) FirstHole() (off, n uint64, found bool) {
	if b.File == nil {
		return 0, 0, false
	}
	fd := uint(b.File.Fd())
	const page = 4096
	first := b.Offset / page
	end := (b.Offset + b.Bytes + page - 1) / page
	// present counts the pages of [lo, hi) in the page cache or swap.
	present := func(lo, hi uint64) (uint64, bool) {
		cr := unix.CachestatRange{Off: lo * page, Len: (hi - lo) * page}
		var cs unix.Cachestat_t
		if unix.Cachestat(fd, &cr, &cs, 0) != nil {
			return 0, false
		}
		return cs.Cache + cs.Evicted, true
	}
	full, ok := present(first, end)
	if !ok || full == end-first {
		return 0, 0, false
	}
	// The first missing page: halve [lo, hi), which holds one, keeping the
	// left half when it holds one.
	lo, hi := first, end
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		c, ok := present(lo, mid)
		if !ok {
			return 0, 0, false
		}
		if c < mid-lo {
			hi = mid
		} else {
			lo = mid
		}
	}
	start := lo
	// The hole's end: the longest run from start with no page present.
	lo, hi = start+1, end // the run ends in (lo-1, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		c, ok := present(start, mid)
		if !ok {
			return 0, 0, false
		}
		if c == 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	hs, he := start*page, lo*page
	hs, he = max(hs, b.Offset), min(he, b.Offset+b.Bytes)
	return hs - b.Offset, he - hs, true
}
