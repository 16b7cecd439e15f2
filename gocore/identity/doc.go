// Package identity owns the cache identity of KV blocks (docs/design.md §5.4): the
// namespace, a 16-byte fingerprint of everything that makes two engines'
// KV blocks interchangeable — model, weights revision, KV dtype and layout,
// block size, TP/PP/CP rank and size, adapter and tenant salt. A block key
// is (namespace, block hash); different namespaces never share a block.
//
// Spec is the plain, validated description; Namespace is its fingerprint.
// Computing it needs no privileges and no Manager. The same bytes come out of
// liborbitkv's okv_namespace_fingerprint (native/src/identity.c) and the
// Python package; gocore/internal/native tests that C and Go agree.
//
// Encoding (version 1). The fingerprint is the first 16 bytes of SHA-256 over:
//
//	offset  size      field
//	0       20        domain tag "orbitkv.namespace.v1" (raw ASCII, no length)
//	20      4 + n     ModelID          u32 little-endian byte length n, then the bytes
//	...     4 + n     WeightsRevision
//	...     4 + n     Dtype
//	...     4 + n     KVLayout
//	...     4 + 4     BlockTokens      u32 LE length 4, then u32 LE value
//	...     4 + 4     TPRank, then TPSize, PPRank, PPSize, CPRank, CPSize (same form)
//	...     4 + n     AdapterID        "" = no adapter
//	...     4 + n     TenantSalt
//
// Every field carries its length so no two specs encode to the same bytes
// ("ab" then "c" differs from "a" then "bc"); integers use the same
// length-prefixed form so a reader can walk the encoding without knowing
// which fields are numbers. The domain tag keeps these digests apart from any
// other SHA-256 use, and its "v1" is bumped if the encoding ever changes
// (which changes every namespace: a cache built under v1 is not reused).
// Strings are at most 1024 bytes and carry no NUL byte (the C API passes
// NUL-terminated strings, so a NUL could not cross it unchanged).
//
// Who may import it: anything. It imports only the standard library.
package identity
