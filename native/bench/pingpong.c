/*
 * native/bench/pingpong.c — raw round-trip baselines (see pingpong.h).
 *
 * Shared layout of the shm spin and futex baselines (one memfd page):
 *   line 0  struct okvb_line request   written by the parent, read by the peer
 *   line 1  struct okvb_line response  written by the peer, read by the parent
 *   line 2  uint32_t stop              written once by the parent
 * Request and response sit on separate cache lines, as in the OrbitKV slot,
 * so each line has exactly one writer.
 *
 * Each line is one 64-byte message whose first word is a sequence number.
 * The writer fills the body with plain stores and then publishes it with a
 * release store of `seq`; the reader acquire-loads `seq` and only then reads
 * the body. The body is never written while the other side may read it: the
 * parent writes request N+1 only after it saw response N, and the peer writes
 * response N only after it saw request N.
 */
#define _GNU_SOURCE
#include "pingpong.h"
#include "channel.h" /* okvi_cpu_relax, okvi_now_ns */

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

/** Sequence value the parent stores to wake a peer that must stop. */
#define OKVB_STOP_SEQ 0xFFFFFFFFu
/** How often a waiting peer checks its parent and idle deadline (ns). */
#define OKVB_PEER_CHECK_NS 200000000ull

struct okvb_line {
	uint32_t seq;                /* 0: futex word; release-stored last */
	uint32_t len;                /* 4: body bytes in use */
	uint8_t body[OKVB_MSG_BYTES - 8];
} __attribute__((aligned(64)));

struct okvb_shm {
	struct okvb_line req;        /*   0: parent -> peer */
	struct okvb_line resp;       /*  64: peer -> parent */
	uint32_t stop __attribute__((aligned(64))); /* 128: parent -> peer */
};

_Static_assert(sizeof(struct okvb_line) == OKVB_MSG_BYTES, "one message per line");
_Static_assert(sizeof(struct okvb_shm) <= OKVB_SHM_BYTES, "shm fits one page");

struct okvb_iox2;

struct okvb_chan {
	int kind;
	int fd;                      /* borrowed */
	struct okvb_shm *shm;        /* mapped for shm kinds */
	struct okvb_iox2 *iox2;      /* owned, OKVB_IOX2 only */
	uint32_t seq;                /* last request sequence */
	uint8_t msg[OKVB_MSG_BYTES]; /* the message sent; echo is compared */
	uint8_t echo[OKVB_MSG_BYTES];
};

static inline void okvb_ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Shared (not private) futex: the word lives in a MAP_SHARED memfd mapping
 * used by two processes. */
static long okvb_futex_wait(uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts;
	okvb_ns_to_ts(timeout_ns, &ts);
	return syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static long okvb_futex_wake(uint32_t *word)
{
	return syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Measurement loop                                                          */
/* ------------------------------------------------------------------------ */

int okvb_measure(okvb_fn fn, void *ctx, uint64_t n, uint64_t warmup,
		 uint64_t period_ns, uint64_t *out)
{
	if (fn == NULL || (n > 0 && out == NULL))
		return -EINVAL;
	uint64_t tick = okvi_now_ns();
	for (uint64_t i = 0; i < warmup + n; i++) {
		if (period_ns > 0) {
			tick += period_ns;
			struct timespec ts;
			okvb_ns_to_ts(tick, &ts);
			/* EINTR: sleep again to the same absolute tick. */
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
		}
		uint64_t t0 = okvi_now_ns();
		int rc = fn(ctx);
		uint64_t t1 = okvi_now_ns();
		if (rc != 0)
			return rc;
		if (i >= warmup)
			out[i - warmup] = t1 - t0;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Parent side                                                               */
/* ------------------------------------------------------------------------ */

int okvb_shm_create(void)
{
	int fd = (int)syscall(SYS_memfd_create, "orbitkv-bench-pingpong",
			      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, OKVB_SHM_BYTES) != 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	/* Size sealed so a peer can never shrink it under the parent's mapping
	 * (a SIGBUS in the bench would be a confusing result). */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

static int okvb_map(int fd, struct okvb_shm **out)
{
	void *p = mmap(NULL, OKVB_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

/* Receive timeout on a socket, so neither side of the uds baseline can block
 * forever on a peer that is gone without closing. */
static int okvb_set_rcvtimeo(int fd, uint64_t ns)
{
	struct timeval tv = { .tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_usec = (suseconds_t)(ns % 1000000000ull / 1000) };
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		return -errno;
	return 0;
}

#ifdef OKV_HAVE_IOX2
static int okvb_iox2_open(int fd, struct okvb_iox2 **out);
static int okvb_rt_iox2(struct okvb_chan *ch);
static void okvb_iox2_close(struct okvb_iox2 *x);
static int okvb_peer_iox2(int fd, pid_t parent_pid, uint64_t idle_ns);
#else
int okvb_iox2_create(void)
{
	return -ENOSYS;
}
#endif

int okvb_chan_open(int kind, int fd, struct okvb_chan **out)
{
	if (out == NULL || fd < 0)
		return -EINVAL;
	if (kind == OKVB_IOX2) {
#ifdef OKV_HAVE_IOX2
		struct okvb_chan *ch = calloc(1, sizeof(*ch));
		if (ch == NULL)
			return -ENOMEM;
		ch->kind = kind;
		ch->fd = fd;
		int rc = okvb_iox2_open(fd, &ch->iox2);
		if (rc != 0) {
			free(ch);
			return rc;
		}
		for (unsigned i = 0; i < OKVB_MSG_BYTES; i++)
			ch->msg[i] = (uint8_t)(i * 7u + 1u);
		*out = ch;
		return 0;
#else
		return -ENOSYS;
#endif
	}
	if (kind != OKVB_SHM_SPIN && kind != OKVB_FUTEX && kind != OKVB_UDS)
		return -EINVAL;
	struct okvb_chan *ch = calloc(1, sizeof(*ch));
	if (ch == NULL)
		return -ENOMEM;
	ch->kind = kind;
	ch->fd = fd;
	int rc = 0;
	if (kind == OKVB_UDS)
		rc = okvb_set_rcvtimeo(fd, OKVB_RT_TIMEOUT_NS);
	else
		rc = okvb_map(fd, &ch->shm);
	if (rc != 0) {
		free(ch);
		return rc;
	}
	for (unsigned i = 0; i < OKVB_MSG_BYTES; i++)
		ch->msg[i] = (uint8_t)(i * 7u + 1u);
	*out = ch;
	return 0;
}

/* Fill the varying part of the message: the sequence in bytes 0..3 (the
 * `seq` word for shm kinds) and a copy in 8..11, so every echo is checked
 * against this round trip and not an earlier one. */
static void okvb_stamp(struct okvb_chan *ch, uint32_t seq)
{
	memcpy(ch->msg, &seq, 4);
	memcpy(ch->msg + 8, &seq, 4);
}

static int okvb_rt_shm(struct okvb_chan *ch, int spin)
{
	struct okvb_shm *shm = ch->shm;
	uint32_t seq = ++ch->seq;
	if (seq == OKVB_STOP_SEQ || seq == 0)
		seq = ch->seq = 1;   /* never send the stop sentinel */
	okvb_stamp(ch, seq);
	/* Body first (plain stores: the peer reads it only after it acquires
	 * the new seq), then publish with a release store of seq. */
	memcpy(&shm->req.len, ch->msg + 4, sizeof(shm->req.len));
	memcpy(shm->req.body, ch->msg + 8, sizeof(shm->req.body));
	__atomic_store_n(&shm->req.seq, seq, __ATOMIC_RELEASE);

	if (spin) {
		uint64_t deadline = 0;
		unsigned spins = 0;
		/* Acquire pairs with the peer's release store of resp.seq:
		 * once we see seq, the response body is complete. */
		while (__atomic_load_n(&shm->resp.seq, __ATOMIC_ACQUIRE) != seq) {
			okvi_cpu_relax();
			if ((++spins & 0xFFFFu) == 0) {
				uint64_t now = okvi_now_ns();
				if (deadline == 0)
					deadline = now + OKVB_RT_TIMEOUT_NS;
				else if (now > deadline)
					return -ETIMEDOUT;
			}
		}
	} else {
		/* The peer may be asleep on req.seq: always wake it. */
		okvb_futex_wake(&shm->req.seq);
		for (;;) {
			uint32_t v = __atomic_load_n(&shm->resp.seq, __ATOMIC_ACQUIRE);
			if (v == seq)
				break;
			/* Sleeps only while resp.seq still equals v, so a response
			 * published between the load and the wait is not missed. */
			if (okvb_futex_wait(&shm->resp.seq, v, OKVB_RT_TIMEOUT_NS) != 0 &&
			    errno == ETIMEDOUT)
				return -ETIMEDOUT;
		}
	}
	memcpy(ch->echo, &shm->resp, OKVB_MSG_BYTES);
	if (memcmp(ch->echo + 8, ch->msg + 8, OKVB_MSG_BYTES - 8) != 0)
		return -EPROTO;
	return 0;
}

static int okvb_rt_uds(struct okvb_chan *ch)
{
	uint32_t seq = ++ch->seq;
	okvb_stamp(ch, seq);
	/* MSG_NOSIGNAL: a gone peer is -EPIPE, never a SIGPIPE in the bench. */
	ssize_t w = send(ch->fd, ch->msg, OKVB_MSG_BYTES, MSG_NOSIGNAL);
	if (w < 0)
		return -errno;
	if (w != OKVB_MSG_BYTES)
		return -EPROTO;
	ssize_t r;
	do {
		r = read(ch->fd, ch->echo, OKVB_MSG_BYTES);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK) ? -ETIMEDOUT : -errno;
	if (r == 0)
		return -EPIPE;
	if (r != OKVB_MSG_BYTES || memcmp(ch->echo, ch->msg, OKVB_MSG_BYTES) != 0)
		return -EPROTO;
	return 0;
}

int okvb_chan_roundtrip(void *chan)
{
	struct okvb_chan *ch = chan;
	switch (ch->kind) {
	case OKVB_SHM_SPIN:
		return okvb_rt_shm(ch, 1);
	case OKVB_FUTEX:
		return okvb_rt_shm(ch, 0);
	case OKVB_UDS:
		return okvb_rt_uds(ch);
#ifdef OKV_HAVE_IOX2
	case OKVB_IOX2:
		return okvb_rt_iox2(ch);
#endif
	default:
		return -EINVAL;
	}
}

int okvb_chan_measure(struct okvb_chan *ch, uint64_t n, uint64_t warmup,
		      uint64_t period_ns, uint64_t *out)
{
	if (ch == NULL)
		return -EINVAL;
	return okvb_measure(okvb_chan_roundtrip, ch, n, warmup, period_ns, out);
}

void okvb_chan_close(struct okvb_chan *ch)
{
	if (ch == NULL)
		return;
#ifdef OKV_HAVE_IOX2
	if (ch->iox2 != NULL) {
		okvb_iox2_close(ch->iox2);
		free(ch);
		return;
	}
#endif
	if (ch->shm != NULL) {
		/* stop first, then the sentinel seq (release: a peer that sees
		 * the sentinel also sees stop), then wake a sleeping peer. */
		__atomic_store_n(&ch->shm->stop, 1u, __ATOMIC_RELAXED);
		__atomic_store_n(&ch->shm->req.seq, OKVB_STOP_SEQ, __ATOMIC_RELEASE);
		okvb_futex_wake(&ch->shm->req.seq);
		munmap(ch->shm, OKVB_SHM_BYTES);
	} else {
		shutdown(ch->fd, SHUT_WR);
	}
	free(ch);
}

/* ------------------------------------------------------------------------ */
/* Peer side                                                                 */
/* ------------------------------------------------------------------------ */

/* Returns 0 while the peer should keep waiting, else the code to exit with. */
static int okvb_peer_check(pid_t parent_pid, uint64_t idle_since, uint64_t idle_ns)
{
	if (getppid() != parent_pid)
		return -ESRCH;
	if (idle_ns > 0 && okvi_now_ns() - idle_since > idle_ns)
		return -ETIMEDOUT;
	return 0;
}

static int okvb_peer_shm(struct okvb_shm *shm, int spin, pid_t parent_pid, uint64_t idle_ns)
{
	/* Requests beyond the last one answered: the parent may have sent the
	 * first request before this process started. */
	uint32_t last = __atomic_load_n(&shm->resp.seq, __ATOMIC_RELAXED);
	uint64_t idle_since = okvi_now_ns();
	for (;;) {
		uint32_t v;
		unsigned spins = 0;
		/* Acquire pairs with the parent's release store of req.seq. */
		while ((v = __atomic_load_n(&shm->req.seq, __ATOMIC_ACQUIRE)) == last) {
			if (spin) {
				okvi_cpu_relax();
				if ((++spins & 0xFFFFFu) != 0)
					continue;
			} else if (okvb_futex_wait(&shm->req.seq, last, OKVB_PEER_CHECK_NS) == 0 ||
				   errno != ETIMEDOUT) {
				continue;    /* woken, or the word already changed */
			}
			int rc = okvb_peer_check(parent_pid, idle_since, idle_ns);
			if (rc != 0)
				return rc;
		}
		if (v == OKVB_STOP_SEQ || __atomic_load_n(&shm->stop, __ATOMIC_RELAXED))
			return 0;
		shm->resp.len = shm->req.len;
		memcpy(shm->resp.body, shm->req.body, sizeof(shm->resp.body));
		/* Release: the parent that sees seq sees the whole body. */
		__atomic_store_n(&shm->resp.seq, v, __ATOMIC_RELEASE);
		if (!spin)
			okvb_futex_wake(&shm->resp.seq);
		last = v;
		/* After the response is published: off the parent's critical path. */
		idle_since = okvi_now_ns();
	}
}

static int okvb_peer_uds(int fd, pid_t parent_pid, uint64_t idle_ns)
{
	int rc = okvb_set_rcvtimeo(fd, OKVB_PEER_CHECK_NS);
	if (rc != 0)
		return rc;
	uint8_t buf[OKVB_MSG_BYTES];
	uint64_t idle_since = okvi_now_ns();
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r == 0)
			return 0;                 /* parent shut its end: stop */
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			rc = okvb_peer_check(parent_pid, idle_since, idle_ns);
			if (rc != 0)
				return rc;
			continue;
		}
		ssize_t w = send(fd, buf, (size_t)r, MSG_NOSIGNAL);
		if (w < 0)
			return errno == EPIPE ? 0 : -errno;
		idle_since = okvi_now_ns();
	}
}

int okvb_peer_run(int kind, int fd, pid_t parent_pid, uint64_t idle_ns)
{
	if (fd < 0)
		return -EINVAL;
	/* Die with the parent even if it is killed before it can stop us;
	 * check getppid() afterwards, since the parent may already be gone. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return -errno;
	if (getppid() != parent_pid)
		return -ESRCH;
	if (kind == OKVB_UDS)
		return okvb_peer_uds(fd, parent_pid, idle_ns);
	if (kind == OKVB_IOX2) {
#ifdef OKV_HAVE_IOX2
		return okvb_peer_iox2(fd, parent_pid, idle_ns);
#else
		return -ENOSYS;
#endif
	}
	if (kind != OKVB_SHM_SPIN && kind != OKVB_FUTEX)
		return -EINVAL;
	struct okvb_shm *shm = NULL;
	int rc = okvb_map(fd, &shm);
	if (rc != 0)
		return rc;
	rc = okvb_peer_shm(shm, kind == OKVB_SHM_SPIN, parent_pid, idle_ns);
	munmap(shm, OKVB_SHM_BYTES);
	return rc;
}

#ifdef OKV_HAVE_IOX2
#include "pingpong_iox2.c"
#endif
