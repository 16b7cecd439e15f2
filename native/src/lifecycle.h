/*
 * lifecycle.h — internal: the client side of the OrbitKV bootstrap socket
 * after connect(2): the hello and its reply (docs/design.md §5.1) and the
 * lifecycle frames that follow it (struct okv_frame_header + protobuf body,
 * proto/lifecycle.proto). Go twin: gocore/lifecycle.
 *
 * Not part of the public API: every symbol is okvi_-prefixed and hidden by
 * native/liborbitkv.map. Users: client.c, tests, fuzz targets.
 *
 * Return values follow client.h: 0 on success, -errno for system errors, or
 * an OKV_E* code. Functions that take (err, errlen) write a NUL-terminated
 * sentence naming the field and the limit into err on failure (err may be
 * NULL when errlen is 0); on success err is left untouched.
 *
 * None of these functions keeps state; they are safe to call from several
 * threads on different sockets.
 */
#ifndef ORBITKV_LIFECYCLE_H
#define ORBITKV_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/abi.h"
#include "orbitkv/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest desc_capacity a hello reply may announce: 64 MiB. */
#define OKVI_MAX_DESC_CAPACITY (64u * 1024u * 1024u)
/** Largest instance id of a RegisterInstance frame in bytes
 *  (proto/lifecycle.proto: "at most 256 bytes"). */
#define OKVI_MAX_FRAME_INSTANCE_ID 256u

/* okvi_fail writes the message into err (if err is not NULL and errlen is
 * nonzero; truncated to errlen) and returns rc: the error path of every
 * decoder and call of the lifecycle channel and the discovery reader. */
__attribute__((format(printf, 4, 5))) int okvi_fail(char *err, size_t errlen, int rc, const char *fmt, ...);

/**
 * Fill *h with a hello: magic, OKV_BOOTSTRAP_VERSION, OKV_ABI_VERSION, pid,
 * role (enum okv_role) and instance_id NUL-padded to OKV_INSTANCE_ID_BYTES
 * (no NUL needed when it is exactly 64 bytes). Reserved fields are zeroed.
 * instance_id NULL means empty.
 * Returns 0, or -EINVAL when instance_id exceeds 64 bytes or role exceeds
 * OKV_ROLE_MAX (h is then zeroed).
 */
int okvi_hello_encode(struct okv_hello *h, uint32_t pid, uint32_t role, const char *instance_id);

/**
 * Validate the n bytes of a hello reply and copy them into *out.
 * Rules (abi.h struct okv_hello_reply): n == sizeof(struct okv_hello_reply)
 * (208); magic OKV_BOOTSTRAP_MAGIC; protocol_version OKV_BOOTSTRAP_VERSION;
 * status <= OKV_BOOT_MAX; error NUL-terminated within its 128 bytes; then,
 * for status OKV_BOOT_OK: epoch != 0; initial_generation odd; desc_offset ==
 * OKV_SLOT_DESC_OFFSET; 0 < desc_capacity <= 64 MiB; slot_bytes ==
 * desc_offset + desc_capacity; max_sessions <= OKV_MAX_SESSIONS; slot_index <
 * max_sessions and != OKV_CONTROL_SLOT (reserved for the Manager);
 * max_frame_body == OKV_FRAME_MAX_BODY; manager_pid != 0 (for pidfd_open);
 * ext_bytes <= OKV_BOOT_EXT_MAX_BYTES, a multiple of 8; ext_fds <=
 * OKV_BOOT_EXT_MAX_FDS (the records themselves: okvi_boot_exts_parse).
 * buf needs no alignment. *out receives the bytes whenever n is right, even
 * when a later rule fails, so the caller can log them.
 * Returns 0; OKV_EVERSION for a protocol version mismatch; OKV_EREFUSED for
 * a valid reply with status != OK, with "hello refused (<status>): <error
 * text>" in err; OKV_EPROTO for anything else, err naming field and limit.
 */
int okvi_hello_reply_check(const void *buf, size_t n, struct okv_hello_reply *out, char *err, size_t errlen);

/** What the extension records of a hello reply told the client. */
struct okvi_boot_exts {
	char manager_version[OKV_BOOT_EXT_VERSION_MAX + 1]; /* "" when absent */
	char iox2_service[OKV_BOOT_EXT_SERVICE_MAX + 1];    /* "" when absent */
	char iox2_runtime[OKV_BOOT_EXT_RUNTIME_MAX + 1];    /* "" when absent */
	uint32_t skipped;                                   /* unknown optional records */
};

/**
 * Validate the n bytes of extension records after a checked hello reply
 * whose ext_fds is `nfds` (abi.h struct okv_boot_ext) and fill *out. Rules:
 * n <= OKV_BOOT_EXT_MAX_BYTES and nfds <= OKV_BOOT_EXT_MAX_FDS; every record
 * header fits, its value and padding fit, padding is zero; the records' nfds
 * sum to exactly `nfds`; a type without OKV_BOOT_EXT_REQUIRED that this
 * client does not know is skipped (counted in out->skipped), a required one
 * refuses the reply; OKV_BOOT_EXT_MANAGER_VERSION carries no fds, 1..64
 * printable ASCII bytes, at most once. buf needs no alignment. fds are the
 * caller's: it closes those of skipped records (today: every one).
 * Returns 0 or OKV_EPROTO with err naming the record, field and limit.
 */
int okvi_boot_exts_parse(const void *buf, size_t n, uint32_t nfds, struct okvi_boot_exts *out, char *err,
			 size_t errlen);

/**
 * Validate the n bytes of a frame header against the session epoch and copy
 * them into *out. Rules, in wire order: n == 24; magic OKV_FRAME_MAGIC;
 * version OKV_FRAME_VERSION; code a request 1..OKV_FRAME_CODE_MAX, the
 * reply of one, or OKV_FRAME_ERROR; epoch equal; length <=
 * OKV_FRAME_MAX_BODY; reserved zero. buf needs no alignment; *out receives
 * the bytes whenever n is right.
 * Returns 0, OKV_EVERSION (version) or OKV_EPROTO (anything else, including
 * another epoch), err naming the field and the limit.
 */
int okvi_frame_header_check(const void *buf, size_t n, uint64_t epoch, struct okv_frame_header *out, char *err,
			    size_t errlen);

/**
 * Send one frame: header (code, epoch, len) then len body bytes, with nfds
 * fds attached as one SCM_RIGHTS message to the first header byte. Loops on
 * partial writes and EINTR, waits with poll(2) on EAGAIN of a non-blocking
 * socket, and sends with MSG_NOSIGNAL (a dead peer gives -EPIPE, not
 * SIGPIPE). The caller keeps its fds.
 * Returns 0; -EINVAL for len > OKV_FRAME_MAX_BODY, nfds outside
 * 0..OKV_FRAME_MAX_FDS, body NULL with len > 0 or fds NULL with nfds > 0;
 * -errno of sendmsg(2)/poll(2). After a send error mid-frame the stream is
 * unusable.
 */
int okvi_frame_send(int sock, uint16_t code, uint64_t epoch, const void *body, uint32_t len, const int *fds,
		    int nfds);

/**
 * okvi_frame_send bounded by deadline_ms (CLOCK_MONOTONIC ms; -1 = none):
 * with a deadline, sendmsg(2) never blocks and a full socket buffer is waited
 * out with poll(2) until the deadline, then OKV_ETIMEDOUT (the stream is then
 * unusable: part of the frame may have gone out).
 */
int okvi_frame_send_until(int sock, uint16_t code, uint64_t epoch, const void *body, uint32_t len,
			  const int *fds, int nfds, int64_t deadline_ms);

/**
 * Receive exactly n bytes from sock by `deadline_ms` (CLOCK_MONOTONIC ms,
 * -1 = none), keeping up to max_fds SCM_RIGHTS fds in fds[] (*nfds counts
 * them; the caller owns them, also on error). *got is the bytes received.
 * Returns 0; 1 when the peer closed first (see *got); OKV_ETIMEDOUT; -errno;
 * OKV_EPROTO when more fds than max_fds arrived (the extra are closed; err
 * says so). fds may be NULL with max_fds 0: any fd is then an error.
 */
int okvi_recv_exact_fds(int sock, void *buf, size_t n, int64_t deadline_ms, size_t *got, int *fds, int max_fds,
			int *nfds, char *err, size_t errlen);

/**
 * Receive one frame within timeout_ms milliseconds (< 0 = no deadline, 0 =
 * only bytes already queued; the deadline covers the whole frame and runs
 * on CLOCK_MONOTONIC). The header is checked
 * with okvi_frame_header_check before the body is allocated. On success *h
 * is the header and *body a malloc'd buffer of h->length bytes (at least one
 * byte allocated, so never NULL) that the caller frees.
 * Replies to the client carry no fds: any fd received is closed and the
 * frame is OKV_EPROTO.
 * Returns 0; OKV_ETIMEDOUT at the deadline; OKV_ECLOSED when the Manager
 * closed the socket before the first header byte; OKV_EPROTO for a frame
 * cut short, a bad header or fds; OKV_EVERSION; -ENOMEM; -errno of
 * recvmsg(2)/poll(2). On error *body is NULL and the stream position is
 * unknown (close the socket), except after OKV_ECLOSED.
 */
int okvi_frame_recv(int sock, uint64_t epoch, int timeout_ms, struct okv_frame_header *h, uint8_t **body, char *err,
		    size_t errlen);

/**
 * RegisterInstance round trip: sends RegisterInstanceRequest{client_token =
 * token, instance_id} (code 1) and waits timeout_ms (< 0 = forever) for its
 * reply (code 0x8001, body RegisterInstanceReply).
 * Returns 0; -EINVAL when instance_id is NULL or over 256 bytes;
 * OKV_EAPPLICATION for an error frame, with "field: message" in err;
 * OKV_EPROTO for another code or an undecodable body; errors of
 * okvi_frame_send / okvi_frame_recv.
 */
int okvi_register_instance(int sock, uint64_t epoch, uint64_t token, const char *instance_id, int timeout_ms,
			   char *err, size_t errlen);

/**
 * Health round trip: sends HealthRequest (code 3), waits for HealthReply
 * (code 0x8003) and fills *out. Strings longer than their okv_health field
 * are truncated (always NUL-terminated). The reply's epoch must equal epoch
 * and its service_id must be exactly OKV_SERVICE_ID_BYTES bytes (else
 * OKV_EPROTO). Other returns as okvi_register_instance.
 */
int okvi_health(int sock, uint64_t epoch, int timeout_ms, struct okv_health *out, char *err, size_t errlen);

/**
 * MapDiscovery round trip: sends MapDiscoveryRequest{client_token, ns}
 * (code 6), waits for MapDiscoveryReply (code 0x8006) with exactly one fd
 * (SCM_RIGHTS on the reply's header), stores it in *fd (owned by the
 * caller, O_CLOEXEC) and the reply's sizes in *bytes and *buckets. A reply
 * with no fd or more than one is OKV_EPROTO. Other returns as
 * okvi_register_instance.
 */
int okvi_map_discovery(int sock, uint64_t epoch, uint64_t token, const struct okv_namespace *ns, int timeout_ms,
		       int *fd, uint64_t *bytes, uint64_t *buckets, char *err, size_t errlen);

/**
 * RegisterBuffers round trip for one host buffer: sends
 * RegisterBuffersRequest{client_token = token, regions = [{fd_index 0,
 * offset 0, bytes, layers, page_bytes, page_count}]} (code 2) with b->fd as
 * the frame's one SCM_RIGHTS fd, waits for RegisterBuffersReply (code
 * 0x8002) and stores its first_buffer_id in *first_id. The reply must count
 * 1 region and total_bytes = b->bytes (else OKV_EPROTO). Other returns as
 * okvi_register_instance (an error frame is OKV_EAPPLICATION, "field:
 * message" in err, e.g. "regions[0].bytes: ...").
 */
int okvi_register_buffer(int sock, uint64_t epoch, uint64_t token, const struct okv_buffer *b, int timeout_ms,
			 uint32_t *first_id, char *err, size_t errlen);

/** RegisterBuffers of one CUDA region (okv_register_cuda_buffer): as
 *  okvi_register_buffer, with the region's handle, device UUID and offset;
 *  a VMM fd travels with SCM_RIGHTS. */
int okvi_register_cuda_buffer(int sock, uint64_t epoch, uint64_t token, const struct okv_cuda_region *r,
			      int timeout_ms, uint32_t *first_id, char *err, size_t errlen);

/**
 * Unregister round trip: sends UnregisterRequest{client_token = token}
 * (code 5) and waits for UnregisterReply (code 0x8005); the Manager then
 * closes the connection. Returns 0, OKV_EAPPLICATION, OKV_EPROTO or the
 * errors of okvi_frame_send / okvi_frame_recv (no error text: callers use
 * it for a best-effort close).
 */
int okvi_unregister(int sock, uint64_t epoch, uint64_t token, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* ORBITKV_LIFECYCLE_H */
