/*
 * orbitkv/iox2.h — OrbitKV's iceoryx2 transport: the C ABI of the Rust crate
 * native/iox2 (a static library, libokv_iox2.a, on the iceoryx2 crate 0.10).
 *
 * Hand-written: the Rust side (native/iox2/src/lib.rs) implements exactly
 * these declarations; a C test (native/tests/test_iox2.c) calls each.
 * Built only where a Rust toolchain of iceoryx2's minimum version (1.89) is
 * present; C code that uses it is compiled under OKV_HAVE_IOX2.
 *
 * Model: a server end exclusively creates a named iceoryx2 request-response
 * service (and two event services beside it, "<name>/rq" and "<name>/rs");
 * a client end opens it by name. One request is in flight per client; each
 * request and each response is one 64-byte line (struct okv_msg of
 * orbitkv/abi.h, moved as opaque bytes). Every send is followed by an
 * iceoryx2 notify, so a side that waits (okv_iox2_*_wait) after finding
 * nothing to receive is always woken; a side that spins on *_receive
 * never needs the notify, and iceoryx2 coalesces notifies while one is
 * unconsumed, so spinning costs the sender no system call.
 *
 * Shared-memory objects and sockets are created with mode 0600 (iceoryx2
 * built without its dev_permissions feature): other users can neither read
 * nor write them. The name is the capability among processes of one user.
 *
 * Threads: a node and every end made from it are used by one thread at a
 * time; a hand-over between threads must be ordered by the caller.
 *
 * Errors: 0 (or a count) on success, else a negative OKV_IOX2_E* code;
 * okv_iox2_last_error() says what failed, in words, for the calling thread.
 */
#ifndef ORBITKV_IOX2_H
#define ORBITKV_IOX2_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Return codes (negative); values equal native/iox2/src/lib.rs. */
enum okv_iox2_rc {
	OKV_IOX2_EINVAL = -1,       /* a NULL, a name too long or not UTF-8, a count out of range */
	OKV_IOX2_EEXIST = -2,       /* create: a service of that name exists */
	OKV_IOX2_ENOENT = -3,       /* open: no service of that name (or not yet) */
	OKV_IOX2_EDISCONNECTED = -4, /* the other side is gone */
	OKV_IOX2_EBUSY = -5,        /* the service has no room for another port */
	OKV_IOX2_EPERM = -6,        /* the objects belong to another user */
	OKV_IOX2_EINTERNAL = -7     /* iceoryx2 failed otherwise (see okv_iox2_last_error) */
};

/** Longest service name, in bytes (iceoryx2 allows 255; "/rq" is added). */
#define OKV_IOX2_NAME_MAX 240u

/** An iceoryx2 node: the process's registration (owning handle). */
struct okv_iox2_node;
/** The answering end of a service (owning handle). */
struct okv_iox2_server;
/** The asking end of a service (owning handle). */
struct okv_iox2_client;

/** Longest runtime string of okv_iox2_runtime_new, in bytes (no NUL). */
#define OKV_IOX2_RUNTIME_MAX 255u

/**
 * Make a fresh runtime, the place where one Manager's iceoryx2 objects
 * live: a root directory "orbitkv-iox2-XXXXXX" made by mkdtemp(3) (mode
 * 0700, random name) under $XDG_RUNTIME_DIR when that is a directory of
 * this euid that no other user may enter, else under /tmp; and a random
 * /dev/shm prefix ("okv" + 16 hex digits + "_"). Neither can be created
 * by another uid first: a predictable name can (a squatted
 * /tmp/orbitkv-iox2-<uid> or /dev/shm name would keep the transport from
 * ever starting). Writes the runtime string, the prefix followed by the
 * root's absolute path (at most OKV_IOX2_RUNTIME_MAX bytes), and a NUL
 * into out[0..outlen). The Manager sends it to its clients in the
 * bootstrap reply (abi.h OKV_BOOT_EXT_IOX2_RUNTIME). The root holds an
 * owner record, the file "owner" (mode 0600): lines "pid N", "start T"
 * (the process's start, clock ticks after boot: /proc/N/stat field 22),
 * "boot ID", "pidns pid:[INODE]", "prefix P". Before making the runtime
 * it sweeps the stale ones (okv_iox2_runtime_sweep). Returns 0,
 * OKV_IOX2_EINVAL (NULL, or it does not fit outlen), OKV_IOX2_EPERM (the
 * directory or its record could not be made, or it is not private: the
 * message names it).
 */
int okv_iox2_runtime_new(char *out, size_t outlen);
/** Remove this euid's /dev/shm objects of a runtime's prefix (iceoryx2's
 *  global node counter outlives the nodes), then its root directory and
 *  what is in it, after every node of it was freed (best effort).
 *  OKV_IOX2_EPERM (nothing removed) when the root is not a private
 *  directory of this euid. */
int okv_iox2_runtime_remove(const char *runtime);
/**
 * Remove the runtimes that processes of this euid made and left without
 * okv_iox2_runtime_remove (SIGKILL, a crash): every "orbitkv-iox2-*"
 * under $XDG_RUNTIME_DIR (when private, as above) and under /tmp that is
 * a directory (lstat: not a symbolic link) of this euid with mode 0700 and
 * whose owner record names a process that is gone: its pid is free or
 * now a process started at another time, or the record is of an earlier
 * boot. For each, this euid's regular files under /dev/shm starting with
 * the record's prefix go, then the directory. Left alone: runtimes of
 * live processes, records of another pid namespace (the pid cannot be
 * judged), directories without a well-formed record, anything of another
 * uid. Returns how many runtimes were removed (>= 0); logs nothing.
 */
int okv_iox2_runtime_sweep(void);

/**
 * Create a node in `runtime` (a string of okv_iox2_runtime_new); `name`
 * may be NULL. Objects are /dev/shm/<prefix>*, files under the runtime's
 * root (not iceoryx2's shared iox2_ and /tmp/iceoryx2, whose root
 * directory belongs to its first user and whose global node counter is
 * 0666); this layer makes the counter 0600. iceoryx2 installs no signal
 * handlers (the host process keeps SIGINT/SIGTERM) and logs only fatal
 * errors (IOX2_LOG_LEVEL raises that). Creating a node removes what dead
 * nodes of this runtime left. Returns 0 and *out; OKV_IOX2_EPERM when the
 * root is not a directory of this euid with mode 0700 or narrower (a
 * symbolic link, another uid's, one others may enter: okv_iox2_last_error
 * names the path, its owner uid and its mode) or the counter is another
 * user's; OKV_IOX2_EINVAL (a NULL out, a malformed runtime string) /
 * OKV_IOX2_EINTERNAL.
 */
int okv_iox2_node_new(const char *runtime, const char *name, struct okv_iox2_node **out);
/** Free a node after every end made from it; NULL is a no-op. */
void okv_iox2_node_free(struct okv_iox2_node *node);
/**
 * Remove what iceoryx2 nodes of this user left behind when their process
 * died (SIGKILL): their shared memory, sockets and node files, where this
 * process may. Returns how many dead nodes were cleaned (≥ 0) or a code.
 */
int okv_iox2_cleanup_dead(struct okv_iox2_node *node);

/**
 * Create the service `name` exclusively, its event services, and the
 * server end, for at most max_clients (1..64) clients. OKV_IOX2_EEXIST when
 * it exists (also a dead process's leftover not yet cleaned).
 */
int okv_iox2_server_create(struct okv_iox2_node *node, const char *name,
			   uint32_t max_clients, struct okv_iox2_server **out);
/** Take the next request into *out: 1 taken, 0 none; never blocks. A newer
 *  request replaces an unanswered older one (its client gave up). */
int okv_iox2_server_receive(struct okv_iox2_server *s, struct okv_msg *out);
/** Answer the request taken last and notify its client. OKV_IOX2_EINVAL
 *  when none is unanswered, OKV_IOX2_EDISCONNECTED when its client is gone. */
int okv_iox2_server_respond(struct okv_iox2_server *s, const struct okv_msg *msg);
/**
 * Sleep until a client notified or timeout_ns passed (0: only consume
 * pending notifications, never sleep). 1 notified, 0 timed out. A
 * notification may be stale; a request sent before the call is always
 * either receivable or notified, so "receive, then wait, then receive"
 * loses nothing.
 */
int okv_iox2_server_wait(struct okv_iox2_server *s, uint64_t timeout_ns);
/** The fd of the server's request listener (borrowed, until the free):
 *  readable while a notification is unconsumed; sleep on it with poll or
 *  epoll, consume with okv_iox2_server_wait(s, 0). */
int okv_iox2_server_fd(struct okv_iox2_server *s);
/** Free the server end; its services go once no process holds them. */
void okv_iox2_server_free(struct okv_iox2_server *s);

/** Open the existing service `name` as a client. OKV_IOX2_ENOENT when it
 *  does not exist, OKV_IOX2_EPERM when it is another user's,
 *  OKV_IOX2_EBUSY when it has no room for another client. */
int okv_iox2_client_open(struct okv_iox2_node *node, const char *name,
			 struct okv_iox2_client **out);
/** Send a request and notify the server; a request still unanswered is
 *  abandoned. OKV_IOX2_EDISCONNECTED when no server is connected. */
int okv_iox2_client_send(struct okv_iox2_client *c, const struct okv_msg *msg);
/** Take the response to the request in flight: 1 taken, 0 not yet,
 *  OKV_IOX2_EDISCONNECTED when the server is gone, OKV_IOX2_EINVAL when no
 *  request is in flight; never blocks. */
int okv_iox2_client_receive(struct okv_iox2_client *c, struct okv_msg *out);
/** Sleep until the server notified or timeout_ns passed; as
 *  okv_iox2_server_wait. */
int okv_iox2_client_wait(struct okv_iox2_client *c, uint64_t timeout_ns);
/** Free the client end; NULL is a no-op. */
void okv_iox2_client_free(struct okv_iox2_client *c);

/** An iceoryx2 WaitSet over many servers' request listeners and one
 *  control fd: where a server process with many clients sleeps (owning). */
struct okv_iox2_waitset;

/** Create a WaitSet with ctl_fd (borrowed, open until the free) attached:
 *  a wait returns when it is readable; the caller drains it. */
int okv_iox2_waitset_new(int ctl_fd, struct okv_iox2_waitset **out);
/** Attach s's request listener under key (the caller's slot index);
 *  OKV_IOX2_EEXIST when key is attached. s must stay until the detach. */
int okv_iox2_waitset_attach(struct okv_iox2_waitset *w, struct okv_iox2_server *s, uint32_t key);
/** Detach key (absent: no-op). */
void okv_iox2_waitset_detach(struct okv_iox2_waitset *w, uint32_t key);
/**
 * Sleep until a client of an attached server notified, the control fd is
 * readable, or timeout_ns passed. Consumes the notifications of the servers
 * that woke it (not the control fd). Returns how many attachments
 * triggered (0: timed out) or a code.
 */
int okv_iox2_waitset_wait(struct okv_iox2_waitset *w, uint64_t timeout_ns);
/** Free the WaitSet; NULL is a no-op. */
void okv_iox2_waitset_free(struct okv_iox2_waitset *w);

/** The calling thread's last failure in words; valid until its next
 *  failing call; never NULL. */
const char *okv_iox2_last_error(void);
/** Static text of a return code; never NULL. */
const char *okv_iox2_strerror(int rc);
/** The iceoryx2 version the library was built on ("0.10.0"); static. */
const char *okv_iox2_version(void);

#ifdef __cplusplus
}
#endif
#endif /* ORBITKV_IOX2_H */
