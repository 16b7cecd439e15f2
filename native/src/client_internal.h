/*
 * client_internal.h — liborbitkv functions shared between its own files and
 * its tests/fuzz targets (okvi_ prefix; not exported by the version script).
 */
#ifndef ORBITKV_CLIENT_INTERNAL_H
#define ORBITKV_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/client.h"

/**
 * Validate a response line copied out of the slot against what the client
 * sent (DESIGN.md §5.2): magic, ABI version, generation = request + 1, a known
 * status, the echoed request id and epoch, reserved zero. Maps the status to
 * an okv error code: 0 for Ok, OKV_ESTALE_SESSION, OKV_ESTALE_GENERATION,
 * OKV_EINVALID (err names the field), OKV_EUNSUPPORTED, OKV_ETIMEDOUT,
 * OKV_EINTERNAL; OKV_EPROTO for a malformed line (err names the field).
 */
int okvi_msg_check_response(const struct okv_msg *m, uint64_t epoch, uint64_t request_id,
			    uint64_t generation, char *err, size_t errlen);

/** Name of an enum okv_field value ("unknown" when out of range). */
const char *okvi_field_name(uint64_t field);

/**
 * One request/response round trip through the slot: fill the request line,
 * store its odd generation last, ring the doorbell, wait for generation + 1
 * (spin, then park with pidfd checks), validate the response into *resp.
 * Returns 0 or an okv error code (see okvi_msg_check_response), OKV_ETIMEDOUT,
 * OKV_EMANAGER_DIED, OKV_ECLOSED.
 */
int okvi_call(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, struct okv_msg *resp);

#endif /* ORBITKV_CLIENT_INTERNAL_H */
