// Package abi is the Go view of the byte layouts in
// native/include/orbitkv/abi.h: the 64-byte channel message (docs/design.md §5.2),
// the slot and doorbell headers, and the bootstrap hello and reply (§5.1).
//
// The C header is the single source of truth. The Go structs here mirror it
// field for field (same sizes, offsets and natural alignment, no packing);
// layout_test.go compares every offset with the values the C compiler
// produced, through gocore/internal/native.
//
// Message layout (all little-endian):
//
//	offset size field
//	 0     4    magic          0x31564B4F ("OKV1")
//	 4     2    abi_version    1
//	 6     2    code           command (request) / status (response)
//	 8     8    request_id     chosen by the client, echoed
//	16     8    epoch          Manager incarnation
//	24     4    desc_offset    descriptor offset from the slot start
//	28     4    desc_length    descriptor bytes
//	32     8    generation     odd request, request+1 response
//	40     8    arg0
//	48     8    arg1
//	56     8    reserved       must be zero
//
// Decoders here take bytes from outside the process and return errors that
// name the field and the limit; they are fuzzed (FuzzDecodeMessage,
// FuzzDecodeHello). Importers: every gocore package; this package imports
// no cgo.
package abi
