/*
 * test_discover.c — the client's reader of a discovery index
 * (native/src/discover.c) on tables written here byte by byte as the
 * Manager lays them out (orbitkv/discover.h): a hash is found in its
 * bucket, a bucket that stays mid-update answers OKV_EDISCOVER_BUSY with
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

/* A sealed memfd holding a table of BUCKETS buckets for ns with `flags`,
 * hash h in way 0 of its first bucket, every bucket's seq set to `seq`. */
static int make_table(const struct okv_namespace *ns, uint16_t flags, uint64_t seq, const struct okv_block_hash *h)
{
	static uint8_t mem[64 + BUCKETS * 64];
	struct okv_discover_header *hdr = (struct okv_discover_header *)mem;
	struct okv_discover_bucket *bkt = (struct okv_discover_bucket *)(mem + sizeof(*hdr));
	uint64_t lo, hi;
	int fd;

	memset(mem, 0, sizeof(mem));
	hdr->magic = OKV_DISCOVER_MAGIC;
	hdr->version = OKV_DISCOVER_VERSION;
	hdr->flags = flags;
	hdr->buckets = BUCKETS;
	hdr->seed = 0x5eed;
	hdr->ns = *ns;
	for (unsigned i = 0; i < BUCKETS; i++)
		bkt[i].seq = seq;
	memcpy(&lo, h->bytes, 8);
	memcpy(&hi, h->bytes + 8, 8);
	{
		struct okv_discover_bucket *b = &bkt[okv_discover_b1(okv_discover_key(hdr->seed, lo, hi), BUCKETS - 1)];
		b->way[0] = *h;
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

static void probe(const char *name, uint16_t flags, uint64_t seq, int want_rc, uint32_t want_count)
{
	struct okv_namespace ns;
	struct okv_block_hash h;
	struct okvi_discover_map m;
	char err[256] = "";
	uint32_t count = 99;
	int fd, rc;

	memset(&ns, 0x4e, sizeof(ns));
	memset(&h, 0x17, sizeof(h));
	fd = make_table(&ns, flags, seq, &h);
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

int main(void)
{
	probe("a resident hash in a quiet table is counted", 0, 0, 0, 1);
	probe("a bucket that stays mid-update answers OKV_EDISCOVER_BUSY", 0, 1, OKV_EDISCOVER_BUSY, 0);
	probe("a retired table is not read", OKV_DISCOVER_RETIRED, 0, OKVI_DISCOVER_RETIRED_RC, 0);
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
