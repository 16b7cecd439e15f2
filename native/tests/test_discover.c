/*
 * test_discover.c — the client's reader of a discovery index
 * (native/src/discover.c) on tables written here byte by byte as the
 * Manager lays them out (orbitkv/discover.h): a hash is found by its
 * digest in the digest's bucket, the hash itself stored there is not, a
 * table of another layout version is refused naming the version, the
 * digest's AES-128 matches FIPS-197 and its two paths (AES-NI, portable)
 * agree, a bucket that stays mid-update answers OKV_EDISCOVER_BUSY with
 * its own message (nothing was sent to the Manager, unlike OKV_ETIMEDOUT),
 * and a retired table is never read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/client_internal.h"
#include "check.h"

#define BUCKETS 64u

/* A sealed memfd holding a table of layout `version` and BUCKETS buckets
 * for ns with `flags`, the 16 bytes of d in way 0 of their first bucket,
 * every bucket's seq set to `seq`. */
static int make_table(const struct okv_namespace *ns, uint16_t version, uint16_t flags, uint64_t seq,
		      const struct okv_discover_digest *d)
{
	static uint8_t mem[64 + BUCKETS * 64];
	struct okv_discover_header *hdr = (struct okv_discover_header *)mem;
	struct okv_discover_bucket *bkt = (struct okv_discover_bucket *)(mem + sizeof(*hdr));
	uint64_t lo, hi;
	int fd;

	memset(mem, 0, sizeof(mem));
	hdr->magic = OKV_DISCOVER_MAGIC;
	hdr->version = version;
	hdr->flags = flags;
	hdr->buckets = BUCKETS;
	hdr->seed = 0x5eed;
	hdr->ns = *ns;
	for (unsigned i = 0; i < BUCKETS; i++)
		bkt[i].seq = seq;
	memcpy(&lo, d->bytes, 8);
	memcpy(&hi, d->bytes + 8, 8);
	{
		struct okv_discover_bucket *b = &bkt[okv_discover_b1(okv_discover_key(hdr->seed, lo, hi), BUCKETS - 1)];
		b->way[0] = *d;
		b->used = 1;
	}
	fd = memfd_create("test-discover", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (write(fd, mem, sizeof(mem)) != (ssize_t)sizeof(mem) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* What make_table stores for the probed hash h: its digest, or h itself
 * (the layout before digests). */
enum stored { STORE_DIGEST, STORE_HASH };

static void probe(const char *name, enum stored stored, uint16_t flags, uint64_t seq, int want_rc,
		  uint32_t want_count)
{
	struct okv_namespace ns;
	struct okv_block_hash h;
	struct okv_discover_digest d;
	struct okvi_discover_map m;
	char err[256] = "";
	uint32_t count = 99;
	int fd, rc;

	memset(&ns, 0x4e, sizeof(ns));
	memset(&h, 0x17, sizeof(h));
	if (stored == STORE_DIGEST)
		okvi_discover_digest(&ns, &h, &d);
	else
		memcpy(d.bytes, h.bytes, sizeof(d.bytes));
	fd = make_table(&ns, OKV_DISCOVER_VERSION, flags, seq, &d);
	CHECK(fd >= 0, "%s: making the table: %s", name, strerror(errno));
	if (fd < 0)
		return;
	rc = okvi_discover_attach(fd, &ns, 64 + BUCKETS * 64, &m, err, sizeof(err));
	close(fd);
	CHECK(rc == 0, "%s: attach %d: %s", name, rc, err);
	if (rc != 0)
		return;
	rc = okvi_discover_prefix(&m, &h, 1, &count);
	CHECK(rc == want_rc && count == want_count, "%s: prefix rc %d count %u, want rc %d count %u", name, rc, count,
	      want_rc, want_count);
	munmap((void *)m.hdr, m.bytes);
}

/* A table of another layout version (here an older one) is refused, and
 * the message names the version found and the one wanted. */
static void older_version_is_refused(uint16_t version)
{
	struct okv_namespace ns;
	struct okv_discover_digest d;
	struct okvi_discover_map m;
	char err[256] = "", found[32], want[64];
	int fd, rc;

	memset(&ns, 0x4e, sizeof(ns));
	memset(&d, 0x17, sizeof(d));
	fd = make_table(&ns, version, 0, 0, &d);
	CHECK(fd >= 0, "version %u: making the table: %s", version, strerror(errno));
	if (fd < 0)
		return;
	rc = okvi_discover_attach(fd, &ns, 64 + BUCKETS * 64, &m, err, sizeof(err));
	close(fd);
	snprintf(found, sizeof(found), "version %u;", version);
	snprintf(want, sizeof(want), "want 0x58564b4f version %u", OKV_DISCOVER_VERSION);
	CHECK(rc == OKV_EPROTO && strstr(err, found) != NULL && strstr(err, want) != NULL,
	      "version %u: attach %d: \"%s\"", version, rc, err);
	if (rc == 0)
		munmap((void *)m.hdr, m.bytes);
}

static void hex16(const uint8_t *b, char out[33])
{
	for (unsigned i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Both AES paths are FIPS-197's AES-128: its Appendix C.1 vector. */
static void aes_matches_fips197(void)
{
	static const uint8_t key[16] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
					0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};
	static const uint8_t pt[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
				       0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
	static const uint8_t ct[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
				       0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
	struct okvi_discover_cipher c;
	struct okv_block_hash h;
	struct okv_discover_digest d;
	uint8_t out[16];
	char got[33];

	okvi_aes128_expand(key, c.rk);
	okvi_aes128_encrypt_soft(c.rk, pt, out);
	hex16(out, got);
	CHECK(memcmp(out, ct, 16) == 0, "portable AES-128 of FIPS-197 C.1: %s, want 69c4e0d86a7b0430d8cdb78070b4c55a", got);
	/* The digest path XORs the plaintext back in: undo it to compare. */
	memcpy(h.bytes, pt, 16);
	for (int aesni = OKVI_AES_SOFT; aesni <= OKVI_AES_NI_AVX; aesni++) {
		c.aesni = aesni;
		if (aesni > okvi_discover_cpu_has_aesni()) {
			printf("test_discover: this CPU does not run AES path %d; it is not checked\n", aesni);
			continue;
		}
		okvi_discover_digests(&c, &h, 1, &d);
		for (unsigned i = 0; i < 16; i++)
			d.bytes[i] ^= pt[i];
		hex16(d.bytes, got);
		CHECK(memcmp(d.bytes, ct, 16) == 0, "digest path %d (enum okvi_aes_path) of FIPS-197 C.1: %s", aesni, got);
	}
}

/* The portable path and both AES-NI encodings give the same digests
 * (3,000 pseudo-random namespaces and hashes, in groups of every length
 * 1..16, so the four-block and the one-block loops both run). */
static void aes_paths_agree(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct okv_namespace ns;
	struct okv_block_hash h[16];
	struct okv_discover_digest a[16], b[16];
	struct okvi_discover_cipher soft, fast;
	int best = okvi_discover_cpu_has_aesni(), bad = 0;

	if (best == OKVI_AES_SOFT) {
		printf("test_discover: this CPU has no AES-NI; the paths are not compared\n");
		return;
	}
	for (unsigned round = 0; round < 3000 / 16; round++) {
		unsigned n = 1 + round % 16;
		for (unsigned i = 0; i < sizeof(ns.bytes); i++)
			ns.bytes[i] = (uint8_t)((x = okv_discover_mix(x + i)) >> 11);
		for (unsigned j = 0; j < n; j++)
			for (unsigned i = 0; i < sizeof(h[j].bytes); i++)
				h[j].bytes[i] = (uint8_t)((x = okv_discover_mix(x + i)) >> 7);
		okvi_discover_cipher_init(&ns, OKVI_DIGEST_SOFT, &soft);
		okvi_discover_cipher_init(&ns, OKVI_DIGEST_AUTO, &fast);
		CHECK(soft.aesni == OKVI_AES_SOFT && fast.aesni == best, "cipher paths: soft %d, auto %d, want %d", soft.aesni,
		      fast.aesni, best);
		okvi_discover_digests(&soft, h, n, a);
		for (int path = OKVI_AES_NI; path <= best; path++) {
			fast.aesni = path;
			okvi_discover_digests(&fast, h, n, b);
			bad += memcmp(a, b, n * sizeof(a[0])) != 0;
		}
	}
	CHECK(bad == 0, "%d groups of digests differ between the portable path and AES-NI", bad);
}

/* d(ns, h) for ns = 0x4e x 16, h = 0x17 x 16: the value gocore/discover
 * writes (its TestDigestIsPinned pins the same bytes), on both paths. */
static void digest_is_pinned(void)
{
	/* K = hashlib.sha256(b"orbitkv.discover.v3" + b"\x4e" * 16).digest()[:16]
	 *   = dd08df786a2bb4723526a8e064dbd055;
	 * AES-128_K(0x17 x 16) (openssl enc -aes-128-ecb -nopad) XOR 0x17 x 16: */
	static const uint8_t want[16] = {0xfb, 0x01, 0xc4, 0xae, 0xac, 0xd1, 0xb7, 0xb2,
					 0xe9, 0x54, 0xea, 0xae, 0x28, 0xdb, 0x5d, 0x84};
	struct okv_namespace ns;
	struct okv_block_hash h;
	struct okv_discover_digest d;
	struct okvi_discover_cipher c;
	char got[33];

	memset(&ns, 0x4e, sizeof(ns));
	memset(&h, 0x17, sizeof(h));
	for (int impl = OKVI_DIGEST_AUTO; impl <= OKVI_DIGEST_SOFT; impl++) {
		okvi_discover_cipher_init(&ns, impl, &c);
		okvi_discover_digests(&c, &h, 1, &d);
		hex16(d.bytes, got);
		CHECK(memcmp(d.bytes, want, sizeof(want)) == 0,
		      "digest of ns 0x4e.. hash 0x17.. (%s): %s, want fb01c4aeacd1b7b2e954eaae28db5d84",
		      c.aesni != OKVI_AES_SOFT ? "AES-NI" : "portable", got);
	}
	okvi_discover_digest(&ns, &h, &d);
	CHECK(memcmp(d.bytes, want, sizeof(want)) == 0, "okvi_discover_digest differs from the pinned value");
	ns.bytes[0] ^= 1;
	okvi_discover_digest(&ns, &h, &d);
	CHECK(memcmp(d.bytes, want, sizeof(want)) != 0, "the digest of one hash is the same in two namespaces");
}

int main(void)
{
	probe("a resident hash in a quiet table is counted", STORE_DIGEST, 0, 0, 0, 1);
	probe("a table holding the hash itself, not its digest, does not count it", STORE_HASH, 0, 0, 0, 0);
	probe("a bucket that stays mid-update answers OKV_EDISCOVER_BUSY", STORE_DIGEST, 0, 1, OKV_EDISCOVER_BUSY, 0);
	probe("a retired table is not read", STORE_DIGEST, OKV_DISCOVER_RETIRED, 0, OKVI_DISCOVER_RETIRED_RC, 0);
	older_version_is_refused(1);
	older_version_is_refused(2);
	aes_matches_fips197();
	aes_paths_agree();
	digest_is_pinned();
	CHECK(OKV_EDISCOVER_BUSY != OKV_ETIMEDOUT, "a stalled bucket is not a lost reply");
	CHECK(strstr(okv_strerror(OKV_EDISCOVER_BUSY), "mid-update") != NULL &&
		      strstr(okv_strerror(OKV_EDISCOVER_BUSY), "nothing was sent") != NULL,
	      "okv_strerror(OKV_EDISCOVER_BUSY) = \"%s\"", okv_strerror(OKV_EDISCOVER_BUSY));
	if (failures != 0) {
		fprintf(stderr, "test_discover: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_discover: all %d checks passed\n", checks);
	return 0;
}
