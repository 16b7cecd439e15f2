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
	OKV_EAPPLICATION = -1012     /* Manager sent an error frame (okv_last_error) */
};

/** Largest okv_connect_options.timeout_ms: one hour. */
#define OKV_MAX_TIMEOUT_MS 3600000u

/** Options for okv_connect. Zero-initialise, then set what you need. */
struct okv_connect_options {
	/** Bootstrap socket path; NULL = derive from `manager_addr`. */
	const char *socket_path;
	/** Manager listen address "host:port" used to derive
	 *  /tmp/orbitkv-<host>-<port>.sock; NULL with socket_path NULL =
	 *  "127.0.0.1:7470". */
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
	uint32_t reserved;
};

/** Opaque client handle: owns the bootstrap socket, the mapped slot and
 *  doorbell, the session eventfd and a pidfd of the Manager. */
typedef struct okv_client okv_client;

/** Health as reported by the Manager's Health lifecycle frame. */
struct okv_health {
	char status[16];        /* "serving" / "draining", NUL-terminated */
	uint64_t epoch;
	uint8_t service_id[OKV_SERVICE_ID_BYTES];
	uint32_t sessions;
	uint32_t manager_pid;
	uint64_t uptime_ns;
	uint64_t requests;
	char poll_mode[16];     /* "spin" / "adaptive" / "park" */
	char version[32];
};

/**
 * Connect to a Manager: bootstrap over the Unix socket (hello, reply with
 * the slot memfd, eventfd and doorbell memfd), map the slot and doorbell,
 * open pidfd_open(2) on the Manager and send RegisterInstance.
 * On success *out owns everything; release it with okv_close.
 * Errors: -ENOENT / -ECONNREFUSED (no Manager at the path), -EACCES,
 * OKV_EREFUSED, OKV_EVERSION, OKV_EPROTO, OKV_ETIMEDOUT, -ENOMEM, -EINVAL.
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

/** Detail of the last OKV_EINVALID / OKV_EREFUSED / OKV_EAPPLICATION on c
 *  (field name and limit); valid until the next call on c. Never NULL. */
const char *okv_last_error(const okv_client *c);

/** Manager epoch of this session. */
uint64_t okv_epoch(const okv_client *c);
/** Session eventfd (borrowed: do not close); readable when a restore ends. */
int okv_notification_fd(const okv_client *c);
/** pidfd of the Manager (borrowed); readable when the Manager exits. */
int okv_manager_pidfd(const okv_client *c);

/** Derive the bootstrap socket path of a Manager listen address:
 *  "127.0.0.1:7470" → "/tmp/orbitkv-127.0.0.1-7470.sock" (DESIGN.md §5.1).
 *  Returns the length written (excluding NUL) or -EINVAL / -ENAMETOOLONG. */
int okv_socket_path(const char *manager_addr, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif
#endif /* ORBITKV_CLIENT_H */
