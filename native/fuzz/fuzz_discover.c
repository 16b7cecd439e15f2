/*
 * fuzz_discover.c — libFuzzer target for the client's reader of a
 * discovery index (orbitkv/discover.h), bytes the Manager wrote into shared
 * memory (CONTRIBUTING.md habit 16): okvi_discover_attach validating a
 * table's header and size, then okvi_discover_prefix probing it.
 *
 * Input: 16 bytes of namespace (the one asked for), then the table bytes
 * (written into a memfd, which attach maps read-only). The probed hashes
 * are the table's own 16-byte words after the header (up to 64); the
 * reader looks up their digests (orbitkv/discover.h), which a mutated
 * table holds only by chance, so the probes reach the digests and the
 * comparisons of both candidate buckets (seed first_words_resident holds
 * the digest of its first probes, so they count). The digests of the
 * probes are also computed by the portable AES and compared with the
 * CPU's AES-NI path. Seeds:
 * native/fuzz/corpus/discover/. Besides the sanitizers it aborts when an
 * accepted table breaks a rule the checker promises (size, power-of-two
 * bucket count, the namespace asked for), when a count exceeds the hashes
 * asked about, or when an error text is not NUL-terminated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/client_internal.h"

#define REQUIRE(cond)                                                                  \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz_discover: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                       \
		}                                                                      \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct okv_namespace ns;
	struct okvi_discover_map m;
	char err[256];
	size_t n, tbytes;
	int fd, rc;

	if (size < sizeof(ns))
		return 0;
	memcpy(&ns, data, sizeof(ns));
	data += sizeof(ns);
	tbytes = size - sizeof(ns);
	fd = memfd_create("fuzz-discover", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	REQUIRE(fd >= 0);
	if (tbytes > 0)
		REQUIRE(write(fd, data, tbytes) == (ssize_t)tbytes);
	/* Sealed as the Manager seals its tables (attach refuses others). */
	REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE) == 0);
	memset(err, 0x55, sizeof(err));
	err[sizeof(err) - 1] = '\0';
	rc = okvi_discover_attach(fd, &ns, tbytes, &m, err, sizeof(err));
	close(fd);
	if (rc != 0) {
		REQUIRE(memchr(err, '\0', sizeof(err)) != NULL);
		return 0;
	}
	REQUIRE(m.mask + 1 >= 2 && ((m.mask + 1) & m.mask) == 0);
	REQUIRE(okv_discover_bytes(m.mask + 1) == tbytes && m.bytes == tbytes);
	REQUIRE(memcmp(&m.ns, &ns, sizeof(ns)) == 0);
	n = (tbytes - sizeof(struct okv_discover_header)) / sizeof(struct okv_block_hash);
	if (n > 64)
		n = 64;
	{
		struct okv_block_hash hs[64];
		uint32_t count = 0;
		memcpy(hs, data + sizeof(struct okv_discover_header), n * sizeof(hs[0]));
		rc = okvi_discover_prefix(&m, hs, n, &count);
		REQUIRE(rc == 0 || rc == OKV_EDISCOVER_BUSY || rc == OKVI_DISCOVER_RETIRED_RC);
		REQUIRE(count <= n);
		/* The portable AES and the CPU's AES-NI give the same digests. */
		if (n > 0 && m.cipher.aesni != OKVI_AES_SOFT) {
			struct okvi_discover_cipher soft;
			struct okv_discover_digest a[64], b[64];
			okvi_discover_cipher_init(&ns, OKVI_DIGEST_SOFT, &soft);
			okvi_discover_digests(&soft, hs, n, a);
			okvi_discover_digests(&m.cipher, hs, n, b);
			REQUIRE(memcmp(a, b, n * sizeof(a[0])) == 0);
		}
	}
	munmap((void *)m.hdr, m.bytes);
	return 0;
}
