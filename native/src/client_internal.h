/*
 * client_internal.h — liborbitkv functions shared between its own files and
 * its tests/fuzz targets (okvi_ prefix; not exported by the version script).
 */
#ifndef ORBITKV_CLIENT_INTERNAL_H
#define ORBITKV_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/client.h"
#include "orbitkv/discover.h"

/** Bytes of sockaddr_un.sun_path (unix(7)): a socket path is at most 107. */
#define OKVI_SOCKET_PATH_BYTES 108

/** Largest buffer id the client records (ids count from 0 per session). */
#define OKVI_MAX_BUFFER_ID 65535u

/*
 * The client handle (opaque in client.h). Owned by client.c (connect, call,
 * close); buffer.c records registered buffers, ops.c builds descriptors in
 * the slot's descriptor area.
 */
struct okv_iox2_node;
struct okv_iox2_client;

/** Most namespaces whose discovery index one client maps. */
#define OKVI_DISCOVER_MAX_NS 16u

/** How long okv_discover_open answers a namespace the Manager refused with
 *  that refusal again, without asking (1 s): a budget stays spent for a
 *  while, and a round trip per call (~140 us) would cost more than the
 *  local answer saves. */
#define OKVI_DISCOVER_BACKOFF_NS 1000000000ull

/* One remembered MapDiscovery refusal (discover.c). */
struct okvi_discover_refusal {
	struct okv_namespace ns;
	uint64_t at_ns; /* okvi_now_ns() of the refusal; 0: unused */
	int rc;
	char msg[512]; /* okv_last_error of the refusal */
};

/** Rounds of AES-128 (its round keys number one more). */
#define OKVI_AES128_ROUNDS 10

/** Expand AES-128 key `key` into its 11 round keys (FIPS-197 §5.2). */
void okvi_aes128_expand(const uint8_t key[16], uint8_t rk[OKVI_AES128_ROUNDS + 1][16]);

/** AES-128 of one block with round keys rk, in portable C (FIPS-197
 *  §5.1): the path of CPUs without AES instructions. */
void okvi_aes128_encrypt_soft(const uint8_t rk[OKVI_AES128_ROUNDS + 1][16], const uint8_t in[16], uint8_t out[16]);

/** The AES paths of okvi_discover_digests (struct okvi_discover_cipher's
 *  aesni): portable C, AES-NI in legacy SSE encoding, AES-NI in VEX
 *  encoding (the OS enables AVX). */
enum okvi_aes_path { OKVI_AES_SOFT = 0, OKVI_AES_NI = 1, OKVI_AES_NI_AVX = 2 };

/** The fastest enum okvi_aes_path this CPU and OS run (x86-64 CPUID and
 *  XCR0; OKVI_AES_SOFT elsewhere). */
int okvi_discover_cpu_has_aesni(void);

/** Which AES okvi_discover_cipher_init picks: AES-NI where the CPU has it
 *  (AUTO), or the portable path always (SOFT: for tests and the fuzzer,
 *  which compare the two). Both give the same digests. */
enum okvi_digest_impl { OKVI_DIGEST_AUTO = 0, OKVI_DIGEST_SOFT = 1 };

/** The digest key of one namespace, expanded (read-only once made, so
 *  any number of readers may share it). */
struct okvi_discover_cipher {
	uint8_t rk[OKVI_AES128_ROUNDS + 1][16]; /* AES-128 round keys of K(ns) */
	int aesni;                               /* enum okvi_aes_path */
};

/* One mapped discovery index (discover.c): read-only, borrowed by readers. */
struct okvi_discover_map {
	struct okv_namespace ns;
	const struct okv_discover_header *hdr;
	const struct okv_discover_bucket *bkt;
	uint64_t mask;
	uint64_t seed;
	uint32_t flags; /* header.flags: enum okv_discover_flags */
	size_t bytes;  /* of the mapping */
	struct okvi_discover_cipher cipher; /* digest key of ns, made at attach */
};

struct okv_client {
	int socket_source; /* enum okv_socket_source of the bootstrap socket */
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
	char manager_version[OKV_BOOT_EXT_VERSION_MAX + 1]; /* from the reply's records; "" if none */
	/* iceoryx2 transport (the reply's OKV_BOOT_EXT_IOX2_SERVICE record):
	 * requests go through the session's iceoryx2 service, responses come
	 * from it; "" / NULL on the shared-memory transport. */
	char iox2_service[OKV_BOOT_EXT_SERVICE_MAX + 1];
	/* The Manager's iceoryx2 runtime (OKV_BOOT_EXT_IOX2_RUNTIME): where
	 * the client's node lives; "" on the shared-memory transport. */
	char iox2_runtime[OKV_BOOT_EXT_RUNTIME_MAX + 1];
	struct okv_iox2_node *iox2_node; /* owned */
	struct okv_iox2_client *iox2;    /* owned */
	int iox2_send_rc;                /* okv_iox2_client_send of the request in flight */
	struct okv_msg iox2_resp;        /* the response taken by the last wait */
	uint64_t next_gen;  /* generation of the next request (odd) */
	uint64_t next_request_id;
	uint64_t spin_ns;
	uint32_t timeout_ms;
	int broken;         /* the channel state is unknown (Manager died, bad reply) */
	int lc_broken;      /* a lifecycle call timed out or failed mid-frame: the
			     * socket's frame stream is out of sync; later lifecycle
			     * calls fail with OKV_ECLOSED (reconnect) */
	/* Response generation of a descriptor request that timed out: until the
	 * Manager has answered it (or a later request), it may still read the
	 * descriptor area, so nothing may be written there (0 = none). */
	uint64_t desc_busy_gen;
	/* Layers of each buffer registered on this session, by buffer id
	 * (0 = no buffer with that id); malloc'd, buf_count entries. */
	uint32_t *buf_layers;
	uint32_t buf_count;
	/* Op id of the next query ticket (tickets.c): starts at 1, strictly
	 * increasing; okv_op_submit moves it past the op id it sends (abi.h
	 * "Query tickets": a new ticket needs an op id greater than every one
	 * the session used). */
	uint64_t next_op_id;
	/* Bit b set: a publish from buffer b ended ambiguously (malformed
	 * acknowledgement, or no clean answer), so the Manager may still read
	 * its source pages; okv_publish and okv_restore naming b answer
	 * OKV_EFENCED until the client is closed. A fixed bitmap, so fencing
	 * never allocates (it must not fail). */
	uint8_t buf_fenced[(OKVI_MAX_BUFFER_ID + 1) / 8];
	/* Discovery indexes mapped so far (okv_discover_open), in order. */
	struct okvi_discover_map disc[OKVI_DISCOVER_MAX_NS];
	uint32_t disc_count;
	/* The Manager's latest refusals of MapDiscovery, a ring by namespace
	 * (okv_discover_open answers them again for OKVI_DISCOVER_BACKOFF_NS
	 * without a round trip). */
	struct okvi_discover_refusal disc_refused[OKVI_DISCOVER_MAX_NS];
	uint32_t disc_refused_next;
	char last_error[512];
};

/** Unmap every discovery index of c (client_free). */
void okvi_discover_unmap_all(okv_client *c);

/**
 * Validate and map read-only a discovery index memfd of `bytes` bytes for
 * ns into *m (the fd may be closed afterwards). Errors: OKV_EPROTO (size,
 * magic, version, bucket count or namespace differ from what was asked),
 * -errno of fstat or mmap; err names the field.
 */
int okvi_discover_attach(int fd, const struct okv_namespace *ns, uint64_t bytes, struct okvi_discover_map *m,
			 char *err, size_t errlen);

/** okvi_discover_prefix's answer for a table with OKV_DISCOVER_RETIRED set
 *  (positive: never a public status). */
#define OKVI_DISCOVER_RETIRED_RC 1

/**
 * Derive namespace ns's digest key K(ns) (orbitkv/discover.h, "Digests"),
 * expand it into *c and choose the AES path (`impl`, enum
 * okvi_digest_impl). Never fails; no allocation, no syscall.
 */
void okvi_discover_cipher_init(const struct okv_namespace *ns, int impl, struct okvi_discover_cipher *c);

/**
 * The digests d(ns, h[j]) a discovery index holds in place of block hashes
 * h[0..n) of c's namespace: AES-128_K(h) XOR h, 16 bytes each, into
 * out[0..n). Never fails; no allocation, no syscall.
 */
void okvi_discover_digests(const struct okvi_discover_cipher *c, const struct okv_block_hash *h, size_t n,
			   struct okv_discover_digest *out);

/** One digest d(ns, h), deriving the key each call (tests; a lookup uses
 *  the cipher its mapping keeps). */
void okvi_discover_digest(const struct okv_namespace *ns, const struct okv_block_hash *h,
			  struct okv_discover_digest *out);

/**
 * Prefix of hashes[0..n) present in m (each looked up by its digest,
 * okvi_discover_digests with m's cipher): *count consecutive from the first.
 * 0, OKVI_DISCOVER_RETIRED_RC when the Manager retired the table (nothing
 * read, *count 0), or OKV_EDISCOVER_BUSY when a bucket stayed mid-update for
 * OKV_DISCOVER_SPINS tries (*count then holds the prefix before it).
 */
int okvi_discover_prefix(const struct okvi_discover_map *m, const struct okv_block_hash *hashes, size_t n,
			 uint32_t *count);

/** Start of every public call on c: okv_last_error describes this call
 *  only, also when it fails before reaching the channel. NULL is a no-op. */
static inline void okvi_clear_error(okv_client *c)
{
	if (c)
		c->last_error[0] = '\0';
}

/** printf into c->last_error (okv_last_error). */
__attribute__((format(printf, 2, 3))) void okvi_set_error(okv_client *c, const char *fmt, ...);

/**
 * Validate a response line copied out of the slot against what the client
 * sent (docs/design.md §5.2): magic, ABI version, generation = request + 1, a known
 * status, the echoed request id and epoch, reserved zero. Maps the status to
 * an okv error code: 0 for Ok, OKV_EPENDING for Loading, OKV_EUNADMITTED,
 * OKV_ESTALE_SESSION, OKV_ESTALE_GENERATION, OKV_EINVALID (err names the
 * field, and for a descriptor field the entry index of arg1),
 * OKV_EUNSUPPORTED, OKV_EEXPIRED for Timeout (a Manager answer: the ticket
 * or operation expired there; distinct from OKV_ETIMEDOUT, no reply at
 * all), OKV_EINTERNAL for Internal and for any status the caller must
 * accept itself (Miss, Candidates: m->code tells); OKV_EPROTO for a
 * malformed line (err names the field).
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
 * Called by okvi_call_desc_until_reply each time its wait passes another
 * watchdog mark: waited_ns since the request was sent (first at the
 * client's timeout, then every OKVI_WATCHDOG_REPEAT_NS).
 */
typedef void (*okvi_overrun_fn)(okv_client *c, void *ctx, uint64_t waited_ns);

/** Watchdog repeat period of okvi_call_desc_until_reply: 60 s (spec: "repeats
 *  at most once per minute"). */
#define OKVI_WATCHDOG_REPEAT_NS 60000000000ull

/**
 * okvi_call_desc without a deadline, for a request whose descriptor names
 * memory the Manager may still be reading (Publish: spec "once submitted,
 * the client waits beyond the ordinary IPC timeout until it receives a
 * reply or the Cache Manager process exits"). Needs c->pidfd ≥ 0 (the
 * caller checks). Waits until the response or until the Manager's pidfd is
 * readable (OKV_EMANAGER_DIED, the client is then broken); overrun(c, ctx,
 * waited) runs when the ordinary timeout has passed and then once per
 * OKVI_WATCHDOG_REPEAT_NS, it never ends the wait (elapsed time says
 * nothing about DMA completion). Returns as okvi_call_desc, never
 * OKV_ETIMEDOUT.
 */
int okvi_call_desc_until_reply(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1,
			       uint32_t desc_length, struct okv_msg *resp, okvi_overrun_fn overrun, void *ctx);

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

/* ---- query tickets (ops.c sends and checks, tickets.c keeps state) ---- */

/** flags value of struct okvi_query_expect when the request's flags are not
 *  known (okv_op_poll / okv_op_claim of a raw op id): flag-specific result
 *  checks are skipped. */
#define OKVI_FLAGS_UNKNOWN 0xFFFFFFFFu

/**
 * What a query result must agree with (abi.h okv_query_result): the op id
 * and revision sent (0/0 for an untracked okv_query), max_hits = hashes
 * sent (for Poll/Claim the ticket's view length), the flags of the request
 * (OKVI_FLAGS_UNKNOWN: any) and its recovery range (OKV_QUERY_RECOVERY).
 */
struct okvi_query_expect {
	uint64_t op_id;
	uint32_t revision;
	uint32_t max_hits;
	uint32_t flags;
	uint32_t recovery_first;
	uint32_t recovery_count;
};

/** One QueryBundle: the descriptor fields and the hashes[0..n) of the view. */
struct okvi_query_req {
	struct okv_namespace ns;
	const struct okv_block_hash *hashes;
	uint32_t n;
	uint32_t flags;
	uint64_t op_id;
	uint32_t revision;
	uint64_t request_id;
	uint64_t group;
	uint32_t recovery_first;
	uint32_t recovery_count;
};

/**
 * Check the okv_query_result r the Manager wrote against the response line
 * resp (a well-formed Ok, Miss or Candidates line) and the request *w
 * (abi.h okv_query_result, "Query tickets"): magic, schema, status = the
 * response code, hit_count = arg0, lease_id = arg1, reserved1 zero, op_id
 * and revision as sent, hit_count and ram_hits ≤ w->max_hits; Ok with a
 * lease has ≥ 1 hit (never for WARMUP or DISCOVER), Ok without one only
 * for WARMUP; a recovery lease is exactly the range asked (first, count),
 * a prefix lease starts at position 0; Miss has 0 hits and no lease;
 * Candidates no lease, and only for DISCOVER or PREPARE. Returns 0 or
 * OKV_EPROTO with okv_last_error naming the field.
 */
int okvi_check_query_result(okv_client *c, const struct okv_msg *resp, const struct okvi_query_expect *w,
			    const struct okv_query_result *r);

/**
 * Send one QueryBundle (descriptor okv_query_desc + hashes, desc_length
 * 64 + 16 n) and decode the answer into *ans (zeroed first; op_id and
 * revision always set to the request's). Returns 0 for Ok, Miss and
 * Candidates (ans->status tells; the result was checked against the line
 * and the request, else OKV_EPROTO naming the field), OKV_EPENDING for
 * Loading (ans->hit_count = hits so far), and the codes of
 * okvi_msg_check_response otherwise (OKV_EUNADMITTED, OKV_EINVALID,
 * OKV_EEXPIRED, ...); *resp is the response line whenever one arrived
 * (resp->code 0xFFFF when none did). Checks n: 0 is -EINVAL, more than
 * okv_max_query_hashes is OKV_E2BIG (nothing sent).
 */
int okvi_query_call(okv_client *c, const struct okvi_query_req *rq, struct okv_query_answer *ans,
		    struct okv_msg *resp);

/**
 * Poll, Claim or CancelQuery of (op_id, revision): Poll and Claim carry a
 * zeroed 64-byte descriptor the Manager answers into; CancelQuery none.
 * Poll/Claim return as okvi_query_call (result checked against *want);
 * CancelQuery returns 0 (Ok with arg0 = 1, else OKV_EPROTO) or the status
 * error. *resp as in okvi_query_call.
 */
int okvi_ticket_msg(okv_client *c, uint16_t code, const struct okvi_query_expect *want,
		    struct okv_query_answer *ans, struct okv_msg *resp);

/** The environment variable that keeps an engine process dumpable: "1"
 *  keeps it; unset, "" or "0" is the default (docs/security.md). */
#define OKVI_DUMPABLE_ENV "ORBITKV_DUMPABLE"
/* The environment variable naming the uid of a Manager a client trusts
 * besides its own euid (struct okv_connect_options.manager_uid_plus1). */
#define OKVI_MANAGER_UID_ENV "ORBITKV_MANAGER_UID"
/* The runtime directory okv_connect resolves the default socket in:
 * OKV_RUNTIME_DIR; native tests point it at a directory of their own. */
extern const char *okvi_runtime_dir;

/**
 * Clear this process's dumpable attribute (prctl PR_SET_DUMPABLE 0) unless
 * OKVI_DUMPABLE_ENV is "1" (dumpable.c). Idempotent; called by okv_connect
 * and okv_buffer_alloc before they make or receive an fd. Returns 0,
 * -EINVAL (another value of the variable; err names it and the values
 * allowed), or -errno of prctl. err may be NULL.
 */
int okvi_drop_dumpable(char *err, size_t errlen);

/** Whether a publish from buffer id b ended ambiguously (c->buf_fenced). */
static inline int okvi_buffer_fenced(const okv_client *c, uint32_t b)
{
	return b <= OKVI_MAX_BUFFER_ID && (c->buf_fenced[b / 8] >> (b % 8)) & 1u;
}

/** Whether a lifecycle call's return code may have left a reply unread on
 *  the socket (a timeout or an I/O -errno). */
static inline int okvi_lifecycle_desynced(int rc)
{
	return rc == OKV_ETIMEDOUT || (rc < 0 && rc > OKV_EPROTO);
}

#endif /* ORBITKV_CLIENT_INTERNAL_H */
