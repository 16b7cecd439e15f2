//go:build cgo

package native

/*
#include "client_internal.h"
*/
import "C"

import "unsafe"

// DiscoverDigests are liborbitkv's digests of hashes in namespace ns, the
// 16-byte values a discovery index holds in their place
// (okvi_discover_digests, orbitkv/discover.h "Digests"): through AES-NI
// where the CPU has it, or through the portable AES when soft is true.
// AESNI reports which path ran. gocore/discover's tests compare them with
// the digests the Manager writes (Go's crypto/aes). Allocates the result.
func DiscoverDigests(ns Namespace, hashes []BlockHash, soft bool) (out [][16]byte, aesni bool) {
	var c C.struct_okvi_discover_cipher
	impl := C.int(C.OKVI_DIGEST_AUTO)
	if soft {
		impl = C.OKVI_DIGEST_SOFT
	}
	C.okvi_discover_cipher_init((*C.struct_okv_namespace)(unsafe.Pointer(&ns)), impl, &c)
	out = make([][16]byte, len(hashes))
	if len(hashes) > 0 {
		C.okvi_discover_digests(&c, (*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))),
			C.size_t(len(hashes)), (*C.struct_okv_discover_digest)(unsafe.Pointer(unsafe.SliceData(out))))
	}
	return out, c.aesni != 0
}
