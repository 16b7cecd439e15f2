/*
 * client.c — liborbitkv: connect, ping, health, close (orbitkv/client.h),
 * and the channel round trip the cache operations of ops.c build on.
 *
 * Bootstrap follows docs/design.md §5.1: hello → reply + SCM_RIGHTS (slot memfd,
 * eventfd, doorbell memfd), pidfd_open(2) of the Manager (pid taken from
 * SO_PEERCRED, which the kernel fills, and cross-checked with the reply),
 * then a RegisterInstance lifecycle frame. Control calls then use the
 * shared-memory slot (channel.h).
 */
#define _GNU_SOURCE
#include "orbitkv/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "channel.h"
#ifdef OKV_HAVE_IOX2
#include <sched.h>

#include "orbitkv/iox2.h"
#endif
#include "client_internal.h"
#include "lifecycle.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

_Static_assert(OKVI_SOCKET_PATH_BYTES == sizeof(((struct sockaddr_un *)0)->sun_path), "sun_path bytes");

/* The runtime directory of the default socket: OKV_RUNTIME_DIR; tests
 * point it at a directory of their own (client_internal.h). */
const char *okvi_runtime_dir = OKV_RUNTIME_DIR;

#define OKV_DEFAULT_SPIN_NS 50000u
#define OKV_DEFAULT_TIMEOUT_MS 5000u
/* Park rounds while waiting for a reply: check the Manager's pidfd this often. */
#define OKV_PARK_ROUND_NS 50000000ull


void okvi_set_error(okv_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

static int map_fd(int fd, size_t want, int exact, void **out)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (exact ? (size_t)st.st_size != want : (size_t)st.st_size < want)
		return OKV_EPROTO;
	void *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static void client_free(okv_client *c)
{
#ifdef OKV_HAVE_IOX2
	okv_iox2_client_free(c->iox2);
	okv_iox2_node_free(c->iox2_node);
#endif
	if (c->slot)
		munmap(c->slot, c->slot_bytes);
	if (c->db)
		munmap(c->db, c->db_bytes);
	int *fds[] = { &c->sock, &c->slot_fd, &c->event_fd, &c->doorbell_fd, &c->pidfd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	free(c->buf_layers);
	okvi_discover_unmap_all(c);
	free(c);
}

/* Hint for a failed connect(2) on the bootstrap socket. */
static const char *connect_hint(int err)
{
	switch (err) {
	case ENOENT:
	case ECONNREFUSED:
		return "is orbitkv-manager running at this path?";
	case EACCES:
	case EPERM:
		return "the socket is mode 0600: connect as the Manager's user";
	case EAGAIN:
		return "the Manager is not accepting connections";
	default:
		return "";
	}
}

/*
 * Connect within the deadline: a Unix stream connect(2) blocks while the
 * listener's backlog is full (a Manager that stopped accepting), so connect
 * non-blocking and retry EAGAIN until the deadline (unix(7): "EAGAIN ... the
 * backlog of the listening socket is full").
 */
static int open_socket(const struct okv_connect_options *o, okv_client *c, uint64_t deadline,
		       char path[OKVI_SOCKET_PATH_BYTES], uint32_t *vouched_uid_plus1)
{
	int source = 0;
	int rc = okv_resolve_socket_path(o->socket_path, o->manager_addr, okvi_runtime_dir, path,
					 OKVI_SOCKET_PATH_BYTES, &source, vouched_uid_plus1);
	if (rc < 0) {
		const char *addr = o->manager_addr, *env = OKV_LISTEN_ENV;
		switch (source) {
		case OKV_SOCKET_FROM_OPTION:
			if (o->socket_path && o->socket_path[0]) {
				okvi_set_error(c, "socket path is %zu bytes, the limit is %d", strlen(o->socket_path),
					       OKVI_SOCKET_PATH_BYTES - 1);
				break;
			}
			env = NULL;
			/* fallthrough */
		case OKV_SOCKET_FROM_DERIVED:
			if (env)
				addr = getenv(env);
			okvi_set_error(c, "%s%smanager address \"%.64s\" %s", env ? env : "", env ? ": " : "",
				       addr ? addr : "",
				       rc == -ENAMETOOLONG ? "gives a socket path over 107 bytes"
							   : "is not host:port with a port 0..65535");
			break;
		case OKV_SOCKET_FROM_ENV:
			okvi_set_error(c, "%s is %zu bytes, the limit is %d", OKV_BOOTSTRAP_SOCKET_ENV,
				       strlen(getenv(OKV_BOOTSTRAP_SOCKET_ENV)), OKVI_SOCKET_PATH_BYTES - 1);
			break;
		default:
			okvi_set_error(c, "socket path in %s is over %d bytes", okvi_runtime_dir,
				       OKVI_SOCKET_PATH_BYTES - 1);
		}
		return rc;
	}
	c->socket_source = source;
	c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->sock < 0)
		return -errno;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		if (connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == EAGAIN && okvi_now_ns() < deadline) {
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 }; /* 1 ms */
			nanosleep(&ts, NULL);
			continue;
		}
		snprintf(c->last_error, sizeof(c->last_error), "connect %s: %s%s%s", path,
			 strerror(e), *connect_hint(e) ? "; " : "", connect_hint(e));
		return e == EAGAIN ? OKV_ETIMEDOUT : -e;
	}
	/* The rest of the protocol uses blocking I/O with poll(2) deadlines. */
	int fl = fcntl(c->sock, F_GETFL);
	if (fl < 0 || fcntl(c->sock, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Check the fds the Manager sent: sizes, seals, the slot's header (docs/design.md §5.1). */
static int adopt_fds(okv_client *c, const int fds[3])
{
	c->slot_fd = fds[0];
	c->event_fd = fds[1];
	c->doorbell_fd = fds[2];
	int seals = fcntl(c->slot_fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_GROW | F_SEAL_SHRINK)) != (F_SEAL_GROW | F_SEAL_SHRINK)) {
		okvi_set_error(c, "%s", "slot memfd is not sealed against grow and shrink");
		return OKV_EPROTO;
	}
	c->slot_bytes = c->reply.slot_bytes;
	int rc = map_fd(c->slot_fd, c->slot_bytes, 1, (void **)&c->slot);
	if (rc) {
		okvi_set_error(c, "%s", "slot memfd size differs from reply.slot_bytes");
		return rc;
	}
	c->db_bytes = sizeof(struct okv_doorbell);
	rc = map_fd(c->doorbell_fd, c->db_bytes, 0, (void **)&c->db);
	if (rc) {
		okvi_set_error(c, "%s", "doorbell memfd smaller than struct okv_doorbell");
		return rc;
	}
	const struct okv_slot_header *h = &c->slot->header;
	if (h->magic != OKV_SLOT_MAGIC || h->abi_version != OKV_ABI_VERSION ||
	    h->epoch != c->reply.epoch || h->slot_index != c->reply.slot_index ||
	    h->desc_offset != c->reply.desc_offset || h->desc_capacity != c->reply.desc_capacity) {
		okvi_set_error(c, "%s", "slot header disagrees with the bootstrap reply");
		return OKV_EPROTO;
	}
	/* The doorbell is writable by every session of the Manager, so nothing
	 * in it is trusted: not its header line (a session that overwrote it
	 * would otherwise lock every later client out), not its flags. What the
	 * client relies on comes from the bootstrap reply, and from the seals,
	 * which the kernel enforces: no session can shrink it under the others. */
	seals = fcntl(c->doorbell_fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_GROW | F_SEAL_SHRINK)) != (F_SEAL_GROW | F_SEAL_SHRINK)) {
		okvi_set_error(c, "%s", "doorbell memfd is not sealed against grow and shrink");
		return OKV_EPROTO;
	}
	return 0;
}

/*
 * The peer rule of docs/design.md §5.1, applied from the client's side: the
 * process serving the socket must run as this process's effective uid (what
 * SO_PEERCRED reports, filled by the kernel at listen(2)). Anyone who can
 * create or swap the path (world-writable /tmp, a directory without the
 * sticky bit) could otherwise receive the hello, the engine's KV buffer
 * memfds and its session. Checked before anything is sent.
 */
/* The kernel's overflow uid (/proc/sys/kernel/overflowuid, 65534 by
 * default): what SO_PEERCRED and geteuid report for a uid not mapped into
 * the caller's user namespace. */
static uid_t overflow_uid(void)
{
	unsigned long v = 65534;
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 65534;
		fclose(f);
	}
	return (uid_t)v;
}

/* Whether this process's user namespace maps every uid (the initial one:
 * uid_map "0 0 4294967295"); then the overflow uid is a real uid too. */
static int maps_every_uid(void)
{
	unsigned long inside, outside, count;
	int all = 0;
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return 1; /* no user namespaces in this kernel */
	while (fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
		if (inside == 0 && outside == 0 && count == 4294967295ul)
			all = 1;
	fclose(f);
	return all;
}

/* The uid of a Manager this client trusts besides its own euid: o's
 * manager_uid_plus1, else ORBITKV_MANAGER_UID. *trusted = 0 when none is
 * given. -EINVAL, naming the variable, for a value that is not a decimal
 * uid below 4294967295. */
static int trusted_manager_uid(okv_client *c, const struct okv_connect_options *o, uid_t *uid, int *trusted)
{
	*trusted = 0;
	if (o->manager_uid_plus1) {
		*uid = (uid_t)(o->manager_uid_plus1 - 1);
		*trusted = 1;
		return 0;
	}
	const char *v = getenv(OKVI_MANAGER_UID_ENV);
	if (!v || !v[0])
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || *end || v[0] < '0' || v[0] > '9' || n >= 4294967295ull) {
		okvi_set_error(c, "%s is \"%.32s\": want the decimal uid of the Manager to trust (unset or empty: only this process's uid %u)",
			       OKVI_MANAGER_UID_ENV, v, (unsigned)geteuid());
		return -EINVAL;
	}
	*uid = (uid_t)n;
	*trusted = 1;
	return 0;
}

/* vouched_uid_plus1: the owner of the runtime directory plus one when the
 * socket is the default there and okv_runtime_dir_owner vouches for it
 * (okv_resolve_socket_path), else 0. */
static int check_peer_uid(okv_client *c, const struct okv_connect_options *o, const struct ucred *cred,
			  const char *path, uint32_t vouched_uid_plus1)
{
	uid_t me = geteuid(), other = 0;
	int trusted = 0;
	int rc = trusted_manager_uid(c, o, &other, &trusted);
	if (rc)
		return rc;
	int match = cred->uid == me || (trusted && cred->uid == other) ||
		    (vouched_uid_plus1 && cred->uid == (uid_t)(vouched_uid_plus1 - 1));
	if (match && cred->uid == overflow_uid() && !maps_every_uid()) {
		/* In a user namespace without a uid map every outside uid reads as
		 * the overflow uid: equal numbers prove nothing. */
		okvi_set_error(c,
			       "refusing the Manager at %s: its uid reads as the overflow uid %u, "
			       "so it cannot be compared (a user namespace without a uid map); nothing was sent to it. "
			       "Map this process's uid into its namespace, or run it outside one",
			       path, (unsigned)cred->uid);
		return OKV_EPEER;
	}
	if (match)
		return 0;
	if (c->socket_source == OKV_SOCKET_FROM_RUNTIME_DIR) {
		char also[48] = "";
		if (trusted)
			snprintf(also, sizeof(also), ", the Manager uid %u", (unsigned)other);
		okvi_set_error(c,
			       "refusing the Manager at %s: the process serving it (pid %d) runs as uid %u; this process "
			       "trusts its own uid %u%s and, for the default socket in %s, that directory's owner%s; "
			       "nothing was sent to it. The owner is trusted when the directory's parent is root's and "
			       "neither is writable by group or others (systemd's RuntimeDirectory=); else name the "
			       "Manager by %s=%u",
			       path, (int)cred->pid, (unsigned)cred->uid, (unsigned)me, also, okvi_runtime_dir,
			       vouched_uid_plus1 ? "" : " (not vouched for: see its and its parent's owner and mode)",
			       OKVI_MANAGER_UID_ENV, (unsigned)cred->uid);
		return OKV_EPEER;
	}
	if (trusted) {
		okvi_set_error(c,
			       "refusing the Manager at %s: the process serving it (pid %d) runs as uid %u; this process "
			       "trusts its own uid %u and the Manager uid %u (%s or the client's manager_uid option); nothing "
			       "was sent to it",
			       path, (int)cred->pid, (unsigned)cred->uid, (unsigned)me, (unsigned)other, OKVI_MANAGER_UID_ENV);
		return OKV_EPEER;
	}
	okvi_set_error(c,
		       "refusing the Manager at %s: the process serving it (pid %d) runs as uid %u, this process as uid "
		       "%u; nothing was sent to it. A Manager must run as its engines' user, or, when it serves tenants "
		       "of other uids, be named by %s=%u (the client's manager_uid option); if another user created "
		       "this path, remove it and start orbitkv-manager as uid %u with --bootstrap-socket in a 0700 "
		       "directory (for example $XDG_RUNTIME_DIR/orbitkv), and give the client the same path",
		       path, (int)cred->pid, (unsigned)cred->uid, (unsigned)me, OKVI_MANAGER_UID_ENV, (unsigned)cred->uid,
		       (unsigned)me);
	return OKV_EPEER;
}

/* Receive and check the reply's extension records (abi.h struct
 * okv_boot_ext), keeping what this client knows. */
static int read_extensions(okv_client *c, int64_t deadline_ms)
{
	uint8_t ext[OKV_BOOT_EXT_MAX_BYTES];
	size_t got = 0;
	size_t n = c->reply.ext_bytes; /* <= OKV_BOOT_EXT_MAX_BYTES: okvi_hello_reply_check */
	if (n == 0 && c->reply.ext_fds == 0)
		return 0;
	int rc = okvi_recv_exact_fds(c->sock, ext, n, deadline_ms, &got, NULL, 0, NULL, c->last_error,
				     sizeof(c->last_error));
	if (rc == 1) {
		okvi_set_error(c, "Manager closed the connection after %zu of %zu extension bytes", got, n);
		return OKV_EPROTO;
	}
	if (rc == OKV_ETIMEDOUT)
		okvi_set_error(c, "bootstrap reply extensions incomplete (%zu of %zu bytes) after %u ms", got, n,
			       c->timeout_ms);
	if (rc)
		return rc;
	struct okvi_boot_exts exts;
	rc = okvi_boot_exts_parse(ext, n, c->reply.ext_fds, &exts, c->last_error, sizeof(c->last_error));
	if (rc)
		return rc;
	memcpy(c->manager_version, exts.manager_version, sizeof(c->manager_version));
	memcpy(c->iox2_service, exts.iox2_service, sizeof(c->iox2_service));
	memcpy(c->iox2_runtime, exts.iox2_runtime, sizeof(c->iox2_runtime));
	return 0;
}

/* The iceoryx2 transport, when the reply named a service: open it as this
 * session's client. A liborbitkv built without the library refuses. */
static int open_iox2(okv_client *c, const char *path)
{
	if (c->iox2_service[0] == '\0')
		return 0;
#ifdef OKV_HAVE_IOX2
	if (c->iox2_runtime[0] == '\0') {
		okvi_set_error(c, "the Manager at %s named iceoryx2 service %s without its iox2_runtime record", path,
			       c->iox2_service);
		return OKV_EPROTO;
	}
	int rc = okv_iox2_node_new(c->iox2_runtime, NULL, &c->iox2_node);
	if (rc == 0)
		rc = okv_iox2_client_open(c->iox2_node, c->iox2_service, &c->iox2);
	if (rc != 0) {
		okvi_set_error(c, "opening the session's iceoryx2 service %s in runtime %s (Manager at %s): %s",
			       c->iox2_service, c->iox2_runtime, path, okv_iox2_last_error());
		return OKV_EPROTO;
	}
	return 0;
#else
	okvi_set_error(c,
		       "the Manager at %s serves the channel over iceoryx2 (--channel-transport iceoryx2) and this "
		       "liborbitkv was built without the iceoryx2 transport (no Rust toolchain >= 1.89 at its build); "
		       "rebuild it with one, or run the Manager with --channel-transport shm",
		       path);
	return OKV_EUNSUPPORTED;
#endif
}

static int connect_steps(const struct okv_connect_options *o, okv_client *c)
{
	uint64_t deadline = okvi_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	char path[OKVI_SOCKET_PATH_BYTES];
	uint32_t vouched_uid_plus1 = 0;
	int rc = open_socket(o, c, deadline, path, &vouched_uid_plus1);
	if (rc)
		return rc;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return -errno;
	rc = check_peer_uid(c, o, &cred, path, vouched_uid_plus1);
	if (rc)
		return rc;
	struct okv_hello hello;
	rc = okvi_hello_encode(&hello, (uint32_t)getpid(), o->role, o->instance_id);
	if (rc)
		return rc;
	ssize_t n = send(c->sock, &hello, sizeof(hello), MSG_NOSIGNAL);
	int send_err = n < 0 ? errno : 0;
	if (send_err && send_err != EPIPE && send_err != ECONNRESET)
		return -send_err;
	if (n >= 0 && n != (ssize_t)sizeof(hello))
		return OKV_EPROTO; /* a 96-byte send on a fresh stream socket is never short */
	/* After EPIPE still read: a Manager that refuses a peer by SO_PEERCRED
	 * answers (and closes) before our hello arrives; its reason is queued. */
	struct okv_hello_reply raw;
	int fds[3 + OKV_BOOT_EXT_MAX_FDS], nfds = 0;
	size_t got = 0;
	int64_t deadline_ms = (int64_t)(okvi_now_ns() / 1000000u) + (int64_t)c->timeout_ms;
	rc = okvi_recv_exact_fds(c->sock, &raw, sizeof(raw), deadline_ms, &got, fds, 3 + (int)OKV_BOOT_EXT_MAX_FDS,
				 &nfds, c->last_error, sizeof(c->last_error));
	if (rc == 1) {
		snprintf(c->last_error, sizeof(c->last_error),
			 "Manager closed the connection after %zu of %zu reply bytes", got, sizeof(raw));
		rc = send_err ? -send_err : OKV_EPROTO;
	} else if (rc == OKV_ETIMEDOUT) {
		snprintf(c->last_error, sizeof(c->last_error), "no bootstrap reply within %u ms", c->timeout_ms);
	}
	if (rc == 0)
		rc = okvi_hello_reply_check(&raw, sizeof(raw), &c->reply,
					    c->last_error, sizeof(c->last_error));
	if (rc == 0 && nfds != 3 + (int)c->reply.ext_fds) {
		okvi_set_error(c, "bootstrap reply carried %d fds, want 3 + ext_fds %u", nfds, (unsigned)c->reply.ext_fds);
		rc = OKV_EPROTO;
	}
	if (rc == 0)
		rc = read_extensions(c, deadline_ms);
	/* No record known to this client owns an fd: those of skipped records
	 * are closed here, the fixed three adopted below. */
	for (int i = rc == 0 ? 3 : 0; i < nfds; i++)
		close(fds[i]);
	if (rc)
		return rc;
	rc = adopt_fds(c, fds);
	if (rc)
		return rc;
	if (c->reply.manager_pid != (uint32_t)cred.pid) {
		okvi_set_error(c, "%s", "reply.manager_pid differs from SO_PEERCRED pid");
		return OKV_EPROTO;
	}
	c->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
	if (c->pidfd < 0)
		return -errno;
	c->next_gen = c->reply.initial_generation;
	rc = open_iox2(c, path);
	if (rc)
		return rc;
	return okvi_register_instance(c->sock, c->reply.epoch, c->reply.client_token,
				      o->instance_id ? o->instance_id : "", (int)c->timeout_ms,
				      c->last_error, sizeof(c->last_error));
}

int okv_connect_err(const struct okv_connect_options *opts, okv_client **out,
		    char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = 0;
	if (!opts || !out)
		return -EINVAL;
	*out = NULL;
	if (opts->timeout_ms > OKV_MAX_TIMEOUT_MS) {
		if (err && errlen)
			snprintf(err, errlen, "timeout_ms %u exceeds the limit %u (1 hour)",
				 opts->timeout_ms, OKV_MAX_TIMEOUT_MS);
		return -EINVAL;
	}
	/* Before any fd of the session exists (dumpable.c). */
	char why[256];
	int drc = okvi_drop_dumpable(why, sizeof(why));
	if (drc) {
		if (err && errlen)
			snprintf(err, errlen, "%s", why);
		return drc;
	}
	okv_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sock = c->slot_fd = c->event_fd = c->doorbell_fd = c->pidfd = -1;
	c->spin_ns = opts->spin_ns ? opts->spin_ns : OKV_DEFAULT_SPIN_NS;
	c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : OKV_DEFAULT_TIMEOUT_MS;
	c->next_op_id = 1; /* op id 0 is the untracked query (abi.h "Query tickets") */
	int rc = connect_steps(opts, c);
	if (rc) {
		if (err && errlen)
			snprintf(err, errlen, "%s", c->last_error);
		client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int okv_connect(const struct okv_connect_options *opts, okv_client **out)
{
	return okv_connect_err(opts, out, NULL, 0);
}

/* Called between park rounds: is the Manager process still alive? */
static int manager_alive(void *ctx)
{
	okv_client *c = ctx;
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
	if (poll(&p, 1, 0) > 0)
		return OKV_EMANAGER_DIED;
	return 0;
}

int okvi_msg_check_response(const struct okv_msg *m, uint64_t epoch, uint64_t request_id,
			    uint64_t generation, char *err, size_t errlen)
{
	const char *field = NULL;
	if (m->magic != OKV_MSG_MAGIC)
		field = "magic";
	else if (m->abi_version != OKV_ABI_VERSION)
		field = "abi_version";
	else if (m->generation != generation)
		field = "generation";
	else if (m->code > OKV_STATUS_MAX)
		field = "code (status > OKV_STATUS_MAX)";
	else if (m->request_id != request_id)
		field = "request_id";
	else if (m->epoch != epoch && m->code != OKV_STATUS_STALE_SESSION)
		field = "epoch";
	else if (m->reserved != 0)
		field = "reserved";
	if (field) {
		snprintf(err, errlen, "malformed response: field %s", field);
		return OKV_EPROTO;
	}
	switch (m->code) {
	case OKV_STATUS_OK:
		return 0;
	case OKV_STATUS_LOADING:
		snprintf(err, errlen, "Manager answered Loading: the operation is still running");
		return OKV_EPENDING;
	case OKV_STATUS_UNADMITTED:
		snprintf(err, errlen, "Manager answered Unadmitted: no capacity now, nothing was done");
		return OKV_EUNADMITTED;
	case OKV_STATUS_STALE_SESSION:
		snprintf(err, errlen, "Manager epoch %llu differs from session epoch %llu",
			 (unsigned long long)m->epoch, (unsigned long long)epoch);
		return OKV_ESTALE_SESSION;
	case OKV_STATUS_STALE_GENERATION:
		snprintf(err, errlen, "Manager refused request generation %llu",
			 (unsigned long long)(generation - 1));
		return OKV_ESTALE_GENERATION;
	case OKV_STATUS_INVALID:
		/* Descriptor fields carry the offending entry's index in arg1. */
		if (m->arg0 >= OKV_FIELD_DESC_MAGIC && m->arg0 <= OKV_FIELD_MAX)
			snprintf(err, errlen, "Manager refused the request: field %s, entry %llu",
				 okvi_field_name(m->arg0), (unsigned long long)m->arg1);
		else
			snprintf(err, errlen, "Manager refused the request: field %s",
				 okvi_field_name(m->arg0));
		return OKV_EINVALID;
	case OKV_STATUS_UNSUPPORTED:
		snprintf(err, errlen, "Manager does not serve this command (status Unsupported)");
		return OKV_EUNSUPPORTED;
	case OKV_STATUS_TIMEOUT:
		/* A Manager answer (the ticket or operation expired there), not
		 * a missing reply: OKV_ETIMEDOUT stays "no reply, outcome unknown". */
		snprintf(err, errlen, "Manager answered Timeout: the ticket or operation expired");
		return OKV_EEXPIRED;
	case OKV_STATUS_INTERNAL:
		snprintf(err, errlen, "Manager answered Internal");
		return OKV_EINTERNAL;
	default: /* Miss, Candidates: only callers that expect them accept them */
		snprintf(err, errlen, "Manager answered status %u where this call expects Ok",
			 (unsigned)m->code);
		return OKV_EINTERNAL;
	}
}

const char *okvi_field_name(uint64_t field)
{
	static const char *const names[] = {
		[OKV_FIELD_NONE] = "none",
		[OKV_FIELD_MAGIC] = "magic",
		[OKV_FIELD_ABI_VERSION] = "abi_version",
		[OKV_FIELD_CODE] = "code",
		[OKV_FIELD_EPOCH] = "epoch",
		[OKV_FIELD_DESC_OFFSET] = "desc_offset",
		[OKV_FIELD_DESC_LENGTH] = "desc_length",
		[OKV_FIELD_GENERATION] = "generation",
		[OKV_FIELD_RESERVED] = "reserved",
		[OKV_FIELD_DESC_MAGIC] = "desc_magic",
		[OKV_FIELD_DESC_SCHEMA] = "desc_schema",
		[OKV_FIELD_DESC_FLAGS] = "desc_flags",
		[OKV_FIELD_DESC_RESERVED] = "desc_reserved",
		[OKV_FIELD_COUNT] = "count",
		[OKV_FIELD_BUFFER_ID] = "buffer_id",
		[OKV_FIELD_PAGE] = "page",
		[OKV_FIELD_LAYERS] = "layers",
		[OKV_FIELD_LEASE_ID] = "lease_id",
		[OKV_FIELD_BLOCK] = "block",
		[OKV_FIELD_BLOCK_BYTES] = "block_bytes",
		[OKV_FIELD_OP_ID] = "op_id",
		[OKV_FIELD_NAMESPACE] = "namespace",
		[OKV_FIELD_REVISION] = "revision",
		[OKV_FIELD_REQUEST] = "request",
		[OKV_FIELD_RECOVERY_RANGE] = "recovery_range",
		[OKV_FIELD_RECORD] = "record",
	};
	_Static_assert(sizeof(names) / sizeof(names[0]) == OKV_FIELD_MAX + 1, "a name for every okv_field");
	return field <= OKV_FIELD_MAX ? names[field] : "unknown";
}

int okvi_desc_acquire(okv_client *c)
{
	if (!c || !c->slot || c->broken)
		return OKV_ECLOSED;
	if (!c->desc_busy_gen)
		return 0;
	/* The Manager serves a slot's requests one at a time, so once the
	 * response line holds the busy generation or a later one it is done
	 * with that descriptor. Rare path: poll in 1 ms steps on the pidfd,
	 * which also notices a dead Manager. */
	uint64_t deadline = okvi_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	for (;;) {
#ifdef OKV_HAVE_IOX2
		/* iceoryx2: the late answer arrives through the service. */
		if (c->iox2) {
			int r = okv_iox2_client_receive(c->iox2, &c->iox2_resp);
			if (r == 1 && c->iox2_resp.generation >= c->desc_busy_gen) {
				c->desc_busy_gen = 0;
				return 0;
			}
		} else
#endif
		if (__atomic_load_n(&c->slot->response.generation, __ATOMIC_ACQUIRE) >= c->desc_busy_gen) {
			c->desc_busy_gen = 0;
			return 0;
		}
		if (okvi_now_ns() >= deadline) {
			okvi_set_error(c, "the Manager has not answered an earlier request that timed out "
					  "and may still read the descriptor area");
			return OKV_ETIMEDOUT;
		}
		struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
		if (poll(&p, 1, 1) > 0) {
			c->broken = 1;
			okvi_set_error(c, "the Manager exited");
			return OKV_EMANAGER_DIED;
		}
	}
}

/* Refuse a call on a closed or broken client (okvi_call_desc and its
 * no-deadline twin). */
static int call_usable(okv_client *c)
{
	if (!c || !c->slot)
		return OKV_ECLOSED;
	if (c->broken) {
		okvi_set_error(c, "%s", "session ended earlier (Manager died or sent a malformed reply); reconnect");
		return OKV_ECLOSED;
	}
	/* okv_last_error describes this call only. */
	c->last_error[0] = '\0';
	return 0;
}

/* Write the request line, store its odd generation last and ring the
 * doorbell. Returns the request generation; *id the request id, *woke
 * whether the ring woke a parked Manager. */
static uint64_t post_request(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, uint32_t desc_length,
			     uint64_t *id, int *woke)
{
	struct okv_msg line;
	/* iceoryx2: the same line, built here and sent through the service. */
	struct okv_msg *rq = c->iox2 ? &line : &c->slot->request;
	uint64_t gen = c->next_gen;
	c->next_gen += 2;
	*id = ++c->next_request_id;
	rq->magic = OKV_MSG_MAGIC;
	rq->abi_version = OKV_ABI_VERSION;
	rq->code = code;
	rq->request_id = *id;
	rq->epoch = c->reply.epoch;
	rq->desc_offset = desc_length ? OKV_SLOT_DESC_OFFSET : 0;
	rq->desc_length = desc_length;
	rq->arg0 = arg0;
	rq->arg1 = arg1;
	rq->reserved = 0;
	/* Release: the Manager load-acquires the generation, then reads the line
	 * and the descriptor the caller wrote before this call. */
	__atomic_store_n(&rq->generation, gen, __ATOMIC_RELEASE);
#ifdef OKV_HAVE_IOX2
	if (c->iox2) {
		/* iceoryx2 orders the descriptor written before this call with
		 * the request (its queue publishes with release semantics). */
		c->iox2_send_rc = okv_iox2_client_send(c->iox2, rq);
		*woke = 0;
		return gen;
	}
#endif
	/* If the Manager was parked it needs a wakeup (10–100 µs on a VM) and may
	 * be scheduled on this very CPU: spinning would only compete with it, so
	 * park at once. A spinning Manager answers within the spin budget. */
	*woke = okvi_doorbell_ring(c->db, c->reply.slot_index);
	return gen;
}

/* Copy the response line of generation gen + 1 and validate it. */
static int take_response(okv_client *c, uint64_t id, uint64_t gen, struct okv_msg *resp)
{
	memcpy(resp, c->iox2 ? &c->iox2_resp : &c->slot->response, sizeof(*resp));
	return okvi_msg_check_response(resp, c->reply.epoch, id, gen + 1, c->last_error, sizeof(c->last_error));
}

/*
 * Wait for the response of generation want: on the shared-memory transport
 * okvi_wait_response on the slot; on iceoryx2 poll the service's receive
 * for spin_ns (yielding the CPU between polls: a Manager woken through the
 * event is often queued on this CPU), then sleep on its response event in
 * rounds of OKV_PARK_ROUND_NS, checking the Manager's pidfd between rounds.
 * Returns 0, OKV_ETIMEDOUT at deadline_ns, OKV_EMANAGER_DIED, or OKV_ECLOSED
 * when the service is gone while the Manager lives.
 */
static int wait_response(okv_client *c, uint64_t want, uint64_t spin_ns, uint64_t deadline_ns)
{
#ifdef OKV_HAVE_IOX2
	if (c->iox2) {
		if (c->iox2_send_rc != 0) {
			if (manager_alive(c) != 0)
				return OKV_EMANAGER_DIED;
			okvi_set_error(c, "sending through the session's iceoryx2 service: %s", okv_iox2_last_error());
			return OKV_ECLOSED;
		}
		uint64_t start = okvi_now_ns();
		for (;;) {
			int r = okv_iox2_client_receive(c->iox2, &c->iox2_resp);
			if (r == 1 && c->iox2_resp.generation == want)
				return 0;
			if (r == 1)
				continue; /* an answer to an older request: not ours */
			if (r < 0) {
				if (manager_alive(c) != 0)
					return OKV_EMANAGER_DIED;
				okvi_set_error(c, "the session's iceoryx2 service: %s", okv_iox2_last_error());
				return OKV_ECLOSED;
			}
			uint64_t now = okvi_now_ns();
			if (now - start < spin_ns) {
				sched_yield();
				continue;
			}
			if (deadline_ns && now >= deadline_ns)
				return OKV_ETIMEDOUT;
			uint64_t round = OKV_PARK_ROUND_NS;
			if (deadline_ns && deadline_ns - now < round)
				round = deadline_ns - now;
			okv_iox2_client_wait(c->iox2, round);
			if (manager_alive(c) != 0)
				return OKV_EMANAGER_DIED;
		}
	}
#endif
	return okvi_wait_response(c->slot, want, spin_ns, deadline_ns, OKV_PARK_ROUND_NS, manager_alive, c);
}

int okvi_call_desc(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, uint32_t desc_length,
		   struct okv_msg *resp)
{
	int rc = call_usable(c);
	if (rc)
		return rc;
	uint64_t id;
	int woke;
	uint64_t gen = post_request(c, code, arg0, arg1, desc_length, &id, &woke);
	uint64_t deadline = okvi_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	rc = wait_response(c, gen + 1, woke ? 0 : c->spin_ns, deadline);
	if (rc) {
		/* Outcome unknown: the Manager may still answer this generation.
		 * Later calls use newer generations, so a late answer is ignored. */
		if (rc == OKV_ETIMEDOUT) {
			okvi_set_error(c, "%s", "no reply within the deadline; outcome unknown");
			if (desc_length)
				c->desc_busy_gen = gen + 1;
		} else {
			c->broken = 1;
			if (rc == OKV_EMANAGER_DIED)
				okvi_set_error(c, "%s", "the Manager process exited while this call waited for its reply");
		}
		return rc;
	}
	return take_response(c, id, gen, resp);
}

int okvi_call_desc_until_reply(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1,
			       uint32_t desc_length, struct okv_msg *resp, okvi_overrun_fn overrun, void *ctx)
{
	int rc = call_usable(c);
	if (rc)
		return rc;
	if (c->pidfd < 0) {
		/* Without a pidfd an endless wait could never end. */
		okvi_set_error(c, "%s", "no pidfd of the Manager: cannot wait for its reply without a deadline");
		return OKV_ECLOSED;
	}
	uint64_t id;
	int woke;
	uint64_t gen = post_request(c, code, arg0, arg1, desc_length, &id, &woke);
	uint64_t start = okvi_now_ns();
	/* The first watchdog mark is the ordinary deadline; each mark passed
	 * reports and moves on by the repeat period. The wait itself never
	 * ends on time: only a reply or the Manager's exit (its pidfd, checked
	 * between park rounds by manager_alive) ends it. */
	uint64_t mark = start + (uint64_t)c->timeout_ms * 1000000ull;
	uint64_t spin = woke ? 0 : c->spin_ns;
	for (;;) {
		rc = wait_response(c, gen + 1, spin, mark);
		spin = 0;
		if (rc != OKV_ETIMEDOUT)
			break;
		uint64_t now = okvi_now_ns();
		if (overrun)
			overrun(c, ctx, now - start);
		while (mark <= now)
			mark += OKVI_WATCHDOG_REPEAT_NS;
	}
	if (rc) {
		c->broken = 1;
		if (rc == OKV_EMANAGER_DIED)
			okvi_set_error(c, "%s", "the Manager process exited while this call waited for its reply");
		return rc;
	}
	return take_response(c, id, gen, resp);
}

int okvi_call(okv_client *c, uint16_t code, uint64_t arg0, uint64_t arg1, struct okv_msg *resp)
{
	return okvi_call_desc(c, code, arg0, arg1, 0, resp);
}

int okv_ping(okv_client *c, uint64_t value, uint64_t *echo)
{
	okvi_clear_error(c);
	struct okv_msg resp;
	int rc = okvi_call(c, OKV_CMD_PING, value, 0, &resp);
	if (rc == 0 && echo)
		*echo = resp.arg0;
	return rc;
}

int okv_health(okv_client *c, struct okv_health *out)
{
	okvi_clear_error(c);
	if (!c || !out)
		return -EINVAL;
	if (c->sock < 0)
		return OKV_ECLOSED;
	if (c->lc_broken) {
		okvi_set_error(c, "%s", "an earlier lifecycle call timed out or failed mid-frame; reconnect");
		return OKV_ECLOSED;
	}
	int rc = okvi_health(c->sock, c->reply.epoch, (int)c->timeout_ms, out,
			     c->last_error, sizeof(c->last_error));
	if (okvi_lifecycle_desynced(rc))
		c->lc_broken = 1;
	return rc;
}

void okv_close(okv_client *c)
{
	if (!c)
		return;
	if (c->sock >= 0 && !c->broken && !c->lc_broken)
		okvi_unregister(c->sock, c->reply.epoch, c->reply.client_token, 200);
	client_free(c);
}

const char *okv_manager_version(const okv_client *c)
{
	return c ? c->manager_version : "";
}

const char *okv_last_error(const okv_client *c)
{
	return c ? c->last_error : "no client";
}

uint64_t okv_epoch(const okv_client *c)
{
	return c ? c->reply.epoch : 0;
}

int okv_notification_fd(const okv_client *c)
{
	return c ? c->event_fd : -1;
}

int okv_manager_pidfd(const okv_client *c)
{
	return c ? c->pidfd : -1;
}
