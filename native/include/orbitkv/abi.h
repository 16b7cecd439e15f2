/*
 * orbitkv/abi.h — every byte layout shared between OrbitKV processes.
 *
 * This header is the single source of truth for the wire contracts of
 * docs/design.md §5: the 64-byte channel message (§5.2), the per-session slot and
 * the shared doorbell (the shared-memory channel), the bootstrap hello/reply
 * (§5.1) and the lifecycle frame header (§5.1). Go mirrors these layouts in
 * gocore/abi; a Go test compares its offsets against the values compiled here.
 *
 * Rules (docs/design.md §5):
 *  - all integers are little-endian (x86-64 and aarch64 hosts; checked below);
 *  - no packed structs: every field sits at its natural alignment;
 *  - version numbers are compared for exact equality; client and Manager are
 *    upgraded together (spec, "Both native clients and the Manager must be
 *    rebuilt together").
 */
#ifndef ORBITKV_ABI_H
#define ORBITKV_ABI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "OrbitKV wire layouts are little-endian; big-endian hosts are not supported"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions and magics                                                       */
/* ------------------------------------------------------------------------ */

/** Magic of a channel message: "OKV1" read as little-endian bytes. */
#define OKV_MSG_MAGIC 0x31564B4Fu
/** Channel ABI version; bumped on any change of a layout in this header. */
#define OKV_ABI_VERSION 3u
/**
 * Bootstrap protocol version. The spec's version 2 gained extension records
 * after the hello reply in version 3 (docs/channel.md, "The bootstrap
 * reply"); client and Manager compare it for equality.
 */
#define OKV_BOOTSTRAP_VERSION 3u
/** Lifecycle frame version: the frame layout of the spec's bootstrap
 *  protocol version 2, unchanged when the hello reply gained extensions. */
#define OKV_FRAME_VERSION 2u
/** Magic of the bootstrap hello and reply: "OKVB". */
#define OKV_BOOTSTRAP_MAGIC 0x42564B4Fu
/** Magic of a lifecycle frame header: "OKVF". */
#define OKV_FRAME_MAGIC 0x46564B4Fu
/** Magic of the slot header: "OKVS". */
#define OKV_SLOT_MAGIC 0x53564B4Fu
/** Magic of the doorbell header: "OKVD". */
#define OKV_DOORBELL_MAGIC 0x44564B4Fu

/** Cache line size assumed by every layout (x86-64, Neoverse). */
#define OKV_CACHE_LINE 64u

/* ------------------------------------------------------------------------ */
/* Commands and statuses (docs/design.md §5.2)                                    */
/* ------------------------------------------------------------------------ */

/** Request codes carried in okv_msg.code of a request. */
enum okv_command {
	OKV_CMD_PING = 1,          /* arg0 echoed in the response's arg0 */
	OKV_CMD_QUERY_BUNDLE = 2,  /* descriptor: okv_query_desc */
	OKV_CMD_POLL = 3,          /* arg0 = op id, arg1 = revision; see "Query tickets" */
	OKV_CMD_CLAIM = 4,         /* arg0 = op id, arg1 = revision (a preparation) */
	OKV_CMD_CANCEL_QUERY = 5,  /* arg0 = op id, arg1 = revision */
	OKV_CMD_PUBLISH = 6,       /* descriptor: okv_publish_desc */
	OKV_CMD_RESTORE = 7,       /* descriptor: okv_restore_desc */
	OKV_CMD_RESTORE_POLL = 8,  /* arg0 = operation id */
	OKV_CMD_RELEASE = 9,       /* arg0 = lease id */
	OKV_CMD_SHUTDOWN = 10,     /* client announces it is closing its session */
	OKV_CMD_MAX = 10
};

/** Status codes carried in okv_msg.code of a response. */
enum okv_status {
	OKV_STATUS_OK = 0,
	OKV_STATUS_LOADING = 1,
	OKV_STATUS_MISS = 2,
	OKV_STATUS_CANDIDATES = 3,
	OKV_STATUS_UNADMITTED = 4,
	OKV_STATUS_INVALID = 5,           /* arg0 = enum okv_field that failed */
	OKV_STATUS_STALE_SESSION = 6,     /* epoch of another Manager lifetime */
	OKV_STATUS_STALE_GENERATION = 7,  /* even or non-increasing generation */
	OKV_STATUS_TIMEOUT = 8,
	OKV_STATUS_INTERNAL = 9,
	OKV_STATUS_UNSUPPORTED = 10,      /* known command this build does not serve */
	OKV_STATUS_MAX = 10
};

/**
 * Which field of a message made it invalid; carried in arg0 of an
 * OKV_STATUS_INVALID response so the client can name it.
 */
enum okv_field {
	OKV_FIELD_NONE = 0,
	OKV_FIELD_MAGIC = 1,
	OKV_FIELD_ABI_VERSION = 2,
	OKV_FIELD_CODE = 3,
	OKV_FIELD_EPOCH = 4,
	OKV_FIELD_DESC_OFFSET = 5,
	OKV_FIELD_DESC_LENGTH = 6,
	OKV_FIELD_GENERATION = 7,
	OKV_FIELD_RESERVED = 8,
	/* descriptor payload fields (docs/design.md §5.3); arg1 of the Invalid
	 * response then carries the index of the offending entry, or 0 */
	OKV_FIELD_DESC_MAGIC = 9,
	OKV_FIELD_DESC_SCHEMA = 10,
	OKV_FIELD_DESC_FLAGS = 11,
	OKV_FIELD_DESC_RESERVED = 12,
	OKV_FIELD_COUNT = 13,        /* entry or hash count vs descriptor length */
	OKV_FIELD_BUFFER_ID = 14,    /* no registered buffer with this id */
	OKV_FIELD_PAGE = 15,         /* page index out of range, repeated, or busy */
	OKV_FIELD_LAYERS = 16,       /* layer set does not match the buffer */
	OKV_FIELD_LEASE_ID = 17,     /* unknown, released, or another session's lease */
	OKV_FIELD_BLOCK = 18,        /* block index outside the lease */
	OKV_FIELD_BLOCK_BYTES = 19,  /* block size differs from the buffer's page layout */
	OKV_FIELD_OP_ID = 20,        /* unknown or already consumed operation */
	OKV_FIELD_NAMESPACE = 21,    /* all-zero namespace */
	OKV_FIELD_REVISION = 22,     /* zero, lower than the live one, or same with a changed request */
	OKV_FIELD_REQUEST = 23,      /* a revision changed request_id or group */
	OKV_FIELD_RECOVERY_RANGE = 24, /* recovery range empty or outside the hashes */
	OKV_FIELD_RECORD = 25,       /* a Publish block record: token count, flags, padding or length */
	OKV_FIELD_MAX = 25
};

/* ------------------------------------------------------------------------ */
/* The 64-byte channel message (docs/design.md §5.2)                             */
/* ------------------------------------------------------------------------ */

/**
 * One request or response. Lives in the request or response cache line of a
 * session slot. The writer fills every other field first and stores
 * `generation` last with release ordering; the reader loads `generation` with
 * acquire ordering and then copies the rest. Requests carry odd generations;
 * the response to request generation g carries g + 1.
 */
struct okv_msg {
	uint32_t magic;        /*  0: OKV_MSG_MAGIC */
	uint16_t abi_version;  /*  4: OKV_ABI_VERSION */
	uint16_t code;         /*  6: enum okv_command (request) / okv_status (response) */
	uint64_t request_id;   /*  8: chosen by the client, echoed */
	uint64_t epoch;        /* 16: Manager incarnation epoch from the bootstrap reply */
	uint32_t desc_offset;  /* 24: byte offset of the descriptor from the slot start */
	uint32_t desc_length;  /* 28: descriptor length in bytes (0 = none) */
	uint64_t generation;   /* 32: odd request, request + 1 response; futex word = low 32 bits */
	uint64_t arg0;         /* 40: opcode-specific */
	uint64_t arg1;         /* 48: opcode-specific */
	uint64_t reserved;     /* 56: must be zero */
};

/* ------------------------------------------------------------------------ */
/* Cache identity and descriptor payloads (docs/design.md §5.3, §5.4)             */
/* ------------------------------------------------------------------------ */

/** A block hash: 16 bytes chosen by the engine (a chained prefix hash). */
struct okv_block_hash {
	uint8_t bytes[16];
};

/** A namespace: the 16-byte fingerprint of a cache identity (§5.4); see
 *  okv_namespace_fingerprint in client.h. All-zero is never valid. */
struct okv_namespace {
	uint8_t bytes[16];
};

/** Descriptor magics: "OKVQ", "OKVA" (query answer), "OKVP", "OKVR". */
#define OKV_QUERY_MAGIC 0x51564B4Fu
#define OKV_QUERY_RESULT_MAGIC 0x41564B4Fu
#define OKV_PUBLISH_MAGIC 0x50564B4Fu
#define OKV_RESTORE_MAGIC 0x52564B4Fu
/** Schema versions of the descriptors (docs/design.md §5.3: QueryBundle is 5).
 *  Publish: schema 2 may carry block records (OKV_PUBLISH_RECORDS); the
 *  Manager accepts schema 1 (flags 0, no records) as well. */
#define OKV_QUERY_SCHEMA 5u
#define OKV_PUBLISH_SCHEMA 2u
#define OKV_PUBLISH_SCHEMA_V1 1u
#define OKV_RESTORE_SCHEMA 1u

/** QueryBundle flags (docs/design.md §5.3; spec "Channel ABI 5" paragraph).
 *  Every flag needs a ticket (op_id ≠ 0). Allowed sets: 0, WAIT, DISCOVER,
 *  WARMUP, RECOVERY (waits by nature), PREPARE, PREPARE|WAIT,
 *  PREPARE|RECOVERY; anything else is Invalid (field desc_flags). */
enum okv_query_flags {
	/** Pending SSD reads of the chain are awaited (Loading until the whole
	 *  available prefix is resident) instead of answering the RAM prefix. */
	OKV_QUERY_WAIT_FOR_FULL_PREFIX = 1u << 0,
	/** Prepare pages (prefetch into RAM) without a lease; answered at once
	 *  and retired without polling; skipped under warmup-budget pressure. */
	OKV_QUERY_WARMUP = 1u << 1,
	/** Metadata only: Candidates (blocks available locally), never a lease,
	 *  no bytes reserved; retired at once. */
	OKV_QUERY_DISCOVER = 1u << 2,
	/** Leased read of exactly hashes [recovery_first, +recovery_count):
	 *  all of it leased or Miss, never partial. Not counted as a lookup. */
	OKV_QUERY_RECOVERY = 1u << 3,
	/** The result stays at the Manager until Claim (exact revision) or
	 *  expiry; Poll reports readiness without consuming it. */
	OKV_QUERY_PREPARE = 1u << 4,
	OKV_QUERY_FLAGS_ALL = 0x1Fu
};

/**
 * Query tickets (docs/design.md §6 rules 1, 5, 6; spec "Channel ABI 5").
 *
 * op_id 0 is an untracked leased read: flags must be 0; the answer is final
 * (Ok, Miss, Unadmitted) except Loading while SSD blocks of the chain are
 * read, after which the client resubmits.
 *
 * op_id ≠ 0 is a ticket of this session (the authenticated instance):
 *  - a new ticket needs op_id greater than every op id the session used
 *    before and revision ≥ 1; it is admitted within the operation bounds
 *    (128 per session, 1024 per Manager, flags) or answered Unadmitted
 *    (nothing kept; retry with a fresh op id);
 *  - op_id of a live ticket with a higher revision replaces its hashes
 *    (and recovery range) and its wait policy (OKV_QUERY_WAIT_FOR_FULL_PREFIX);
 *    request_id and group must stay (else Invalid field request), the other
 *    flags too (else Invalid field desc_flags), and the namespace (else
 *    Invalid field namespace); the same revision with the same request is a poll;
 *    the same revision with a changed request, or a lower revision, is
 *    Invalid field revision;
 *  - op_id of a retired ticket (terminal result delivered, cancelled) is
 *    Invalid field op_id; of an expired one, Timeout. Neither submits work.
 * Answers: Ok/Miss/Candidates are terminal and retire the ticket as they
 * are delivered (a PREPARE ticket: by Claim); Loading leaves it live: Poll
 * with (op_id, revision) until terminal. A ticket expires 60 s (flag) after
 * its latest revision; a late Poll, Claim or Cancel then answers Timeout
 * (a bounded tombstone per session remembers it). Expiry, Cancel and
 * disconnect drop an undelivered lease; SSD reads it started drain first,
 * still counted against the bounds.
 *
 * Poll (arg0 op id, arg1 revision; optional descriptor ≥ 64 bytes where the
 * Manager writes struct okv_query_result on a terminal answer): the ticket's
 * state; arg1 below the live revision is Invalid field revision (an old
 * poll never consumes a replacement); above it, Invalid field revision.
 * Claim (same arguments): consumes a ready PREPARE ticket of exactly that
 * revision (Ok with lease, or Miss); Loading while preparing; any other
 * case (not a preparation, other revision, retired, expired) Unadmitted.
 * CancelQuery (same arguments): Ok (arg0 = 1) retires a live ticket of that
 * revision; a lower revision is Invalid field revision; retired is Invalid
 * field op_id; expired is Timeout.
 */
struct okv_query_desc {
	uint32_t magic;          /*  0: OKV_QUERY_MAGIC */
	uint16_t schema;         /*  4: OKV_QUERY_SCHEMA */
	uint16_t flags;          /*  6: enum okv_query_flags */
	uint64_t op_id;          /*  8: ticket operation id (0: untracked leased read) */
	uint32_t revision;       /* 16: ticket revision */
	uint32_t hash_count;     /* 20: hashes that follow, ≥ 1 */
	uint64_t request_id;     /* 24: engine request id (informational) */
	uint64_t group;          /* 32: request group (informational) */
	uint32_t recovery_first; /* 40: recovery range (OKV_QUERY_RECOVERY only) */
	uint32_t recovery_count; /* 44 */
	struct okv_namespace ns; /* 48 */
	/* struct okv_block_hash hashes[hash_count] at 64 */
};

/** Written by the Manager over the query descriptor (QueryBundle) or into
 *  the Poll/Claim descriptor with every Ok, Miss or Candidates answer. */
struct okv_query_result {
	uint32_t magic;          /*  0: OKV_QUERY_RESULT_MAGIC */
	uint16_t schema;         /*  4: OKV_QUERY_SCHEMA */
	uint16_t status;         /*  6: enum okv_status, as in the response */
	uint32_t hit_count;      /*  8: Ok: blocks leased; Candidates: leading blocks
	                          *     available locally (RAM, then SSD); WARMUP Ok:
	                          *     blocks being prefetched (0 = skipped) */
	uint32_t ram_hits;       /* 12: leading blocks resident in RAM now */
	uint64_t lease_id;       /* 16: 0 unless Ok with a lease */
	uint64_t lease_bytes;    /* 24: bytes reserved by the lease */
	uint64_t block_bytes;    /* 32: bytes of one leased block (all layers) */
	uint64_t op_id;          /* 40: the ticket (0: untracked) */
	uint32_t revision;       /* 48: the ticket revision answered */
	uint32_t first;          /* 52: chain position of lease block 0 (recovery_first) */
	uint64_t reserved1;      /* 56: zero */
};

/**
 * Publish request descriptor: this header, then count struct
 * okv_publish_entry at offset 64, then (flags & OKV_PUBLISH_RECORDS) count
 * block records, record i describing entry i, each a struct
 * okv_block_record followed by its token_count uint32 token ids and zero
 * padding to a multiple of 8 bytes (okv_block_record_bytes). desc_length =
 * 64 + 24 * count (+ the records' bytes).
 * A block is one page index across the layer set of the buffer: block bytes
 * = layer_count * page_bytes. This build requires the full layer set
 * (layer_first 0, layer_count = the buffer's layers).
 * Response: Ok with arg0 = blocks newly stored, arg1 = blocks already
 * resident (skipped); Unadmitted (nothing stored) when the RAM tier cannot
 * free enough unpinned frames for the chunk. The copy has completed and the
 * blocks are visible when the response is posted.
 */
struct okv_publish_desc {
	uint32_t magic;          /*  0: OKV_PUBLISH_MAGIC */
	uint16_t schema;         /*  4: OKV_PUBLISH_SCHEMA (or _V1: flags 0) */
	uint16_t flags;          /*  6: enum okv_publish_flags */
	uint32_t buffer_id;      /*  8: from okv_register_buffer */
	uint32_t count;          /* 12: entries that follow, ≥ 1 */
	struct okv_namespace ns; /* 16 */
	uint32_t layer_first;    /* 32 */
	uint32_t layer_count;    /* 36 */
	uint64_t reserved[3];    /* 40: must be zero */
	/* struct okv_publish_entry entries[count] at 64 */
	/* block records after the entries (OKV_PUBLISH_RECORDS) */
};

/** Publish flags (schema 2). */
enum okv_publish_flags {
	/** Every entry has a block record after the entries array. */
	OKV_PUBLISH_RECORDS = 1u << 0,
	OKV_PUBLISH_FLAGS_ALL = 0x1u
};

/** One (block hash, source page) pair of a Publish. */
struct okv_publish_entry {
	struct okv_block_hash hash; /*  0 */
	uint32_t page;              /* 16: page index in the buffer, < page_count */
	uint32_t reserved;          /* 20: must be zero */
};

/**
 * A block record: what a router matches on, kept with the block and
 * announced in the Manager's KV events (docs/events.md). engine_hash is the
 * engine's own block hash as its KV events carry it (vLLM: the low 64 bits
 * of the block's SHA-256 read big-endian); parent_hash that of the block
 * before it in the chain, valid when flags has OKV_RECORD_PARENT (the first
 * block of a chain has none). token_count token ids (uint32 each) follow
 * the 24-byte header, then zero bytes up to the next multiple of 8.
 */
struct okv_block_record {
	uint64_t engine_hash;    /*  0 */
	uint64_t parent_hash;    /*  8: 0 unless OKV_RECORD_PARENT */
	uint32_t flags;          /* 16: enum okv_record_flags */
	uint32_t token_count;    /* 20: 1..OKV_RECORD_MAX_TOKENS */
	/* uint32_t tokens[token_count] at 24, zero padding to 8 */
};

enum okv_record_flags {
	OKV_RECORD_PARENT = 1u << 0,
	OKV_RECORD_FLAGS_ALL = 0x1u
};

/** Most token ids one block record carries (a block of more tokens is
 *  published without records). */
#define OKV_RECORD_MAX_TOKENS 512u
/** Bytes of a block record of n tokens, padding included. */
#define okv_block_record_bytes(n) ((24u + 4u * (uint32_t)(n) + 7u) & ~7u)

/**
 * Restore request descriptor: this header, then count struct
 * okv_restore_entry at offset 64. desc_length = 64 + 8 * count.
 * Response: Ok with arg0 = operation id. The copy runs on the Manager's
 * copy workers; its terminal state is signalled on the session eventfd and
 * consumed by RestorePoll (arg0 = operation id): Ok (arg0 = bytes copied),
 * Loading (still copying) or Internal (copy failed).
 */
struct okv_restore_desc {
	uint32_t magic;          /*  0: OKV_RESTORE_MAGIC */
	uint16_t schema;         /*  4: OKV_RESTORE_SCHEMA */
	uint16_t flags;          /*  6: must be 0 */
	uint32_t buffer_id;      /*  8: destination buffer */
	uint32_t count;          /* 12: entries that follow, ≥ 1 */
	uint64_t lease_id;       /* 16: from QueryBundle, this session's */
	uint64_t reserved[5];    /* 24: must be zero */
	/* struct okv_restore_entry entries[count] at 64 */
};

/** One (leased block, destination page) pair of a Restore. */
struct okv_restore_entry {
	uint32_t block;          /* 0: index into the lease, < hit count */
	uint32_t page;           /* 4: destination page, < page_count */
};

/* ------------------------------------------------------------------------ */
/* Per-session slot (a sealed memfd, one per session)                         */
/* ------------------------------------------------------------------------ */

/** Default descriptor area of a slot: 256 KiB. A publish whose entries
 * carry block records of 128 token ids (560 bytes an entry) fits 468
 * blocks in one descriptor; liborbitkv splits a larger one into several
 * publishes, each sealed and visible before the next is sent. */
#define OKV_DEFAULT_DESC_CAPACITY (256u * 1024u)
/** Byte offset of the descriptor area inside a slot (one page). */
#define OKV_SLOT_DESC_OFFSET 4096u

/** Line 0 of a slot: written once by the Manager before the fd is sent. */
struct okv_slot_header {
	uint32_t magic;          /*  0: OKV_SLOT_MAGIC */
	uint16_t abi_version;    /*  4: OKV_ABI_VERSION */
	uint16_t reserved0;      /*  6 */
	uint32_t slot_bytes;     /*  8: total size of the memfd */
	uint32_t slot_index;     /* 12: index of this session's doorbell bit */
	uint32_t desc_offset;    /* 16: OKV_SLOT_DESC_OFFSET */
	uint32_t desc_capacity;  /* 20: bytes of descriptor area */
	uint64_t epoch;          /* 24: Manager epoch */
	uint64_t initial_generation; /* 32: first request generation (odd) */
	uint64_t reserved1[3];   /* 40 */
};

/** Line 3 of a slot: the client's park flag (Dekker handshake with the Manager). */
struct okv_slot_wait {
	uint32_t client_parked;  /*  0: 1 while the client sleeps on the response futex */
	uint32_t reserved0;
	uint64_t reserved1[7];
};

/**
 * The whole slot. Request and response sit on separate cache lines so the
 * client's writes never invalidate the line the Manager writes, and vice
 * versa. The descriptor area starts at OKV_SLOT_DESC_OFFSET.
 */
struct okv_slot {
	struct okv_slot_header header; /*   0 */
	struct okv_msg request;        /*  64: written by the client */
	struct okv_msg response;       /* 128: written by the Manager */
	struct okv_slot_wait wait;     /* 192: written by the client, read by the Manager */
	uint8_t reserved[OKV_SLOT_DESC_OFFSET - 256];
	/* descriptor area follows at OKV_SLOT_DESC_OFFSET */
};

/* ------------------------------------------------------------------------ */
/* Doorbell (one memfd per Manager, shared by every session)                 */
/* ------------------------------------------------------------------------ */

/** Pending bitmap words; 64 sessions each. */
#define OKV_DOORBELL_WORDS 64u
/** Largest number of sessions one Manager can serve (64 words x 64 bits). */
#define OKV_MAX_SESSIONS (OKV_DOORBELL_WORDS * 64u)
/** Reserved slot index the Manager rings for its own control events. */
#define OKV_CONTROL_SLOT (OKV_MAX_SESSIONS - 1u)

/**
 * The doorbell lets the Manager find sessions with a pending request in time
 * independent of the number of idle sessions: a client sets its bit in
 * `pending`, then the word's bit in `summary`; the Manager exchanges
 * `summary` with zero and then each flagged `pending` word with zero.
 * `seq` is the Manager's futex word: a client that sees `server_parked`
 * increments it and wakes the Manager. The bitmap is a hint: the Manager
 * also rescans every attached slot's request line at least every 100 ms
 * (native/src/server.h), so a session that erases other sessions' bits
 * delays their requests by at most that much and never loses one.
 */
struct okv_doorbell {
	/* line 0: written once by the Manager, for debuggers. Every session can
	 * write the doorbell, so clients trust none of it: what they rely on
	 * comes from the bootstrap reply (docs/channel.md, "The doorbell"). */
	uint32_t magic;          /*   0: OKV_DOORBELL_MAGIC */
	uint16_t abi_version;    /*   4 */
	uint16_t reserved0;      /*   6 */
	uint32_t max_sessions;   /*   8 */
	uint32_t reserved1;      /*  12 */
	uint64_t epoch;          /*  16 */
	uint64_t reserved2[5];   /*  24 */
	/* line 1 */
	uint32_t seq;            /*  64: Manager futex word, bumped by a waking client */
	uint32_t reserved3[15];
	/* line 2 */
	uint32_t server_parked;  /* 128: 1 while the Manager sleeps on `seq` */
	uint32_t reserved4[15];
	/* line 3 */
	uint64_t summary;        /* 192: bit w set = pending[w] may be nonzero */
	uint64_t reserved5[7];
	/* lines 4..11 */
	uint64_t pending[OKV_DOORBELL_WORDS]; /* 256: bit i of word w = slot 64*w+i rang */
};

/* ------------------------------------------------------------------------ */
/* Bootstrap (docs/design.md §5.1)                                               */
/* ------------------------------------------------------------------------ */

/** Role of a connecting process (informational; logged and shown in Health). */
enum okv_role {
	OKV_ROLE_UNSPECIFIED = 0,
	OKV_ROLE_SCHEDULER = 1,
	OKV_ROLE_WORKER = 2,
	OKV_ROLE_TOOL = 3,
	OKV_ROLE_BENCH = 4,
	OKV_ROLE_MAX = 4
};

/** Bytes of the instance id field, NUL-padded, no NUL required when full. */
#define OKV_INSTANCE_ID_BYTES 64u
/** Bytes of the service identity (random per Manager incarnation). */
#define OKV_SERVICE_ID_BYTES 16u
/** Bytes of the error text of a refused hello, NUL-padded. */
#define OKV_BOOTSTRAP_ERROR_BYTES 128u

/** Client → Manager, first bytes on a new bootstrap connection. */
struct okv_hello {
	uint32_t magic;             /*  0: OKV_BOOTSTRAP_MAGIC */
	uint16_t protocol_version;  /*  4: OKV_BOOTSTRAP_VERSION */
	uint16_t abi_version;       /*  6: OKV_ABI_VERSION */
	uint32_t pid;               /*  8: informational; SO_PEERCRED is authoritative */
	uint32_t role;              /* 12: enum okv_role */
	uint8_t instance_id[OKV_INSTANCE_ID_BYTES]; /* 16 */
	uint64_t reserved[2];       /* 80: must be zero */
};

/** Status of a bootstrap reply. */
enum okv_bootstrap_status {
	OKV_BOOT_OK = 0,
	OKV_BOOT_BAD_MAGIC = 1,
	OKV_BOOT_BAD_VERSION = 2,
	OKV_BOOT_BAD_FIELD = 3,
	OKV_BOOT_FULL = 4,          /* no free slot */
	OKV_BOOT_INTERNAL = 5,
	OKV_BOOT_MAX = 5
};

/**
 * Manager → client. On OKV_BOOT_OK it travels with SCM_RIGHTS carrying
 * 3 + ext_fds fds: slot memfd, session eventfd, doorbell memfd, then the
 * fds of the extension records in record order; ext_bytes bytes of
 * extension records (struct okv_boot_ext) follow the reply on the stream.
 * On any other status no fds and no records travel, `error` says why, and
 * the Manager closes the connection.
 */
struct okv_hello_reply {
	uint32_t magic;             /*   0: OKV_BOOTSTRAP_MAGIC */
	uint16_t protocol_version;  /*   4: OKV_BOOTSTRAP_VERSION */
	uint16_t status;            /*   6: enum okv_bootstrap_status */
	uint64_t epoch;             /*   8: Manager incarnation epoch (nonzero) */
	uint8_t service_id[OKV_SERVICE_ID_BYTES]; /* 16: random per incarnation */
	uint64_t client_token;      /*  32: random per session */
	uint64_t initial_generation;/*  40: first request generation (odd) */
	uint32_t slot_index;        /*  48 */
	uint32_t slot_bytes;        /*  52: size of the slot memfd */
	uint32_t desc_offset;       /*  56: OKV_SLOT_DESC_OFFSET */
	uint32_t desc_capacity;     /*  60 */
	uint32_t max_frame_body;    /*  64: OKV_FRAME_MAX_BODY */
	uint32_t manager_pid;       /*  68: for pidfd_open(2) */
	uint32_t max_sessions;      /*  72 */
	uint16_t ext_bytes;         /*  76: extension record bytes after the reply, <= OKV_BOOT_EXT_MAX_BYTES */
	uint16_t ext_fds;           /*  78: fds of the records, <= OKV_BOOT_EXT_MAX_FDS */
	char error[OKV_BOOTSTRAP_ERROR_BYTES]; /* 80 */
};

/** Most bytes of extension records after a hello reply. */
#define OKV_BOOT_EXT_MAX_BYTES 4096u
/** Most fds the extension records of one reply carry. */
#define OKV_BOOT_EXT_MAX_FDS 16u
/** Bit of okv_boot_ext.type: a client that does not know the type must
 *  refuse the reply (without it, an unknown record is skipped and its fds
 *  closed). */
#define OKV_BOOT_EXT_REQUIRED 0x8000u

/**
 * One extension record of a hello reply: this header, then `length` value
 * bytes, then zero padding to the next multiple of 8. The record owns the
 * next `nfds` fds after those of the records before it. Records let later
 * versions hand a session more (a service name, a read-only index memfd)
 * without a new fixed layout; every record's type is listed below.
 */
struct okv_boot_ext {
	uint16_t type;              /* 0: enum okv_boot_ext_type, | OKV_BOOT_EXT_REQUIRED */
	uint16_t nfds;              /* 2: fds this record owns */
	uint32_t length;            /* 4: value bytes that follow */
};

/** Extension record types. */
enum okv_boot_ext_type {
	/** The Manager's build version: 1..OKV_BOOT_EXT_VERSION_MAX printable
	 *  ASCII bytes, no fds (okv_manager_version). */
	OKV_BOOT_EXT_MANAGER_VERSION = 1,
	/** The session's iceoryx2 service (a Manager with
	 *  --channel-transport iceoryx2): 1..OKV_BOOT_EXT_SERVICE_MAX bytes of
	 *  printable ASCII, no fds, always sent with OKV_BOOT_EXT_REQUIRED. The
	 *  client then sends its 64-byte requests through that service and
	 *  takes the responses from it (orbitkv/iox2.h) instead of the slot's
	 *  request and response lines; descriptors stay in the slot. The name
	 *  carries a 128-bit token of this session: it is the capability. A
	 *  liborbitkv that does not know the type refuses the reply. */
	OKV_BOOT_EXT_IOX2_SERVICE = 2,
	/** Where the Manager's iceoryx2 objects live, sent with every
	 *  OKV_BOOT_EXT_IOX2_SERVICE record and always with
	 *  OKV_BOOT_EXT_REQUIRED: 1..OKV_BOOT_EXT_RUNTIME_MAX bytes of printable
	 *  ASCII, no fds, the string of okv_iox2_runtime_new (orbitkv/iox2.h:
	 *  a random /dev/shm prefix, then the absolute path of a root
	 *  directory of the Manager's uid, mode 0700, with a random name). The
	 *  client opens its iceoryx2 node there (okv_iox2_node_new), after
	 *  checking the directory is its own uid's and private. */
	OKV_BOOT_EXT_IOX2_RUNTIME = 3
};

/** Longest OKV_BOOT_EXT_MANAGER_VERSION value. */
#define OKV_BOOT_EXT_VERSION_MAX 64u
/** Longest OKV_BOOT_EXT_IOX2_SERVICE value (iceoryx2 allows 255 bytes; its
 *  event services add 3). */
#define OKV_BOOT_EXT_SERVICE_MAX 240u
/** Longest OKV_BOOT_EXT_IOX2_RUNTIME value (OKV_IOX2_RUNTIME_MAX). */
#define OKV_BOOT_EXT_RUNTIME_MAX 255u

/* ------------------------------------------------------------------------ */
/* Lifecycle frames (docs/design.md §5.1)                                        */
/* ------------------------------------------------------------------------ */

/** Largest lifecycle frame body: 16 MiB (spec: "16 MiB metadata limit"). */
#define OKV_FRAME_MAX_BODY (16u * 1024u * 1024u)
/** Largest number of fds that may travel with one frame (RegisterBuffers). */
#define OKV_FRAME_MAX_FDS 64u

/** Lifecycle frame codes; a reply carries the request code | OKV_FRAME_REPLY. */
enum okv_frame_code {
	OKV_FRAME_REGISTER_INSTANCE = 1,
	OKV_FRAME_REGISTER_BUFFERS = 2,
	OKV_FRAME_HEALTH = 3,
	OKV_FRAME_WATCH_SESSION = 4,
	OKV_FRAME_UNREGISTER = 5,
	OKV_FRAME_MAP_DISCOVERY = 6, /* reply carries one fd: orbitkv/discover.h */
	OKV_FRAME_CODE_MAX = 6,
	OKV_FRAME_REPLY = 0x8000,
	OKV_FRAME_ERROR = 0xFFFF    /* body: lifecycle.Error */
};

/** Header of a lifecycle frame; `length` bytes of protobuf body follow. */
struct okv_frame_header {
	uint32_t magic;     /*  0: OKV_FRAME_MAGIC */
	uint16_t version;   /*  4: OKV_FRAME_VERSION */
	uint16_t code;      /*  6: enum okv_frame_code */
	uint64_t epoch;     /*  8: Manager epoch from the reply */
	uint32_t length;    /* 16: body bytes, <= OKV_FRAME_MAX_BODY */
	uint32_t reserved;  /* 20: must be zero */
};

/* ------------------------------------------------------------------------ */
/* Layout checks                                                            */
/* ------------------------------------------------------------------------ */

#define OKV_ASSERT_OFFSET(type, field, off) \
	_Static_assert(offsetof(struct type, field) == (off), #type "." #field " offset")

_Static_assert(sizeof(struct okv_msg) == 64, "okv_msg is 64 bytes");
OKV_ASSERT_OFFSET(okv_msg, magic, 0);
OKV_ASSERT_OFFSET(okv_msg, abi_version, 4);
OKV_ASSERT_OFFSET(okv_msg, code, 6);
OKV_ASSERT_OFFSET(okv_msg, request_id, 8);
OKV_ASSERT_OFFSET(okv_msg, epoch, 16);
OKV_ASSERT_OFFSET(okv_msg, desc_offset, 24);
OKV_ASSERT_OFFSET(okv_msg, desc_length, 28);
OKV_ASSERT_OFFSET(okv_msg, generation, 32);
OKV_ASSERT_OFFSET(okv_msg, arg0, 40);
OKV_ASSERT_OFFSET(okv_msg, arg1, 48);
OKV_ASSERT_OFFSET(okv_msg, reserved, 56);

_Static_assert(sizeof(struct okv_slot_header) == 64, "slot header is one line");
_Static_assert(sizeof(struct okv_slot_wait) == 64, "slot wait is one line");
_Static_assert(sizeof(struct okv_slot) == OKV_SLOT_DESC_OFFSET, "slot control page");
OKV_ASSERT_OFFSET(okv_slot, request, 64);
OKV_ASSERT_OFFSET(okv_slot, response, 128);
OKV_ASSERT_OFFSET(okv_slot, wait, 192);
OKV_ASSERT_OFFSET(okv_slot_header, epoch, 24);
OKV_ASSERT_OFFSET(okv_slot_header, initial_generation, 32);

OKV_ASSERT_OFFSET(okv_doorbell, seq, 64);
OKV_ASSERT_OFFSET(okv_doorbell, server_parked, 128);
OKV_ASSERT_OFFSET(okv_doorbell, summary, 192);
OKV_ASSERT_OFFSET(okv_doorbell, pending, 256);
_Static_assert(sizeof(struct okv_doorbell) == 256 + 8 * OKV_DOORBELL_WORDS, "doorbell size");

_Static_assert(sizeof(struct okv_hello) == 96, "hello size");
OKV_ASSERT_OFFSET(okv_hello, instance_id, 16);
OKV_ASSERT_OFFSET(okv_hello, reserved, 80);
_Static_assert(sizeof(struct okv_hello_reply) == 208, "hello reply size");
OKV_ASSERT_OFFSET(okv_hello_reply, client_token, 32);
OKV_ASSERT_OFFSET(okv_hello_reply, slot_index, 48);
OKV_ASSERT_OFFSET(okv_hello_reply, max_frame_body, 64);
OKV_ASSERT_OFFSET(okv_hello_reply, ext_bytes, 76);
OKV_ASSERT_OFFSET(okv_hello_reply, ext_fds, 78);
OKV_ASSERT_OFFSET(okv_hello_reply, error, 80);
_Static_assert(sizeof(struct okv_boot_ext) == 8, "boot ext header size");
_Static_assert(OKV_BOOT_EXT_MAX_FDS + 3u <= OKV_FRAME_MAX_FDS, "reply fds fit a frame's fd buffer");
_Static_assert(sizeof(struct okv_frame_header) == 24, "frame header size");
OKV_ASSERT_OFFSET(okv_frame_header, epoch, 8);
OKV_ASSERT_OFFSET(okv_frame_header, length, 16);

_Static_assert(sizeof(struct okv_query_desc) == 64, "query desc header");
OKV_ASSERT_OFFSET(okv_query_desc, op_id, 8);
OKV_ASSERT_OFFSET(okv_query_desc, hash_count, 20);
OKV_ASSERT_OFFSET(okv_query_desc, request_id, 24);
OKV_ASSERT_OFFSET(okv_query_desc, group, 32);
OKV_ASSERT_OFFSET(okv_query_desc, recovery_first, 40);
OKV_ASSERT_OFFSET(okv_query_desc, ns, 48);
_Static_assert(sizeof(struct okv_query_result) == 64, "query result");
OKV_ASSERT_OFFSET(okv_query_result, hit_count, 8);
OKV_ASSERT_OFFSET(okv_query_result, ram_hits, 12);
OKV_ASSERT_OFFSET(okv_query_result, op_id, 40);
OKV_ASSERT_OFFSET(okv_query_result, revision, 48);
OKV_ASSERT_OFFSET(okv_query_result, first, 52);
OKV_ASSERT_OFFSET(okv_query_result, lease_id, 16);
OKV_ASSERT_OFFSET(okv_query_result, lease_bytes, 24);
OKV_ASSERT_OFFSET(okv_query_result, block_bytes, 32);
_Static_assert(sizeof(struct okv_publish_desc) == 64, "publish desc header");
OKV_ASSERT_OFFSET(okv_publish_desc, buffer_id, 8);
OKV_ASSERT_OFFSET(okv_publish_desc, count, 12);
OKV_ASSERT_OFFSET(okv_publish_desc, ns, 16);
OKV_ASSERT_OFFSET(okv_publish_desc, layer_first, 32);
OKV_ASSERT_OFFSET(okv_publish_desc, layer_count, 36);
OKV_ASSERT_OFFSET(okv_publish_desc, reserved, 40);
_Static_assert(sizeof(struct okv_publish_entry) == 24, "publish entry");
_Static_assert(sizeof(struct okv_block_record) == 24, "block record header");
OKV_ASSERT_OFFSET(okv_block_record, parent_hash, 8);
OKV_ASSERT_OFFSET(okv_block_record, flags, 16);
OKV_ASSERT_OFFSET(okv_block_record, token_count, 20);
_Static_assert(sizeof(struct okv_restore_desc) == 64, "restore desc header");
OKV_ASSERT_OFFSET(okv_restore_desc, buffer_id, 8);
OKV_ASSERT_OFFSET(okv_restore_desc, count, 12);
OKV_ASSERT_OFFSET(okv_restore_desc, lease_id, 16);
OKV_ASSERT_OFFSET(okv_restore_desc, reserved, 24);
_Static_assert(sizeof(struct okv_restore_entry) == 8, "restore entry");

#ifdef __cplusplus
}
#endif
#endif /* ORBITKV_ABI_H */
