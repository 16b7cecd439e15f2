/*
 * errors.c — okv_strerror (the one table from return codes to text,
 * CONTRIBUTING.md habit 7), okv_socket_path (docs/design.md §5.1) and the
 * default socket rule okv_resolve_socket_path / okv_runtime_dir_owner
 * (docs/operating.md "Socket paths"), all public (orbitkv/client.h). Go
 * twins: gocore/lifecycle.SocketPath, ClientSocketPath, RuntimeDirOwner.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "orbitkv/client.h"

/*
 * Static description of a code returned by any okv_ function: 0, an OKV_E*
 * code of client.h, or -errno (glibc's strerrordesc_np, which unlike
 * strerror is thread-safe and never formats into a shared buffer). Any other
 * value gives "unknown error". Never NULL; the string lives forever.
 */
const char *okv_strerror(int err)
{
	switch (err) {
	case OKV_OK:
		return "success";
	case OKV_EPROTO:
		return "malformed reply or frame from the Manager";
	case OKV_EVERSION:
		return "ABI or bootstrap protocol version mismatch with the Manager";
	case OKV_EREFUSED:
		return "Manager refused the hello";
	case OKV_ESTALE_SESSION:
		return "stale session: message from another Manager epoch";
	case OKV_ESTALE_GENERATION:
		return "stale generation: even or non-increasing request generation";
	case OKV_EINVALID:
		return "Manager rejected an invalid request field";
	case OKV_ETIMEDOUT:
		return "no reply within the deadline; outcome unknown";
	case OKV_EMANAGER_DIED:
		return "the Manager process exited";
	case OKV_ECLOSED:
		return "client closed or session ended";
	case OKV_EINTERNAL:
		return "Manager internal error";
	case OKV_EUNSUPPORTED:
		return "Manager does not serve this command";
	case OKV_EAPPLICATION:
		return "Manager sent an error frame";
	case OKV_EPENDING:
		return "still running (restore copying, query loading or prepared); poll again";
	case OKV_EUNADMITTED:
		return "Manager has no capacity now (unadmitted); nothing was done, retry later";
	case OKV_E2BIG:
		return "batch does not fit the session's descriptor area";
	case OKV_EEXPIRED:
		return "Manager answered Timeout: the ticket or operation expired";
	case OKV_EFENCED:
		return "publish outcome ambiguous: the buffer's pages stay pinned until the Manager exits";
	case OKV_EDISCOVER_BUSY:
		return "a discovery index bucket stayed mid-update; nothing was sent: take the round trip";
	case OKV_EPEER:
		return "the bootstrap socket is served by a process of another user; nothing was sent to it";
	default:
		break;
	}
	if (err < 0 && err > -4096) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
		const char *s = strerrordesc_np(-err);
		if (s != NULL)
			return s;
#endif
	}
	return "unknown error";
}

/* Largest socket path: sizeof(sockaddr_un.sun_path) - 1 (107 on Linux). */
#define OKVI_MAX_SOCKET_PATH (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/*
 * Derive the bootstrap socket path of a Manager listen address
 * (docs/design.md §5.1): "127.0.0.1:7470" -> "/tmp/orbitkv-127.0.0.1-7470.sock",
 * "[::1]:7470" -> "/tmp/orbitkv-::1-7470.sock". Rules (same as the Go
 * SocketPath): host:port; an IPv6 host is bracketed and loses its brackets;
 * an unbracketed host holds no ':'; the host is non-empty and holds no '/',
 * '[' or ']'; the port is ASCII digits with value <= 65535, written back in
 * canonical decimal ("007470" -> "7470").
 * Returns the path length (excluding the NUL) written into buf; -EINVAL for
 * a NULL argument or a bad address; -ENAMETOOLONG when the path exceeds
 * 107 bytes (sizeof sun_path - 1) or does not fit in buflen with its NUL.
 */
int okv_socket_path(const char *manager_addr, char *buf, size_t buflen)
{
	const char *host, *port;
	size_t hostlen;
	unsigned long value = 0;
	int n;

	if (manager_addr == NULL || buf == NULL)
		return -EINVAL;
	if (manager_addr[0] == '[') {
		const char *end = strchr(manager_addr, ']');
		if (end == NULL || end[1] != ':')
			return -EINVAL; /* unclosed bracket or no port after it */
		host = manager_addr + 1;
		hostlen = (size_t)(end - host);
		port = end + 2;
	} else {
		const char *colon = strrchr(manager_addr, ':');
		if (colon == NULL)
			return -EINVAL; /* missing port */
		host = manager_addr;
		hostlen = (size_t)(colon - host);
		port = colon + 1;
		if (memchr(host, ':', hostlen) != NULL)
			return -EINVAL; /* unbracketed IPv6 */
	}
	if (hostlen == 0 || memchr(host, '/', hostlen) != NULL || memchr(host, '[', hostlen) != NULL ||
	    memchr(host, ']', hostlen) != NULL)
		return -EINVAL;
	if (port[0] == '\0')
		return -EINVAL;
	for (const char *p = port; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		value = value * 10 + (unsigned long)(*p - '0');
		if (value > 65535)
			return -EINVAL;
	}
	if (hostlen > OKVI_MAX_SOCKET_PATH)
		return -ENAMETOOLONG; /* keeps the %.*s precision in int range */
	n = snprintf(buf, buflen, "/tmp/orbitkv-%.*s-%lu.sock", (int)hostlen, host, value);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n > OKVI_MAX_SOCKET_PATH || (size_t)n >= buflen) {
		if (buflen > 0)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return n;
}

int okv_runtime_dir_owner(const char *runtime_dir, uint32_t *uid)
{
	char dir[OKVI_MAX_SOCKET_PATH + 1], parent[OKVI_MAX_SOCKET_PATH + 1];
	struct stat ps, ds;
	size_t n;

	if (runtime_dir == NULL)
		return -EINVAL;
	n = strlen(runtime_dir);
	while (n > 1 && runtime_dir[n - 1] == '/')
		n--; /* "/run/orbitkv/" is "/run/orbitkv" */
	if (n >= sizeof(parent))
		return 0;
	memcpy(dir, runtime_dir, n);
	dir[n] = '\0'; /* without the trailing '/', lstat does not follow a link */
	memcpy(parent, dir, n + 1);
	char *slash = strrchr(parent, '/');
	if (slash == NULL)
		return 0; /* a relative name: no parent to judge */
	if (slash == parent)
		slash[1] = '\0'; /* the parent of "/x" is "/" */
	else
		*slash = '\0';
	if (lstat(parent, &ps) != 0 || !S_ISDIR(ps.st_mode) || ps.st_uid != 0 || (ps.st_mode & 022) != 0)
		return 0;
	if (lstat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) || (ds.st_mode & 022) != 0)
		return 0;
	if (uid != NULL)
		*uid = (uint32_t)ds.st_uid;
	return 1;
}

/* Copy path into buf: its length, or -ENAMETOOLONG past 107 bytes or buflen. */
static int copy_path(const char *path, char *buf, size_t buflen)
{
	size_t n = strlen(path);
	if (n > OKVI_MAX_SOCKET_PATH || n >= buflen) {
		if (buflen > 0)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(buf, path, n + 1);
	return (int)n;
}

int okv_resolve_socket_path(const char *socket_path, const char *manager_addr, const char *runtime_dir, char *buf,
			    size_t buflen, int *source, uint32_t *vouched_uid_plus1)
{
	int src = OKV_SOCKET_FROM_OPTION, rc;
	uint32_t vouched = 0;
	const char *env;

	if (buf == NULL)
		return -EINVAL;
	if (runtime_dir == NULL)
		runtime_dir = OKV_RUNTIME_DIR;
	if (socket_path != NULL && socket_path[0] != '\0') {
		rc = copy_path(socket_path, buf, buflen);
	} else if (manager_addr != NULL && manager_addr[0] != '\0') {
		rc = okv_socket_path(manager_addr, buf, buflen);
	} else if ((env = getenv(OKV_BOOTSTRAP_SOCKET_ENV)) != NULL && env[0] != '\0') {
		src = OKV_SOCKET_FROM_ENV;
		rc = copy_path(env, buf, buflen);
	} else {
		char p[OKVI_MAX_SOCKET_PATH + 2];
		struct stat st;
		int n = snprintf(p, sizeof(p), "%s/%s", runtime_dir, OKV_SOCKET_NAME);
		if (n > 0 && (size_t)n < sizeof(p) && stat(p, &st) == 0 && S_ISSOCK(st.st_mode)) {
			uint32_t owner = 0;
			src = OKV_SOCKET_FROM_RUNTIME_DIR;
			rc = copy_path(p, buf, buflen);
			if (rc >= 0 && okv_runtime_dir_owner(runtime_dir, &owner) == 1 && owner != UINT32_MAX)
				vouched = owner + 1;
		} else {
			src = OKV_SOCKET_FROM_DERIVED;
			env = getenv(OKV_LISTEN_ENV);
			rc = okv_socket_path(env != NULL && env[0] != '\0' ? env : OKV_DEFAULT_MANAGER_ADDR, buf, buflen);
		}
	}
	if (source != NULL)
		*source = src;
	if (vouched_uid_plus1 != NULL)
		*vouched_uid_plus1 = rc >= 0 ? vouched : 0;
	return rc;
}
