/*
 * test_peer_uid.c — the client's half of the peer rule (docs/design.md §5.1):
 * okv_connect refuses a socket served by a process of
 * another uid, before it sends the hello or any fd, except the owner of the
 * runtime directory of the default socket when root vouches for it.
 *
 * Needs root: the fake Manager is a child that switches to a throwaway uid
 * (one with no passwd entry, found by scanning from 61000) and listens on a
 * socket in a sticky, world-writable directory, as another user could in
 * /tmp. It records every byte and fd it receives. Without root the test
 * prints why it is skipped and passes (ctest shows the reason in its log).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orbitkv/client.h"
#include "../src/client_internal.h"
#include "check.h"

/* A uid nobody on this machine has. */
static uid_t throwaway_uid(void)
{
	for (uid_t u = 61000; u < 65000; u++)
		if (getpwuid(u) == NULL)
			return u;
	return 0;
}

/*
 * The fake Manager: as uid `uid`, listen at path, accept one connection,
 * read what arrives for up to 2 s, and report "<bytes> <fds>" on report_fd.
 */
static void fake_manager(uid_t uid, const char *path, int ready_fd, int report_fd)
{
	if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0)
		_exit(10);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		_exit(15);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0777) != 0 || listen(s, 4) != 0)
		_exit(11);
	if (write(ready_fd, "r", 1) != 1)
		_exit(12);
	int c = accept(s, NULL, NULL);
	if (c < 0)
		_exit(13);
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	long bytes = 0, fds = 0;
	for (;;) {
		char buf[512];
		union {
			char b[CMSG_SPACE(sizeof(int) * 16)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
				    .msg_controllen = sizeof(cbuf.b) };
		ssize_t n = recvmsg(c, &m, 0);
		if (n <= 0)
			break;
		bytes += n;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
			if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
				fds += (long)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	}
	char rep[64];
	int len = snprintf(rep, sizeof(rep), "%ld %ld", bytes, fds);
	if (write(report_fd, rep, (size_t)len) != len)
		_exit(14);
	_exit(0);
}

/* A fake Manager of a throwaway uid in a sticky 1777 directory of /tmp. */
struct fake {
	char dir[64];
	char path[128];
	int report; /* read end: "<bytes> <fds>" once it is done */
	pid_t pid;
	uid_t uid;  /* the fake Manager's */
};

/* Start a fake Manager; 0 when it listens, else -1 (the check says why). */
static int fake_start(struct fake *f, const char *name)
{
	uid_t other = throwaway_uid();
	f->uid = other;
	CHECK(other != 0, "no free uid in 61000..64999");
	snprintf(f->dir, sizeof(f->dir), "/tmp/okv-%s-XXXXXX", name);
	CHECK(other != 0 && mkdtemp(f->dir) != NULL, "mkdtemp: %s", strerror(errno));
	if (other == 0)
		return -1;
	chmod(f->dir, 01777); /* like /tmp: anyone may create a name in it */
	snprintf(f->path, sizeof(f->path), "%s/orbitkv-127.0.0.1-7470.sock", f->dir);
	int ready[2], report[2];
	CHECK(pipe(ready) == 0 && pipe(report) == 0, "pipe");
	f->pid = fork();
	if (f->pid == 0) {
		close(ready[0]);
		close(report[0]);
		fake_manager(other, f->path, ready[1], report[1]);
	}
	close(ready[1]);
	close(report[1]);
	f->report = report[0];
	char r;
	int ok = read(ready[0], &r, 1) == 1;
	close(ready[0]);
	CHECK(ok, "the fake Manager did not start (child exit codes 10..15 say where)");
	return ok ? 0 : -1;
}

/* Check the fake Manager received nothing at all, then clean up. */
static void fake_finish(struct fake *f, const char *who)
{
	char rep[64] = "";
	ssize_t n = read(f->report, rep, sizeof(rep) - 1);
	long bytes = -1, fds = -1;
	if (n > 0)
		sscanf(rep, "%ld %ld", &bytes, &fds);
	CHECK(bytes == 0 && fds == 0, "the foreign process received %ld bytes and %ld fds from %s, want none", bytes,
	      fds, who);
	int st = 0;
	waitpid(f->pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake Manager exit status %d", st);
	close(f->report);
	unlink(f->path);
	rmdir(f->dir);
}

static void test_foreign_manager_is_refused(void)
{
	struct fake f;
	if (fake_start(&f, "peer-uid") != 0)
		return;
	struct okv_connect_options o = { .socket_path = f.path, .role = OKV_ROLE_WORKER, .instance_id = "victim",
					 .timeout_ms = 3000 };
	okv_client *c = NULL;
	char err[512] = "";
	int rc = okv_connect_err(&o, &c, err, sizeof(err));
	CHECK(rc == OKV_EPEER, "connect to a socket of another uid returned %d (%s), want OKV_EPEER", rc, err);
	CHECK(c == NULL, "a client handle came back");
	char want[64];
	snprintf(want, sizeof(want), "runs as uid %u", (unsigned)f.uid);
	CHECK(strstr(err, want) != NULL && strstr(err, f.path) != NULL && strstr(err, "--bootstrap-socket") != NULL,
	      "the error names the path, the foreign uid and the fix: %s", err);
	CHECK(strstr(okv_strerror(OKV_EPEER), "another user") != NULL, "okv_strerror(OKV_EPEER) = %s",
	      okv_strerror(OKV_EPEER));
	fake_finish(&f, "the client");
}

/* A client in a user namespace without a uid map sees its own euid and
 * every outside uid as the overflow uid: the equal numbers must not pass
 * the peer rule. The client runs in a child that unshare(2)s a new user
 * namespace and reports okv_connect's code as its exit status. */
static void test_unmapped_user_namespace_is_refused(void)
{
	struct fake f;
	if (fake_start(&f, "peer-userns") != 0)
		return;
	pid_t cl = fork();
	if (cl == 0) {
		if (unshare(CLONE_NEWUSER) != 0)
			_exit(100); /* no user namespaces here */
		struct okv_connect_options o = { .socket_path = f.path, .role = OKV_ROLE_WORKER, .timeout_ms = 3000 };
		okv_client *c = NULL;
		char err[512] = "";
		int rc = okv_connect_err(&o, &c, err, sizeof(err));
		_exit(rc == OKV_EPEER && strstr(err, "overflow uid") != NULL ? 0 : 1);
	}
	int st = 0;
	waitpid(cl, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 100) {
		printf("test_peer_uid: user namespace case skipped: unshare(CLONE_NEWUSER) failed\n");
		kill(f.pid, SIGKILL);
		waitpid(f.pid, &st, 0);
		close(f.report);
		unlink(f.path);
		rmdir(f.dir);
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a client in an unmapped user namespace was not refused with OKV_EPEER (status %d)", st);
	fake_finish(&f, "the namespaced client");
}

/*
 * The default socket in a runtime directory (okvi_runtime_dir, pointed at
 * a /run-like directory of the test): a Manager of another uid that owns
 * the directory is trusted when root vouches for it (the parent is root's
 * and 0755, the directory 0755), so the hello reaches it; the same socket
 * named explicitly, or by ORBITKV_BOOTSTRAP_SOCKET, is refused; and with
 * the parent owned by another uid the directory's owner is refused too.
 */
static void test_runtime_dir_owner_is_trusted(void)
{
	uid_t other = throwaway_uid();
	CHECK(other != 0, "no free uid in 61000..64999");
	if (other == 0)
		return;
	for (int round = 0; round < 4; round++) {
		/* round 0: the default, vouched; 1: the same path given explicitly;
		 * 2: given by ORBITKV_BOOTSTRAP_SOCKET; 3: the parent is not root's. */
		struct fake f;
		char parent[64] = "/tmp/okv-rundir-XXXXXX";
		CHECK(mkdtemp(parent) != NULL, "mkdtemp: %s", strerror(errno));
		snprintf(f.dir, sizeof(f.dir), "%s/orbitkv", parent);
		snprintf(f.path, sizeof(f.path), "%s/manager.sock", f.dir);
		f.uid = other;
		int ok = chmod(parent, 0755) == 0 && mkdir(f.dir, 0755) == 0 && chown(f.dir, other, other) == 0 &&
			 (round != 3 || chown(parent, other, other) == 0);
		CHECK(ok, "making %s: %s", f.dir, strerror(errno));
		int ready[2], report[2];
		CHECK(pipe(ready) == 0 && pipe(report) == 0, "pipe");
		f.pid = fork();
		if (f.pid == 0) {
			close(ready[0]);
			close(report[0]);
			fake_manager(other, f.path, ready[1], report[1]);
		}
		close(ready[1]);
		close(report[1]);
		f.report = report[0];
		char r;
		CHECK(read(ready[0], &r, 1) == 1, "the fake Manager did not start");
		close(ready[0]);

		okvi_runtime_dir = f.dir;
		if (round == 2)
			setenv(OKV_BOOTSTRAP_SOCKET_ENV, f.path, 1);
		struct okv_connect_options o = { .socket_path = round == 1 ? f.path : NULL, .role = OKV_ROLE_WORKER,
						 .timeout_ms = 300 };
		okv_client *c = NULL;
		char err[768] = "";
		int rc = okv_connect_err(&o, &c, err, sizeof(err));
		unsetenv(OKV_BOOTSTRAP_SOCKET_ENV);
		okvi_runtime_dir = OKV_RUNTIME_DIR;
		CHECK(c == NULL, "a client handle came back from a fake Manager");
		char rep[64] = "";
		ssize_t n = read(f.report, rep, sizeof(rep) - 1);
		long bytes = -1, fds = -1;
		if (n > 0)
			sscanf(rep, "%ld %ld", &bytes, &fds);
		if (round == 0) {
			CHECK(rc != OKV_EPEER && bytes == (long)sizeof(struct okv_hello),
			      "the vouched-for owner of the runtime directory got %ld bytes (want the %zu-byte hello); "
			      "connect returned %d (%s)",
			      bytes, sizeof(struct okv_hello), rc, err);
		} else {
			CHECK(rc == OKV_EPEER && bytes == 0 && fds == 0,
			      "round %d: connect returned %d (%s), the foreign process got %ld bytes and %ld fds; want "
			      "OKV_EPEER and nothing sent",
			      round, rc, err, bytes, fds);
		}
		if (round == 3)
			CHECK(strstr(err, "not vouched for") != NULL && strstr(err, "ORBITKV_MANAGER_UID") != NULL,
			      "the refusal says the directory is not vouched for and names the override: %s", err);
		int st = 0;
		waitpid(f.pid, &st, 0);
		close(f.report);
		unlink(f.path);
		rmdir(f.dir);
		rmdir(parent);
	}
}

int main(void)
{
	if (geteuid() != 0) {
		printf("test_peer_uid: skipped: needs root to run a fake Manager as another uid\n");
		return 0;
	}
	test_foreign_manager_is_refused();
	test_unmapped_user_namespace_is_refused();
	test_runtime_dir_owner_is_trusted();
	if (failures) {
		fprintf(stderr, "test_peer_uid: %d failures of %d checks\n", failures, checks);
		return 1;
	}
	printf("test_peer_uid: ok (%d checks)\n", checks);
	return 0;
}
