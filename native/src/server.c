/*
 * server.c — the Manager's channel poll loop. See server.h for the contract
 * and channel.h for the memory-ordering protocol.
 */
#define _GNU_SOURCE
#include "server.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"

#ifdef OKV_HAVE_IOX2
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "orbitkv/iox2.h"
#endif

struct okvi_server {
	struct okv_doorbell *db;
	uint32_t max_sessions;
	int mode;
	uint64_t spin_window_ns;
	uint64_t last_activity_ns; /* CLOCK_MONOTONIC of the last request/reply */
	int cold;                  /* the last post had to wake a parked client */
	int caller_parks;          /* return 0 instead of sleeping (see server.h) */
	uint32_t park_seq;         /* seq value to FUTEX_WAIT on after such a return */
	struct okvi_server_stats stats;
	uint32_t ctl_pending;      /* private control flag, see okvi_server_ctl_word */
	struct okv_slot **slots;   /* [OKV_MAX_SESSIONS], NULL = not attached */
	uint64_t *seen_gen;        /* [OKV_MAX_SESSIONS], last generation observed */
	uint64_t rescan_at_ns;     /* CLOCK_MONOTONIC when the next rescan is due */
	uint32_t rescan_next;      /* slot index a rescan cut short resumes at */
	uint32_t since_check;      /* busy steps since the rescan clock was read */
	uint32_t stray_streak;     /* collects in a row whose rings carried no event */
	int wake_fd;               /* iceoryx2 mode: eventfd the control path writes, else -1 */
#ifdef OKV_HAVE_IOX2
	/* iceoryx2 mode (okvi_server_use_iox2): requests and responses of the
	 * slots attached with okvi_server_attach_iox2 move through their
	 * iceoryx2 services; the loop sleeps on one WaitSet over every
	 * service's request listener and wake_fd. */
	struct okv_iox2_node *iox2_node;
	char iox2_runtime[OKV_IOX2_RUNTIME_MAX + 1]; /* okv_iox2_runtime_new; "" before */
	struct okv_iox2_waitset *iox2_ws;
	struct okv_iox2_server **iox2;  /* [OKV_MAX_SESSIONS], NULL = shm slot */
	uint32_t *iox2_list;            /* dense indices of iceoryx2 slots */
	uint32_t iox2_n;
	int iox2_epfd;                  /* epoll over the listeners' fds and wake_fd (caller parks) */
	int iox2_drain;                 /* the last step returned 0: consume notifications first */
#endif
};

/* Empty collects in a row after which a set summary word no longer keeps
 * the loop from parking (a session that rings stray bits in a loop). */
#define OKVI_STRAY_STREAK 256u

struct okvi_server *okvi_server_new(struct okv_doorbell *db, uint32_t max_sessions,
				    int mode, uint64_t spin_window_ns)
{
	if (!db || max_sessions == 0 || max_sessions > OKV_CONTROL_SLOT ||
	    mode < OKVI_POLL_SPIN || mode > OKVI_POLL_PARK)
		return NULL;
	struct okvi_server *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->slots = calloc(OKV_MAX_SESSIONS, sizeof(*s->slots));
	s->seen_gen = calloc(OKV_MAX_SESSIONS, sizeof(*s->seen_gen));
	if (!s->slots || !s->seen_gen) {
		okvi_server_free(s);
		return NULL;
	}
	s->db = db;
	s->wake_fd = -1;
	s->max_sessions = max_sessions;
	s->mode = mode;
	s->spin_window_ns = spin_window_ns;
	s->last_activity_ns = okvi_now_ns();
	s->rescan_at_ns = s->last_activity_ns + OKVI_RESCAN_NS;
	return s;
}

void okvi_server_free(struct okvi_server *s)
{
	if (!s)
		return;
#ifdef OKV_HAVE_IOX2
	if (s->iox2) {
		for (uint32_t i = 0; i < s->iox2_n; i++) {
			uint32_t idx = s->iox2_list[i];
			okv_iox2_waitset_detach(s->iox2_ws, idx);
			okv_iox2_server_free(s->iox2[idx]);
		}
	}
	if (s->iox2_node && s->iox2_epfd >= 0)
		close(s->iox2_epfd);
	okv_iox2_waitset_free(s->iox2_ws);
	okv_iox2_node_free(s->iox2_node);
	if (s->iox2_runtime[0] != '\0')
		okv_iox2_runtime_remove(s->iox2_runtime);
	free(s->iox2);
	free(s->iox2_list);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
#endif
	free(s->slots);
	free(s->seen_gen);
	free(s);
}

void okvi_server_set_mode(struct okvi_server *s, int mode, uint64_t spin_window_ns)
{
	if (mode >= OKVI_POLL_SPIN && mode <= OKVI_POLL_PARK)
		s->mode = mode;
	s->spin_window_ns = spin_window_ns;
}

int okvi_server_attach(struct okvi_server *s, uint32_t slot_index,
		       struct okv_slot *slot, uint64_t seen_gen)
{
	if (!slot || slot_index >= s->max_sessions)
		return -EINVAL;
	if (s->slots[slot_index])
		return -EBUSY;
	s->slots[slot_index] = slot;
	s->seen_gen[slot_index] = seen_gen;
	return 0;
}

void okvi_server_detach(struct okvi_server *s, uint32_t slot_index)
{
	if (slot_index >= s->max_sessions)
		return;
	s->slots[slot_index] = NULL;
#ifdef OKV_HAVE_IOX2
	if (s->iox2 && s->iox2[slot_index]) {
		epoll_ctl(s->iox2_epfd, EPOLL_CTL_DEL, okv_iox2_server_fd(s->iox2[slot_index]), NULL);
		okv_iox2_waitset_detach(s->iox2_ws, slot_index);
		okv_iox2_server_free(s->iox2[slot_index]);
		s->iox2[slot_index] = NULL;
		/* A client killed by SIGKILL still holds the service in its dead
		 * node's records, so the objects outlive the free: remove what
		 * dead nodes left (upstream:
		 * https://github.com/eclipse-iceoryx/iceoryx2/issues/601 and
		 * https://github.com/eclipse-iceoryx/iceoryx2/issues/774). A scan
		 * of iceoryx2's node directory, on detach only. */
		okv_iox2_cleanup_dead(s->iox2_node);
		for (uint32_t i = 0; i < s->iox2_n; i++)
			if (s->iox2_list[i] == slot_index) {
				s->iox2_list[i] = s->iox2_list[--s->iox2_n];
				break;
			}
	}
#endif
}

int okvi_server_use_iox2(struct okvi_server *s, char *err, size_t errlen)
{
#ifdef OKV_HAVE_IOX2
	if (s->iox2_node)
		return 0;
	int rc;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->iox2 = calloc(OKV_MAX_SESSIONS, sizeof(*s->iox2));
	s->iox2_list = calloc(OKV_MAX_SESSIONS, sizeof(*s->iox2_list));
	if (s->wake_fd < 0 || !s->iox2 || !s->iox2_list) {
		snprintf(err, errlen, "iceoryx2 mode: eventfd or memory: %s", strerror(errno));
		return -ENOMEM;
	}
	s->iox2_epfd = -1;
	if ((rc = okv_iox2_runtime_new(s->iox2_runtime, sizeof(s->iox2_runtime))) != 0 ||
	    (rc = okv_iox2_node_new(s->iox2_runtime, "orbitkv-manager", &s->iox2_node)) != 0 ||
	    (rc = okv_iox2_waitset_new(s->wake_fd, &s->iox2_ws)) != 0) {
		snprintf(err, errlen, "iceoryx2 mode: %s", okv_iox2_last_error());
		return -EIO;
	}
	/* The caller's short sleep (okvi_server_park_fd): readiness of every
	 * session's iceoryx2 request listener and of wake_fd. */
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = OKV_CONTROL_SLOT };
	s->iox2_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->iox2_epfd < 0 || epoll_ctl(s->iox2_epfd, EPOLL_CTL_ADD, s->wake_fd, &ev) != 0) {
		snprintf(err, errlen, "iceoryx2 mode: epoll: %s", strerror(errno));
		return -EIO;
	}
	return 0;
#else
	(void)s;
	snprintf(err, errlen, "this build has no iceoryx2 transport (OKV_HAVE_IOX2)");
	return -ENOSYS;
#endif
}

int okvi_server_attach_iox2(struct okvi_server *s, uint32_t slot_index, struct okv_slot *slot,
			    uint64_t seen_gen, const char *name, char *err, size_t errlen)
{
#ifdef OKV_HAVE_IOX2
	if (!s->iox2_node) {
		snprintf(err, errlen, "okvi_server_use_iox2 was not called");
		return -EINVAL;
	}
	int rc = okvi_server_attach(s, slot_index, slot, seen_gen);
	if (rc != 0) {
		snprintf(err, errlen, "slot %u: %s", slot_index, rc == -EBUSY ? "attached already" : "out of range");
		return rc;
	}
	struct okv_iox2_server *srv = NULL;
	rc = okv_iox2_server_create(s->iox2_node, name, 1, &srv);
	if (rc == 0 && (rc = okv_iox2_waitset_attach(s->iox2_ws, srv, slot_index)) != 0)
		okv_iox2_server_free(srv);
	if (rc == 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = slot_index };
		if (epoll_ctl(s->iox2_epfd, EPOLL_CTL_ADD, okv_iox2_server_fd(srv), &ev) != 0) {
			okv_iox2_waitset_detach(s->iox2_ws, slot_index);
			okv_iox2_server_free(srv);
			snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
			s->slots[slot_index] = NULL;
			return -EIO;
		}
	}
	if (rc != 0) {
		snprintf(err, errlen, "%s", okv_iox2_last_error());
		s->slots[slot_index] = NULL;
		return rc == OKV_IOX2_EEXIST ? -EEXIST : -EIO;
	}
	s->iox2[slot_index] = srv;
	s->iox2_list[s->iox2_n++] = slot_index;
	return 0;
#else
	(void)s; (void)slot_index; (void)slot; (void)seen_gen; (void)name;
	snprintf(err, errlen, "this build has no iceoryx2 transport (OKV_HAVE_IOX2)");
	return -ENOSYS;
#endif
}

const char *okvi_server_iox2_runtime(const struct okvi_server *s)
{
#ifdef OKV_HAVE_IOX2
	return s->iox2_node ? s->iox2_runtime : "";
#else
	(void)s;
	return "";
#endif
}

int okvi_server_wake_fd(const struct okvi_server *s)
{
	return s->wake_fd;
}

int okvi_server_park_fd(const struct okvi_server *s)
{
#ifdef OKV_HAVE_IOX2
	return s->iox2_node ? s->iox2_epfd : -1;
#else
	(void)s;
	return -1;
#endif
}

/* iceoryx2 mode, after the caller slept: consume every pending
 * notification (the listeners' sockets are level triggered), so the next
 * sleep sleeps; a request sent after this is notified anew, one sent
 * before is in its queue for the collect that follows. */
static void iox2_drain(struct okvi_server *s)
{
#ifdef OKV_HAVE_IOX2
	if (!s->iox2_drain)
		return;
	s->iox2_drain = 0;
	for (uint32_t i = 0; i < s->iox2_n; i++)
		okv_iox2_server_wait(s->iox2[s->iox2_list[i]], 0);
	uint64_t v;
	if (read(s->wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing written */
	}
#else
	(void)s;
#endif
}

/* iceoryx2 mode: an iceoryx2 slot's request line is not a request (the
 * client may write anything there): the doorbell path skips it. */
static inline int is_iox2(const struct okvi_server *s, uint32_t idx)
{
#ifdef OKV_HAVE_IOX2
	return s->iox2 != NULL && s->iox2[idx] != NULL;
#else
	(void)s; (void)idx;
	return 0;
#endif
}

void okvi_server_control_ring(struct okv_doorbell *db)
{
	okvi_doorbell_ring(db, OKV_CONTROL_SLOT);
	/* Wake unconditionally: server_parked lives in client-writable memory,
	 * and a client that cleared it must not be able to keep the Manager's
	 * own control events (attach, detach, stop) from waking it. */
	__atomic_fetch_add(&db->seq, 1, __ATOMIC_SEQ_CST);
	okvi_futex_wake(&db->seq, 1);
}

void okvi_server_stats(const struct okvi_server *s, struct okvi_server_stats *out)
{
	*out = s->stats;
}

uint64_t okvi_server_rescued(const struct okvi_server *s)
{
	return __atomic_load_n(&s->stats.rescued, __ATOMIC_RELAXED);
}

/* Turn slot idx's request line, at generation g, into a request event. */
static void take(struct okvi_server *s, uint32_t idx, struct okv_slot *slot, uint64_t g, struct okvi_event *e)
{
	e->slot = idx;
	e->kind = OKVI_EV_REQUEST;
	e->prev_gen = s->seen_gen[idx];
	memcpy(&e->msg, &slot->request, sizeof(e->msg));
	/* The copy may race with a misbehaving client rewriting its own
	 * line; use the generation we acquired, never a newer one. */
	e->msg.generation = g;
	s->seen_gen[idx] = g;
	s->stats.requests++;
}

/* The first attached slot at or after idx whose request generation differs
 * from the one last taken, or max_sessions when there is none. */
static uint32_t next_untaken(const struct okvi_server *s, uint32_t idx)
{
	for (; idx < s->max_sessions; idx++) {
		const struct okv_slot *slot = s->slots[idx];
		if (slot && !is_iox2(s, idx) &&
		    __atomic_load_n(&slot->request.generation, __ATOMIC_ACQUIRE) != s->seen_gen[idx])
			return idx;
	}
	return s->max_sessions;
}

/*
 * Rescan (see server.h): add an event for every attached slot whose request
 * generation differs from the one last taken, into events[n..max-2] (one
 * entry stays free for a control event, as in collect). A rescan cut short
 * by a full batch resumes at the next step; a complete one schedules the
 * next after OKVI_RESCAN_NS. Returns the new count.
 */
static int rescan(struct okvi_server *s, struct okvi_event *events, int n, int max, uint64_t now)
{
	for (uint32_t idx = next_untaken(s, s->rescan_next); idx < s->max_sessions;
	     idx = next_untaken(s, idx + 1)) {
		if (n >= max - 1) {
			s->rescan_next = idx; /* still due: the next step goes on from here */
			return n;
		}
		struct okv_slot *slot = s->slots[idx];
		take(s, idx, slot, __atomic_load_n(&slot->request.generation, __ATOMIC_ACQUIRE), &events[n++]);
		/* Read by other threads through okvi_server_rescued. */
		__atomic_fetch_add(&s->stats.rescued, 1, __ATOMIC_RELAXED);
	}
	s->rescan_next = 0;
	s->rescan_at_ns = now + OKVI_RESCAN_NS;
	s->stats.rescans++;
	return n;
}

/* Rescan when due. The clock is read on every idle poll and on every 16th
 * busy step, so a Manager that never idles still rescans on time. */
static int maybe_rescan(struct okvi_server *s, struct okvi_event *events, int n, int max)
{
	if (n > 0 && (++s->since_check & 15u) != 0)
		return n;
	uint64_t now = okvi_now_ns();
	if (now < s->rescan_at_ns)
		return n;
	return rescan(s, events, n, max, now);
}

/* Whether the summary word says a ring may be pending. After
 * OKVI_STRAY_STREAK empty collects in a row it is taken for noise (a
 * session ringing stray bits in a loop), so it no longer keeps the loop
 * from sleeping: the sleep stays bounded by the rescan, and an honest ring
 * still wakes it (the client sees server_parked and bumps seq). */
static int summary_rang(const struct okvi_server *s)
{
	return __atomic_load_n(&s->db->summary, __ATOMIC_SEQ_CST) != 0 && s->stray_streak < OKVI_STRAY_STREAK;
}

/* How long a sleep may last: until the next rescan, at most OKVI_PARK_MAX_NS. */
static uint64_t park_timeout(const struct okvi_server *s)
{
	uint64_t now = okvi_now_ns();
	if (s->rescan_at_ns <= now)
		return 1; /* due now: 0 would mean "forever" to okvi_futex_wait */
	uint64_t left = s->rescan_at_ns - now;
	return left < OKVI_PARK_MAX_NS ? left : OKVI_PARK_MAX_NS;
}

/*
 * Collect events from the doorbell. Clears summary, then each flagged pending
 * word (a client sets pending first, then summary, so a bit set after our
 * summary exchange keeps its summary bit for the next pass: nothing is lost).
 * Bits that do not fit in `events` are put back.
 */
static int collect(struct okvi_server *s, struct okvi_event *events, int max)
{
	struct okv_doorbell *db = s->db;
	int control = 0;
	int n = 0;
	if (__atomic_load_n(&s->ctl_pending, __ATOMIC_RELAXED) != 0)
		control = (int)__atomic_exchange_n(&s->ctl_pending, 0u, __ATOMIC_SEQ_CST);
#ifdef OKV_HAVE_IOX2
	/* Every iceoryx2 slot's receive: one look at its request queue each. */
	for (uint32_t i = 0; i < s->iox2_n && n < max - 1; i++) {
		uint32_t idx = s->iox2_list[i];
		struct okvi_event *e = &events[n];
		if (okv_iox2_server_receive(s->iox2[idx], &e->msg) != 1)
			continue;
		e->slot = idx;
		e->kind = OKVI_EV_REQUEST;
		e->prev_gen = s->seen_gen[idx];
		s->seen_gen[idx] = e->msg.generation;
		s->stats.requests++;
		n++;
	}
	if (!control && n == 0 && __atomic_load_n(&db->summary, __ATOMIC_RELAXED) == 0) {
#else
	if (!control && __atomic_load_n(&db->summary, __ATOMIC_RELAXED) == 0) {
#endif
		s->stray_streak = 0;
		return 0;
	}
	uint64_t summary = __atomic_exchange_n(&db->summary, 0, __ATOMIC_SEQ_CST);
	while (summary) {
		uint32_t w = (uint32_t)__builtin_ctzll(summary);
		summary &= summary - 1;
		uint64_t bits = __atomic_exchange_n(&db->pending[w], 0, __ATOMIC_SEQ_CST);
		while (bits) {
			uint32_t b = (uint32_t)__builtin_ctzll(bits);
			uint32_t idx = w * 64u + b;
			if (n >= max - 1) {
				/* Keep one entry free for a control event; push the rest
				 * back and flag the word again for the next step. */
				__atomic_fetch_or(&db->pending[w], bits, __ATOMIC_SEQ_CST);
				__atomic_fetch_or(&db->summary, 1ull << w, __ATOMIC_SEQ_CST);
				break;
			}
			bits &= bits - 1;
			if (idx == OKV_CONTROL_SLOT) {
				control = 1;
				continue;
			}
			struct okv_slot *slot = idx < s->max_sessions ? s->slots[idx] : NULL;
			if (!slot || is_iox2(s, idx)) {
				s->stats.stray_rings++;
				continue;
			}
			uint64_t g = __atomic_load_n(&slot->request.generation, __ATOMIC_ACQUIRE);
			if (g == s->seen_gen[idx])
				continue; /* repeated ring for a request already taken */
			take(s, idx, slot, g, &events[n++]);
		}
	}
	if (control) {
		struct okvi_event *e = &events[n++];
		memset(e, 0, sizeof(*e));
		e->slot = OKV_CONTROL_SLOT;
		e->kind = OKVI_EV_CONTROL;
	}
	/* Rings that carried nothing (stray or repeated bits): a session that
	 * keeps setting them must not keep the loop from sleeping. */
	s->stray_streak = n == 0 ? s->stray_streak + 1 : 0;
	return n;
}

/*
 * Arm the park handshake. Dekker: store server_parked, then load summary; a
 * client stores summary, then loads server_parked, so one of us sees the
 * other. Returns 1 with *seq set when the caller may sleep on db->seq
 * (server_parked stays 1); 0 when a ring arrived meanwhile (cleared again).
 */
static int arm_park(struct okvi_server *s, uint32_t *seq)
{
	struct okv_doorbell *db = s->db;
	*seq = __atomic_load_n(&db->seq, __ATOMIC_SEQ_CST);
	__atomic_store_n(&db->server_parked, 1u, __ATOMIC_SEQ_CST);
	if (!summary_rang(s) && __atomic_load_n(&s->ctl_pending, __ATOMIC_SEQ_CST) == 0) {
		s->stats.parks++;
		return 1;
	}
	__atomic_store_n(&db->server_parked, 0u, __ATOMIC_SEQ_CST);
	return 0;
}

/* Sleep on the doorbell until a client or the control path rings; in
 * iceoryx2 mode on the WaitSet (every iceoryx2 service's request listener
 * and wake_fd), bounded like the futex sleep. */
static void park(struct okvi_server *s)
{
	uint32_t seq;
#ifdef OKV_HAVE_IOX2
	if (s->iox2_ws) {
		if (arm_park(s, &seq)) {
			okv_iox2_waitset_wait(s->iox2_ws, park_timeout(s));
			__atomic_store_n(&s->db->server_parked, 0u, __ATOMIC_SEQ_CST);
			uint64_t v;
			if (read(s->wake_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: the control path did not write; nothing to drain */
			}
		}
		return;
	}
#endif
	if (arm_park(s, &seq)) {
		okvi_futex_wait(&s->db->seq, seq, park_timeout(s));
		__atomic_store_n(&s->db->server_parked, 0u, __ATOMIC_SEQ_CST);
	}
}

int okvi_server_post(struct okvi_server *s, const struct okvi_reply *replies, int nreplies)
{
	if (nreplies < 0)
		return -EINVAL;
	int woke = 0;
	for (int i = 0; i < nreplies; i++) {
		uint32_t idx = replies[i].slot;
		if (idx < s->max_sessions && s->slots[idx]) {
#ifdef OKV_HAVE_IOX2
			if (is_iox2(s, idx)) {
				/* A client that is gone is torn down by its socket. */
				okv_iox2_server_respond(s->iox2[idx], &replies[i].msg);
				s->stats.replies++;
				continue;
			}
#endif
			woke |= okvi_post_response(s->slots[idx], &replies[i].msg);
			s->stats.replies++;
		}
	}
	if (nreplies > 0) {
		/* iceoryx2 mode cannot tell whether a client slept: yield while
		 * polling, as after a wake (see okvi_server_step). */
		s->cold = woke || s->wake_fd >= 0;
		s->last_activity_ns = okvi_now_ns();
	}
	return 0;
}

int okvi_server_step(struct okvi_server *s, const struct okvi_reply *replies,
		     int nreplies, struct okvi_event *events, int max_events)
{
	if (max_events < 2 || nreplies < 0)
		return -EINVAL;
	s->stats.steps++;
	if (s->caller_parks)
		__atomic_store_n(&s->db->server_parked, 0u, __ATOMIC_SEQ_CST);
	iox2_drain(s);
	okvi_server_post(s, replies, nreplies);
	unsigned iter = 0;
	for (;;) {
		int n = maybe_rescan(s, events, collect(s, events, max_events), max_events);
		if (n > 0) {
			if (s->mode == OKVI_POLL_ADAPTIVE)
				s->last_activity_ns = okvi_now_ns();
			return n;
		}
		if (s->mode == OKVI_POLL_SPIN) {
			okvi_cpu_relax();
			continue;
		}
		if (s->mode == OKVI_POLL_ADAPTIVE) {
			if (s->cold) {
				/* The client we just had to wake may be queued on this
				 * very CPU (the kernel often places a wakee on the
				 * waker's CPU): a plain spin would delay it by the whole
				 * window. Yield while we wait instead; when nothing else
				 * is runnable here, sched_yield returns at once. */
				sched_yield();
			} else {
				okvi_cpu_relax();
				if ((++iter & 63u) != 0)
					continue;
			}
			if (okvi_now_ns() - s->last_activity_ns < s->spin_window_ns)
				continue;
		}
		if (s->caller_parks) {
			uint32_t seq;
			if (arm_park(s, &seq)) {
				s->park_seq = seq; /* the caller sleeps; next step clears the flag */
#ifdef OKV_HAVE_IOX2
				s->iox2_drain = s->iox2_node != NULL;
#endif
				return 0;
			}
			continue;
		}
		park(s);
	}
}

void okvi_server_set_caller_parks(struct okvi_server *s, int on)
{
	s->caller_parks = on ? 1 : 0;
}

uint32_t *okvi_server_ctl_word(struct okvi_server *s)
{
	return &s->ctl_pending;
}

void okvi_server_ring(struct okvi_server *s)
{
	__atomic_store_n(&s->ctl_pending, 1u, __ATOMIC_SEQ_CST);
	okvi_server_control_ring(s->db);
	if (s->wake_fd >= 0) {
		uint64_t one = 1;
		/* EAGAIN only when the counter is full: a wake is pending then. */
		if (write(s->wake_fd, &one, sizeof(one)) < 0) {
		}
	}
}

uint32_t okvi_server_park_seq(const struct okvi_server *s)
{
	return s->park_seq;
}

void okvi_server_park_wait(struct okvi_server *s)
{
	struct okv_doorbell *db = s->db;
#ifdef OKV_HAVE_IOX2
	if (s->iox2_ws) {
		/* The long sleep: iceoryx2's WaitSet (it consumes what woke it). */
		okv_iox2_waitset_wait(s->iox2_ws, park_timeout(s));
		s->iox2_drain = 1;
		return;
	}
#endif
	for (;;) {
		if (okvi_futex_wait(&db->seq, s->park_seq, park_timeout(s)) != -ETIMEDOUT)
			return;
		/* Timed out. Stay in this call (an idle Manager must not bounce
		 * through Go ten times a second) unless a ring was missed: a client
		 * may have cleared server_parked, so re-arm it and look again, or
		 * erased a ring, so look at the request lines themselves. */
		__atomic_store_n(&db->server_parked, 1u, __ATOMIC_SEQ_CST);
		if (summary_rang(s) ||
		    __atomic_load_n(&s->ctl_pending, __ATOMIC_SEQ_CST) != 0 ||
		    __atomic_load_n(&db->seq, __ATOMIC_SEQ_CST) != s->park_seq)
			return;
		uint64_t now = okvi_now_ns();
		if (now >= s->rescan_at_ns) {
			if (next_untaken(s, 0) < s->max_sessions) {
				s->rescan_at_ns = 0; /* the next step rescans and takes them */
				return;
			}
			s->rescan_at_ns = now + OKVI_RESCAN_NS;
			s->stats.rescans++;
		}
	}
}
