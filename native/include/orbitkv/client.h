/*
 * orbitkv/client.h — liborbitkv, the OrbitKV client library.
 *
 * The one public header of liborbitkv (shared and static). Every symbol is
 * prefixed okv_; the linker version script exports nothing else.
 *
 * Errors: functions return 0 on success or a negative code: -errno for
 * system errors (man 3 errno), or one of the OKV_E* codes below. okv_strerror
 * turns either into a static string.
 *
 * Threads: an okv_client is not thread-safe; give each thread its own client
 * or serialise calls. Different clients may be used from different threads.
 *
 * The process is made non-dumpable (prctl(2) PR_SET_DUMPABLE 0) by
 * okv_connect and okv_buffer_alloc, before either creates or receives an
 * fd: the engine's KV buffers and session memfds are otherwise open
 * read-write to every process of its uid through /proc/<pid>/fd. What that
 * costs the process: no core dump; attaching gdb, strace or py-spy needs
 * root or CAP_SYS_PTRACE; /proc/<pid>/{fd,mem,environ,maps} belong to
 * root; pidfd_getfd(2) on it needs CAP_SYS_PTRACE. execve(2) and a change
 * of the process's uids or gids set the attribute again (to 1, or to
 * /proc/sys/fs/suid_dumpable); the next of these calls clears it again.
 * The environment variable ORBITKV_DUMPABLE=1 leaves the attribute as it
 * is; unset, "" or "0" is the default; any other value makes both calls
 * fail with -EINVAL (okv_connect_err names the variable). See
 * docs/security.md "Engine processes are not dumpable".
 */
#ifndef ORBITKV_CLIENT_H
#define ORBITKV_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** OrbitKV-specific error codes (negative, below every -errno). */
enum okv_error {
	OKV_OK = 0,
	OKV_EPROTO = -1001,          /* malformed reply or frame from the Manager */
	OKV_EVERSION = -1002,        /* ABI or bootstrap version mismatch */
	OKV_EREFUSED = -1003,        /* Manager refused the hello (see okv_last_error) */
	OKV_ESTALE_SESSION = -1004,  /* Manager answered StaleSession: other epoch */
	OKV_ESTALE_GENERATION = -1005,
	OKV_EINVALID = -1006,        /* Manager answered Invalid (okv_last_error names the field) */
	OKV_ETIMEDOUT = -1007,       /* no reply within the deadline; outcome unknown */
	OKV_EMANAGER_DIED = -1008,   /* the Manager process exited (pidfd readable) */
	OKV_ECLOSED = -1009,         /* client already closed or session ended */
	OKV_EINTERNAL = -1010,       /* Manager answered Internal */
	OKV_EUNSUPPORTED = -1011,    /* Manager does not serve this command */
	OKV_EAPPLICATION = -1012,    /* Manager sent an error frame (okv_last_error) */
	OKV_EPENDING = -1013,        /* restore still copying: poll or wait again */
	OKV_EUNADMITTED = -1014,     /* capacity pressure: nothing done, retry later */
	OKV_E2BIG = -1015,           /* batch does not fit the slot's descriptor area */
	OKV_EEXPIRED = -1016,        /* Manager answered Timeout: the ticket or restore expired */
	OKV_EFENCED = -1017,         /* a publish's outcome is ambiguous: its source pages stay
	                              * the Manager's until it exits (okv_publish) */
	OKV_EPEER = -1018,           /* the bootstrap socket is served by a process of another
	                              * uid: refused before the hello or any fd was sent */
	OKV_EDISCOVER_BUSY = -1019   /* a discovery index bucket stayed mid-update for the
	                              * reader's whole spin budget; nothing was sent to the
	                              * Manager: take the round trip (okv_discover_local) */
};

/** Largest okv_connect_options.timeout_ms: one hour. */
#define OKV_MAX_TIMEOUT_MS 3600000u

/** Options for okv_connect. Zero-initialise, then set what you need. */
struct okv_connect_options {
	/** Bootstrap socket path; NULL = derive from `manager_addr`, or with
	 *  both NULL the default of okv_resolve_socket_path
	 *  ($ORBITKV_BOOTSTRAP_SOCKET, /run/orbitkv/manager.sock, the path of
	 *  $ORBITKV_LISTEN or 127.0.0.1:7470). */
	const char *socket_path;
	/** Manager listen address "host:port" used to derive
	 *  /tmp/orbitkv-<host>-<port>.sock when socket_path is NULL; NULL with
	 *  socket_path NULL = the default of okv_resolve_socket_path. */
	const char *manager_addr;
	/** Instance id sent in the hello (≤ 64 bytes; longer is EINVAL). */
	const char *instance_id;
	/** enum okv_role. */
	uint32_t role;
	/** Nanoseconds a call spins on the response line before it parks on the
	 *  futex; 0 = default 50 µs. */
	uint32_t spin_ns;
	/** Milliseconds a control call waits for its reply; 0 = default 5000;
	 *  at most OKV_MAX_TIMEOUT_MS (larger is -EINVAL). */
	uint32_t timeout_ms;
	/** The uid of a Manager this client trusts besides its own euid, plus
	 *  one: a Manager serving tenants of other uids (docs/security.md
	 *  "Tenants"). 0 = none given here; then ORBITKV_MANAGER_UID (a
	 *  decimal uid) gives it, when set and not empty. When the socket is
	 *  the default in /run/orbitkv (socket_path, manager_addr and
	 *  ORBITKV_BOOTSTRAP_SOCKET unset), that directory's owner is trusted
	 *  too if okv_runtime_dir_owner vouches for it. A Manager of any other
	 *  uid is refused (OKV_EPEER) before anything is sent. */
	uint32_t manager_uid_plus1;
};

/** Opaque client handle: owns the bootstrap socket, the mapped slot and
 *  doorbell, the session eventfd and a pidfd of the Manager. */
typedef struct okv_client okv_client;

/**
 * Health as the Manager reports it to this session (Health lifecycle
 * frame): the Manager's liveness and this session's own figures. Figures of
 * the whole Manager would tell one tenant about another's traffic (whether
 * a publish was new, whether a lookup repeated), so they are 0 here; the
 * operator's endpoint serves them (GET /health on the Manager's loopback
 * HTTP address), and the idle invariant is checked there.
 */
struct okv_health {
	char status[16];        /* "serving" / "draining", NUL-terminated */
	uint64_t epoch;
	uint8_t service_id[OKV_SERVICE_ID_BYTES];
	uint32_t sessions;      /* Manager-wide: 0 */
	uint32_t manager_pid;
	uint64_t uptime_ns;
	uint64_t requests;      /* channel requests of this session served */
	char poll_mode[16];     /* "spin" / "adaptive" / "park" */
	char version[32];      /* NUL-terminated, cut to 31 bytes (okv_manager_version: up to 64) */
	/* this session's cache state: 0 once it holds nothing */
	uint64_t blocks;             /* Manager-wide: 0 */
	uint64_t ram_used_bytes;     /* Manager-wide: 0 */
	uint64_t ram_capacity_bytes; /* --ram-capacity */
	uint64_t leases;             /* leases this session holds */
	uint64_t pins;               /* block references its leases hold */
	uint64_t reserved_bytes;     /* budget bytes its leases and in-flight restores reserve */
	uint64_t operations;         /* its tickets and restores (operation permits) */
	uint64_t evictions;          /* Manager-wide: 0 */
	uint64_t tickets;            /* its live query tickets */
	uint64_t lookups;            /* Manager-wide: 0 */
	uint64_t distinct_lookups;   /* Manager-wide: 0 */
};

/**
 * Connect to a Manager: bootstrap over the Unix socket (hello, reply with
 * the slot memfd, eventfd and doorbell memfd), map the slot and doorbell,
 * open pidfd_open(2) on the Manager and send RegisterInstance.
 * On success *out owns everything; release it with okv_close.
 * Errors: -ENOENT / -ECONNREFUSED (no Manager at the path), -EACCES,
 * OKV_EPEER (the process serving the path runs as another uid than this
 * process's effective uid: nothing is sent to it, neither the hello nor any
 * fd; the same rule the Manager applies to its clients, docs/design.md §5.1),
 * OKV_EREFUSED, OKV_EVERSION, OKV_EPROTO, OKV_ETIMEDOUT, -ENOMEM, -EINVAL
 * (also an ORBITKV_DUMPABLE other than unset, "", "0" or "1": nothing is
 * done). First of all it makes the process non-dumpable (see the top of
 * this header).
 */
int okv_connect(const struct okv_connect_options *opts, okv_client **out);

/**
 * okv_connect that also explains a failure: on a nonzero return, err (if not
 * NULL) holds a NUL-terminated reason of at most errlen - 1 bytes, such as the
 * Manager's refusal text ("peer uid 1000 differs from the Manager's uid 0"),
 * the socket path and a hint for a failed connect(2), or the field of the
 * bootstrap reply that was malformed. The whole call, connect(2) included,
 * is bounded by timeout_ms.
 */
int okv_connect_err(const struct okv_connect_options *opts, okv_client **out,
		    char *err, size_t errlen);

/**
 * Round trip a Ping through the shared-memory channel; *echo receives the
 * Manager's copy of `value` (may be NULL). Spins up to spin_ns, then parks on
 * the response futex; checks the Manager's pidfd while parked.
 * Errors: OKV_ETIMEDOUT, OKV_EMANAGER_DIED, OKV_ESTALE_SESSION,
 * OKV_ESTALE_GENERATION, OKV_EINVALID, OKV_ECLOSED.
 */
int okv_ping(okv_client *c, uint64_t value, uint64_t *echo);

/** Health lifecycle frame round trip over the bootstrap socket. */
int okv_health(okv_client *c, struct okv_health *out);

/** Close: sends Unregister (best effort), unmaps, closes every fd, frees c.
 *  NULL is a no-op. Always succeeds. */
void okv_close(okv_client *c);

/** Static description of a code returned by any okv_ function. Never NULL. */
const char *okv_strerror(int err);

/** This liborbitkv's version, a static string never NULL: VERSION of the
 *  source tree, MAJOR.MINOR.PATCH, for a release ("0.1.0"), with
 *  "-dev.N+gHASH" between releases and ".dirty" for a modified tree
 *  ("0.1.0-dev.12+g0123456789ab"), as ci/version.sh prints it; the same
 *  string the Go binaries of the same build print with --version. The
 *  shared library's SONAME carries MAJOR (liborbitkv.so.0). */
const char *okv_version(void);

/** The Manager's build version as its bootstrap reply announced it
 *  (extension record OKV_BOOT_EXT_MANAGER_VERSION), "" when it sent none or
 *  c is NULL. Valid until okv_close(c). Never NULL. */
const char *okv_manager_version(const okv_client *c);

/** Detail of the last OKV_EINVALID / OKV_EREFUSED / OKV_EAPPLICATION on c
 *  (field name and limit); valid until the next call on c. Never NULL. */
const char *okv_last_error(const okv_client *c);

/** Manager epoch of this session. */
uint64_t okv_epoch(const okv_client *c);
/** Session eventfd (borrowed: do not close); readable when a restore ends.
 *  okv_restore_wait reads it to reset it; a caller that polls it itself
 *  reads it too, then asks okv_restore_poll which restore ended. */
int okv_notification_fd(const okv_client *c);
/** pidfd of the Manager (borrowed); readable when the Manager exits. */
int okv_manager_pidfd(const okv_client *c);

/* ------------------------------------------------------------------------ */
/* Cache identity (docs/design.md §5.4)                                           */
/* ------------------------------------------------------------------------ */

/** The cache identity of an engine's KV blocks. Strings may be NULL (= "");
 *  each is at most 1024 bytes. */
struct okv_namespace_spec {
	const char *model_id;         /* e.g. "meta-llama/Llama-3.1-8B" */
	const char *weights_revision; /* commit or checksum of the weights */
	const char *dtype;            /* KV dtype: "bfloat16", "fp8_e4m3" */
	const char *kv_layout;        /* engine layout name, e.g. "vllm-nhd" */
	uint32_t block_tokens;        /* tokens per block, ≥ 1 */
	uint32_t tp_rank, tp_size;    /* tensor parallel; size ≥ 1, rank < size */
	uint32_t pp_rank, pp_size;    /* pipeline parallel */
	uint32_t cp_rank, cp_size;    /* context parallel */
	const char *adapter_id;       /* LoRA/adapter id, NULL or "" = none */
	const char *tenant_salt;      /* isolates tenants sharing a model */
};

/**
 * Fingerprint a cache identity: the first 16 bytes of SHA-256 over the
 * domain tag "orbitkv.namespace.v1" and then every field of spec in the
 * order declared, each as a 4-byte little-endian length followed by its
 * bytes (integers as 4-byte little-endian values, so length 4). The same
 * bytes in every process and language (gocore and the Python package
 * compute it the same way). Errors: -EINVAL (NULL, block_tokens 0, a size
 * 0, a rank ≥ its size, a string over 1024 bytes); -EIO if libcrypto fails.
 */
int okv_namespace_fingerprint(const struct okv_namespace_spec *spec, struct okv_namespace *out);

/* ------------------------------------------------------------------------ */
/* Engine buffers (host backend)                                             */
/* ------------------------------------------------------------------------ */

/**
 * An engine KV buffer in shared memory: one memfd holding `layers` layers
 * of `page_count` pages of `page_bytes` bytes, layer-major: page p of layer
 * l starts at base + (l * page_count + p) * page_bytes.
 */
struct okv_buffer {
	void *base;           /* mapping, MAP_SHARED, read-write */
	uint64_t bytes;       /* layers * page_count * page_bytes */
	int fd;               /* memfd, sealed against shrink and grow */
	uint32_t layers;
	uint64_t page_bytes;
	uint64_t page_count;
};

/**
 * Allocate a buffer: memfd_create(2) with MFD_ALLOW_SEALING, ftruncate,
 * F_SEAL_SHRINK | F_SEAL_GROW (so the Manager's mapping can never lose its
 * pages: a shrink would SIGBUS the copy workers), mmap MAP_SHARED and
 * pre-fault (MAP_POPULATE). Before the memfd exists the process is made
 * non-dumpable, as by okv_connect (see the top of this header). On failure
 * *out is zeroed with fd -1.
 * Errors: -EINVAL (a zero dimension, page_bytes not a multiple of 64,
 * overflow, an ORBITKV_DUMPABLE other than unset, "", "0" or "1"), -ENOMEM
 * and other -errno.
 */
int okv_buffer_alloc(uint32_t layers, uint64_t page_bytes, uint64_t page_count, struct okv_buffer *out);
/** Unmap and close; zeroes *b. NULL or a zeroed buffer is a no-op. */
void okv_buffer_free(struct okv_buffer *b);
/** Address of page `page` of layer `layer` (no bounds check). */
static inline void *okv_buffer_page(const struct okv_buffer *b, uint32_t layer, uint64_t page)
{
	return (uint8_t *)b->base + ((uint64_t)layer * b->page_count + page) * b->page_bytes;
}

/**
 * Register a buffer with the Manager (RegisterBuffers lifecycle frame, the
 * memfd passed with SCM_RIGHTS); the Manager maps it and checks its seals.
 * *buffer_id names it in Publish and Restore; the client remembers the
 * buffer's layer count by id (okv_publish needs it). The buffer must stay
 * allocated until okv_close. Errors: OKV_EAPPLICATION (okv_last_error names
 * the field and limit), OKV_ETIMEDOUT, OKV_EPROTO, OKV_ECLOSED, -EINVAL
 * (NULL, or a buffer not allocated by okv_buffer_alloc).
 */
int okv_register_buffer(okv_client *c, const struct okv_buffer *b, uint32_t *buffer_id);

/** okv_cuda_region.handle_kind: a legacy CUDA IPC handle (cudaMalloc memory). */
#define OKV_CUDA_HANDLE_IPC 1
/** okv_cuda_region.handle_kind: a VMM allocation exported as a POSIX fd. */
#define OKV_CUDA_HANDLE_VMM_FD 2

/**
 * An engine KV buffer in CUDA memory of this process, registered by handle
 * (okv_register_cuda_buffer): never a pickled tensor. Layout as okv_buffer
 * (layer-major pages); the region is [offset, offset+bytes) of its base
 * allocation.
 */
struct okv_cuda_region {
	uint32_t handle_kind;     /* OKV_CUDA_HANDLE_IPC or OKV_CUDA_HANDLE_VMM_FD */
	uint32_t layers;          /* KV layers */
	uint8_t device_uuid[16];  /* cuDeviceGetUuid of the device (not the ordinal) */
	uint8_t ipc_handle[64];   /* IPC: cuIpcGetMemHandle of the base allocation */
	int32_t vmm_fd;           /* VMM: the exported fd (borrowed; sent with SCM_RIGHTS) */
	uint32_t reserved;        /* 0 */
	uint64_t alloc_bytes;     /* VMM: bytes of the allocation */
	uint64_t offset;          /* bytes from the base allocation to the region */
	uint64_t bytes;           /* region length, >= layers*page_bytes*page_count */
	uint64_t page_bytes;      /* bytes of one page of one layer */
	uint64_t page_count;      /* pages per layer */
};

/**
 * Register a CUDA buffer with the Manager (RegisterBuffers with handle_kind
 * CUDA_IPC or CUDA_VMM_FD; the Manager must run --copy-backend cuda, maps
 * it, and refuses a bad field naming it). *buffer_id as okv_register_buffer.
 * The memory must stay allocated until okv_close. Errors as
 * okv_register_buffer, and -EINVAL for a NULL, a zero dimension or an
 * unknown handle_kind.
 */
int okv_register_cuda_buffer(okv_client *c, const struct okv_cuda_region *r, uint32_t *buffer_id);

/* ------------------------------------------------------------------------ */
/* Cache operations (docs/design.md §5.3)                                         */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Local discovery (orbitkv/discover.h)                                      */
/* ------------------------------------------------------------------------ */

/**
 * Map the Manager's discovery index of namespace ns read-only (one
 * MapDiscovery lifecycle round trip; a no-op when it is mapped already).
 * The Manager hands a session the index of a namespace only when the
 * session names it, so nothing of other namespaces is learnt. A client maps
 * at most 16 namespaces. Errors: -EINVAL (NULL, all-zero ns), -ENOSPC (16
 * mapped), OKV_EAPPLICATION (the Manager refused: its discovery budget,
 * --discover-bytes, is spent, or it serves none; okv_last_error says
 * which; the Manager also refuses a session's 17th namespace), OKV_EPROTO
 * (a reply or table that does not check out), OKV_ETIMEDOUT, OKV_ECLOSED.
 * A refusal by the Manager is remembered per namespace for 1 s: calls for
 * that namespace meanwhile return it again without a round trip (the
 * message says how long ago the Manager gave it).
 */
int okv_discover_open(okv_client *c, const struct okv_namespace *ns);

/**
 * How many of hashes[0..n) are resident in the Manager's RAM tier, counted
 * from the first up to the first absent one (the prefix QueryBundle would
 * report as hits), into *count, answered from the namespace's mapped
 * discovery index: no syscall, no message, no Manager wake-up once mapped
 * (the first call for a namespace maps it with okv_discover_open).
 * The answer is advisory: it takes no lease, so a reported block may be
 * evicted before it is restored (confirm a hit with okv_query where a
 * missing block would fail a request), and it is stale by at most the one
 * update the Manager is writing (a block sealed or evicted a moment ago).
 * A table the Manager retired (OKV_DISCOVER_RETIRED: the session that
 * mapped it closed, or the Manager stopped) is never read: it is unmapped
 * and the namespace mapped again (one round trip).
 * Thread use: like every call on c, one thread at a time. Errors: those
 * of okv_discover_open on the first call and after a retirement;
 * OKV_EDISCOVER_BUSY when a bucket stayed mid-update for
 * OKV_DISCOVER_SPINS tries (a Manager descheduled or dead while writing;
 * nothing was sent, *count holds the prefix before it: take the round
 * trip); -EINVAL (NULL, n > UINT32_MAX).
 */
int okv_discover_local(okv_client *c, const struct okv_namespace *ns, const struct okv_block_hash *hashes, size_t n,
		       uint32_t *count);

/**
 * The header flags of ns's discovery index (enum okv_discover_flags of
 * orbitkv/discover.h; mapping it first like okv_discover_local). With
 * OKV_DISCOVER_COMPLETE a local miss is final (the Manager serves from RAM
 * only); without it a local miss may still be an SSD or peer hit, so only
 * the round trip answers it. Errors: those of okv_discover_open.
 */
int okv_discover_flags(okv_client *c, const struct okv_namespace *ns, uint32_t *flags);

/** A lease returned by okv_query. */
struct okv_lease {
	uint64_t lease_id;     /* 0 when hit_count is 0 (no lease to release) */
	uint32_t hit_count;    /* leading hashes resident, pinned by the lease */
	uint32_t reserved;
	uint64_t lease_bytes;  /* bytes the lease pins and reserves */
	uint64_t block_bytes;  /* bytes of one leased block */
};

/**
 * QueryBundle, leased read: the longest resident prefix of hashes[0..n).
 * On hit_count ≥ 1 the Manager pins those blocks under a lease that this
 * session must end with okv_release (or by closing). hit_count 0 returns 0
 * with lease_id 0. 1 ≤ n ≤ okv_max_query_hashes(c): 0 is -EINVAL, more is
 * OKV_E2BIG (nothing sent). The Manager's okv_query_result must agree with
 * the response line (else OKV_EPROTO).
 * Errors: OKV_EINVALID (okv_last_error names the field and entry),
 * OKV_EUNADMITTED, OKV_E2BIG, -EINVAL, and the channel errors of okv_ping.
 */
int okv_query(okv_client *c, const struct okv_namespace *ns, const struct okv_block_hash *hashes,
	      uint32_t n, struct okv_lease *out);

/** Result of okv_publish, summed over its chunks. */
struct okv_publish_result {
	uint32_t stored;   /* blocks copied in and made visible */
	uint32_t present;  /* blocks already resident (not copied) */
};

/**
 * Publish n blocks: block i is page pages[i] of every layer of buffer
 * buffer_id, stored under (ns, hashes[i]). The copy (D2H on a GPU backend)
 * has completed and the blocks are visible when this returns. A batch larger
 * than the slot is sent as several chunks of at most
 * okv_max_publish_entries(c) entries, each a contiguous range of entries
 * over all layers; n 0 does nothing and returns 0. out may be NULL.
 *
 * Fence (spec: "Publish requires a Cache Manager pidfd before submission.
 * Once submitted, the client waits beyond the ordinary IPC timeout until it
 * receives a reply or the Cache Manager process exits"): without a pidfd
 * of the Manager nothing is sent (OKV_ECLOSED). A sent chunk is waited for
 * without a deadline, never OKV_ETIMEDOUT; when the ordinary timeout has
 * passed, a watchdog writes one line to stderr ("orbitkv: publish of N
 * blocks to buffer B waiting Xs for the Manager (pid P); source pages stay
 * pinned") and repeats it at most once per minute; elapsed time is never
 * taken for copy completion. The wait ends with the reply or the Manager's
 * exit (OKV_EMANAGER_DIED; its mappings die with it). An ambiguous
 * acknowledgement — a malformed reply (bad line, stored + present beyond
 * the entries sent) or a status a Publish never gets (Loading, Miss,
 * Candidates) — returns OKV_EFENCED and fences the buffer: the Manager may
 * still read its pages, so they stay pinned until the Manager exits, and
 * every later okv_publish or okv_restore naming buffer_id on this client
 * returns OKV_EFENCED without sending. Do not rewrite the source pages of
 * a fenced buffer.
 * Errors: OKV_EUNADMITTED (the RAM tier has no unpinned frames; chunks
 * before it stay published, *out counts them), OKV_EINVALID, OKV_EFENCED,
 * OKV_ECLOSED (no pidfd, or a closed client), OKV_EMANAGER_DIED, -EINVAL
 * (buffer_id not registered through this client), and the other channel
 * errors of a chunk that was not sent (OKV_ETIMEDOUT: an earlier timed-out
 * query or restore still holds the descriptor area).
 */
int okv_publish(okv_client *c, const struct okv_namespace *ns, uint32_t buffer_id,
		const struct okv_block_hash *hashes, const uint32_t *pages, uint32_t n,
		struct okv_publish_result *out);

/** What a router matches a block on (abi.h struct okv_block_record): the
 *  engine's own block hash as its KV events carry it, its parent's, and
 *  the block's token ids (token_count of them, 1..OKV_RECORD_MAX_TOKENS;
 *  the caller's memory, read during the call only). */
struct okv_block_info {
	uint64_t engine_hash;
	uint64_t parent_hash;   /* ignored unless has_parent; must be 0 then */
	uint32_t has_parent;    /* 0: the first block of its chain */
	uint32_t token_count;
	const uint32_t *tokens;
};

/**
 * okv_publish with a block record per block (records[i] describes block
 * i; NULL: none, as okv_publish). The Manager keeps each record with its
 * block and announces it in its KV events (docs/events.md). Chunks are
 * cut so that entries and records fit the descriptor area. Errors: those
 * of okv_publish, and -EINVAL naming a record with a bad token count or a
 * parent hash without has_parent (nothing sent). A Manager older than
 * Publish schema 2 answers OKV_EINVALID naming desc_schema.
 */
int okv_publish_records(okv_client *c, const struct okv_namespace *ns, uint32_t buffer_id,
			const struct okv_block_hash *hashes, const uint32_t *pages,
			const struct okv_block_info *records, uint32_t n, struct okv_publish_result *out);

/**
 * Start copying leased blocks into pages of buffer buffer_id (H2D on a GPU
 * backend): entries[i] copies lease block entries[i].block into page
 * entries[i].page of every layer. *op_id names the operation for
 * okv_restore_poll / okv_restore_wait. The destination pages belong to the
 * Manager's copy workers until a terminal result: do not touch them before.
 * 1 ≤ n ≤ okv_max_restore_entries(c): 0 is -EINVAL, more is OKV_E2BIG.
 * Errors: OKV_EINVALID (unknown or foreign lease, page out of range or in
 * an in-flight restore, block outside the lease), OKV_E2BIG, OKV_EFENCED
 * (buffer_id was fenced by an ambiguous okv_publish; nothing sent),
 * channel errors.
 */
int okv_restore(okv_client *c, uint64_t lease_id, uint32_t buffer_id,
		const struct okv_restore_entry *entries, uint32_t n, uint64_t *op_id);

/**
 * Non-blocking: 0 when the restore completed (the operation is consumed;
 * a second poll answers OKV_EINVALID), OKV_EPENDING while it copies,
 * OKV_EINTERNAL when the copy failed, OKV_EINVALID for an unknown id.
 */
int okv_restore_poll(okv_client *c, uint64_t op_id);

/**
 * Block until the restore reaches a terminal state or timeout_ms passes:
 * polls, then sleeps on the session eventfd (okv_notification_fd) for at
 * most 50 ms at a time, so a lost notification costs at most 50 ms; a
 * readable eventfd is read to reset it. timeout_ms above OKV_MAX_TIMEOUT_MS
 * counts as OKV_MAX_TIMEOUT_MS. Returns as okv_restore_poll; OKV_ETIMEDOUT
 * when the deadline passed (the destination pages are still the
 * Manager's), OKV_EMANAGER_DIED (the Manager's pidfd became readable).
 */
int okv_restore_wait(okv_client *c, uint64_t op_id, uint32_t timeout_ms);

/** End a lease: its pins and reserved bytes are released. Errors:
 *  OKV_EINVALID (unknown, released or another session's lease). */
int okv_release(okv_client *c, uint64_t lease_id);

/** Largest n for okv_query / entries for okv_restore in one call, and per
 *  chunk of okv_publish, given this session's descriptor area. */
uint32_t okv_max_query_hashes(const okv_client *c);
uint32_t okv_max_restore_entries(const okv_client *c);
uint32_t okv_max_publish_entries(const okv_client *c);

/* ------------------------------------------------------------------------ */
/* Query tickets (abi.h "Query tickets"; spec "Channel ABI 5")                */
/* ------------------------------------------------------------------------ */

/**
 * An immutable batch of block hashes, built once per lookup and shared by
 * reference: a ticket keeps a reference while live, and a prefix view of a
 * batch is (batch, length), so okv_ticket_revise compares identity in
 * constant time (same batch pointer, same length) instead of hashes.
 * Reference counted; not thread-safe (one client thread per batch).
 */
typedef struct okv_block_hashes okv_block_hashes;

/** Copy hashes[0..n) into a new batch (refcount 1). n ≥ 1. Errors: -EINVAL,
 *  -ENOMEM. */
int okv_block_hashes_new(const struct okv_block_hash *hashes, uint32_t n, okv_block_hashes **out);
/** Take one more reference; returns b. */
okv_block_hashes *okv_block_hashes_ref(okv_block_hashes *b);
/** Drop one reference; the last frees the batch. NULL is a no-op. */
void okv_block_hashes_unref(okv_block_hashes *b);
/** Hash count and first hash of a batch. */
uint32_t okv_block_hashes_len(const okv_block_hashes *b);
const struct okv_block_hash *okv_block_hashes_data(const okv_block_hashes *b);

/** What a ticket asks (struct okv_query_desc of abi.h). */
struct okv_query_spec {
	struct okv_namespace ns;
	okv_block_hashes *hashes; /* the batch; the ticket takes its own reference */
	uint32_t prefix_len;      /* hashes[0..prefix_len) are sent; 0 = the whole batch */
	uint32_t flags;           /* enum okv_query_flags */
	uint64_t request_id;      /* engine request (kept across revisions) */
	uint64_t group;           /* request group (kept across revisions) */
	uint32_t recovery_first;  /* OKV_QUERY_RECOVERY: leased range of the view */
	uint32_t recovery_count;
};

/** A ticket's answer (struct okv_query_result plus the response status). */
struct okv_query_answer {
	uint16_t status;       /* enum okv_status: Ok, Miss, Candidates, Loading */
	uint16_t reserved0;
	uint32_t hit_count;    /* as okv_query_result.hit_count */
	uint32_t ram_hits;
	uint32_t first;        /* chain position of lease block 0 */
	uint64_t lease_id;     /* Ok with a lease: end it with okv_release */
	uint64_t lease_bytes;
	uint64_t block_bytes;
	uint64_t op_id;
	uint32_t revision;
	uint32_t reserved1;
};

/** A query ticket owned by liborbitkv: op id (increasing per client) and
 *  revision, and the view it last sent. */
typedef struct okv_ticket okv_ticket;

/**
 * Submit a query under a fresh ticket. 0: terminal answer in *ans (Ok, Miss,
 * Candidates; WARMUP: Ok, hit_count = blocks warming), the ticket is retired
 * (*out is still set: free it with okv_ticket_free). OKV_EPENDING: Loading;
 * the ticket is live: okv_ticket_poll (or okv_ticket_claim for PREPARE).
 * OKV_EUNADMITTED: operation bounds full, *out NULL: retry later with a new
 * submit. Errors: OKV_EINVALID, OKV_E2BIG (view longer than
 * okv_max_query_hashes), -EOVERFLOW (the session used up its op ids:
 * reconnect), -EINVAL, -ENOMEM, channel errors.
 */
int okv_ticket_submit(okv_client *c, const struct okv_query_spec *spec, okv_ticket **out,
		      struct okv_query_answer *ans);
/**
 * Poll a live ticket without resending hashes. 0: terminal (*ans), the
 * ticket is retired; OKV_EPENDING: still loading (or a PREPARE ticket is
 * ready: ans->status Candidates, claim it); OKV_EEXPIRED: expired at the
 * Manager (retired); OKV_EUNADMITTED: the Manager could not lease the
 * result (per-session lease limits, a lease over the whole byte budget) and
 * retired the ticket: submit again later; OKV_EINVALID: not live. A retired ticket is answered
 * OKV_EINVALID locally without a message (unknown polls never submit work).
 */
int okv_ticket_poll(okv_client *c, okv_ticket *t, struct okv_query_answer *ans);
/**
 * Replace a live ticket's view (hashes, recovery range) or wait policy
 * (OKV_QUERY_WAIT_FOR_FULL_PREFIX) with revision + 1; request_id, group,
 * namespace and the other flags must stay (the Manager answers Invalid,
 * field request / desc_flags / namespace, and the live revision stays).
 * The same batch pointer, prefix length, flags and namespace as the live
 * revision is a poll (constant-time comparison; no hashes resent). Returns
 * as okv_ticket_submit.
 */
int okv_ticket_revise(okv_client *c, okv_ticket *t, const struct okv_query_spec *spec,
		      struct okv_query_answer *ans);
/** Claim a PREPARE ticket's result (exact revision): 0 (Ok with a lease or
 *  Miss; retired), OKV_EPENDING (preparing), OKV_EUNADMITTED (retired,
 *  expired or revised at the Manager: submit a fresh ordinary query);
 *  -EINVAL without sending for a ticket that is not a PREPARE ticket. */
int okv_ticket_claim(okv_client *c, okv_ticket *t, struct okv_query_answer *ans);
/** Cancel a live ticket (its undelivered lease is dropped by the Manager):
 *  0, OKV_EEXPIRED, OKV_EINVALID (already retired), channel errors. */
int okv_ticket_cancel(okv_client *c, okv_ticket *t);
/** Free a ticket; a live one is cancelled first (errors ignored). NULL ok. */
void okv_ticket_free(okv_client *c, okv_ticket *t);
/** The ticket's op id, current revision, and whether it is live. */
uint64_t okv_ticket_op_id(const okv_ticket *t);
uint32_t okv_ticket_revision(const okv_ticket *t);
int okv_ticket_live(const okv_ticket *t);

/**
 * Raw ticket messages, for tests and tools that need to send what the
 * ticket API never sends (an old revision, a retired op id). okv_op_submit
 * sends spec under (op_id, revision) as given; the client's next ticket op
 * id moves past op_id. Return codes as the ticket calls; *ans may be NULL.
 */
int okv_op_submit(okv_client *c, uint64_t op_id, uint32_t revision, const struct okv_query_spec *spec,
		  struct okv_query_answer *ans);
int okv_op_poll(okv_client *c, uint64_t op_id, uint32_t revision, struct okv_query_answer *ans);
int okv_op_claim(okv_client *c, uint64_t op_id, uint32_t revision, struct okv_query_answer *ans);
int okv_op_cancel(okv_client *c, uint64_t op_id, uint32_t revision);

/** Derive the bootstrap socket path of a Manager listen address:
 *  "127.0.0.1:7470" → "/tmp/orbitkv-127.0.0.1-7470.sock" (docs/design.md §5.1).
 *  Returns the length written (excluding NUL) or -EINVAL / -ENAMETOOLONG. */
int okv_socket_path(const char *manager_addr, char *buf, size_t buflen);

/* The default socket location (docs/operating.md "Socket paths"); the Go
 * twins are the constants of gocore/lifecycle. */
/** The directory systemd makes for the Manager's unit (RuntimeDirectory=orbitkv). */
#define OKV_RUNTIME_DIR "/run/orbitkv"
/** The bootstrap socket's name in the runtime directory. */
#define OKV_SOCKET_NAME "manager.sock"
/** The Manager's --listen default, whose derived path is the last fallback. */
#define OKV_DEFAULT_MANAGER_ADDR "127.0.0.1:7470"
/** A bootstrap socket path given by the environment (the Manager's
 *  --bootstrap-socket reads the same variable). */
#define OKV_BOOTSTRAP_SOCKET_ENV "ORBITKV_BOOTSTRAP_SOCKET"
/** The Manager address a derived path is made from when none is given
 *  (the Manager's --listen reads the same variable). */
#define OKV_LISTEN_ENV "ORBITKV_LISTEN"

/** Which step of okv_resolve_socket_path chose the path. */
enum okv_socket_source {
	OKV_SOCKET_FROM_OPTION = 1,      /* the caller's socket_path or manager_addr */
	OKV_SOCKET_FROM_ENV = 2,         /* ORBITKV_BOOTSTRAP_SOCKET */
	OKV_SOCKET_FROM_RUNTIME_DIR = 3, /* a socket at <runtime_dir>/manager.sock */
	OKV_SOCKET_FROM_DERIVED = 4      /* okv_socket_path of ORBITKV_LISTEN or 127.0.0.1:7470 */
};

/**
 * The bootstrap socket a client connects to, as okv_connect chooses it:
 *  1. socket_path when not NULL or empty, else okv_socket_path(manager_addr)
 *     when manager_addr is not NULL or empty;
 *  2. else $ORBITKV_BOOTSTRAP_SOCKET when set and not empty;
 *  3. else <runtime_dir>/manager.sock when it exists and is a socket
 *     (stat(2), following links); runtime_dir NULL = OKV_RUNTIME_DIR;
 *  4. else okv_socket_path($ORBITKV_LISTEN when set and not empty, else
 *     OKV_DEFAULT_MANAGER_ADDR).
 * Writes the path and its NUL into buf; *source (may be NULL) gets the
 * step, enum okv_socket_source. *vouched_uid_plus1 (may be NULL) gets the
 * owner of runtime_dir plus one when the path came from step 3 and
 * okv_runtime_dir_owner vouches for that owner, else 0: okv_connect trusts
 * that uid as the Manager's besides its own and manager_uid_plus1.
 * Returns the path's length (excluding the NUL); -EINVAL for a NULL buf or
 * a bad address (the option's or ORBITKV_LISTEN's); -ENAMETOOLONG for a
 * path over 107 bytes (sizeof sun_path - 1) or one that does not fit
 * buflen with its NUL.
 */
int okv_resolve_socket_path(const char *socket_path, const char *manager_addr, const char *runtime_dir, char *buf,
			    size_t buflen, int *source, uint32_t *vouched_uid_plus1);

/**
 * Whether root vouches for the owner of runtime_dir: its parent (/run for
 * OKV_RUNTIME_DIR) is a directory owned by root and writable by neither
 * group nor others, and runtime_dir is a directory, not a symbolic link
 * (lstat(2)), writable by neither group nor others. Then only root could
 * have created runtime_dir and only its owner (or root) can bind a socket
 * in it. Returns 1 and sets *uid (may be NULL) to runtime_dir's owner; 0
 * when not vouched for (missing, or any condition fails); -EINVAL for a
 * NULL runtime_dir.
 */
int okv_runtime_dir_owner(const char *runtime_dir, uint32_t *uid);

#ifdef __cplusplus
}
#endif
#endif /* ORBITKV_CLIENT_H */
