/*
 * test_iox2.c — the iceoryx2 layer (orbitkv/iox2.h, native/iox2): exclusive
 * create, open by name, a round trip in one process and one across a fork
 * that sleeps on the event services, the mode of every shared-memory object
 * it creates, the refusals of bad arguments, and the cleanup of what a
 * SIGKILLed process left under /dev/shm, the sweep of runtimes whose process
 * died, the WaitSet, and the Manager's poll loop in iceoryx2 mode
 * (server.h). Built only with the Rust library
 * (OKV_HAVE_IOX2); prints each failed check, exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "orbitkv/iox2.h"
#include "check.h"
#include "server.h"

#define MAX_ENTRIES 4096

/* The runtime every node of this test opens (okv_iox2_runtime_new in main;
 * the re-executed children take it from OKV_TEST_IOX2_RUNTIME). */
static char rt[OKV_IOX2_RUNTIME_MAX + 1];

/* The names under /dev/shm, sorted; returns the count. */
static int shm_list(char names[][256], int max)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL && n < max) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(names[n++], 256, "%s", e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
	return n;
}

static int contains(char names[][256], int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return 1;
	return 0;
}

static char before[MAX_ENTRIES][256], during[MAX_ENTRIES][256], after[MAX_ENTRIES][256];

static void unique_name(char *buf, size_t len, const char *what)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, len, "okv-test/%s/%d/%ld", what, (int)getpid(), (long)ts.tv_nsec);
}

static void fill(struct okv_msg *m, uint64_t v)
{
	memset(m, 0, sizeof(*m));
	m->magic = OKV_MSG_MAGIC;
	m->generation = v;
	m->arg0 = v * 3;
}

/* Server and client in this process: exclusive create, open, one round
 * trip, and the mode of every new /dev/shm entry. */
static void test_one_process(void)
{
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL, *dup = NULL;
	struct okv_iox2_client *cli = NULL, *none = NULL;
	struct okv_msg req, got, rsp;
	char name[128];
	int nb = shm_list(before, MAX_ENTRIES);

	unique_name(name, sizeof(name), "one");
	CHECK(okv_iox2_node_new(rt, "okv-test", &node) == 0, "node: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_create(node, name, 4, &srv) == 0, "create: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_create(node, name, 4, &dup) == OKV_IOX2_EEXIST,
	      "a second create of %s must be refused as existing", name);
	CHECK(okv_iox2_client_open(node, "okv-test/no-such-service", &none) == OKV_IOX2_ENOENT,
	      "opening a missing service: %s", okv_iox2_last_error());
	CHECK(okv_iox2_client_open(node, name, &cli) == 0, "open: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_receive(srv, &got) == 0, "nothing to receive before a send");
	CHECK(okv_iox2_client_receive(cli, &got) == OKV_IOX2_EINVAL, "receive with no request in flight");

	fill(&req, 41);
	CHECK(okv_iox2_client_send(cli, &req) == 0, "send: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_wait(srv, 1000000000ull) == 1, "the send notified the server");
	CHECK(okv_iox2_server_receive(srv, &got) == 1, "receive: %s", okv_iox2_last_error());
	CHECK(memcmp(&got, &req, sizeof(req)) == 0, "request bytes arrive unchanged");
	CHECK(okv_iox2_client_receive(cli, &rsp) == 0, "no response before the answer");
	fill(&rsp, 42);
	CHECK(okv_iox2_server_respond(srv, &rsp) == 0, "respond: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_respond(srv, &rsp) == OKV_IOX2_EINVAL, "a second answer is refused");
	CHECK(okv_iox2_client_wait(cli, 1000000000ull) == 1, "the answer notified the client");
	CHECK(okv_iox2_client_receive(cli, &got) == 1, "client receive: %s", okv_iox2_last_error());
	CHECK(memcmp(&got, &rsp, sizeof(rsp)) == 0, "response bytes arrive unchanged");

	int nd = shm_list(during, MAX_ENTRIES);
	int fresh = 0;
	for (int i = 0; i < nd; i++) {
		struct stat st;

		if (contains(before, nb, during[i]))
			continue;
		fresh++;
		if (fstatat(AT_FDCWD, "/dev/shm", &st, 0) != 0 || !S_ISDIR(st.st_mode))
			continue;
		int dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int rc = dfd < 0 ? -1 : fstatat(dfd, during[i], &st, 0);
		if (dfd >= 0)
			close(dfd);
		if (rc != 0)
			continue;
		CHECK((st.st_mode & 077) == 0 && st.st_uid == geteuid(),
		      "/dev/shm/%s has mode %o uid %u: the owner's only", during[i],
		      st.st_mode & 0777, st.st_uid);
	}
	CHECK(fresh > 0, "the service created shared-memory objects under /dev/shm");

	okv_iox2_client_free(cli);
	CHECK(okv_iox2_server_respond(srv, &rsp) == OKV_IOX2_EINVAL, "nothing to answer after free");
	okv_iox2_server_free(srv);
	okv_iox2_node_free(node);
	int na = shm_list(after, MAX_ENTRIES);
	for (int i = 0; i < na; i++)
		CHECK(contains(before, nb, after[i]), "/dev/shm/%s left behind after every free", after[i]);
}

/* A server in a child process that sleeps on its listener between
 * requests, a client here that sleeps on its own: 200 round trips. */
static void test_across_processes(void)
{
	char name[128];
	int ready[2];
	char c;

	unique_name(name, sizeof(name), "fork");
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		char fd[16];

		close(ready[0]);
		snprintf(fd, sizeof(fd), "%d", ready[1]);
		execl("/proc/self/exe", "test_iox2", "echo-200", name, fd, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1, "the child created its server");
	close(ready[0]);

	struct okv_iox2_node *node = NULL;
	struct okv_iox2_client *cli = NULL;
	CHECK(okv_iox2_node_new(rt, NULL, &node) == 0, "node: %s", okv_iox2_last_error());
	CHECK(okv_iox2_client_open(node, name, &cli) == 0, "open: %s", okv_iox2_last_error());
	int ok = 0;
	for (uint64_t i = 0; cli != NULL && i < 200; i++) {
		struct okv_msg req, got;
		int rc;

		fill(&req, 2 * i + 1);
		if (okv_iox2_client_send(cli, &req) != 0)
			break;
		while ((rc = okv_iox2_client_receive(cli, &got)) == 0)
			if (okv_iox2_client_wait(cli, 5000000000ull) == 0)
				break;
		if (rc == 1 && got.generation == req.generation && got.arg0 == req.arg0 + 1)
			ok++;
	}
	CHECK(ok == 200, "%d of 200 round trips through a child's server echoed", ok);
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child server exited with 0 (status %#x)", status);
	/* The server is gone: a send or a receive says so. */
	struct okv_msg req, got;
	fill(&req, 1001);
	int rc = okv_iox2_client_send(cli, &req);
	if (rc == 0)
		rc = okv_iox2_client_receive(cli, &got);
	CHECK(rc == OKV_IOX2_EDISCONNECTED, "after the server left: %d (%s)", rc, okv_iox2_last_error());
	okv_iox2_client_free(cli);
	okv_iox2_node_free(node);
}

/* A child creates a service and dies by SIGKILL: its objects stay under
 * /dev/shm until a live node cleans up dead nodes, and then are gone. */
static void test_sigkill_leftovers_are_cleaned(void)
{
	char name[128];
	int ready[2];
	char c;
	int nb = shm_list(before, MAX_ENTRIES);

	unique_name(name, sizeof(name), "kill");
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		/* A fresh program, not only a fork: iceoryx2 caches its process id,
		 * and a forked child's node would carry this process's. */
		char fd[16];

		close(ready[0]);
		snprintf(fd, sizeof(fd), "%d", ready[1]);
		execl("/proc/self/exe", "test_iox2", "serve-and-wait", name, fd, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1, "the child created its server");
	close(ready[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	int nd = shm_list(during, MAX_ENTRIES), left = 0;
	for (int i = 0; i < nd; i++)
		left += !contains(before, nb, during[i]);
	CHECK(left > 0, "a SIGKILLed server leaves objects under /dev/shm (%d)", left);

	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL;
	CHECK(okv_iox2_node_new(rt, NULL, &node) == 0, "node: %s", okv_iox2_last_error());
	int cleaned = okv_iox2_cleanup_dead(node);
	/* Creating the node already cleaned the dead one (iceoryx2 cleans dead
	 * nodes when a node is created); the explicit call finds 0 or more. */
	CHECK(cleaned >= 0, "cleanup_dead: %d: %s", cleaned, okv_iox2_last_error());
	int na = shm_list(after, MAX_ENTRIES);
	for (int i = 0; i < na; i++)
		CHECK(contains(before, nb, after[i]), "/dev/shm/%s of the dead node left after cleanup", after[i]);
	CHECK(okv_iox2_server_create(node, name, 1, &srv) == 0,
	      "the dead server's name can be created again: %s", okv_iox2_last_error());
	okv_iox2_server_free(srv);
	okv_iox2_node_free(node);
}

/* The WaitSet: a client's notify and the control fd wake it, nothing else
 * does, and a consumed notification does not wake it again. */
static void test_waitset(void)
{
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL;
	struct okv_iox2_client *cli = NULL;
	struct okv_iox2_waitset *ws = NULL;
	struct okv_msg m, got;
	char name[128];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t v = 1;

	unique_name(name, sizeof(name), "waitset");
	CHECK(efd >= 0, "eventfd");
	CHECK(okv_iox2_node_new(rt, NULL, &node) == 0, "node: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_create(node, name, 1, &srv) == 0, "create: %s", okv_iox2_last_error());
	CHECK(okv_iox2_client_open(node, name, &cli) == 0, "open: %s", okv_iox2_last_error());
	CHECK(okv_iox2_waitset_new(efd, &ws) == 0, "waitset: %s", okv_iox2_last_error());
	CHECK(okv_iox2_waitset_attach(ws, srv, 7) == 0, "attach: %s", okv_iox2_last_error());
	CHECK(okv_iox2_waitset_attach(ws, srv, 7) == OKV_IOX2_EEXIST, "a key attached twice is refused");
	CHECK(okv_iox2_waitset_wait(ws, 20000000ull) == 0, "nothing pending: the wait times out");
	fill(&m, 5);
	CHECK(okv_iox2_client_send(cli, &m) == 0, "send: %s", okv_iox2_last_error());
	CHECK(okv_iox2_waitset_wait(ws, 1000000000ull) >= 1, "the client's notify wakes the WaitSet");
	CHECK(okv_iox2_server_receive(srv, &got) == 1 && got.generation == 5, "the request is there after the wake");
	CHECK(okv_iox2_waitset_wait(ws, 20000000ull) == 0, "a consumed notification does not wake it again");
	CHECK(write(efd, &v, sizeof(v)) == sizeof(v), "eventfd write");
	CHECK(okv_iox2_waitset_wait(ws, 1000000000ull) >= 1, "the control fd wakes the WaitSet");
	CHECK(read(efd, &v, sizeof(v)) == sizeof(v), "eventfd drained");
	okv_iox2_waitset_detach(ws, 7);
	okv_iox2_waitset_detach(ws, 7); /* absent: a no-op */
	CHECK(okv_iox2_client_send(cli, &m) == 0, "send: %s", okv_iox2_last_error());
	CHECK(okv_iox2_waitset_wait(ws, 20000000ull) == 0, "a detached server's client no longer wakes it");
	okv_iox2_waitset_free(ws);
	okv_iox2_waitset_free(NULL);
	okv_iox2_client_free(cli);
	okv_iox2_server_free(srv);
	okv_iox2_node_free(node);
	close(efd);
}

/* The Manager's poll loop in iceoryx2 mode (server.h): a request sent
 * through a slot's service comes out of a step as that slot's event, the
 * reply goes back through the service, a request line or doorbell ring of
 * that slot is ignored, a step that would park returns 0 with a park fd the
 * next notify makes readable, and detach frees the service. */
static void test_poll_loop(void)
{
	struct okv_doorbell *db = mmap(NULL, sizeof(*db), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct okv_slot *slot = mmap(NULL, sizeof(*slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct okvi_event ev[8];
	struct okvi_reply rep;
	char err[256], name[128];
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_client *cli = NULL;
	struct okv_msg m, got;
	int nb = shm_list(before, MAX_ENTRIES);

	CHECK(db != MAP_FAILED && slot != MAP_FAILED, "mmap");
	unique_name(name, sizeof(name), "loop");
	struct okvi_server *s = okvi_server_new(db, 8, OKVI_POLL_PARK, 0);
	CHECK(s != NULL && okvi_server_use_iox2(s, err, sizeof(err)) == 0, "iceoryx2 mode: %s", err);
	okvi_server_set_caller_parks(s, 1);
	CHECK(okvi_server_attach_iox2(s, 3, slot, 0, name, err, sizeof(err)) == 0, "attach: %s", err);
	CHECK(okvi_server_attach_iox2(s, 4, slot, 0, name, err, sizeof(err)) == -EEXIST, "a second service of one name: %s", err);
	CHECK(okvi_server_park_fd(s) >= 0 && okvi_server_wake_fd(s) >= 0, "park and wake fds");
	CHECK(okvi_server_step(s, NULL, 0, ev, 8) == 0, "nothing pending: the step returns 0 for the caller to park");
	struct pollfd pf = { .fd = okvi_server_park_fd(s), .events = POLLIN };
	CHECK(poll(&pf, 1, 0) == 0, "the park fd is quiet with nothing sent");

	CHECK(okv_iox2_node_new(okvi_server_iox2_runtime(s), NULL, &node) == 0 && okv_iox2_client_open(node, name, &cli) == 0,
	      "client: %s", okv_iox2_last_error());
	/* A request line and a doorbell ring of an iceoryx2 slot are strays. */
	__atomic_store_n(&slot->request.generation, 99, __ATOMIC_RELEASE);
	fill(&m, 7);
	CHECK(okv_iox2_client_send(cli, &m) == 0, "send: %s", okv_iox2_last_error());
	CHECK(poll(&pf, 1, 1000) == 1, "the notify makes the park fd readable");
	int n = okvi_server_step(s, NULL, 0, ev, 8);
	CHECK(n == 1 && ev[0].kind == OKVI_EV_REQUEST && ev[0].slot == 3 && ev[0].msg.generation == 7,
	      "one request event of slot 3 (n %d, slot %u, gen %llu)", n, n > 0 ? ev[0].slot : 0,
	      n > 0 ? (unsigned long long)ev[0].msg.generation : 0ull);
	memset(&rep, 0, sizeof(rep));
	rep.slot = 3;
	rep.msg = ev[0].msg;
	rep.msg.generation = 8;
	CHECK(okvi_server_post(s, &rep, 1) == 0, "post");
	int r;
	for (int i = 0; (r = okv_iox2_client_receive(cli, &got)) == 0 && i < 1000; i++)
		okv_iox2_client_wait(cli, 1000000ull);
	CHECK(r == 1 && got.generation == 8, "the reply came back through the service (rc %d)", r);
	CHECK(okvi_server_step(s, NULL, 0, ev, 8) == 0, "the stray request line made no event");
	/* The control ring wakes a parked caller through the wake fd. */
	okvi_server_ring(s);
	CHECK(poll(&pf, 1, 1000) == 1, "a control ring makes the park fd readable");
	n = okvi_server_step(s, NULL, 0, ev, 8);
	CHECK(n == 1 && ev[0].kind == OKVI_EV_CONTROL, "the control event (n %d)", n);
	okv_iox2_client_free(cli);
	okv_iox2_node_free(node);
	okvi_server_detach(s, 3);
	okvi_server_free(s);
	int na = shm_list(after, MAX_ENTRIES);
	for (int i = 0; i < na; i++)
		CHECK(contains(before, nb, after[i]), "/dev/shm/%s left after detach and free", after[i]);
	munmap(db, sizeof(*db));
	munmap(slot, sizeof(*slot));
}

static void test_bad_arguments(void)
{
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL;
	struct okv_iox2_client *cli = NULL;
	char long_name[OKV_IOX2_NAME_MAX + 2];

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK(okv_iox2_node_new(rt, NULL, NULL) == OKV_IOX2_EINVAL, "NULL out");
	CHECK(okv_iox2_node_new(rt, NULL, &node) == 0, "node: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_create(node, NULL, 1, &srv) == OKV_IOX2_EINVAL, "NULL name");
	CHECK(okv_iox2_server_create(node, long_name, 1, &srv) == OKV_IOX2_EINVAL, "a name over the limit");
	CHECK(strstr(okv_iox2_last_error(), "240") != NULL, "the error names the limit: %s", okv_iox2_last_error());
	CHECK(okv_iox2_server_create(node, "okv-test/x", 0, &srv) == OKV_IOX2_EINVAL, "0 clients");
	CHECK(okv_iox2_server_create(node, "okv-test/x", 65, &srv) == OKV_IOX2_EINVAL, "65 clients");
	CHECK(okv_iox2_client_open(NULL, "okv-test/x", &cli) == OKV_IOX2_EINVAL, "NULL node");
	CHECK(strncmp(okv_iox2_strerror(OKV_IOX2_ENOENT), "OKV_IOX2_ENOENT", 15) == 0, "strerror names the code");
	CHECK(strcmp(okv_iox2_version(), "0.10.0") == 0, "built on iceoryx2 %s", okv_iox2_version());
	/* This layer's configuration: the runtime's own root and prefix, every
	 * object the owner's only, the global node counter included. */
	char root[OKV_IOX2_RUNTIME_MAX + 1], prefix[40];
	struct stat st;
	const char *slash = strchr(rt, '/');
	CHECK(slash != NULL && slash - rt < (long)sizeof(prefix), "runtime %s is PREFIX/ROOT", rt);
	snprintf(prefix, sizeof(prefix), "%.*s", slash ? (int)(slash - rt) : 0, rt);
	snprintf(root, sizeof(root), "%s", slash ? slash : "");
	CHECK(lstat(root, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0,
	      "%s is this user's private directory (mode %o)", root, st.st_mode & 0777);
	CHECK(strncmp(prefix, "okv", 3) == 0 && strlen(prefix) == 3 + 16 + 1, "prefix %s: okv, 16 hex digits, _",
	      prefix);
	int n = shm_list(during, MAX_ENTRIES), counters = 0;
	int dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < n && dfd >= 0; i++) {
		if (strncmp(during[i], prefix, strlen(prefix)) != 0)
			continue;
		counters += strstr(during[i], ".global_mgmt") != NULL;
		CHECK(fstatat(dfd, during[i], &st, 0) != 0 || ((st.st_mode & 077) == 0 && st.st_uid == geteuid()),
		      "/dev/shm/%s has mode %o: the owner's only", during[i], st.st_mode & 0777);
	}
	if (dfd >= 0)
		close(dfd);
	CHECK(counters == 1, "one global node counter of this runtime's prefix %s, found %d", prefix, counters);
	/* A root others may enter is refused, naming it, its owner and mode. */
	struct okv_iox2_node *refused = NULL;
	CHECK(chmod(root, 0777) == 0, "chmod %s", root);
	CHECK(okv_iox2_node_new(rt, NULL, &refused) == OKV_IOX2_EPERM && strstr(okv_iox2_last_error(), root) != NULL &&
		      strstr(okv_iox2_last_error(), "with mode 777") != NULL,
	      "a node on a root writable by others: %s", okv_iox2_last_error());
	CHECK(chmod(root, 0700) == 0, "chmod %s back", root);
	CHECK(okv_iox2_node_new(NULL, NULL, &refused) == OKV_IOX2_EINVAL, "NULL runtime");
	CHECK(okv_iox2_node_new("okv_no_root", NULL, &refused) == OKV_IOX2_EINVAL, "a runtime without a root");
	CHECK(okv_iox2_node_new("okv-x/tmp", NULL, &refused) == OKV_IOX2_EINVAL, "a prefix with a dash");
	okv_iox2_node_free(refused);
	okv_iox2_node_free(node);
	okv_iox2_node_free(NULL);
	okv_iox2_server_free(NULL);
	okv_iox2_client_free(NULL);
}

/* Paths another uid could make first never keep the transport from
 * starting: the runtime's root gets a random name (the old predictable
 * /tmp/orbitkv-iox2-<uid>, squatted here when absent, is not used), an
 * $XDG_RUNTIME_DIR others may enter is passed over, and a runtime forced
 * onto a root that is a symbolic link, another uid's or open to others is
 * refused naming the path, its owner and its mode. */
static void test_squatted_paths(void)
{
	char old[64], xdg[] = "/tmp/okv-test-xdg-XXXXXX", got[OKV_IOX2_RUNTIME_MAX + 1];
	snprintf(old, sizeof(old), "/tmp/orbitkv-iox2-%u", (unsigned)geteuid());
	int squatted = symlink("/nonexistent", old) == 0;
	CHECK(mkdtemp(xdg) != NULL && chmod(xdg, 0777) == 0, "mkdtemp %s", xdg);
	const char *saved = getenv("XDG_RUNTIME_DIR");
	char keep[256];
	snprintf(keep, sizeof(keep), "%s", saved ? saved : "");
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	CHECK(okv_iox2_runtime_new(got, sizeof(got)) == 0, "a runtime despite squatted paths: %s", okv_iox2_last_error());
	const char *root = strchr(got, '/');
	CHECK(root && strncmp(root, "/tmp/orbitkv-iox2-", 18) == 0 && strcmp(root, old) != 0 &&
		      strncmp(root, xdg, strlen(xdg)) != 0,
	      "root %s: under /tmp with a random name, not %s nor under the open %s", root ? root : "(none)", old, xdg);
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL;
	CHECK(okv_iox2_node_new(got, NULL, &node) == 0 && okv_iox2_server_create(node, "okv-test/squat", 1, &srv) == 0,
	      "a node and a service in it: %s", okv_iox2_last_error());
	okv_iox2_server_free(srv);
	okv_iox2_node_free(node);
	CHECK(okv_iox2_runtime_remove(got) == 0, "remove: %s", okv_iox2_last_error());
	if (saved)
		setenv("XDG_RUNTIME_DIR", keep, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
	if (squatted)
		unlink(old);

	/* A forced root that is a symbolic link, or open to others. */
	char forced[OKV_IOX2_RUNTIME_MAX + 1], link[64];
	snprintf(link, sizeof(link), "%s/root", xdg);
	CHECK(chmod(xdg, 0700) == 0 && symlink(xdg, link) == 0, "symlink %s", link);
	snprintf(forced, sizeof(forced), "okv0123456789abcdef_%s", link);
	CHECK(okv_iox2_node_new(forced, NULL, &node) == OKV_IOX2_EPERM && strstr(okv_iox2_last_error(), link) &&
		      strstr(okv_iox2_last_error(), "symbolic link of uid"),
	      "a root that is a symbolic link: %s", okv_iox2_last_error());
	unlink(link);
	snprintf(forced, sizeof(forced), "okv0123456789abcdef_%s", xdg);
	if (geteuid() == 0) {
		CHECK(chown(xdg, 65534, 65534) == 0, "chown %s", xdg);
		char want[64];
		snprintf(want, sizeof(want), "of uid 65534 with mode 700");
		CHECK(okv_iox2_node_new(forced, NULL, &node) == OKV_IOX2_EPERM && strstr(okv_iox2_last_error(), xdg) &&
			      strstr(okv_iox2_last_error(), want),
		      "a root of another uid: %s", okv_iox2_last_error());
		CHECK(chown(xdg, 0, 0) == 0, "chown %s back", xdg);
	}
	CHECK(chmod(xdg, 0755) == 0, "chmod %s", xdg);
	CHECK(okv_iox2_node_new(forced, NULL, &node) == OKV_IOX2_EPERM && strstr(okv_iox2_last_error(), xdg) &&
		      strstr(okv_iox2_last_error(), "with mode 755"),
	      "a root others may enter: %s", okv_iox2_last_error());
	rmdir(xdg);
}

/* The owner record of the live runtime rt, for its "boot" and "pidns"
 * lines. */
static char live_boot[256], live_pidns[256];

static void read_live_record(void)
{
	char path[OKV_IOX2_RUNTIME_MAX + 16], line[256];
	snprintf(path, sizeof(path), "%s/owner", strchr(rt, '/') ? strchr(rt, '/') : "");
	FILE *f = fopen(path, "r");
	CHECK(f != NULL, "the live runtime's owner record %s", path);
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "boot ", 5) == 0)
			snprintf(live_boot, sizeof(live_boot), "%s", line + 5);
		else if (strncmp(line, "pidns ", 6) == 0)
			snprintf(live_pidns, sizeof(live_pidns), "%s", line + 6);
	}
	if (f)
		fclose(f);
	CHECK(live_pidns[0] != '\0', "the owner record names the pid namespace");
}

/* A forged runtime: a root /tmp/orbitkv-iox2-XXXXXX (into root) whose
 * owner record names pid, start, pidns (NULL: this one's) and prefix; text
 * (when not NULL) replaces the record. */
static void forge_runtime(char *root, size_t len, int pid, unsigned long long start, const char *pidns,
			  const char *prefix, const char *text)
{
	char path[300];
	snprintf(root, len, "/tmp/orbitkv-iox2-XXXXXX");
	CHECK(mkdtemp(root) != NULL, "mkdtemp %s", root);
	snprintf(path, sizeof(path), "%s/owner", root);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "create %s", path);
	if (fd < 0)
		return;
	if (text == NULL)
		dprintf(fd, "pid %d\nstart %llu\nboot %s\npidns %s\nprefix %s\n", pid, start, live_boot,
			pidns ? pidns : live_pidns, prefix);
	else
		dprintf(fd, "%s", text);
	close(fd);
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* How many names under /dev/shm start with prefix. */
static int shm_with_prefix(const char *prefix)
{
	int n = shm_list(during, MAX_ENTRIES), k = 0;
	for (int i = 0; i < n; i++)
		k += strncmp(during[i], prefix, strlen(prefix)) == 0;
	return k;
}

static void remove_forged(const char *root)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/owner", root);
	unlink(path);
	rmdir(root);
}

/* A runtime whose process died without okv_iox2_runtime_remove (a child
 * that makes one, serves a service in it and exits) is removed, root and
 * /dev/shm objects, by the next okv_iox2_runtime_new; so is one whose
 * record names a pid now used by a process started at another time
 * (okv_iox2_runtime_sweep). Left alone: a live runtime (this process's),
 * a record of another pid namespace, a malformed record, a root others
 * may enter, a root of another uid, a symbolic link named like a root, and
 * under a swept prefix another uid's object and a symbolic link. */
static void test_stale_runtimes_are_swept(void)
{
	char dead[OKV_IOX2_RUNTIME_MAX + 1] = "", next[OKV_IOX2_RUNTIME_MAX + 1], dead_prefix[40] = "";
	int ready[2];

	read_live_record();
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		char fd[16];

		close(ready[0]);
		snprintf(fd, sizeof(fd), "%d", ready[1]);
		execl("/proc/self/exe", "test_iox2", "runtime-and-exit", "okv-test/stale", fd, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	ssize_t got = read(ready[0], dead, sizeof(dead) - 1);
	close(ready[0]);
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child made a runtime and exited without removing it (status %#x)", status);
	CHECK(got > 0 && strchr(dead, '/') != NULL, "the child's runtime string: %s", dead);
	const char *dead_root = strchr(dead, '/') ? strchr(dead, '/') : "/nonexistent";
	snprintf(dead_prefix, sizeof(dead_prefix), "%.*s", (int)(dead_root - dead), dead);
	CHECK(exists(dead_root) && shm_with_prefix(dead_prefix) > 0,
	      "the dead child's root %s and its /dev/shm objects %s* are there (%d)", dead_root, dead_prefix,
	      shm_with_prefix(dead_prefix));

	/* Forged records of this user, judged by the sweep. */
	const char *reused_prefix = "okv00000000000000a1_", *kept_prefix = "okv00000000000000a2_";
	char reused[64], otherns[64], malformed[64], open_root[64], foreign[64], outside[] = "/tmp/okv-test-out-XXXXXX";
	char link[64], shm_ours[128], shm_theirs[128], shm_link[128], shm_target[128];
	forge_runtime(reused, sizeof(reused), (int)getpid(), 1, NULL, reused_prefix, NULL);
	forge_runtime(otherns, sizeof(otherns), 999999, 1, "pid:[1]", kept_prefix, NULL);
	forge_runtime(malformed, sizeof(malformed), 0, 0, NULL, NULL, "pid 999999\nstart x\n");
	forge_runtime(open_root, sizeof(open_root), 999999, 1, NULL, kept_prefix, NULL);
	CHECK(chmod(open_root, 0755) == 0, "chmod %s", open_root);
	forge_runtime(foreign, sizeof(foreign), 999999, 1, NULL, kept_prefix, NULL);
	int as_root = geteuid() == 0;
	if (as_root) {
		char path[128];
		snprintf(path, sizeof(path), "%s/owner", foreign);
		CHECK(chown(path, 65534, 65534) == 0 && chown(foreign, 65534, 65534) == 0, "chown %s", foreign);
	}
	/* A stale record behind a symbolic link named like a root. */
	CHECK(mkdtemp(outside) != NULL, "mkdtemp %s", outside);
	{
		char path[128];
		snprintf(path, sizeof(path), "%s/owner", outside);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		CHECK(fd >= 0, "create %s", path);
		if (fd >= 0) {
			dprintf(fd, "pid %d\nstart 1\nboot %s\npidns %s\nprefix %s\n", (int)getpid(), live_boot, live_pidns,
				kept_prefix);
			close(fd);
		}
		snprintf(link, sizeof(link), "/tmp/orbitkv-iox2-lnk%d", (int)getpid());
		CHECK(symlink(outside, link) == 0, "symlink %s", link);
	}
	/* Under the reused prefix: one object of this user (swept), one of
	 * another uid and one symbolic link (both kept). */
	snprintf(shm_ours, sizeof(shm_ours), "/dev/shm/%sours", reused_prefix);
	snprintf(shm_theirs, sizeof(shm_theirs), "/dev/shm/%stheirs", reused_prefix);
	snprintf(shm_link, sizeof(shm_link), "/dev/shm/%slink", reused_prefix);
	snprintf(shm_target, sizeof(shm_target), "/dev/shm/okv-test-target-%d", (int)getpid());
	int fd = open(shm_ours, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "create %s", shm_ours);
	if (fd >= 0)
		close(fd);
	fd = open(shm_target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && symlink(shm_target, shm_link) == 0, "create %s -> %s", shm_link, shm_target);
	if (fd >= 0)
		close(fd);
	if (as_root) {
		fd = open(shm_theirs, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		CHECK(fd >= 0 && fchown(fd, 65534, 65534) == 0, "create %s of uid 65534", shm_theirs);
		if (fd >= 0)
			close(fd);
	}

	/* The next runtime sweeps. */
	CHECK(okv_iox2_runtime_new(next, sizeof(next)) == 0, "runtime: %s", okv_iox2_last_error());
	CHECK(!exists(dead_root), "the dead child's root %s was removed", dead_root);
	CHECK(shm_with_prefix(dead_prefix) == 0, "the dead child's /dev/shm objects %s* were removed (%d left)",
	      dead_prefix, shm_with_prefix(dead_prefix));
	CHECK(!exists(reused), "the root %s of a reused pid was removed", reused);
	CHECK(!exists(shm_ours), "this user's %s under the swept prefix was removed", shm_ours);
	CHECK(exists(shm_link) && exists(shm_target), "the symbolic link %s and its target were left", shm_link);
	if (as_root)
		CHECK(exists(shm_theirs), "uid 65534's %s under the swept prefix was left", shm_theirs);
	CHECK(exists(strchr(rt, '/')), "the live runtime's root %s was left", strchr(rt, '/'));
	CHECK(exists(otherns), "%s, a record of another pid namespace, was left", otherns);
	CHECK(exists(malformed), "%s, a malformed record, was left", malformed);
	CHECK(exists(open_root), "%s, a root of mode 755, was left", open_root);
	if (as_root)
		CHECK(exists(foreign), "%s, a root of uid 65534, was left", foreign);
	CHECK(exists(link) && exists(outside), "the symbolic link %s and its target %s were left", link, outside);
	CHECK(okv_iox2_runtime_remove(next) == 0, "remove: %s", okv_iox2_last_error());

	/* okv_iox2_runtime_sweep alone, and its count. */
	char again[64];
	forge_runtime(again, sizeof(again), (int)getpid(), 1, NULL, reused_prefix, NULL);
	int n = okv_iox2_runtime_sweep();
	CHECK(n >= 1 && !exists(again), "okv_iox2_runtime_sweep removed %s (returned %d)", again, n);

	unlink(link);
	remove_forged(outside);
	remove_forged(otherns);
	remove_forged(malformed);
	remove_forged(open_root);
	remove_forged(foreign);
	unlink(shm_link);
	unlink(shm_target);
	unlink(shm_theirs);
}

/* The child programs (re-executed by the tests above): a server that echoes
 * 200 requests sleeping on its listener between them, one that makes its
 * own runtime and service, writes the runtime string to READY_FD and exits
 * without removing them, or one that waits to be killed. argv: ROLE NAME
 * READY_FD. */
static int child(const char *role, const char *name, int ready_fd)
{
	if (strcmp(role, "echo-200") == 0) {
		struct okv_iox2_node *node;
		struct okv_iox2_server *srv;
		struct okv_msg m;

		if (okv_iox2_node_new(rt, NULL, &node) != 0 ||
		    okv_iox2_server_create(node, name, 1, &srv) != 0)
			return 2;
		if (write(ready_fd, "r", 1) != 1)
			return 3;
		for (int done = 0; done < 200;) {
			int rc = okv_iox2_server_receive(srv, &m);
			if (rc < 0)
				return 4;
			if (rc == 0) {
				if (okv_iox2_server_wait(srv, 5000000000ull) < 0)
					return 5;
				continue;
			}
			m.arg0 += 1;
			if (okv_iox2_server_respond(srv, &m) != 0)
				return 6;
			done++;
		}
		okv_iox2_server_free(srv);
		okv_iox2_node_free(node);
		return 0;
	}
	if (strcmp(role, "runtime-and-exit") == 0) {
		/* A runtime of its own, a node and a service in it, then an exit
		 * that removes nothing (as a SIGKILL would). */
		char own[OKV_IOX2_RUNTIME_MAX + 1];
		struct okv_iox2_node *node;
		struct okv_iox2_server *srv;

		if (okv_iox2_runtime_new(own, sizeof(own)) != 0 || okv_iox2_node_new(own, NULL, &node) != 0 ||
		    okv_iox2_server_create(node, name, 1, &srv) != 0)
			_exit(2);
		if (write(ready_fd, own, strlen(own)) != (ssize_t)strlen(own))
			_exit(3);
		_exit(0);
	}
	struct okv_iox2_node *node;
	struct okv_iox2_server *srv;

	if (okv_iox2_node_new(rt, NULL, &node) != 0 || okv_iox2_server_create(node, name, 1, &srv) != 0)
		return 2;
	if (write(ready_fd, "r", 1) != 1)
		return 3;
	pause();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4) {
		snprintf(rt, sizeof(rt), "%s", getenv("OKV_TEST_IOX2_RUNTIME") ? getenv("OKV_TEST_IOX2_RUNTIME") : "");
		return child(argv[1], argv[2], atoi(argv[3]));
	}
	CHECK(okv_iox2_runtime_new(rt, sizeof(rt)) == 0, "runtime: %s", okv_iox2_last_error());
	setenv("OKV_TEST_IOX2_RUNTIME", rt, 1);
	test_squatted_paths();
	test_bad_arguments();
	test_one_process();
	test_waitset();
	test_poll_loop();
	test_across_processes();
	test_sigkill_leftovers_are_cleaned();
	test_stale_runtimes_are_swept();
	if (failures != 0) {
		fprintf(stderr, "test_iox2: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	okv_iox2_runtime_remove(rt);
	struct stat gone;
	CHECK(lstat(strchr(rt, '/'), &gone) != 0 && errno == ENOENT, "okv_iox2_runtime_remove removed %s",
	      strchr(rt, '/'));
	if (failures != 0)
		return 1;
	printf("test_iox2: all %d checks passed\n", checks);
	return 0;
}
