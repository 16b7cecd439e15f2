/*
 * channel.h — the shared-memory channel primitives both sides use.
 *
 * Internal to OrbitKV (okvi_ prefix). The layouts are in orbitkv/abi.h; this
 * file holds the memory-ordering protocol on top of them:
 *
 *  Request (client → Manager)
 *    client: write request fields; store-release request.generation (odd);
 *            okvi_doorbell_ring(slot_index)
 *    Manager: finds the bit, load-acquire request.generation, copies the line.
 *
 *  Response (Manager → client)
 *    Manager: write response fields; store-release response.generation;
 *             full fence; if wait.client_parked: FUTEX_WAKE on the low 32 bits
 *             of response.generation.
 *    client: spin on load-acquire response.generation up to spin_ns; then
 *            store client_parked = 1; full fence; re-check; FUTEX_WAIT.
 *
 *  The two "store; full fence; load" pairs form a Dekker handshake: at least
 *  one side sees the other's store, so a parked waiter is always woken and a
 *  request never waits on a timer (futex(2), "FUTEX_WAIT ... if the value at
 *  uaddr still equals val").
 */
#ifndef ORBITKV_CHANNEL_H
#define ORBITKV_CHANNEL_H

#include <stdint.h>
#include <time.h>

#include "orbitkv/abi.h"

/** CPU relax hint inside spin loops (PAUSE on x86, YIELD on arm64). */
static inline void okvi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/** CLOCK_MONOTONIC in nanoseconds (vDSO; ~20 ns). */
static inline uint64_t okvi_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/**
 * FUTEX_WAIT (shared, not private: the word lives in a MAP_SHARED memfd) on
 * *word while it equals `expected`, for at most timeout_ns (0 = forever).
 * Returns 0 when woken or the value differed, -ETIMEDOUT, -EINTR.
 */
int okvi_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);

/** FUTEX_WAKE up to `n` waiters on *word. Returns woken count or -errno. */
int okvi_futex_wake(uint32_t *word, int n);

/**
 * Tell the Manager that `slot_index` has a pending request: set its pending
 * bit, then its summary bit, and wake the Manager if it is parked.
 * Cost when the Manager spins: two locked RMWs and one load.
 * Returns 1 if the Manager was parked (this call woke it), else 0.
 */
int okvi_doorbell_ring(struct okv_doorbell *db, uint32_t slot_index);

/**
 * Wait until the response line's generation equals `want`: spin up to spin_ns,
 * then park on the futex in rounds of at most park_round_ns, calling
 * alive(ctx) between rounds (NULL = no check). Returns 0, OKV_ETIMEDOUT when
 * deadline_ns (CLOCK_MONOTONIC, 0 = none) passed, or alive()'s nonzero code.
 */
int okvi_wait_response(struct okv_slot *slot, uint64_t want, uint64_t spin_ns,
		       uint64_t deadline_ns, uint64_t park_round_ns,
		       int (*alive)(void *ctx), void *ctx);

/**
 * Publish a response (Manager side): copy `msg` into the response line with
 * generation stored last (release), then wake the client if it parked.
 * Returns 1 if the client was parked (this call woke it), else 0.
 */
int okvi_post_response(struct okv_slot *slot, const struct okv_msg *msg);

#endif /* ORBITKV_CHANNEL_H */
