/*
 * client_internal.h — liborbitkv functions shared between its own files and
 * its tests/fuzz targets (okvi_ prefix; not exported by the version script).
 */
#ifndef ORBITKV_CLIENT_INTERNAL_H
#define ORBITKV_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/client.h"

/** Largest buffer id the client records (ids count from 0 per session). */
#define OKVI_MAX_BUFFER_ID 65535u

/*
 * The client handle (opaque in client.h). Owned by client.c (connect, call,
 * close); buffer.c records registered buffers, ops.c builds descriptors in
 * the slot's descriptor area.
 */
struct okv_client {
	int sock;          /* bootstrap socket (owning) */
	int slot_fd;       /* slot memfd (owning) */
	int event_fd;      /* session eventfd (owning) */
	int doorbell_fd;   /* doorbell memfd (owning) */
	int pidfd;         /* pidfd of the Manager (owning) */
	struct okv_slot *slot;
	size_t slot_bytes;
	struct okv_doorbell *db;
	size_t db_bytes;
	struct okv_hello_reply reply;
	uint64_t next_gen;  /* generation of the next request (odd) */
	uint64_t next_request_id;
	uint64_t spin_ns;
	uint32_t timeout_ms;
	int broken;
	int lc_broken;      /* a lifecycle call timed out or failed mid-frame: the
			     * socket's frame stream is out of sync; later lifecycle
			     * calls fail with OKV_ECLOSED (reconnect) */         /* the channel state is unknown (Manager died, bad reply) */
	/* Response generation of a descriptor request that timed out: until the
	 * Manager has answered it (or a later request), it may still read the
	 * descriptor area, so nothing may be written there (0 = none). */
	uint64_t desc_busy_gen;
	/* Layers of each buffer registered on this session, by buffer id
	 * (0 = no buffer with that id); malloc'd, buf_count entries. */
	uint32_t *buf_layers;
	uint32_t buf_count;
	char last_error[256];
};

/** printf into c->last_error (okv_last_error). */
__attribute__((format(printf, 2, 3))) void okvi_set_error(okv_client *c, const char *fmt, ...);

/**
 * Validate a response line copied out of the slot against what the client
 * sent (DESIGN.md §5.2): magic, ABI version, generation = request + 1, a known
 * status, the echoed request id and epoch, reserved zero. Maps the status to
 * an okv error code: 0 for Ok, OKV_EPENDING for Loading, OKV_EUNADMITTED,
 * OKV_ESTALE_SESSION, OKV_ESTALE_GENERATION, OKV_EINVALID (err names the
 * field, and for a descriptor field the entry index of arg1),
 * OKV_EUNSUPPORTED, OKV_ETIMEDOUT, OKV_EINTERNAL for Internal and for any
 * status the caller must accept itself (Miss, Candidates: m->code tells);
 * OKV_EPROTO for a malformed line (err names the field).
 */
int okvi_msg_check_response(const struct okv_msg *m, uint64_t epoch, uint64_t request_id,
			    uint64_t generation, char *err, size_t errlen);

/** Name of an enum okv_field value ("unknown" when out of range). */
const char *okvi_field_name(uint64_t field);

/**
 * One request/response round trip through the slot: fill the request line,
 * store its odd generation last, ring the doorbell, wait for generation + 1
 * (spin, then park with pidfd checks), validate the response into *resp
 * (*resp is the copied line whenever the Manager answered, also on a status
 * error). Returns 0 or an okv error code (see okvi_msg_check_response),
 * OKV_ETIMEDOUT, OKV_EMANAGER_DIED, OKV_ECLOSED.
 */
int okvi_call(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, struct okv_msg *resp);

/**
 * okvi_call for a request with a descriptor: the caller has written
 * desc_length bytes at okvi_desc(c) (after okvi_desc_acquire); the request
 * line carries desc_offset = OKV_SLOT_DESC_OFFSET and desc_length (0 = no
 * descriptor, offset 0). A timeout leaves the descriptor area busy until the
 * Manager answers (see okvi_desc_acquire).
 */
int okvi_call_desc(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, uint32_t desc_length,
		   struct okv_msg *resp);

/**
 * Make the descriptor area writable: checks the client is open and, when an
 * earlier descriptor request timed out, waits (up to the client's timeout,
 * watching the Manager's pidfd) until the Manager has answered it or a later
 * request, so a late Manager never reads a half-rewritten descriptor.
 * Returns 0, OKV_ECLOSED, OKV_ETIMEDOUT, OKV_EMANAGER_DIED.
 */
int okvi_desc_acquire(okv_client *c);

/** Start of the slot's descriptor area (c->reply.desc_capacity bytes). */
static inline uint8_t *okvi_desc(okv_client *c)
{
	return (uint8_t *)c->slot + OKV_SLOT_DESC_OFFSET;
}

/** Whether a lifecycle call's return code may have left a reply unread on
 *  the socket (a timeout or an I/O -errno). */
static inline int okvi_lifecycle_desynced(int rc)
{
	return rc == OKV_ETIMEDOUT || (rc < 0 && rc > OKV_EPROTO);
}

#endif /* ORBITKV_CLIENT_INTERNAL_H */
