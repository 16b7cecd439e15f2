/*
 * fuzz_msg.c — libFuzzer target for okvi_msg_check_response, liborbitkv's
 * decoder of the Manager's response line (bytes another process wrote into
 * shared memory).
 *
 * Input: 64 bytes of response line (struct okv_msg, little-endian), then 24
 * bytes of call parameters: the session epoch, the request id and the
 * expected response generation (u64 each), then optionally one byte that
 * sets the error buffer length (0..255). Shorter inputs are zero-padded.
 *
 * Properties (abort on violation):
 *  - never crashes, never writes past errlen, NUL-terminates err whenever
 *    it writes a message (EPROTO, EINVALID, ESTALE_*);
 *  - 0 only for a well-formed Ok line: magic, ABI version, generation,
 *    request id and epoch as expected, reserved zero;
 *  - a malformed line is OKV_EPROTO with err naming the field;
 *  - every well-formed status maps to its documented code.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined -Inative/include
 *   -Inative/src native/fuzz/fuzz_msg.c native/src/client.c
 *   native/src/channel.c native/src/lifecycle.c native/src/errors.c
 *   native/src/proto/lifecycle.pb-c.c -lprotobuf-c
 * Seeds: native/fuzz/corpus/msg/.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t in[64 + 24 + 1] = { 0 };
	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	struct okv_msg m;
	memcpy(&m, in, sizeof(m));
	uint64_t epoch = rd64(in + 64), request_id = rd64(in + 72), generation = rd64(in + 80);
	size_t errlen = size > 88 ? in[88] : 128;

	/* A heap buffer of exactly errlen bytes: ASan catches any overrun. */
	char *err = malloc(errlen ? errlen : 1);
	REQUIRE(err != NULL);
	memset(err, 'x', errlen ? errlen : 1);
	int rc = okvi_msg_check_response(&m, epoch, request_id, generation, err, errlen);
	/* Every error comes with a NUL-terminated message. */
	if (errlen > 0 && rc != 0)
		REQUIRE(memchr(err, '\0', errlen) != NULL);

	int wellformed = m.magic == OKV_MSG_MAGIC && m.abi_version == OKV_ABI_VERSION &&
			 m.generation == generation && m.code <= OKV_STATUS_MAX &&
			 m.request_id == request_id &&
			 (m.epoch == epoch || m.code == OKV_STATUS_STALE_SESSION) && m.reserved == 0;
	if (!wellformed) {
		REQUIRE(rc == OKV_EPROTO);
		if (errlen > 32)
			REQUIRE(strstr(err, "field") != NULL);
	} else {
		int want;
		switch (m.code) {
		case OKV_STATUS_OK: want = 0; break;
		case OKV_STATUS_STALE_SESSION: want = OKV_ESTALE_SESSION; break;
		case OKV_STATUS_STALE_GENERATION: want = OKV_ESTALE_GENERATION; break;
		case OKV_STATUS_INVALID: want = OKV_EINVALID; break;
		case OKV_STATUS_UNSUPPORTED: want = OKV_EUNSUPPORTED; break;
		case OKV_STATUS_TIMEOUT: want = OKV_EEXPIRED; break; /* a Manager answer, not OKV_ETIMEDOUT */
		case OKV_STATUS_LOADING: want = OKV_EPENDING; break;
		case OKV_STATUS_UNADMITTED: want = OKV_EUNADMITTED; break;
		default: want = OKV_EINTERNAL; break;
		}
		REQUIRE(rc == want);
	}
	if (rc == 0)
		REQUIRE(m.code == OKV_STATUS_OK && m.epoch == epoch);
	free(err);
	return 0;
}
