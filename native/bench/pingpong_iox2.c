/*
 * native/bench/pingpong_iox2.c — the iceoryx2_raw baseline of
 * `orbitkv-bench channel` (pingpong.h): one 64-byte request and one 64-byte
 * response per round trip through a bare iceoryx2 request-response service
 * (orbitkv/iox2.h, the Rust crate native/iox2) between two processes.
 *
 * Waiting is iceoryx2's own: each side polls its receive for
 * OKVB_IOX2_SPIN_NS (yielding the CPU between polls), then sleeps on the
 * iceoryx2 event its peer notifies after every send (okv_iox2_*_wait). Back to back, neither side sleeps;
 * at one round trip per millisecond both do, as the orbitkv_ping subject's
 * client and Manager do with their own spin windows.
 *
 * The fd handed to the peer is a memfd holding the service name and then
 * the iceoryx2 runtime both sides open their nodes in (okv_iox2_runtime_new),
 * each NUL-terminated; the peer creates the service, the parent opens it
 * (retrying until the peer has started) and removes the runtime at the end. Included by pingpong.c when OKV_HAVE_IOX2.
 */
#include <sched.h>
#include <stdio.h>

#include "orbitkv/iox2.h"

/** Spin before sleeping, each side: 50 µs, the default spin window of the
 *  orbitkv_ping subject's client and Manager. */
#define OKVB_IOX2_SPIN_NS 50000ull

struct okvb_iox2 {
	struct okv_iox2_node *node;
	struct okv_iox2_client *client; /* NULL until the peer's service is open */
	int served;                     /* a request reached the peer's server */
	char name[OKV_IOX2_NAME_MAX + 1];
	char rt[OKV_IOX2_RUNTIME_MAX + 1];
};

/* The name and the runtime stored in the memfd fd (pread: the offset
 * stays shared). name has OKV_IOX2_NAME_MAX + 1 bytes, rt
 * OKV_IOX2_RUNTIME_MAX + 1. */
static int okvb_iox2_read_name(int fd, char *name, char *rt)
{
	char b[OKV_IOX2_NAME_MAX + OKV_IOX2_RUNTIME_MAX + 2];
	ssize_t r = pread(fd, b, sizeof(b) - 1, 0);
	if (r <= 0)
		return r < 0 ? -errno : -EINVAL;
	b[r] = '\0';
	size_t n = strlen(b);
	if (n == 0 || n > OKV_IOX2_NAME_MAX || (ssize_t)n + 1 >= r || strlen(b + n + 1) > OKV_IOX2_RUNTIME_MAX)
		return -EINVAL;
	memcpy(name, b, n + 1);
	memcpy(rt, b + n + 1, strlen(b + n + 1) + 1);
	return 0;
}

int okvb_iox2_create(void)
{
	char name[OKV_IOX2_NAME_MAX + 1];
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(name, sizeof(name), "orbitkv-bench/%d/%lx%lx", (int)getpid(),
		 (unsigned long)ts.tv_sec, (unsigned long)ts.tv_nsec);
	char rt[OKV_IOX2_RUNTIME_MAX + 1];
	if (okv_iox2_runtime_new(rt, sizeof(rt)) != 0)
		return -EIO;
	int fd = (int)syscall(SYS_memfd_create, "orbitkv-bench-iox2", MFD_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		okv_iox2_runtime_remove(rt);
		return -e;
	}
	size_t n = strlen(name) + 1, m = strlen(rt) + 1;
	if (write(fd, name, n) != (ssize_t)n || write(fd, rt, m) != (ssize_t)m) {
		int e = errno ? errno : EIO;
		close(fd);
		okv_iox2_runtime_remove(rt);
		return -e;
	}
	return fd;
}

static int okvb_iox2_open(int fd, struct okvb_iox2 **out)
{
	struct okvb_iox2 *x = calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	int rc = okvb_iox2_read_name(fd, x->name, x->rt);
	if (rc == 0 && okv_iox2_node_new(x->rt, "orbitkv-bench", &x->node) != 0)
		rc = -EIO;
	if (rc != 0) {
		free(x);
		return rc;
	}
	*out = x;
	return 0;
}

static int okvb_iox2_errno(int rc)
{
	switch (rc) {
	case OKV_IOX2_EDISCONNECTED:
		return -EPIPE;
	case OKV_IOX2_ENOENT:
		return -ENOENT;
	case OKV_IOX2_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* Take the response or the request (recv) into m: spin for spin_ns, then
 * sleep on the peer's notifications in rounds of round_ns until
 * deadline_ns (0: none) or check() says stop. */
static int okvb_iox2_await(int (*recv)(void *, struct okv_msg *), int (*wait)(void *, uint64_t),
			   void *end, struct okv_msg *m, uint64_t deadline_ns, uint64_t round_ns,
			   int (*check)(void *), void *check_ctx)
{
	uint64_t start = okvi_now_ns();
	int rc;

	while ((rc = recv(end, m)) == 0) {
		if (okvi_now_ns() - start < OKVB_IOX2_SPIN_NS) {
			/* Yield, not pause: a peer this side woke is often queued on
			 * this CPU, and a pause spin would make it wait out the whole
			 * window (docs/channel.md, "Never spin against a peer that had
			 * to be woken"); measured: 120 µs back to back with pause, 4 µs
			 * with yield, on the 2-vCPU VM. */
			sched_yield();
			continue;
		}
		/* Sleep: a send after the receive above is always notified. */
		rc = wait(end, round_ns);
		if (rc < 0)
			return rc;
		if (deadline_ns != 0 && okvi_now_ns() > deadline_ns)
			return -ETIMEDOUT;
		if (check != NULL && (rc = check(check_ctx)) != 0)
			return rc;
	}
	return rc < 0 ? rc : 0;
}

/* The four ends' receive and wait, with okv_iox2 codes as -errno. */
static int okvb_iox2_rc(int rc) { return rc < 0 ? okvb_iox2_errno(rc) : rc; }
static int okvb_iox2_client_recv(void *c, struct okv_msg *m) { return okvb_iox2_rc(okv_iox2_client_receive(c, m)); }
static int okvb_iox2_client_wait(void *c, uint64_t ns) { return okvb_iox2_rc(okv_iox2_client_wait(c, ns)); }
static int okvb_iox2_server_recv(void *s, struct okv_msg *m) { return okvb_iox2_rc(okv_iox2_server_receive(s, m)); }
static int okvb_iox2_server_wait(void *s, uint64_t ns) { return okvb_iox2_rc(okv_iox2_server_wait(s, ns)); }

static int okvb_rt_iox2(struct okvb_chan *ch)
{
	struct okvb_iox2 *x = ch->iox2;
	struct okv_msg req, resp;
	int rc;

	if (x->client == NULL) {
		/* The peer process creates the service; wait for it to start. */
		uint64_t deadline = okvi_now_ns() + OKVB_RT_TIMEOUT_NS;
		while ((rc = okv_iox2_client_open(x->node, x->name, &x->client)) == OKV_IOX2_ENOENT) {
			if (okvi_now_ns() > deadline)
				return -ETIMEDOUT;
			usleep(1000);
		}
		if (rc != 0)
			return okvb_iox2_errno(rc);
	}
	uint32_t seq = ++ch->seq;
	if (seq == OKVB_STOP_SEQ || seq == 0)
		seq = ch->seq = 1;
	okvb_stamp(ch, seq);
	memcpy(&req, ch->msg, sizeof(req));
	/* The peer creates its server port just after the service: until a
	 * first request reached it, no server is not yet an error. */
	uint64_t deadline = okvi_now_ns() + OKVB_RT_TIMEOUT_NS;
	while ((rc = okv_iox2_client_send(x->client, &req)) == OKV_IOX2_EDISCONNECTED && !x->served) {
		if (okvi_now_ns() > deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	if (rc != 0)
		return okvb_iox2_errno(rc);
	x->served = 1;
	rc = okvb_iox2_await(okvb_iox2_client_recv, okvb_iox2_client_wait, x->client, &resp,
			     okvi_now_ns() + OKVB_RT_TIMEOUT_NS, OKVB_RT_TIMEOUT_NS, NULL, NULL);
	if (rc != 0)
		return rc;
	memcpy(ch->echo, &resp, OKVB_MSG_BYTES);
	if (memcmp(ch->echo, ch->msg, OKVB_MSG_BYTES) != 0)
		return -EPROTO;
	return 0;
}

static void okvb_iox2_close(struct okvb_iox2 *x)
{
	if (x->client != NULL) {
		/* The stop request: seq OKVB_STOP_SEQ; the peer exits without
		 * answering. */
		struct okv_msg stop;
		uint32_t s = OKVB_STOP_SEQ;

		memset(&stop, 0, sizeof(stop));
		memcpy(&stop, &s, sizeof(s));
		okv_iox2_client_send(x->client, &stop);
		okv_iox2_client_free(x->client);
	}
	okv_iox2_node_free(x->node);
	okv_iox2_runtime_remove(x->rt);
	free(x);
}

struct okvb_iox2_peer_check {
	pid_t parent_pid;
	uint64_t idle_since;
	uint64_t idle_ns;
};

static int okvb_iox2_peer_check_fn(void *ctx)
{
	struct okvb_iox2_peer_check *c = ctx;
	return okvb_peer_check(c->parent_pid, c->idle_since, c->idle_ns);
}

static int okvb_peer_iox2(int fd, pid_t parent_pid, uint64_t idle_ns)
{
	char name[OKV_IOX2_NAME_MAX + 1], rt[OKV_IOX2_RUNTIME_MAX + 1];
	struct okv_iox2_node *node = NULL;
	struct okv_iox2_server *srv = NULL;
	int rc = okvb_iox2_read_name(fd, name, rt);

	if (rc != 0)
		return rc;
	if (okv_iox2_node_new(rt, "orbitkv-bench-peer", &node) != 0)
		return -EIO;
	if ((rc = okv_iox2_server_create(node, name, 1, &srv)) != 0) {
		okv_iox2_node_free(node);
		return rc == OKV_IOX2_EEXIST ? -EEXIST : -EIO;
	}
	struct okvb_iox2_peer_check check = { parent_pid, okvi_now_ns(), idle_ns };
	for (;;) {
		struct okv_msg m;
		uint32_t seq;

		rc = okvb_iox2_await(okvb_iox2_server_recv, okvb_iox2_server_wait, srv, &m, 0,
				     OKVB_PEER_CHECK_NS, okvb_iox2_peer_check_fn, &check);
		if (rc != 0)
			break;
		memcpy(&seq, &m, sizeof(seq));
		if (seq == OKVB_STOP_SEQ)
			break;
		rc = okv_iox2_server_respond(srv, &m);
		if (rc == OKV_IOX2_EDISCONNECTED) {
			rc = 0;      /* the parent left: an orderly end */
			break;
		}
		if (rc != 0) {
			rc = -EIO;
			break;
		}
		check.idle_since = okvi_now_ns();
	}
	okv_iox2_server_free(srv);
	okv_iox2_node_free(node);
	return rc;
}
