/*
 * discover.c — the client's reader of the Manager's shared-memory discovery
 * indexes (orbitkv/discover.h): okv_discover_open maps a namespace's index
 * read-only once (one MapDiscovery lifecycle round trip); okv_discover_local
 * then answers from the mapping alone: no syscall, no message to the
 * Manager. The index holds digests of block hashes, never the hashes
 * (orbitkv/discover.h): a lookup digests each hash asked about first
 * (discover_digest.c, with the key attach derived).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "channel.h"
#include "client_internal.h"
#include "lifecycle.h"

/* A spin-wait hint while the writer holds a bucket. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Hashes whose buckets are prefetched before the first is compared. */
#define OKVI_DISCOVER_GROUP 16u

int okvi_discover_attach(int fd, const struct okv_namespace *ns, uint64_t bytes, struct okvi_discover_map *m,
			 char *err, size_t errlen)
{
	struct stat st;
	const struct okv_discover_header *h;
	uint64_t buckets;
	void *p;
	int seals;

	memset(m, 0, sizeof(*m));
	/* A table that could shrink under the mapping would SIGBUS a reader;
	 * one that could still be written by others is not the Manager's. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE)) != (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE))
		return okvi_fail(err, errlen, OKV_EPROTO,
				 "discovery index memfd seals 0x%x lack F_SEAL_SHRINK|F_SEAL_FUTURE_WRITE", seals);
	if (fstat(fd, &st) < 0)
		return okvi_fail(err, errlen, -errno, "discovery index fstat: %s", strerror(errno));
	if (bytes < sizeof(struct okv_discover_header) || (uint64_t)st.st_size != bytes)
		return okvi_fail(err, errlen, OKV_EPROTO, "discovery index is %lld bytes; the reply said %llu",
				 (long long)st.st_size, (unsigned long long)bytes);
	p = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		return okvi_fail(err, errlen, -errno, "mapping the discovery index read-only: %s", strerror(errno));
	h = p;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != OKV_DISCOVER_MAGIC || h->version != OKV_DISCOVER_VERSION) {
		uint32_t magic = h->magic;
		unsigned version = h->version;
		munmap(p, (size_t)bytes); /* h is gone: the message uses the copies */
		return okvi_fail(err, errlen, OKV_EPROTO, "discovery index magic 0x%08x version %u; want 0x%08x version %u",
				 magic, version, OKV_DISCOVER_MAGIC, OKV_DISCOVER_VERSION);
	}
	buckets = h->buckets; /* read once: what is checked is what is used */
	if (buckets < 2 || buckets > OKV_DISCOVER_MAX_BUCKETS || (buckets & (buckets - 1)) != 0 ||
	    okv_discover_bytes(buckets) != bytes) {
		munmap(p, (size_t)bytes);
		return okvi_fail(err, errlen, OKV_EPROTO,
				 "discovery index buckets %llu: not a power of two in 2..%llu filling %llu bytes",
				 (unsigned long long)buckets, (unsigned long long)OKV_DISCOVER_MAX_BUCKETS,
				 (unsigned long long)bytes);
	}
	if (memcmp(&h->ns, ns, sizeof(*ns)) != 0) {
		munmap(p, (size_t)bytes);
		return okvi_fail(err, errlen, OKV_EPROTO, "discovery index is of another namespace than the one asked for");
	}
	m->ns = *ns;
	m->hdr = h;
	m->bkt = (const struct okv_discover_bucket *)((const uint8_t *)p + sizeof(*h));
	m->mask = buckets - 1;
	m->seed = h->seed;
	m->flags = h->flags;
	m->bytes = (size_t)bytes;
	okvi_discover_cipher_init(ns, OKVI_DIGEST_AUTO, &m->cipher);
	return 0;
}

void okvi_discover_unmap_all(okv_client *c)
{
	for (uint32_t i = 0; i < c->disc_count; i++)
		munmap((void *)c->disc[i].hdr, c->disc[i].bytes);
	c->disc_count = 0;
}

/*
 * One seqlock read of bucket b (the reader of discover.h: seq (acquire),
 * `used` and the ways (relaxed 64-bit loads), an acquire fence, seq
 * again): 1 when b holds the digest of words (lo, hi), 0 when it does
 * not, -1 when the read overlapped an update (seq odd or changed) and
 * must be retried. The ways
 * are compared without branches, so a hit costs no misprediction; inlined
 * into the prefix loop (a call per bucket cost a fifth of a lookup).
 */
static inline __attribute__((always_inline)) int bucket_read(const struct okv_discover_bucket *b, uint64_t lo,
							     uint64_t hi)
{
	uint64_t s1 = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
	uint64_t used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	uint64_t hit = 0;

#pragma GCC unroll 8
	for (unsigned w = 0; w < OKV_DISCOVER_WAYS; w++) {
		const uint64_t *wd = (const uint64_t *)(const void *)b->way[w].bytes;
		uint64_t diff = (__atomic_load_n(&wd[0], __ATOMIC_RELAXED) ^ lo) | (__atomic_load_n(&wd[1], __ATOMIC_RELAXED) ^ hi);
		hit |= (uint64_t)(diff == 0) << w;
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if ((s1 & 1u) || __atomic_load_n(&b->seq, __ATOMIC_RELAXED) != s1)
		return -1;
	return (hit & used) != 0;
}

/* bucket_has's retries: up to OKV_DISCOVER_SPINS reads of a bucket the
 * writer holds, then OKV_EDISCOVER_BUSY. Out of line: rarely run. */
static __attribute__((noinline)) int bucket_has_retry(const struct okv_discover_bucket *b, uint64_t lo, uint64_t hi)
{
	for (unsigned t = 1; t < OKV_DISCOVER_SPINS; t++) {
		cpu_relax();
		int rc = bucket_read(b, lo, hi);
		if (rc >= 0)
			return rc;
	}
	return OKV_EDISCOVER_BUSY;
}

/*
 * Whether bucket b holds (lo, hi): 1 yes, 0 no, OKV_EDISCOVER_BUSY when
 * it stayed mid-update for OKV_DISCOVER_SPINS reads.
 */
static inline __attribute__((always_inline)) int bucket_has(const struct okv_discover_bucket *b, uint64_t lo,
							    uint64_t hi)
{
	int rc = bucket_read(b, lo, hi);
	return __builtin_expect(rc >= 0, 1) ? rc : bucket_has_retry(b, lo, hi);
}

int okvi_discover_prefix(const struct okvi_discover_map *m, const struct okv_block_hash *hashes, size_t n,
			 uint32_t *count)
{
	uint64_t key[OKVI_DISCOVER_GROUP], lo[OKVI_DISCOVER_GROUP], hi[OKVI_DISCOVER_GROUP];
	struct okv_discover_digest d[OKVI_DISCOVER_GROUP];

	*count = 0;
	/* Acquire: a table retired before this load is never read. One retired
	 * during the read answers as of at most the one update in flight. */
	if (__atomic_load_n(&m->hdr->flags, __ATOMIC_ACQUIRE) & OKV_DISCOVER_RETIRED)
		return OKVI_DISCOVER_RETIRED_RC;
	for (size_t base = 0; base < n; base += OKVI_DISCOVER_GROUP) {
		size_t g = n - base < OKVI_DISCOVER_GROUP ? n - base : OKVI_DISCOVER_GROUP;
		/* Phase 1: every hash is digested (one AES-128 each, a few ns
		 * with AES-NI) and its bucket's line requested before any is
		 * needed, so the cache misses of a group overlap. */
		okvi_discover_digests(&m->cipher, &hashes[base], g, d);
		for (size_t j = 0; j < g; j++) {
			memcpy(&lo[j], d[j].bytes, 8);
			memcpy(&hi[j], d[j].bytes + 8, 8);
			key[j] = okv_discover_key(m->seed, lo[j], hi[j]);
			__builtin_prefetch(&m->bkt[okv_discover_b1(key[j], m->mask)]);
		}
		/* Phase 2: the first bucket, then the second only where needed. */
		for (size_t j = 0; j < g; j++) {
			int rc = bucket_has(&m->bkt[okv_discover_b1(key[j], m->mask)], lo[j], hi[j]);
			if (rc == 0)
				rc = bucket_has(&m->bkt[okv_discover_b2(key[j], m->mask)], lo[j], hi[j]);
			if (rc < 0)
				return rc;
			if (rc == 0)
				return 0;
			(*count)++;
		}
	}
	return 0;
}

/* The mapped index of ns in c, or NULL. */
static const struct okvi_discover_map *find_map(const okv_client *c, const struct okv_namespace *ns)
{
	for (uint32_t i = 0; i < c->disc_count; i++)
		if (memcmp(&c->disc[i].ns, ns, sizeof(*ns)) == 0)
			return &c->disc[i];
	return NULL;
}

/* The remembered refusal of ns younger than OKVI_DISCOVER_BACKOFF_NS, or NULL. */
static struct okvi_discover_refusal *find_refusal(okv_client *c, const struct okv_namespace *ns, uint64_t now)
{
	for (uint32_t i = 0; i < OKVI_DISCOVER_MAX_NS; i++) {
		struct okvi_discover_refusal *r = &c->disc_refused[i];
		if (r->at_ns != 0 && memcmp(&r->ns, ns, sizeof(*ns)) == 0)
			return now - r->at_ns < OKVI_DISCOVER_BACKOFF_NS ? r : NULL;
	}
	return NULL;
}

/* Remember the Manager's refusal rc of ns (message in c->last_error). */
static void remember_refusal(okv_client *c, const struct okv_namespace *ns, int rc)
{
	struct okvi_discover_refusal *r = NULL;

	for (uint32_t i = 0; i < OKVI_DISCOVER_MAX_NS && r == NULL; i++)
		if (c->disc_refused[i].at_ns != 0 && memcmp(&c->disc_refused[i].ns, ns, sizeof(*ns)) == 0)
			r = &c->disc_refused[i];
	if (r == NULL)
		r = &c->disc_refused[c->disc_refused_next++ % OKVI_DISCOVER_MAX_NS];
	r->ns = *ns;
	r->at_ns = okvi_now_ns();
	r->rc = rc;
	_Static_assert(sizeof(r->msg) == sizeof(c->last_error), "a refusal keeps the whole message");
	memcpy(r->msg, c->last_error, sizeof(r->msg));
}

/* Unmap c->disc[i] and drop it from the list (the last entry takes its place). */
static void drop_map(okv_client *c, uint32_t i)
{
	munmap((void *)c->disc[i].hdr, c->disc[i].bytes);
	c->disc[i] = c->disc[--c->disc_count];
}

int okv_discover_open(okv_client *c, const struct okv_namespace *ns)
{
	static const struct okv_namespace zero;
	uint64_t bytes = 0, buckets = 0;
	int fd = -1;
	int rc;

	okvi_clear_error(c);
	if (!c || !ns)
		return -EINVAL;
	if (memcmp(ns, &zero, sizeof(zero)) == 0) {
		okvi_set_error(c, "%s", "namespace: all zero, which is never a valid namespace");
		return -EINVAL;
	}
	if (find_map(c, ns) != NULL)
		return 0;
	if (c->sock < 0)
		return OKV_ECLOSED;
	{
		uint64_t now = okvi_now_ns();
		const struct okvi_discover_refusal *r = find_refusal(c, ns, now);
		if (r != NULL) {
			okvi_set_error(c, "%s (the Manager's answer %llu ms ago; asked again %llu ms after it)", r->msg,
				       (unsigned long long)((now - r->at_ns) / 1000000u),
				       (unsigned long long)(OKVI_DISCOVER_BACKOFF_NS / 1000000u));
			return r->rc;
		}
	}
	if (c->lc_broken) {
		okvi_set_error(c, "%s", "an earlier lifecycle call timed out or failed mid-frame; reconnect");
		return OKV_ECLOSED;
	}
	if (c->disc_count == OKVI_DISCOVER_MAX_NS) {
		okvi_set_error(c, "namespace: this client maps %u discovery indexes already, the most it maps",
			       OKVI_DISCOVER_MAX_NS);
		return -ENOSPC;
	}
	rc = okvi_map_discovery(c->sock, c->reply.epoch, c->reply.client_token, ns, (int)c->timeout_ms, &fd, &bytes,
				&buckets, c->last_error, sizeof(c->last_error));
	if (okvi_lifecycle_desynced(rc))
		c->lc_broken = 1;
	if (rc == OKV_EAPPLICATION || rc == OKV_EUNADMITTED || rc == OKV_EINVALID || rc == OKV_EUNSUPPORTED)
		remember_refusal(c, ns, rc); /* the Manager's answer, not a transport failure */
	if (rc != 0)
		return rc;
	rc = okvi_discover_attach(fd, ns, bytes, &c->disc[c->disc_count], c->last_error, sizeof(c->last_error));
	close(fd); /* the mapping keeps the memory */
	if (rc != 0)
		return rc;
	if (c->disc[c->disc_count].mask + 1 != buckets) {
		munmap((void *)c->disc[c->disc_count].hdr, c->disc[c->disc_count].bytes);
		okvi_set_error(c, "discovery index has %llu buckets; the reply said %llu",
			       (unsigned long long)(c->disc[c->disc_count].mask + 1), (unsigned long long)buckets);
		return OKV_EPROTO;
	}
	c->disc_count++;
	return 0;
}

/*
 * The live mapping of ns in c: the one mapped, unless the Manager retired
 * it (then it is unmapped and ns mapped again, one round trip), or a new
 * one. *m is NULL on error.
 */
static int live_map(okv_client *c, const struct okv_namespace *ns, const struct okvi_discover_map **m)
{
	int rc;

	*m = find_map(c, ns);
	if (*m != NULL &&
	    (__atomic_load_n(&(*m)->hdr->flags, __ATOMIC_ACQUIRE) & OKV_DISCOVER_RETIRED) == 0)
		return 0;
	if (*m != NULL) {
		drop_map(c, (uint32_t)(*m - c->disc));
		*m = NULL;
	}
	rc = okv_discover_open(c, ns);
	if (rc != 0)
		return rc;
	*m = find_map(c, ns);
	return 0;
}

int okv_discover_local(okv_client *c, const struct okv_namespace *ns, const struct okv_block_hash *hashes, size_t n,
		       uint32_t *count)
{
	const struct okvi_discover_map *m;
	int rc;

	if (!c || !ns || !count || (n > 0 && !hashes))
		return -EINVAL;
	*count = 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	m = find_map(c, ns);
	if (m != NULL) {
		rc = okvi_discover_prefix(m, hashes, n, count);
		if (rc != OKVI_DISCOVER_RETIRED_RC)
			return rc;
	}
	/* Not mapped yet, or retired since: map it (again) and read once. */
	rc = live_map(c, ns, &m);
	if (rc != 0)
		return rc;
	rc = okvi_discover_prefix(m, hashes, n, count);
	if (rc == OKVI_DISCOVER_RETIRED_RC) {
		okvi_set_error(c, "%s", "the discovery index was retired as soon as it was mapped; take the round trip");
		return OKV_ECLOSED;
	}
	return rc;
}

int okv_discover_flags(okv_client *c, const struct okv_namespace *ns, uint32_t *flags)
{
	const struct okvi_discover_map *m;
	int rc;

	if (!c || !ns || !flags)
		return -EINVAL;
	*flags = 0;
	rc = live_map(c, ns, &m);
	if (rc != 0)
		return rc;
	*flags = __atomic_load_n(&m->hdr->flags, __ATOMIC_ACQUIRE);
	return 0;
}
