//go:build cgo

package native

/*
#include <stdlib.h>
#include "orbitkv/client.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Buffer is an engine KV buffer in shared memory (struct okv_buffer, owned:
// a sealed memfd and its MAP_SHARED mapping, described by a C-allocated
// struct): Layers layers of PageCount pages of PageBytes bytes, layer-major.
// Free releases it; the memory returned by Bytes and Page stays valid until
// then. Not safe for concurrent Free; the bytes themselves may be read and
// written from any goroutine (synchronisation of their contents is the
// caller's).
type Buffer struct {
	b *C.struct_okv_buffer // C memory, so C may keep it; nil after Free
}

// AllocBuffer allocates a buffer of layers × pageCount pages of pageBytes
// bytes (okv_buffer_alloc: memfd sealed against shrink and grow, mapped
// and pre-faulted). Errors: *ClientError with -EINVAL for a zero dimension,
// pageBytes not a multiple of 64 or an overflowing size; -ENOMEM and other
// -errno.
func AllocBuffer(layers uint32, pageBytes, pageCount uint64) (*Buffer, error) {
	p := (*C.struct_okv_buffer)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_okv_buffer{}))))
	if p == nil {
		return nil, fmt.Errorf("native: allocating a buffer descriptor: out of memory")
	}
	if rc := C.okv_buffer_alloc(C.uint32_t(layers), C.uint64_t(pageBytes), C.uint64_t(pageCount), p); rc != 0 {
		C.free(unsafe.Pointer(p))
		return nil, newClientError(nil, rc)
	}
	return &Buffer{b: p}, nil
}

// Bytes returns the whole mapping (Layers × PageCount × PageBytes bytes),
// valid until Free; nil after Free.
func (b *Buffer) Bytes() []byte {
	if b.b == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.b.base), int(b.b.bytes))
}

// Page returns page `page` of layer `layer` (PageBytes bytes), valid until
// Free. It panics when layer or page is out of range, like an index
// expression, or after Free.
func (b *Buffer) Page(layer uint32, page uint64) []byte {
	if b.b == nil {
		panic("native: Buffer.Page after Free")
	}
	if layer >= uint32(b.b.layers) || page >= uint64(b.b.page_count) {
		panic(fmt.Sprintf("native: Buffer.Page(%d, %d) out of range [%d layers, %d pages)",
			layer, page, uint32(b.b.layers), uint64(b.b.page_count)))
	}
	off := (uint64(layer)*uint64(b.b.page_count) + page) * uint64(b.b.page_bytes)
	return b.Bytes()[off : off+uint64(b.b.page_bytes) : off+uint64(b.b.page_bytes)]
}

// Layers returns the number of layers (0 after Free).
func (b *Buffer) Layers() uint32 {
	if b.b == nil {
		return 0
	}
	return uint32(b.b.layers)
}

// PageBytes returns the bytes of one page of one layer (0 after Free).
func (b *Buffer) PageBytes() uint64 {
	if b.b == nil {
		return 0
	}
	return uint64(b.b.page_bytes)
}

// PageCount returns the pages per layer (0 after Free).
func (b *Buffer) PageCount() uint64 {
	if b.b == nil {
		return 0
	}
	return uint64(b.b.page_count)
}

// FD returns the buffer's memfd (borrowed: do not close), or -1 after Free.
func (b *Buffer) FD() int {
	if b.b == nil {
		return -1
	}
	return int(b.b.fd)
}

// Free unmaps the buffer and closes its memfd (okv_buffer_free); slices
// from Bytes and Page must not be used afterwards. A buffer registered with
// a Client must stay allocated until that Client is closed. Idempotent.
func (b *Buffer) Free() {
	if b.b != nil {
		C.okv_buffer_free(b.b)
		C.free(unsafe.Pointer(b.b))
		b.b = nil
	}
}

// RegisterBuffer registers b with the Manager (okv_register_buffer: a
// RegisterBuffers lifecycle frame carrying the memfd) and returns the
// buffer id that names it in Publish and Restore. b must stay allocated
// until c is closed. Errors: *ClientError — CodeApplication (Detail names
// the refused field and its limit), CodeTimedOut, CodeProto, CodeClosed,
// -EINVAL for a freed buffer.
func (c *Client) RegisterBuffer(b *Buffer) (uint32, error) {
	if b == nil || b.b == nil {
		return 0, fmt.Errorf("native: RegisterBuffer of a nil or freed buffer")
	}
	var id C.uint32_t
	if rc := C.okv_register_buffer(c.c, b.b, &id); rc != 0 {
		return 0, newClientError(c.c, rc)
	}
	return uint32(id), nil
}
