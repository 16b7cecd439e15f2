/*
 * discover_digest.c — the digest a discovery index holds in place of a
 * block hash (orbitkv/discover.h, "Digests"):
 *
 *   K(ns)    = the first 16 bytes of SHA-256(OKV_DISCOVER_DIGEST_TAG || ns)
 *   d(ns, h) = AES-128_{K(ns)}(h) XOR h
 *
 * The key is derived once per mapped table (okvi_discover_cipher_init, at
 * attach); a lookup then pays one AES-128 encryption per hash. Two
 * implementations of the same FIPS-197 AES-128 give the same bytes:
 * AES-NI (x86-64 CPUs whose CPUID reports AES; compiled with a target
 * attribute, so the library needs no -maes) and a portable byte-oriented
 * AES of this file for every other CPU. test_discover.c checks both
 * against FIPS-197's vector and against each other; gocore/discover
 * writes the same digests with Go's crypto/aes, and
 * TestDigestsAgreeWithLiborbitkv (gocore/internal/native) compares the
 * two on random vectors.
 *
 * The portable path indexes its S-box by secret bytes (the hash looked
 * up), so its timing depends on cache state; it runs only where the CPU
 * has no AES instructions (Go's generic crypto/aes is table-driven too).
 */
#include <string.h>

/* SHA256_Init/Update/Final are deprecated since OpenSSL 3.0 in favour of
 * EVP, but they use no allocation and no global state (an EVP_MD_CTX is
 * allocated), so deriving a key at attach cannot fail. */
#define OPENSSL_API_COMPAT 0x10100000L
#include <openssl/sha.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define OKVI_HAVE_AESNI_PATH 1
#else
#define OKVI_HAVE_AESNI_PATH 0
#endif

#include "client_internal.h"

/* FIPS-197 S-box. */
static const uint8_t sbox[256] = {
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
	0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
	0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
	0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
	0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
	0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
	0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
	0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
	0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
	0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
	0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
	0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
	0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
	0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
	0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
	0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
};

/* Multiplication by x (0x02) in GF(2^8) mod x^8 + x^4 + x^3 + x + 1,
 * without a branch on the byte. */
static inline uint8_t xtime(uint8_t x)
{
	return (uint8_t)((x << 1) ^ (0x1b & (uint8_t)-(x >> 7)));
}

void okvi_aes128_expand(const uint8_t key[16], uint8_t rk[OKVI_AES128_ROUNDS + 1][16])
{
	uint8_t rcon = 0x01;

	memcpy(rk[0], key, 16);
	for (unsigned r = 1; r <= OKVI_AES128_ROUNDS; r++) {
		const uint8_t *p = rk[r - 1];
		uint8_t *q = rk[r];
		/* The first word: RotWord, SubWord, Rcon of the previous last word. */
		q[0] = (uint8_t)(p[0] ^ sbox[p[13]] ^ rcon);
		q[1] = (uint8_t)(p[1] ^ sbox[p[14]]);
		q[2] = (uint8_t)(p[2] ^ sbox[p[15]]);
		q[3] = (uint8_t)(p[3] ^ sbox[p[12]]);
		for (unsigned i = 4; i < 16; i++)
			q[i] = (uint8_t)(p[i] ^ q[i - 4]);
		rcon = xtime(rcon);
	}
}

void okvi_aes128_encrypt_soft(const uint8_t rk[OKVI_AES128_ROUNDS + 1][16], const uint8_t in[16], uint8_t out[16])
{
	uint8_t s[16], t[16];

	/* s[r + 4c] is row r of column c (FIPS-197 §3.4). */
	for (unsigned i = 0; i < 16; i++)
		s[i] = (uint8_t)(in[i] ^ rk[0][i]);
	for (unsigned r = 1; r <= OKVI_AES128_ROUNDS; r++) {
		/* SubBytes and ShiftRows: row i moves left by i columns. */
		for (unsigned c = 0; c < 4; c++)
			for (unsigned i = 0; i < 4; i++)
				t[i + 4 * c] = sbox[s[i + 4 * ((c + i) & 3)]];
		if (r < OKVI_AES128_ROUNDS) {
			/* MixColumns: each column times {03}x^3 + {01}x^2 + {01}x + {02}. */
			for (unsigned c = 0; c < 4; c++) {
				uint8_t *a = &t[4 * c];
				uint8_t all = (uint8_t)(a[0] ^ a[1] ^ a[2] ^ a[3]), a0 = a[0];
				a[0] = (uint8_t)(a[0] ^ all ^ xtime((uint8_t)(a[0] ^ a[1])));
				a[1] = (uint8_t)(a[1] ^ all ^ xtime((uint8_t)(a[1] ^ a[2])));
				a[2] = (uint8_t)(a[2] ^ all ^ xtime((uint8_t)(a[2] ^ a[3])));
				a[3] = (uint8_t)(a[3] ^ all ^ xtime((uint8_t)(a[3] ^ a0)));
			}
		}
		for (unsigned i = 0; i < 16; i++)
			s[i] = (uint8_t)(t[i] ^ rk[r][i]);
	}
	memcpy(out, s, 16);
}

int okvi_discover_cpu_has_aesni(void)
{
#if OKVI_HAVE_AESNI_PATH
	unsigned a, b, c, d, xcr0_lo, xcr0_hi;

	/* CPUID leaf 1: ECX bit 25 AES, bit 27 OSXSAVE, bit 28 AVX. */
	if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_AES) == 0)
		return OKVI_AES_SOFT;
	if ((c & (bit_OSXSAVE | bit_AVX)) != (bit_OSXSAVE | bit_AVX))
		return OKVI_AES_NI;
	/* XCR0 bits 1 and 2: the OS saves the XMM and YMM state. */
	__asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	(void)xcr0_hi;
	return (xcr0_lo & 6u) == 6u ? OKVI_AES_NI_AVX : OKVI_AES_NI;
#else
	return OKVI_AES_SOFT;
#endif
}

#if OKVI_HAVE_AESNI_PATH
/* One AES-128 round on each of four blocks: four independent aesenc in a
 * row, so their latencies overlap (a single block's ten rounds are a
 * dependency chain). */
#define AESNI_ROUND4(s, k)                            \
	do {                                          \
		(s)[0] = _mm_aesenc_si128((s)[0], (k)); \
		(s)[1] = _mm_aesenc_si128((s)[1], (k)); \
		(s)[2] = _mm_aesenc_si128((s)[2], (k)); \
		(s)[3] = _mm_aesenc_si128((s)[3], (k)); \
	} while (0)

/* Digests of h[0..n) with AES-NI: the round keys in registers, four
 * blocks interleaved round by round, the rounds unrolled. Defined twice:
 * VEX-encoded (target avx) where the OS enables AVX, legacy SSE
 * elsewhere. A legacy-SSE instruction run while the upper halves of the
 * YMM registers are dirty (AVX code before it without VZEROUPPER, which
 * this library does not control inside a host process such as a Go
 * program) pays a merge with the register's old value on recent Intel
 * cores, which chains the four blocks back together; VEX-encoded
 * instructions clear the upper halves and carry no such dependency. */
#define AESNI_DIGESTS(name, target_isa) \
__attribute__((target(target_isa))) static void name(const uint8_t rk[OKVI_AES128_ROUNDS + 1][16], const struct okv_block_hash *h, size_t n, struct okv_discover_digest *out) \
{ \
	const __m128i k0 = _mm_loadu_si128((const __m128i *)(const void *)rk[0]); \
	const __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)rk[1]); \
	const __m128i k2 = _mm_loadu_si128((const __m128i *)(const void *)rk[2]); \
	const __m128i k3 = _mm_loadu_si128((const __m128i *)(const void *)rk[3]); \
	const __m128i k4 = _mm_loadu_si128((const __m128i *)(const void *)rk[4]); \
	const __m128i k5 = _mm_loadu_si128((const __m128i *)(const void *)rk[5]); \
	const __m128i k6 = _mm_loadu_si128((const __m128i *)(const void *)rk[6]); \
	const __m128i k7 = _mm_loadu_si128((const __m128i *)(const void *)rk[7]); \
	const __m128i k8 = _mm_loadu_si128((const __m128i *)(const void *)rk[8]); \
	const __m128i k9 = _mm_loadu_si128((const __m128i *)(const void *)rk[9]); \
	const __m128i k10 = _mm_loadu_si128((const __m128i *)(const void *)rk[10]); \
	size_t j = 0; \
 \
	_Static_assert(OKVI_AES128_ROUNDS == 10, "the rounds below are unrolled for AES-128"); \
	for (; j + 4 <= n; j += 4) { \
		__m128i x[4], s[4]; \
		for (unsigned i = 0; i < 4; i++) { \
			x[i] = _mm_loadu_si128((const __m128i *)(const void *)h[j + i].bytes); \
			s[i] = _mm_xor_si128(x[i], k0); \
		} \
		AESNI_ROUND4(s, k1); \
		AESNI_ROUND4(s, k2); \
		AESNI_ROUND4(s, k3); \
		AESNI_ROUND4(s, k4); \
		AESNI_ROUND4(s, k5); \
		AESNI_ROUND4(s, k6); \
		AESNI_ROUND4(s, k7); \
		AESNI_ROUND4(s, k8); \
		AESNI_ROUND4(s, k9); \
		for (unsigned i = 0; i < 4; i++) \
			_mm_storeu_si128((__m128i *)(void *)out[j + i].bytes, \
					 _mm_xor_si128(_mm_aesenclast_si128(s[i], k10), x[i])); \
	} \
	for (; j < n; j++) { \
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)h[j].bytes); \
		__m128i s = _mm_xor_si128(x, k0); \
		s = _mm_aesenc_si128(s, k1); \
		s = _mm_aesenc_si128(s, k2); \
		s = _mm_aesenc_si128(s, k3); \
		s = _mm_aesenc_si128(s, k4); \
		s = _mm_aesenc_si128(s, k5); \
		s = _mm_aesenc_si128(s, k6); \
		s = _mm_aesenc_si128(s, k7); \
		s = _mm_aesenc_si128(s, k8); \
		s = _mm_aesenc_si128(s, k9); \
		_mm_storeu_si128((__m128i *)(void *)out[j].bytes, _mm_xor_si128(_mm_aesenclast_si128(s, k10), x)); \
	} \
}

AESNI_DIGESTS(digests_aesni_sse, "aes,sse2")
AESNI_DIGESTS(digests_aesni_avx, "aes,avx")
#endif

void okvi_discover_cipher_init(const struct okv_namespace *ns, int impl, struct okvi_discover_cipher *c)
{
	uint8_t in[sizeof(OKV_DISCOVER_DIGEST_TAG) - 1 + sizeof(ns->bytes)];
	uint8_t md[SHA256_DIGEST_LENGTH];
	SHA256_CTX sha;

	memcpy(in, OKV_DISCOVER_DIGEST_TAG, sizeof(OKV_DISCOVER_DIGEST_TAG) - 1);
	memcpy(in + sizeof(OKV_DISCOVER_DIGEST_TAG) - 1, ns->bytes, sizeof(ns->bytes));
	/* The software SHA-256 of libcrypto cannot fail on a valid context. */
	SHA256_Init(&sha);
	SHA256_Update(&sha, in, sizeof(in));
	SHA256_Final(md, &sha);
	_Static_assert(OKV_DISCOVER_KEY_BYTES <= SHA256_DIGEST_LENGTH, "the key is a prefix of SHA-256");
	okvi_aes128_expand(md, c->rk);
	c->aesni = OKVI_AES_SOFT;
	if (impl != OKVI_DIGEST_SOFT)
		c->aesni = okvi_discover_cpu_has_aesni();
}

void okvi_discover_digests(const struct okvi_discover_cipher *c, const struct okv_block_hash *h, size_t n,
			   struct okv_discover_digest *out)
{
#if OKVI_HAVE_AESNI_PATH
	if (c->aesni == OKVI_AES_NI_AVX) {
		digests_aesni_avx(c->rk, h, n, out);
		return;
	}
	if (c->aesni == OKVI_AES_NI) {
		digests_aesni_sse(c->rk, h, n, out);
		return;
	}
#endif
	for (size_t j = 0; j < n; j++) {
		okvi_aes128_encrypt_soft(c->rk, h[j].bytes, out[j].bytes);
		for (unsigned i = 0; i < sizeof(out[j].bytes); i++)
			out[j].bytes[i] ^= h[j].bytes[i];
	}
}

void okvi_discover_digest(const struct okv_namespace *ns, const struct okv_block_hash *h,
			  struct okv_discover_digest *out)
{
	struct okvi_discover_cipher c;

	okvi_discover_cipher_init(ns, OKVI_DIGEST_AUTO, &c);
	okvi_discover_digests(&c, h, 1, out);
}
