/*
 * native/bench/pingpong.h — raw round-trip baselines and the measurement loop
 * of `orbitkv-bench channel` (bench/channel/README.md states the method).
 *
 * Internal to the bench: compiled only by cgo (gocore/internal/native/
 * bench_csrc.c includes pingpong.c), never part of liborbitkv. Every symbol
 * is prefixed okvb_.
 *
 * Three baselines move one 64-byte message to a peer process and back:
 *   shm spin  — request and response on two cache lines of a shared memfd;
 *               each side spins (with a pause hint) on the other's sequence
 *               counter;
 *   futex     — the same mapping; each side sleeps in FUTEX_WAIT on the
 *               other's 32-bit sequence word and is woken by FUTEX_WAKE
 *               (shared futexes, never private: two processes); no spinning;
 *   uds       — blocking write(2)/read(2) of 64 bytes on a SOCK_SEQPACKET
 *               socketpair;
 *   iceoryx2  — a bare iceoryx2 request-response service (orbitkv/iox2.h);
 *               each side polls its receive for 50 µs (yielding the
 *               CPU between polls), then sleeps on
 *               the iceoryx2 event the other notifies (pingpong_iox2.c).
 *               Only where the Rust library was built (OKV_HAVE_IOX2);
 *               elsewhere its functions return -ENOSYS.
 * The client side ("the parent") lives in the bench process; the echoing side
 * ("the peer") in a separate process that the bench starts by re-executing
 * itself and handing it the fd.
 *
 * Errors: functions return 0 or a negative errno.
 */
#ifndef ORBITKV_BENCH_PINGPONG_H
#define ORBITKV_BENCH_PINGPONG_H

#include <stdint.h>
#include <sys/types.h>

#include "orbitkv/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Baselines; values are stable (Go mirrors them). */
enum okvb_kind {
	OKVB_SHM_SPIN = 1,
	OKVB_FUTEX = 2,
	OKVB_UDS = 3,
	OKVB_IOX2 = 4
};

/** Bytes of the message every baseline moves each way. */
#define OKVB_MSG_BYTES 64u
/** Bytes of the shared mapping of the shm spin and futex baselines. */
#define OKVB_SHM_BYTES 4096u
/** How long one round trip may take before the parent gives up (10 s).
 *  Generous on purpose: the first round trip also waits for the peer
 *  process to start, which on a loaded 2-vCPU VM can take over a second. */
#define OKVB_RT_TIMEOUT_NS 10000000000ull

/**
 * One round trip (or any unit of work) to be timed by okvb_measure.
 * Returns 0, or a negative code that stops the measurement and is returned.
 */
typedef int (*okvb_fn)(void *ctx);

/**
 * Run `warmup` untimed calls of fn, then `n` timed calls, writing the
 * duration of call i in nanoseconds (CLOCK_MONOTONIC) to out[i].
 * period_ns == 0: back-to-back cadence, one call right after the other.
 * period_ns  > 0: fixed cadence; before each call the thread sleeps with
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until the next tick
 * start + k*period_ns; a call that overruns its tick makes the next one start
 * at once (ticks are never re-based, so the mean rate stays 1/period).
 * out must hold n values; it is borrowed for the call only.
 * Returns 0 or the first nonzero return of fn (out[0..i) valid), or -EINVAL.
 */
int okvb_measure(okvb_fn fn, void *ctx, uint64_t n, uint64_t warmup,
		 uint64_t period_ns, uint64_t *out);

/** The parent's end of a baseline. Opaque. */
struct okvb_chan;

/**
 * Create the shared memory of the shm spin / futex baselines: a sealed-size
 * memfd of OKVB_SHM_BYTES. Returns the fd (owned by the caller) or -errno.
 */
int okvb_shm_create(void);

/**
 * Create the fd of the iceoryx2 baseline: a memfd holding a fresh service
 * name (NUL-terminated), which the peer creates and the parent opens.
 * Returns the fd (owned by the caller), -ENOSYS without the iceoryx2
 * library, or -errno.
 */
int okvb_iox2_create(void);

/**
 * Open the parent's end of a baseline on fd (borrowed: the channel dups
 * nothing and does not close fd; keep it open until okvb_chan_close).
 * kind OKVB_SHM_SPIN / OKVB_FUTEX: fd from okvb_shm_create.
 * kind OKVB_UDS: one end of a SOCK_SEQPACKET socketpair.
 * kind OKVB_IOX2: fd from okvb_iox2_create; the service is opened at the
 * first round trip (the peer creates it), -ENOSYS without the library.
 * Returns 0 and *out, or -EINVAL / -errno.
 */
int okvb_chan_open(int kind, int fd, struct okvb_chan **out);

/** One round trip of the channel's baseline; okvb_fn-compatible (ctx is the
 *  struct okvb_chan *). Errors: -ETIMEDOUT (no echo within
 *  OKVB_RT_TIMEOUT_NS), -EPROTO (echo differs), -EPIPE (peer gone), -errno. */
int okvb_chan_roundtrip(void *chan);

/** okvb_measure over okvb_chan_roundtrip. */
int okvb_chan_measure(struct okvb_chan *ch, uint64_t n, uint64_t warmup,
		      uint64_t period_ns, uint64_t *out);

/**
 * Tell the peer to exit (shm: stop flag plus a sentinel sequence and a
 * futex wake; uds: shutdown(SHUT_WR), so the peer reads EOF), unmap and free.
 * Does not close the fd. NULL is a no-op.
 */
void okvb_chan_close(struct okvb_chan *ch);

/**
 * The peer side: echo every request until the parent sets the stop flag or
 * closes its socket, the parent process `parent_pid` is gone, or no request
 * arrives for idle_ns. Arms PR_SET_PDEATHSIG(SIGKILL) first, so the peer
 * also dies with its parent. Borrows fd.
 * Returns 0 on an orderly stop, -ETIMEDOUT on idle, -ESRCH when the parent
 * is gone, -EINVAL / -errno otherwise.
 */
int okvb_peer_run(int kind, int fd, pid_t parent_pid, uint64_t idle_ns);

/* ------------------------------------------------------------------------ */
/* The orbitkv_ping subject (ping.c; links against liborbitkv)               */
/* ------------------------------------------------------------------------ */

struct okv_client;

/**
 * okvb_measure over okv_ping(client, v, &echo) with v = first_value,
 * first_value+1, ...; an echo that differs from v is -EPROTO. client is
 * borrowed and must not be used by another thread during the call.
 * Returns 0, an okv_ping error (-errno or OKV_E*), or -EINVAL.
 */
int okvb_ping_measure(struct okv_client *client, uint64_t first_value, uint64_t n,
		      uint64_t warmup, uint64_t period_ns, uint64_t *out);

#ifdef __cplusplus
}
#endif
/**
 * okvb_measure over one discovery of hashes[0..n) of ns on client, each
 * answer checked to count `want`: mode 0 okv_discover_local (the mapped
 * index), mode 1 a QueryBundle ticket with OKV_QUERY_DISCOVER (the round
 * trip), mode 2 an empty call (the timer's floor). Returns 0, -EPROTO (an
 * answer differed from want), -EINVAL, or the call's error.
 */
int okvb_discover_measure(struct okv_client *client, const struct okv_namespace *ns,
			  const struct okv_block_hash *hashes, size_t n, uint32_t want, int mode, uint64_t iters,
			  uint64_t warmup, uint64_t period_ns, uint64_t *out);

#endif /* ORBITKV_BENCH_PINGPONG_H */
