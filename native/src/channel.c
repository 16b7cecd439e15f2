/*
 * channel.c — futex, doorbell and response-wait primitives of the
 * shared-memory channel. The protocol is described in channel.h.
 */
#define _GNU_SOURCE
#include "channel.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orbitkv/client.h"

int okvi_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tsp = &ts;
	}
	/* FUTEX_WAIT (not _PRIVATE): the word is in a MAP_SHARED mapping seen by
	 * another process; the kernel keys it by (inode, offset). */
	long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, NULL, 0);
	if (rc == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

int okvi_futex_wake(uint32_t *word, int n)
{
	long rc = syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
	return rc < 0 ? -errno : (int)rc;
}

int okvi_doorbell_ring(struct okv_doorbell *db, uint32_t slot_index)
{
	uint32_t w = slot_index / 64u, b = slot_index % 64u;
	/* seq_cst RMWs: the pending bit must be visible before the summary bit
	 * (the Manager clears summary first, then pending words), and the summary
	 * store must be ordered before our load of server_parked (Dekker with the
	 * Manager's "store server_parked; fence; load summary"). */
	__atomic_fetch_or(&db->pending[w], 1ull << b, __ATOMIC_SEQ_CST);
	__atomic_fetch_or(&db->summary, 1ull << w, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&db->server_parked, __ATOMIC_SEQ_CST)) {
		/* Bump seq so a Manager between "read seq" and FUTEX_WAIT sees a
		 * changed value and does not sleep (futex(2) EAGAIN). */
		__atomic_fetch_add(&db->seq, 1, __ATOMIC_SEQ_CST);
		okvi_futex_wake(&db->seq, 1);
		return 1;
	}
	return 0;
}

static inline uint64_t load_gen(const struct okv_msg *m)
{
	return __atomic_load_n(&m->generation, __ATOMIC_ACQUIRE);
}

int okvi_wait_response(struct okv_slot *slot, uint64_t want, uint64_t spin_ns,
		       uint64_t deadline_ns, uint64_t park_round_ns,
		       int (*alive)(void *ctx), void *ctx)
{
	if (load_gen(&slot->response) == want)
		return 0;
	/* spin_ns == 0 parks at once: the caller knows the other side needs a
	 * wakeup, and every pause here would hold a CPU the other side may be
	 * scheduled on. */
	uint64_t start = spin_ns ? okvi_now_ns() : 0;
	unsigned iter = 0;
	while (spin_ns) {
		if (load_gen(&slot->response) == want)
			return 0;
		okvi_cpu_relax();
		/* Read the clock every 64 spins: vDSO clock_gettime costs ~20 ns. */
		if ((++iter & 63u) == 0 && okvi_now_ns() - start >= spin_ns)
			break;
	}
	/* The futex word is the low half of the little-endian generation. */
	uint32_t *word = (uint32_t *)&slot->response.generation;
	for (;;) {
		uint64_t gen = load_gen(&slot->response);
		if (gen == want)
			break;
		__atomic_store_n(&slot->wait.client_parked, 1u, __ATOMIC_SEQ_CST);
		gen = __atomic_load_n(&slot->response.generation, __ATOMIC_SEQ_CST);
		if (gen == want)
			break;
		uint64_t round = park_round_ns;
		if (deadline_ns) {
			uint64_t now = okvi_now_ns();
			if (now >= deadline_ns) {
				__atomic_store_n(&slot->wait.client_parked, 0u, __ATOMIC_RELAXED);
				return OKV_ETIMEDOUT;
			}
			if (!round || deadline_ns - now < round)
				round = deadline_ns - now;
		}
		okvi_futex_wait(word, (uint32_t)gen, round);
		if (load_gen(&slot->response) == want)
			break;
		if (alive) {
			int rc = alive(ctx);
			if (rc) {
				__atomic_store_n(&slot->wait.client_parked, 0u, __ATOMIC_RELAXED);
				return rc;
			}
		}
	}
	__atomic_store_n(&slot->wait.client_parked, 0u, __ATOMIC_RELAXED);
	return 0;
}

int okvi_post_response(struct okv_slot *slot, const struct okv_msg *msg)
{
	struct okv_msg *r = &slot->response;
	/* Every field but generation, then generation with release: the client
	 * reads the line only after it load-acquires the generation it wants. */
	memcpy(r, msg, offsetof(struct okv_msg, generation));
	memcpy(&r->arg0, &msg->arg0,
	       sizeof(*msg) - offsetof(struct okv_msg, arg0));
	__atomic_store_n(&r->generation, msg->generation, __ATOMIC_SEQ_CST);
	/* seq_cst store then seq_cst load: Dekker pair with the client's
	 * "store client_parked; load generation" in okvi_wait_response. */
	if (__atomic_load_n(&slot->wait.client_parked, __ATOMIC_SEQ_CST)) {
		okvi_futex_wake((uint32_t *)&r->generation, 1);
		return 1;
	}
	return 0;
}
