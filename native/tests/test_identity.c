/*
 * test_identity.c — okv_namespace_fingerprint (native/src/identity.c): the
 * golden vectors shared with gocore/identity/identity_test.go, field
 * separation, and every limit of client.h. Standalone: prints each failed
 * check, exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "orbitkv/client.h"
#include "check.h"

static void hex16(const uint8_t *b, char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The same vectors as gocore/identity/identity_test.go (computed there with
 * crypto/sha256 and here with libcrypto). */
static void test_fingerprint(void)
{
	struct okv_namespace_spec llama = {
		.model_id = "meta-llama/Llama-3.1-8B",
		.weights_revision = "0e9e39f249a16976918f6564b8830bc894c89659",
		.dtype = "bfloat16",
		.kv_layout = "vllm-nhd",
		.block_tokens = 16,
		.tp_rank = 1, .tp_size = 4,
		.pp_rank = 0, .pp_size = 1,
		.cp_rank = 0, .cp_size = 1,
		.adapter_id = NULL,
		.tenant_salt = "tenant-a",
	};
	struct okv_namespace_spec minimal = {
		.block_tokens = 1, .tp_size = 1, .pp_size = 1, .cp_size = 1,
	};
	struct okv_namespace ns, ns2;
	char hex[33];

	CHECK(okv_namespace_fingerprint(&llama, &ns) == 0, "llama spec");
	hex16(ns.bytes, hex);
	CHECK(strcmp(hex, "c00c255d5e3eb3aff4f0fa62741ddf8c") == 0, "llama golden vector: %s", hex);
	CHECK(okv_namespace_fingerprint(&minimal, &ns) == 0, "minimal spec");
	hex16(ns.bytes, hex);
	CHECK(strcmp(hex, "4a75a77c97e6b18c1fae6b3ea4379d3a") == 0, "minimal golden vector: %s", hex);

	/* NULL and "" are the same string; moving bytes between fields is not. */
	struct okv_namespace_spec s = llama;
	s.adapter_id = "";
	CHECK(okv_namespace_fingerprint(&s, &ns2) == 0 && okv_namespace_fingerprint(&llama, &ns) == 0 &&
		      memcmp(ns.bytes, ns2.bytes, 16) == 0,
	      "NULL adapter equals empty adapter");
	s = llama;
	s.dtype = "bfloat1";
	s.kv_layout = "6vllm-nhd";
	CHECK(okv_namespace_fingerprint(&s, &ns2) == 0 && memcmp(ns.bytes, ns2.bytes, 16) != 0,
	      "length prefixes separate fields");
	s = llama;
	s.tp_rank = 2;
	CHECK(okv_namespace_fingerprint(&s, &ns2) == 0 && memcmp(ns.bytes, ns2.bytes, 16) != 0,
	      "another rank is another namespace");

	/* Limits. */
	static char big[1026];
	memset(big, 'x', 1024);
	big[1024] = '\0';
	s = llama;
	s.tenant_salt = big;
	CHECK(okv_namespace_fingerprint(&s, &ns2) == 0, "a 1024-byte string is accepted");
	big[1024] = 'x';
	big[1025] = '\0';
	CHECK(okv_namespace_fingerprint(&s, &ns2) == -EINVAL, "a 1025-byte string is refused");
	s = llama;
	s.model_id = big;
	CHECK(okv_namespace_fingerprint(&s, &ns2) == -EINVAL, "a 1025-byte model id is refused");
	static const struct {
		const char *name;
		size_t off;
		uint32_t value;
	} bad[] = {
		{ "block_tokens 0", offsetof(struct okv_namespace_spec, block_tokens), 0 },
		{ "tp_size 0", offsetof(struct okv_namespace_spec, tp_size), 0 },
		{ "pp_size 0", offsetof(struct okv_namespace_spec, pp_size), 0 },
		{ "cp_size 0", offsetof(struct okv_namespace_spec, cp_size), 0 },
		{ "tp_rank = tp_size", offsetof(struct okv_namespace_spec, tp_rank), 4 },
		{ "pp_rank = pp_size", offsetof(struct okv_namespace_spec, pp_rank), 1 },
		{ "cp_rank = cp_size", offsetof(struct okv_namespace_spec, cp_rank), 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = llama;
		memcpy((char *)&s + bad[i].off, &bad[i].value, sizeof(uint32_t));
		CHECK(okv_namespace_fingerprint(&s, &ns2) == -EINVAL, "%s is refused", bad[i].name);
	}
	CHECK(okv_namespace_fingerprint(NULL, &ns2) == -EINVAL, "NULL spec");
	CHECK(okv_namespace_fingerprint(&llama, NULL) == -EINVAL, "NULL out");
}

int main(void)
{
	test_fingerprint();
	if (failures != 0) {
		fprintf(stderr, "test_identity: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_identity: all %d checks passed\n", checks);
	return 0;
}
