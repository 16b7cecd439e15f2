/*
 * identity.c — okv_namespace_fingerprint (orbitkv/client.h, docs/design.md §5.4).
 *
 * The fingerprint is the first 16 bytes of SHA-256 over
 *
 *   "orbitkv.namespace.v1"            20 raw bytes, no length prefix
 *   model_id, weights_revision,       each: u32 LE byte length, then bytes
 *   dtype, kv_layout                  (NULL = "", length 0)
 *   block_tokens, tp_rank, tp_size,   each: u32 LE 4, then u32 LE value
 *   pp_rank, pp_size, cp_rank,
 *   cp_size
 *   adapter_id, tenant_salt           as the strings above
 *
 * Every field is length-prefixed so no two specs encode to the same bytes
 * ("ab"+"c" differs from "a"+"bc"). The Go twin is gocore/identity; a test
 * in gocore/internal/native checks both produce the same bytes.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "orbitkv/client.h"

/** Largest string field of a namespace spec in bytes. */
#define OKVI_NS_MAX_STRING 1024u
/** Domain tag that starts the hashed bytes. */
#define OKVI_NS_TAG "orbitkv.namespace.v1"
/** Largest encoding: tag, 6 strings, 7 integers. */
#define OKVI_NS_MAX_BYTES (sizeof(OKVI_NS_TAG) - 1 + 6 * (4 + OKVI_NS_MAX_STRING) + 7 * (4 + 4))

static uint8_t *put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
	return p + 4;
}

/* Append a length-prefixed string; -EINVAL when it exceeds the limit. */
static int put_str(uint8_t **p, const char *s)
{
	size_t n = s ? strnlen(s, OKVI_NS_MAX_STRING + 1) : 0;
	if (n > OKVI_NS_MAX_STRING)
		return -EINVAL;
	*p = put_u32(*p, (uint32_t)n);
	if (n)
		memcpy(*p, s, n);
	*p += n;
	return 0;
}

static uint8_t *put_int(uint8_t *p, uint32_t v)
{
	return put_u32(put_u32(p, 4), v);
}

int okv_namespace_fingerprint(const struct okv_namespace_spec *spec, struct okv_namespace *out)
{
	uint8_t buf[OKVI_NS_MAX_BYTES], *p = buf;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!spec || !out)
		return -EINVAL;
	if (spec->block_tokens == 0 || spec->tp_size == 0 || spec->pp_size == 0 || spec->cp_size == 0 ||
	    spec->tp_rank >= spec->tp_size || spec->pp_rank >= spec->pp_size || spec->cp_rank >= spec->cp_size)
		return -EINVAL;
	memcpy(p, OKVI_NS_TAG, sizeof(OKVI_NS_TAG) - 1);
	p += sizeof(OKVI_NS_TAG) - 1;
	if (put_str(&p, spec->model_id) || put_str(&p, spec->weights_revision) || put_str(&p, spec->dtype) ||
	    put_str(&p, spec->kv_layout))
		return -EINVAL;
	p = put_int(p, spec->block_tokens);
	p = put_int(p, spec->tp_rank);
	p = put_int(p, spec->tp_size);
	p = put_int(p, spec->pp_rank);
	p = put_int(p, spec->pp_size);
	p = put_int(p, spec->cp_rank);
	p = put_int(p, spec->cp_size);
	if (put_str(&p, spec->adapter_id) || put_str(&p, spec->tenant_salt))
		return -EINVAL;
	if (EVP_Digest(buf, (size_t)(p - buf), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < sizeof(out->bytes))
		return -EIO;
	memcpy(out->bytes, md, sizeof(out->bytes));
	return 0;
}
