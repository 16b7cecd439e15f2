/*
 * test_socket_rule.c — the default socket rule of native/src/errors.c
 * (docs/operating.md "Socket paths"): okv_resolve_socket_path's order
 * (option, ORBITKV_BOOTSTRAP_SOCKET, <runtime_dir>/manager.sock when it is
 * a socket, the path derived from ORBITKV_LISTEN or 127.0.0.1:7470) and
 * okv_runtime_dir_owner's conditions, against a /run-like directory the
 * test makes in /tmp, and okv_connect naming the variable at fault. The
 * same cases are in gocore/lifecycle
 * (socketrule_test.go) and python/tests/test_socket_rule.py.
 *
 * The cases that chown to another uid need root; without it they print why
 * they are skipped, and the rest still runs (an unprivileged parent is then
 * itself the case of a parent not owned by root).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "orbitkv/client.h"
#include "../src/client_internal.h"
#include "check.h"

#define OTHER_UID 12345u

/* A /run-like parent (0755) with a runtime directory "orbitkv" (0755). */
struct rundir {
	char parent[64];
	char dir[80];
	char sock[96];
};

static int rundir_make(struct rundir *r)
{
	snprintf(r->parent, sizeof(r->parent), "/tmp/okvrule-XXXXXX");
	if (mkdtemp(r->parent) == NULL) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return -1;
	}
	snprintf(r->dir, sizeof(r->dir), "%s/orbitkv", r->parent);
	snprintf(r->sock, sizeof(r->sock), "%s/manager.sock", r->dir);
	int ok = chmod(r->parent, 0755) == 0 && mkdir(r->dir, 0755) == 0 && chmod(r->dir, 0755) == 0;
	CHECK(ok, "making %s: %s", r->dir, strerror(errno));
	return ok ? 0 : -1;
}

static void rundir_remove(struct rundir *r)
{
	unlink(r->sock);
	rmdir(r->dir);
	rmdir(r->parent);
}

/* Bind (and keep) a listening socket at path; the fd, or -1. */
static int bind_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 1) != 0) {
		CHECK(0, "bind %s: %s", path, strerror(errno));
		return -1;
	}
	return s;
}

static void test_order(void)
{
	struct rundir r, empty;
	char buf[128];
	int src = 0;
	uint32_t vouched = 7;

	if (rundir_make(&r) || rundir_make(&empty))
		return;
	int s = bind_at(r.sock);
	unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);
	unsetenv(OKV_LISTEN_ENV);

	setenv(OKV_BOOTSTRAP_SOCKET_ENV, "/e.sock", 1);
	int rc = okv_resolve_socket_path("/x/y.sock", NULL, r.dir, buf, sizeof(buf), &src, &vouched);
	CHECK(rc == 9 && strcmp(buf, "/x/y.sock") == 0 && src == OKV_SOCKET_FROM_OPTION && vouched == 0,
	      "an explicit path comes first: %d %s source %d vouched %u", rc, buf, src, vouched);
	rc = okv_resolve_socket_path(NULL, "10.0.0.1:7471", r.dir, buf, sizeof(buf), &src, &vouched);
	CHECK(rc > 0 && strcmp(buf, "/tmp/orbitkv-10.0.0.1-7471.sock") == 0 && src == OKV_SOCKET_FROM_OPTION,
	      "an explicit address comes before the environment: %d %s source %d", rc, buf, src);
	rc = okv_resolve_socket_path("", "", r.dir, buf, sizeof(buf), &src, &vouched);
	CHECK(rc == 7 && strcmp(buf, "/e.sock") == 0 && src == OKV_SOCKET_FROM_ENV && vouched == 0,
	      "ORBITKV_BOOTSTRAP_SOCKET comes before the runtime directory (empty options are unset): %d %s source %d",
	      rc, buf, src);
	unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);

	setenv(OKV_LISTEN_ENV, "h:1", 1);
	rc = okv_resolve_socket_path(NULL, NULL, r.dir, buf, sizeof(buf), &src, &vouched);
	CHECK(rc == (int)strlen(r.sock) && strcmp(buf, r.sock) == 0 && src == OKV_SOCKET_FROM_RUNTIME_DIR,
	      "the runtime directory's socket comes before the derived path: %d %s source %d", rc, buf, src);
	if (geteuid() == 0)
		CHECK(vouched == 1, "a root-owned 0755 parent vouches for the directory's owner, uid 0: vouched %u",
		      vouched);
	else
		CHECK(vouched == 0, "a parent owned by uid %u, not root, vouches for nobody: vouched %u",
		      (unsigned)geteuid(), vouched);

	rc = okv_resolve_socket_path(NULL, NULL, empty.dir, buf, sizeof(buf), &src, &vouched);
	CHECK(rc > 0 && strcmp(buf, "/tmp/orbitkv-h-1.sock") == 0 && src == OKV_SOCKET_FROM_DERIVED && vouched == 0,
	      "no socket in the runtime directory: the path of ORBITKV_LISTEN: %d %s source %d", rc, buf, src);
	unsetenv(OKV_LISTEN_ENV);
	rc = okv_resolve_socket_path(NULL, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc > 0 && strcmp(buf, "/tmp/orbitkv-127.0.0.1-7470.sock") == 0 && src == OKV_SOCKET_FROM_DERIVED,
	      "without ORBITKV_LISTEN the path of 127.0.0.1:7470: %d %s", rc, buf);

	FILE *f = fopen(empty.sock, "w");
	CHECK(f != NULL, "create %s", empty.sock);
	if (f)
		fclose(f);
	rc = okv_resolve_socket_path(NULL, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc > 0 && src == OKV_SOCKET_FROM_DERIVED, "a file named manager.sock is not a socket: source %d", src);

	setenv(OKV_LISTEN_ENV, "nope", 1);
	rc = okv_resolve_socket_path(NULL, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc == -EINVAL && src == OKV_SOCKET_FROM_DERIVED, "a bad ORBITKV_LISTEN: %d source %d", rc, src);
	unsetenv(OKV_LISTEN_ENV);
	rc = okv_resolve_socket_path(NULL, "a/b:1", empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc == -EINVAL && src == OKV_SOCKET_FROM_OPTION, "a bad explicit address: %d source %d", rc, src);

	char long_path[110];
	long_path[0] = '/';
	memset(long_path + 1, 's', 107);
	long_path[108] = '\0';
	setenv(OKV_BOOTSTRAP_SOCKET_ENV, long_path, 1);
	rc = okv_resolve_socket_path(NULL, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc == -ENAMETOOLONG && src == OKV_SOCKET_FROM_ENV, "an ORBITKV_BOOTSTRAP_SOCKET of 108 bytes: %d", rc);
	unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);
	rc = okv_resolve_socket_path(long_path, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc == -ENAMETOOLONG && src == OKV_SOCKET_FROM_OPTION, "an explicit path of 108 bytes: %d", rc);
	long_path[107] = '\0';
	rc = okv_resolve_socket_path(long_path, NULL, empty.dir, buf, sizeof(buf), &src, NULL);
	CHECK(rc == 107, "an explicit path of 107 bytes: %d", rc);
	rc = okv_resolve_socket_path("/x/y.sock", NULL, empty.dir, buf, 9, &src, NULL);
	CHECK(rc == -ENAMETOOLONG, "a buffer without room for the NUL: %d", rc);
	CHECK(okv_resolve_socket_path("/x", NULL, NULL, NULL, 0, NULL, NULL) == -EINVAL, "a NULL buffer");

	struct stat st;
	if (stat(OKV_RUNTIME_DIR "/" OKV_SOCKET_NAME, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		rc = okv_resolve_socket_path(NULL, NULL, NULL, buf, sizeof(buf), &src, NULL);
		CHECK(rc > 0 && src == OKV_SOCKET_FROM_DERIVED, "runtime_dir NULL is " OKV_RUNTIME_DIR
		      ", which holds no socket here: source %d", src);
	}

	if (s >= 0)
		close(s);
	unlink(empty.sock);
	rundir_remove(&r);
	rundir_remove(&empty);
}

static void test_runtime_dir_owner(void)
{
	static const struct {
		const char *name;
		uid_t parent_uid;
		mode_t parent_mode, dir_mode;
		int want;
	} cases[] = {
		{ "a root-owned 0755 parent vouches for a 0750 directory's owner", 0, 0755, 0750, 1 },
		{ "a 1755 parent (sticky, not writable) vouches too", 0, 01755, 0700, 1 },
		{ "a parent owned by another uid is refused", OTHER_UID, 0755, 0750, 0 },
		{ "a group-writable parent is refused", 0, 0775, 0750, 0 },
		{ "an other-writable sticky parent (like /tmp) is refused", 0, 01777, 0750, 0 },
		{ "a group-writable runtime directory is refused", 0, 0755, 0770, 0 },
		{ "an other-writable runtime directory is refused", 0, 0755, 0757, 0 },
	};
	struct rundir r;

	CHECK(okv_runtime_dir_owner(NULL, NULL) == -EINVAL, "a NULL runtime_dir");
	CHECK(okv_runtime_dir_owner("/nonexistent/orbitkv", NULL) == 0, "a missing runtime directory");
	CHECK(okv_runtime_dir_owner("orbitkv", NULL) == 0, "a relative runtime directory");
	if (geteuid() != 0) {
		printf("test_socket_rule: okv_runtime_dir_owner's ownership cases skipped: chown needs root (euid %u)\n",
		       (unsigned)geteuid());
		return;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (rundir_make(&r))
			return;
		uint32_t uid = 0;
		int ok = chown(r.dir, OTHER_UID, OTHER_UID) == 0 && chmod(r.dir, cases[i].dir_mode) == 0 &&
			 chown(r.parent, cases[i].parent_uid, 0) == 0 && chmod(r.parent, cases[i].parent_mode) == 0;
		CHECK(ok, "%s: chown/chmod: %s", cases[i].name, strerror(errno));
		int got = okv_runtime_dir_owner(r.dir, &uid);
		CHECK(got == cases[i].want && (got == 0 || uid == OTHER_UID), "%s: got %d uid %u, want %d uid %u",
		      cases[i].name, got, uid, cases[i].want, OTHER_UID);
		if (cases[i].want) {
			char slashed[96];
			snprintf(slashed, sizeof(slashed), "%s/", r.dir);
			CHECK(okv_runtime_dir_owner(slashed, NULL) == 1, "%s: a trailing slash is the same directory",
			      cases[i].name);
		}
		rundir_remove(&r);
	}
	if (rundir_make(&r))
		return;
	char link[96];
	snprintf(link, sizeof(link), "%s/link", r.parent);
	CHECK(symlink(r.dir, link) == 0, "symlink: %s", strerror(errno));
	CHECK(okv_runtime_dir_owner(link, NULL) == 0, "a symbolic link in the runtime directory's place is refused");
	char slashed[100];
	snprintf(slashed, sizeof(slashed), "%s/", link);
	CHECK(okv_runtime_dir_owner(slashed, NULL) == 0, "a symbolic link named with a trailing slash is refused");
	unlink(link);
	rundir_remove(&r);
}

/* okv_connect applies the rule and names the variable at fault. */
static void test_connect_names_the_variable(void)
{
	struct rundir empty;
	struct okv_connect_options o = { .timeout_ms = 500 };
	okv_client *c = NULL;
	char err[512] = "", long_path[110];

	if (rundir_make(&empty))
		return;
	okvi_runtime_dir = empty.dir;
	unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);
	setenv(OKV_LISTEN_ENV, "nope", 1);
	int rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "ORBITKV_LISTEN: manager address \"nope\" is not host:port") != NULL,
	      "a bad ORBITKV_LISTEN: %d %s", rc, err);
	unsetenv(OKV_LISTEN_ENV);

	long_path[0] = '/';
	memset(long_path + 1, 's', 107);
	long_path[108] = '\0';
	setenv(OKV_BOOTSTRAP_SOCKET_ENV, long_path, 1);
	rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == -ENAMETOOLONG && strstr(err, "ORBITKV_BOOTSTRAP_SOCKET is 108 bytes, the limit is 107") != NULL,
	      "a long ORBITKV_BOOTSTRAP_SOCKET: %d %s", rc, err);
	setenv(OKV_BOOTSTRAP_SOCKET_ENV, "/nonexistent/okv.sock", 1);
	rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "connect /nonexistent/okv.sock") != NULL,
	      "ORBITKV_BOOTSTRAP_SOCKET is the path dialled: %d %s", rc, err);
	unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);
	CHECK(c == NULL, "no client came back");
	okvi_runtime_dir = OKV_RUNTIME_DIR;
	rundir_remove(&empty);
}

int main(void)
{
	test_order();
	test_connect_names_the_variable();
	test_runtime_dir_owner();
	if (failures) {
		fprintf(stderr, "test_socket_rule: %d failures of %d checks\n", failures, checks);
		return 1;
	}
	printf("test_socket_rule: ok (%d checks)\n", checks);
	return 0;
}
