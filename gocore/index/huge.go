package index

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeAlign is the transparent hugepage size of x86-64 and arm64 with 4 KiB
// base pages.
const hugeAlign = 2 << 20

// newSlots returns n zeroed slots whose 2 MiB-aligned interior is advised
// MADV_HUGEPAGE. A lookup of an arbitrary key is a random access into the
// slot array (32 MiB at 1M blocks); on 4 KiB pages each one is also a TLB
// miss and a page walk, which on the 2-vCPU VM cost as much as the cache
// miss itself. Go's heap is not advised (transparent_hugepage=madvise, the
// common distribution default, gives it 4 KiB pages), so the table asks
// for its own array. The array is an ordinary Go allocation (it holds
// *Block pointers the collector must see); advice only sets a flag on the
// pages' mapping, so it is safe whatever the runtime later does with
// them, and an error (THP disabled, an old kernel) leaves 4 KiB pages:
// slower, not wrong. Arrays under 2 MiB are not advised.
func newSlots(n int) []slot {
	s := make([]slot, n)
	size := uintptr(n) * unsafe.Sizeof(slot{})
	if size < hugeAlign {
		return s
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (start + hugeAlign - 1) &^ (hugeAlign - 1)
	hi := (start + size) &^ (hugeAlign - 1)
	if hi > lo {
		// The slice of the array's own bytes: the pointer arithmetic stays
		// inside the allocation.
		b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), lo-start)), hi-lo)
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // best effort: see above
	}
	return s
}
