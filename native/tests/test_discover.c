/*
 * test_discover.c — the client's reader of a discovery index
 * (native/src/discover.c) on tables written here byte by byte as the
 * Manager lays them out (orbitkv/discover.h): a hash is found by its
 * digest in the digest's bucket, the hash itself stored there is not, a
 * table of another layout version is refused naming the version, a bucket that stays mid-update answers OKV_EDISCOVER_BUSY with
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

/* A table of layout version 1 (ways held block hashes) is refused, and
 * the message names the version found and the one wanted. */
static void version_one_is_refused(void)
{
	struct okv_namespace ns;
	struct okv_discover_digest d;
	struct okvi_discover_map m;
	char err[256] = "";
	int fd, rc;

	memset(&ns, 0x4e, sizeof(ns));
	memset(&d, 0x17, sizeof(d));
	fd = make_table(&ns, 1, 0, 0, &d);
	CHECK(fd >= 0, "version 1: making the table: %s", strerror(errno));
	if (fd < 0)
		return;
	rc = okvi_discover_attach(fd, &ns, 64 + BUCKETS * 64, &m, err, sizeof(err));
	close(fd);
	CHECK(rc == OKV_EPROTO && strstr(err, "version 1;") != NULL && strstr(err, "want 0x58564b4f version 2") != NULL,
	      "version 1: attach %d: \"%s\"", rc, err);
	if (rc == 0)
		munmap((void *)m.hdr, m.bytes);
}

/* The digest is SHA-256 of the tag, the namespace and the hash, cut to 16
 * bytes: the value gocore/discover writes (its test pins the same one). */
static void digest_is_pinned(void)
{
	/* Python: hashlib.sha256(b"orbitkv.discover.v2" + b"\x4e" * 16 + b"\x17" * 16).digest()[:16] */
	static const uint8_t want[16] = {0x7d, 0x6e, 0xaf, 0x3d, 0xba, 0xf1, 0x51, 0xa2,
					 0x20, 0x6f, 0x6d, 0xdf, 0x39, 0x4a, 0x7c, 0x80};
	struct okv_namespace ns;
	struct okv_block_hash h;
	struct okv_discover_digest d;

	memset(&ns, 0x4e, sizeof(ns));
	memset(&h, 0x17, sizeof(h));
	okvi_discover_digest(&ns, &h, &d);
	CHECK(memcmp(d.bytes, want, sizeof(want)) == 0, "digest of ns 0x4e.. hash 0x17..: %02x%02x%02x%02x..", d.bytes[0],
	      d.bytes[1], d.bytes[2], d.bytes[3]);
}

int main(void)
{
	probe("a resident hash in a quiet table is counted", STORE_DIGEST, 0, 0, 0, 1);
	probe("a table holding the hash itself, not its digest, does not count it", STORE_HASH, 0, 0, 0, 0);
	probe("a bucket that stays mid-update answers OKV_EDISCOVER_BUSY", STORE_DIGEST, 0, 1, OKV_EDISCOVER_BUSY, 0);
	probe("a retired table is not read", STORE_DIGEST, OKV_DISCOVER_RETIRED, 0, OKVI_DISCOVER_RETIRED_RC, 0);
	version_one_is_refused();
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
