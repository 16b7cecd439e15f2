/*
 * server.h — the Manager's channel poll loop (compiled only into the Manager
 * through cgo, and into C tests).
 *
 * One dispatcher thread owns an okvi_server. okvi_server_step posts the
 * replies of the previous batch and then waits for the next batch of
 * requests, so the Go dispatcher crosses into C once per batch
 * (CONTRIBUTING.md habit 10). Attach and detach are called by the same thread
 * between steps; other threads only call okvi_server_control_ring to make a
 * step return (session attach/detach queued, shutdown).
 *
 * Waiting follows the poll mode:
 *   spin      never parks (a dedicated core);
 *   adaptive  spins for spin_window_ns after the last request, then parks;
 *   park      parks as soon as nothing is pending.
 * A parked Manager sleeps on the doorbell's seq futex; a request rings the
 * doorbell and wakes it (channel.h), so no request waits on a timer.
 *
 * The doorbell is shared by every session, so a session can clear other
 * sessions' pending and summary bits or the park flag. Two guards turn that
 * from a lost request into a bounded delay: every sleep is bounded, and at
 * least every OKVI_RESCAN_NS, busy or idle, the loop compares the request
 * line of every attached slot with the generation it last took (a rescan),
 * so a request whose ring was erased is found within OKVI_RESCAN_NS plus
 * one wakeup. Slots are private to their session; the doorbell only says
 * where to look first.
 */
#ifndef ORBITKV_SERVER_H
#define ORBITKV_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "orbitkv/abi.h"

/**
 * Longest single sleep of a parked poll loop: 100 ms. The park flag lives in
 * the doorbell, which every session can write; a misbehaving client that
 * clears it makes other clients' rings skip the wakeup, and this bound turns
 * that from a hang into a delay. Idle cost: 10 wakeups a second.
 */
#define OKVI_PARK_MAX_NS 100000000ull

/**
 * Longest time between two rescans of every attached slot's request line:
 * 100 ms, the bound on how long a request whose doorbell ring another
 * session erased can wait (plus one wakeup). A rescan reads one cache line
 * per attached session; an idle Manager does it inside its bounded sleep
 * and stays in C unless it finds a request.
 */
#define OKVI_RESCAN_NS 100000000ull

enum okvi_poll_mode {
	OKVI_POLL_SPIN = 0,
	OKVI_POLL_ADAPTIVE = 1,
	OKVI_POLL_PARK = 2
};

enum okvi_event_kind {
	OKVI_EV_REQUEST = 1, /* a new request line: msg is a private copy */
	OKVI_EV_CONTROL = 2  /* the control slot rang: check the control queue */
};

/** One event returned by a step (80 bytes; mirrored in Go). */
struct okvi_event {
	uint32_t slot;      /* slot index */
	uint32_t kind;      /* enum okvi_event_kind */
	uint64_t prev_gen;  /* request generation seen before this one */
	struct okv_msg msg; /* copy of the request line */
};

/** One reply to post (80 bytes; mirrored in Go). */
struct okvi_reply {
	uint32_t slot;      /* slot index the reply goes to */
	uint32_t reserved0;
	uint64_t reserved1;
	struct okv_msg msg; /* full response, generation = request + 1 */
};

/** Counters of the poll loop; read by the dispatcher thread only. */
struct okvi_server_stats {
	uint64_t requests;     /* request events returned */
	uint64_t replies;      /* responses posted */
	uint64_t parks;        /* times the loop slept on the futex */
	uint64_t steps;        /* okvi_server_step calls */
	uint64_t stray_rings;  /* doorbell bits of unattached slots */
	uint64_t rescued;      /* requests found by a rescan: their ring was lost */
	uint64_t rescans;      /* rescans of every attached slot */
};

struct okvi_server;

/**
 * Create a server over a mapped doorbell. max_sessions ≤ OKV_MAX_SESSIONS - 1
 * (the last index is the control slot). Returns NULL on bad arguments or
 * ENOMEM.
 */
struct okvi_server *okvi_server_new(struct okv_doorbell *db, uint32_t max_sessions,
				    int mode, uint64_t spin_window_ns);
/** Free the server (does not unmap the doorbell or any slot). */
void okvi_server_free(struct okvi_server *s);
/** Change the poll mode and window; dispatcher thread only. */
void okvi_server_set_mode(struct okvi_server *s, int mode, uint64_t spin_window_ns);

/**
 * Attach a mapped slot at slot_index (dispatcher thread, between steps).
 * `seen_gen` is the request generation currently in the line (0 for a fresh
 * slot). Returns 0 or -EINVAL / -EBUSY.
 */
int okvi_server_attach(struct okvi_server *s, uint32_t slot_index,
		       struct okv_slot *slot, uint64_t seen_gen);
/** Detach the slot at slot_index; after it returns the server never touches
 *  that mapping again, so the caller may unmap it. */
void okvi_server_detach(struct okvi_server *s, uint32_t slot_index);

/**
 * Post `nreplies` replies, then wait (per poll mode) until at least one event
 * is available, and return up to max_events of them (≥ 1; 0 only in
 * caller-parks mode, see below). Requests that do not fit stay pending for
 * the next step. Returns the count or -EINVAL.
 */
int okvi_server_step(struct okvi_server *s, const struct okvi_reply *replies,
		     int nreplies, struct okvi_event *events, int max_events);

/**
 * Caller-parks mode: instead of sleeping in the kernel itself, a step that
 * would park leaves server_parked set and returns 0; the caller then sleeps
 * with FUTEX_WAIT on &db->seq for the value okvi_server_park_seq returns, and
 * calls the next step when woken (which clears server_parked). The Go
 * dispatcher uses this so the sleep happens outside a cgo call: Go's runtime
 * wakes its sysmon thread whenever a long cgo call returns, an extra
 * cross-CPU wakeup on every request that arrives at a parked Manager.
 */
void okvi_server_set_caller_parks(struct okvi_server *s, int on);
/** The futex value for the caller's sleep after a step returned 0. */
uint32_t okvi_server_park_seq(const struct okvi_server *s);
/** The caller's sleep done in C (FUTEX_WAIT on &db->seq for park_seq, no
 *  timeout): for callers that want to block inside a foreign call. */
void okvi_server_park_wait(struct okvi_server *s);

/** Post replies without waiting for requests (used once at shutdown).
 *  Returns 0 or -EINVAL. */
int okvi_server_post(struct okvi_server *s, const struct okvi_reply *replies, int nreplies);

/** Make the current or next step return a control event. Any thread. */
void okvi_server_control_ring(struct okv_doorbell *db);

/**
 * The server's private "control pending" word: a thread of the Manager's
 * process that stores 1 here (seq_cst) before okvi_server_control_ring
 * gets its control event even if a client cleared the doorbell's control
 * bit (the doorbell is client-writable memory). The copy engine uses it.
 */
uint32_t *okvi_server_ctl_word(struct okvi_server *s);
/** Set the private word, then ring: a control event that clients cannot
 *  suppress. Any thread of the Manager. */
void okvi_server_ring(struct okvi_server *s);

/**
 * iceoryx2 mode (orbitkv/iox2.h; the Manager's --channel-transport
 * iceoryx2): slots attached with okvi_server_attach_iox2 take their
 * requests from, and post their responses to, their own iceoryx2
 * request-response service instead of the slot's request and response
 * lines (descriptors stay in the slot). The loop polls every such service
 * while it spins (yielding the CPU, as after a wake) and sleeps on one
 * iceoryx2 WaitSet over their request listeners and a private eventfd
 * that okvi_server_ring writes (okvi_server_wake_fd; the copy engine's
 * completions write it too), bounded like the futex sleep; in
 * caller-parks mode the caller sleeps (okvi_server_park_fd). Call once,
 * before the first attach. It makes the Manager's iceoryx2 runtime
 * (okv_iox2_runtime_new; okvi_server_iox2_runtime). Returns 0, -ENOSYS in
 * a build without the library (OKV_HAVE_IOX2), -ENOMEM or -EIO; err gets
 * the reason.
 */
int okvi_server_use_iox2(struct okvi_server *s, char *err, size_t errlen);
/**
 * Attach like okvi_server_attach and create the slot's iceoryx2 service
 * `name` exclusively (one client). -EEXIST when the name exists, -EINVAL /
 * -EBUSY as okvi_server_attach, -EIO, -ENOSYS; err gets the reason.
 * okvi_server_detach frees the service.
 */
int okvi_server_attach_iox2(struct okvi_server *s, uint32_t slot_index, struct okv_slot *slot,
			    uint64_t seen_gen, const char *name, char *err, size_t errlen);
/** The iceoryx2 runtime okvi_server_use_iox2 made (okv_iox2_runtime_new:
 *  the /dev/shm prefix and root directory its clients open their nodes
 *  in; removed by okvi_server_free), "" before it or without iceoryx2.
 *  Valid until okvi_server_free. */
const char *okvi_server_iox2_runtime(const struct okvi_server *s);
/** The eventfd okvi_server_ring writes in iceoryx2 mode, else -1. */
int okvi_server_wake_fd(const struct okvi_server *s);
/**
 * iceoryx2 mode in caller-parks mode: an epoll fd over every iceoryx2
 * session's request listener (iceoryx2's event service) and wake_fd; the
 * caller's short sleep after a step returned 0 is epoll_wait on it (a raw
 * system call, like the futex sleep of the shm transport), and its long one
 * okvi_server_park_wait, which sleeps on the iceoryx2 WaitSet. The next
 * step consumes the notifications. -1 outside iceoryx2 mode.
 */
int okvi_server_park_fd(const struct okvi_server *s);

/** Copy the counters. Dispatcher thread only. */
void okvi_server_stats(const struct okvi_server *s, struct okvi_server_stats *out);
/** stats.rescued (requests whose doorbell ring was erased, found by a
 *  rescan). Any thread. */
uint64_t okvi_server_rescued(const struct okvi_server *s);

_Static_assert(sizeof(struct okvi_event) == 80, "event size");
_Static_assert(sizeof(struct okvi_reply) == 80, "reply size");

#endif /* ORBITKV_SERVER_H */
