/*
 * fuzz_query_result.c — libFuzzer target for okvi_check_query_result,
 * liborbitkv's check of the okv_query_result the Manager writes into the
 * slot's descriptor area (bytes another process wrote into shared memory)
 * on every Ok, Miss or Candidates answer of a QueryBundle, Poll or Claim.
 *
 * Input (zero-padded when shorter): 64 bytes of struct okv_query_result;
 * then the request it answers: op_id (u64), revision, max_hits, flags,
 * recovery_first, recovery_count (u32 each); then the response line's
 * status selector (u8: 0 Ok, 1 Miss, 2 Candidates, by value mod 3), arg0
 * and arg1 (u64 each). All little-endian.
 *
 * Properties (abort on violation):
 *  - never crashes; the answer is 0 or OKV_EPROTO, and OKV_EPROTO names a
 *    field in okv_last_error;
 *  - 0 only for a result that agrees with the line (status, hit_count =
 *    arg0, lease_id = arg1) and the request (op id, revision, hit_count and
 *    ram_hits ≤ max_hits), Ok with a lease has ≥ 1 hit and a lease-taking
 *    query, Ok without one is a WARMUP (or unknown-flags) answer, Miss has
 *    neither hits nor lease, Candidates no lease.
 *
 * Seeds: native/fuzz/corpus/query_result/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

#define REQUIRE(c)                  \
	do {                        \
		if (!(c))           \
			abort();    \
	} while (0)

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t codes[3] = { OKV_STATUS_OK, OKV_STATUS_MISS, OKV_STATUS_CANDIDATES };
	uint8_t in[64 + 28 + 1 + 16] = { 0 };
	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));

	struct okv_query_result r;
	memcpy(&r, in, sizeof(r));
	struct okvi_query_expect w = {
		.op_id = rd64(in + 64),
		.revision = rd32(in + 72),
		.max_hits = rd32(in + 76),
		.flags = rd32(in + 80),
		.recovery_first = rd32(in + 84),
		.recovery_count = rd32(in + 88),
	};
	struct okv_msg resp;
	memset(&resp, 0, sizeof(resp));
	resp.code = codes[in[92] % 3];
	resp.arg0 = rd64(in + 93);
	resp.arg1 = rd64(in + 101);

	okv_client *c = calloc(1, sizeof(*c));
	REQUIRE(c != NULL);
	int rc = okvi_check_query_result(c, &resp, &w, &r);
	REQUIRE(rc == 0 || rc == OKV_EPROTO);
	if (rc == OKV_EPROTO)
		REQUIRE(strstr(c->last_error, "field") != NULL);
	if (rc == 0) {
		int known = w.flags != OKVI_FLAGS_UNKNOWN;
		REQUIRE(r.magic == OKV_QUERY_RESULT_MAGIC && r.schema == OKV_QUERY_SCHEMA);
		REQUIRE(r.status == resp.code && r.hit_count == resp.arg0 && r.lease_id == resp.arg1);
		REQUIRE(r.op_id == w.op_id && r.revision == w.revision);
		REQUIRE(r.hit_count <= w.max_hits && r.ram_hits <= w.max_hits);
		if (resp.code == OKV_STATUS_OK && r.lease_id != 0)
			REQUIRE(r.hit_count >= 1 && (!known || !(w.flags & (OKV_QUERY_WARMUP | OKV_QUERY_DISCOVER))));
		if (resp.code == OKV_STATUS_OK && r.lease_id == 0)
			REQUIRE(!known || (w.flags & OKV_QUERY_WARMUP));
		if (resp.code == OKV_STATUS_MISS)
			REQUIRE(r.hit_count == 0 && r.lease_id == 0);
		if (resp.code == OKV_STATUS_CANDIDATES)
			REQUIRE(r.lease_id == 0);
	}
	free(c);
	return 0;
}
