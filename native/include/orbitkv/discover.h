/*
 * orbitkv/discover.h — the shared-memory discovery index of one namespace.
 *
 * The Manager keeps, per namespace a session asked for (the MapDiscovery
 * lifecycle frame), a table of the digests of the block hashes resident in
 * its RAM tier (sealed, visible to QueryBundle). The table lives in a memfd the Manager
 * created, mapped read-write by the Manager only and then sealed with
 * F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE, so a client can map it
 * read-only and nothing else: mmap(PROT_WRITE, MAP_SHARED) and write(2) on
 * the fd fail with EPERM (fcntl(2), "File Sealing"). A client answers "how
 * many of these blocks are here?" from its own mapping: no syscall, no
 * message, no Manager wake-up (okv_discover_local in client.h).
 *
 * Layout (little-endian, natural alignment, no packed structs; the Go writer
 * is gocore/discover, whose tests read it back through liborbitkv):
 *
 *   offset 0:  struct okv_discover_header (64 bytes)
 *   offset 64: struct okv_discover_bucket buckets[header.buckets]
 *              (64 bytes each, one cache line; buckets is a power of two)
 *
 * Digests: a way holds not the block hash h but its digest
 *
 *   K(ns)    = the first 16 bytes of SHA-256(OKV_DISCOVER_DIGEST_TAG || ns)
 *   d(ns, h) = AES-128_{K(ns)}(h) XOR h     (16 bytes; h as one AES block)
 *
 * (the Matyas-Meyer-Oseas construction over one block, with a key per
 * namespace). A block hash is the capability to restore its block
 * (QueryBundle with it hits), and every session of the namespace can map
 * the table, which also tells it K (it knows ns). A digest lets a reader
 * confirm a hash it already holds (it computes d and looks it up) but not
 * learn one it lacks: finding h from d means inverting h -> E_K(h) XOR h,
 * a preimage of Matyas-Meyer-Oseas, which with AES modelled as an ideal
 * cipher takes about 2^128 work even with the key known (Black, Rogaway
 * and Shrimpton, CRYPTO 2002); E_K alone would not do, as a reader could
 * decrypt. The namespace in the key makes the digests of one hash differ
 * across namespaces. One AES-128 per hash (a few ns with AES-NI) keeps a
 * local lookup within a small factor of reading the table alone; the
 * key is derived once per mapping. liborbitkv uses AES-NI where the CPU
 * has it and a portable AES otherwise; the Manager (gocore/discover)
 * uses Go's crypto/aes; all three give the same bytes (tests pin
 * vectors on both sides).
 *
 * Placement: two-choice bucketed hashing. A digest d has two candidate
 * buckets, okv_discover_b1 and okv_discover_b2 of okv_discover_key(seed,
 * d); it sits in at most one way of
 * one of them. Entries never move once written (no displacement), so a
 * reader probes exactly two cache lines for a miss and usually one for a hit.
 * The Manager sizes the table at one bucket per block its RAM tier can hold
 * (the chunk count, rounded up to a power of two), so at most a third of
 * the OKV_DISCOVER_WAYS ways per bucket are ever used;
 * an insert whose two buckets are both full is dropped and counted
 * (header.dropped): a false negative, which costs a round trip or a
 * recomputation, never a wrong hit.
 *
 * Consistency: each bucket is a seqlock with one writer (the Manager's
 * dispatcher goroutine). The writer makes seq odd (a full barrier: a
 * sequentially consistent read-modify-write), stores the ways and `used`,
 * then makes seq even (a release store). A reader loads seq (acquire),
 * reads used and the ways (relaxed atomic loads of whole 64-bit words),
 * issues an acquire fence, reloads seq, and discards the read and retries
 * if the first load was odd or the two differ: it never uses a torn entry. Every insert and removal is
 * written before the dispatcher handles its next request, so an answer is
 * stale by at most the one update in flight. header.generation counts the
 * updates (a reader that wants to know whether anything changed compares
 * two loads). A Manager that died mid-update leaves a bucket odd forever;
 * readers give up after OKV_DISCOVER_SPINS tries and report the hash
 * absent (okv_discover_local answers OKV_EDISCOVER_BUSY).
 */
#ifndef ORBITKV_DISCOVER_H
#define ORBITKV_DISCOVER_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Magic of a discovery index: "OKVX" read as little-endian bytes. */
#define OKV_DISCOVER_MAGIC 0x58564B4Fu
/** Layout version; compared for equality (3: ways hold the AES-based
 *  digests d(ns, h) described above). */
#define OKV_DISCOVER_VERSION 3u
/** Domain string that starts the SHA-256 input of a namespace's digest key
 *  K(ns) (19 bytes, no NUL, no length prefix); it names the layout
 *  version, so a later digest function changes it with
 *  OKV_DISCOVER_VERSION. */
#define OKV_DISCOVER_DIGEST_TAG "orbitkv.discover.v3"
/** Bytes of the digest key K(ns): an AES-128 key. */
#define OKV_DISCOVER_KEY_BYTES 16u
/** Ways (digests) per bucket. */
#define OKV_DISCOVER_WAYS 3u
/** Largest bucket count (2^26 buckets: a 4 GiB table). */
#define OKV_DISCOVER_MAX_BUCKETS (1ull << 26)
/** Tries a reader makes on a bucket whose seq stays odd before it gives up. */
#define OKV_DISCOVER_SPINS 4096u

/** Flags of a discovery index (header.flags); all but OKV_DISCOVER_RETIRED
 *  are fixed for its life. */
enum okv_discover_flags {
	/** The Manager serves only from its RAM tier (no SSD tier, no peers):
	 *  a hash absent here is one QueryBundle would miss too, so a local
	 *  miss is as good as the round trip's. Without it a local miss may
	 *  still be an SSD or peer hit that the round trip would fetch. */
	OKV_DISCOVER_COMPLETE = 1u << 0,
	/** The Manager no longer keeps this table current (the last session
	 *  that mapped it closed, or the Manager stopped): a reader checks it
	 *  on every read and, when set, answers nothing from the buckets
	 *  (okv_discover_local maps the namespace again). Set once, never
	 *  cleared: the only flag that changes in a table's life. */
	OKV_DISCOVER_RETIRED = 1u << 1,
};

/** Header of a discovery index (64 bytes, offset 0). */
struct okv_discover_header {
	uint32_t magic;             /*  0: OKV_DISCOVER_MAGIC */
	uint16_t version;           /*  4: OKV_DISCOVER_VERSION */
	uint16_t flags;             /*  6: enum okv_discover_flags (atomic load) */
	uint64_t buckets;           /*  8: bucket count, a power of two */
	uint64_t seed;              /* 16: keys the bucket choice (random per table) */
	uint64_t generation;        /* 24: updates written so far (writer: atomic add) */
	struct okv_namespace ns;    /* 32: the namespace this table indexes */
	uint64_t entries;           /* 48: hashes present (writer: atomic store) */
	uint64_t dropped;           /* 56: inserts dropped, both buckets full */
};

/** A block hash's digest d(ns, h) (16 bytes; see the top of this file). */
struct okv_discover_digest {
	uint8_t bytes[16];
};

/** One bucket: a seqlock over up to OKV_DISCOVER_WAYS digests (64 bytes). */
struct okv_discover_bucket {
	uint64_t seq;                                       /*  0: odd while written */
	uint64_t used;                                      /*  8: bit w set: way w holds a digest */
	struct okv_discover_digest way[OKV_DISCOVER_WAYS]; /* 16 */
};

_Static_assert(sizeof(struct okv_discover_header) == 64, "discover header is one cache line");
_Static_assert(offsetof(struct okv_discover_header, flags) == 6, "flags offset");
_Static_assert(offsetof(struct okv_discover_header, generation) == 24, "generation offset");
_Static_assert(offsetof(struct okv_discover_header, ns) == 32, "ns offset");
_Static_assert(offsetof(struct okv_discover_header, entries) == 48, "entries offset");
_Static_assert(sizeof(struct okv_discover_bucket) == OKV_CACHE_LINE, "a bucket is one cache line");
_Static_assert(offsetof(struct okv_discover_bucket, way) == 16, "way offset");
_Static_assert(sizeof(struct okv_discover_digest) == 16, "a digest is 16 bytes");
_Static_assert(sizeof(OKV_DISCOVER_DIGEST_TAG) - 1 + sizeof(struct okv_namespace) <= 55,
	       "the digest key's SHA-256 input fits one compression (55 bytes with its padding)");

/** Bytes of a table of `buckets` buckets. */
static inline uint64_t okv_discover_bytes(uint64_t buckets)
{
	return sizeof(struct okv_discover_header) + buckets * sizeof(struct okv_discover_bucket);
}

/** The 64-bit finaliser of MurmurHash3 (a bijection with full avalanche). */
static inline uint64_t okv_discover_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/**
 * The keyed mix of digest words (lo, hi): one full-avalanche finaliser over
 * both words and the seed. It only places a digest (it is invertible and
 * hides nothing); digests are uniform already, but the seed keeps a table's
 * placement its own.
 */
static inline uint64_t okv_discover_key(uint64_t seed, uint64_t lo, uint64_t hi)
{
	return okv_discover_mix(((lo ^ seed) * 0x9e3779b97f4a7c15ull) ^ hi);
}

/** The first candidate bucket of key x (okv_discover_key): its low bits. */
static inline uint64_t okv_discover_b1(uint64_t x, uint64_t mask)
{
	return x & mask;
}

/** The second candidate bucket of key x: its bits from 32 on (the table
 *  has at most 2^26 buckets, so they are independent of the first's),
 *  never the first bucket itself. */
static inline uint64_t okv_discover_b2(uint64_t x, uint64_t mask)
{
	uint64_t b = (x >> 32) & mask;
	return b == (x & mask) ? (b ^ 1u) & mask : b;
}

#ifdef __cplusplus
}
#endif

#endif /* ORBITKV_DISCOVER_H */
