/*
 * copy.h — the Manager's copy engine (compiled only into the Manager through
 * cgo, and into C tests; not part of liborbitkv).
 *
 * A job is a list of segments (source, destination, length) in mapped
 * memory. okvi_copy_submit queues it and returns at once; a pool of worker
 * threads copies it; okvi_copy_drain hands back one completion per job.
 *
 * Parallelism: a job's segments are shared among the workers, so one big job
 * uses all of them. A piece is a segment, or a 1 MiB sub-range of a longer
 * one (OKVI_COPY_CHUNK); workers claim pieces with an atomic counter on the
 * job, and the worker that finishes the last piece pushes the completion.
 *
 * Wakeups: workers sleep on a condition variable while the queue is empty
 * (no idle spinning: the Manager is idle most of the time). A completion
 * pushed onto an empty completion queue rings the doorbell's control slot
 * (okvi_server_control_ring), which wakes the Manager's dispatcher; the
 * dispatcher then calls okvi_copy_drain until it returns fewer than it asked
 * for — a completion pushed onto a non-empty queue does not ring again.
 *
 * The bytes themselves are moved by a backend (struct okvi_copy_backend):
 * the host backend is memcpy; a device backend (cudaMemcpyAsync + event
 * wait) fits the same interface.
 *
 * Thread safety: okvi_copy_submit, okvi_copy_drain and okvi_copy_inflight may
 * be called from any threads at once. okvi_copy_engine_free must not race
 * with any other call on the same engine.
 */
#ifndef ORBITKV_COPY_H
#define ORBITKV_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

/** Pieces of a long segment are this many bytes (the last may be shorter). */
#define OKVI_COPY_CHUNK (1ull << 20)
/** Most segments in one job. */
#define OKVI_COPY_MAX_SEGS (1u << 20)
/** Most worker threads of one engine. */
#define OKVI_COPY_MAX_WORKERS 64

/**
 * One copy (24 bytes; mirrored in Go as native.CopySeg): len bytes from
 * address src to address dst, both in mapped memory of this process. The two
 * ranges must not overlap.
 */
struct okvi_copy_seg {
	uint64_t src; /* source address */
	uint64_t dst; /* destination address */
	uint64_t len; /* bytes; 0 is allowed and copies nothing */
};

/** The outcome of one job (24 bytes; mirrored in Go as native.CopyCompletion). */
struct okvi_copy_completion {
	uint64_t token;    /* the job's token, as submitted */
	int32_t status;    /* 0, or the first -errno a backend returned */
	uint32_t reserved; /* 0 */
	uint64_t bytes;    /* total length of the job's segments (also on failure) */
};

/**
 * One copy backend. copy() moves n segments and returns 0 or -errno (a
 * positive return is taken as -EIO). It must not return before the bytes are
 * in place at the destination, or it reports failure; a failure means
 * nothing of the job is still in flight (the Manager then reuses the source
 * and destination memory). A backend that cannot establish that its device
 * stopped touching the memory (a DMA that neither completed nor was
 * cancelled) must abort() the process instead of returning (docs/design.md §6
 * rule 9: terminate rather than recycle memory that may still be written).
 * Workers call it
 * concurrently with one piece each (n == 1 today), so it must be thread-safe.
 * The host backend is memcpy; a CUDA backend (cudaMemcpyAsync on a
 * per-worker stream, then an event wait) slots in here.
 */
struct okvi_copy_engine;

/** submit's answer for a job with no device memory: run it on the workers. */
#define OKVI_COPY_HOST 1

struct okvi_copy_backend {
	const char *name; /* "host", "cuda"; static storage */
	int (*copy)(void *ctx, const struct okvi_copy_seg *segs, size_t n);
	void *ctx; /* passed to copy, submit and quiesce; owned by whoever made the backend */
	/*
	 * Optional (NULL: every job goes to the workers): the asynchronous path
	 * of a device backend (copy_cuda.h). Called by okvi_copy_submit_lane,
	 * after the job was validated and its completion capacity reserved, on
	 * the submitting thread, with the validated segments (bytes: their
	 * total). Returns 0 when the backend took the job: it then calls
	 * okvi_copy_complete(e, token, ...) exactly once, from any thread,
	 * when no byte of the job is still in flight; OKVI_COPY_HOST when the
	 * job touches no device memory (the workers copy it); or -errno when
	 * nothing of the job was issued (the submit fails with it). lane
	 * names the stream set (the Manager passes the session).
	 */
	int (*submit)(void *ctx, struct okvi_copy_engine *e, uint64_t token, uint64_t lane,
		      const struct okvi_copy_seg *segs, size_t n, uint64_t bytes);
	/* Optional: return once every job submit took has been completed
	 * (okvi_copy_engine_free calls it before joining the workers). */
	void (*quiesce)(void *ctx);
};

/** The memcpy backend (static storage; never fails). */
const struct okvi_copy_backend *okvi_copy_host_backend(void);

/**
 * Start an engine with `workers` threads (1..OKVI_COPY_MAX_WORKERS) over
 * `backend` (NULL: the host backend; borrowed, must outlive the engine). db
 * (borrowed, may be NULL) is the doorbell whose control slot a completion
 * rings; it must stay mapped until okvi_copy_engine_free returns. Returns
 * NULL with errno EINVAL (bad arguments), ENOMEM, or pthread_create's error.
 */
struct okvi_copy_engine *okvi_copy_engine_new(const struct okvi_copy_backend *backend,
					      int workers, struct okv_doorbell *db);

/**
 * Queue one job of n segments (1..OKVI_COPY_MAX_SEGS) under `token`. The
 * segment array is copied: the caller's memory is free once this returns.
 * The memory the segments address must stay mapped until the job's
 * completion is drained. A job whose segments are all empty completes at
 * once. Returns 0, -EINVAL (n out of range, segs NULL, a NULL address, a
 * range that wraps or whose source and destination overlap), -ENOMEM, or
 * -ESHUTDOWN (the engine is being freed).
 */
int okvi_copy_submit(struct okvi_copy_engine *e, uint64_t token,
		     const struct okvi_copy_seg *segs, size_t n);

/**
 * okvi_copy_submit on stream set `lane` of a device backend (the Manager
 * passes the session id, so each (session, device) has its own streams);
 * the host backend ignores lane. Same returns as okvi_copy_submit, plus a
 * device backend's -errno when it issued nothing.
 */
int okvi_copy_submit_lane(struct okvi_copy_engine *e, uint64_t token, uint64_t lane,
			  const struct okvi_copy_seg *segs, size_t n);

/**
 * Push the completion of a job a backend's submit took (token, status 0 or
 * -errno, bytes as submitted), through the same queue and doorbell ring as
 * the workers' completions. Called once per such job, from any thread,
 * before okvi_copy_engine_free returns.
 */
void okvi_copy_complete(struct okvi_copy_engine *e, uint64_t token, int32_t status,
			uint64_t bytes);

/**
 * Move up to max completions, oldest first, into out; return how many (0 if
 * none or max <= 0). Never blocks on a copy (only on the completion queue's
 * mutex, held for a few stores). Call again while it returns max.
 */
int okvi_copy_drain(struct okvi_copy_engine *e, struct okvi_copy_completion *out, int max);

/** Jobs submitted and not yet drained (a relaxed atomic read: a snapshot). */
uint64_t okvi_copy_inflight(const struct okvi_copy_engine *e);

/** The engine's backend name ("host"). Static storage. */
const char *okvi_copy_backend_name(const struct okvi_copy_engine *e);

/**
 * Finish every queued job, join the workers, free the engine. Completions
 * not yet drained are dropped. NULL is a no-op.
 */
void okvi_copy_engine_free(struct okvi_copy_engine *e);

/**
 * Baseline: memcpy(dst, src, len) iters times in this thread. Returns the
 * elapsed CLOCK_MONOTONIC nanoseconds.
 */
uint64_t okvi_memcpy_bench(uint64_t dst, uint64_t src, uint64_t len, int iters);

/**
 * Submit the same job iters times, one after another, each time waiting for
 * its completion with a busy drain loop (yielding the CPU between polls, so
 * workers on a small machine are not starved). Returns the elapsed
 * CLOCK_MONOTONIC nanoseconds: the engine's throughput including its
 * handoff. Returns 0 if a submit or a copy failed. Meant for an otherwise
 * idle engine: completions of other jobs drained meanwhile are dropped.
 */
uint64_t okvi_copy_bench(struct okvi_copy_engine *e, const struct okvi_copy_seg *segs,
			 size_t n, int iters);

_Static_assert(sizeof(struct okvi_copy_seg) == 24, "copy seg size");
_Static_assert(offsetof(struct okvi_copy_seg, len) == 16, "copy seg len");
_Static_assert(sizeof(struct okvi_copy_completion) == 24, "copy completion size");
_Static_assert(offsetof(struct okvi_copy_completion, status) == 8, "completion status");
_Static_assert(offsetof(struct okvi_copy_completion, bytes) == 16, "completion bytes");

/**
 * Also set *word to 1 before each ring: the Manager's private "control
 * pending" word (okvi_server_ctl_word), which a client cannot clear the way
 * it can clear the doorbell's control bit. Call before the first submit.
 */
void okvi_copy_set_ring_word(struct okvi_copy_engine *e, uint32_t *word);

/**
 * Also write 1 to the eventfd fd (borrowed; -1: none) with each ring: the
 * poll loop's wake_fd in iceoryx2 mode (okvi_server_wake_fd), where it
 * sleeps on a WaitSet rather than the doorbell futex. Call before the
 * first submit.
 */
void okvi_copy_set_wake_fd(struct okvi_copy_engine *e, int fd);

#endif /* ORBITKV_COPY_H */
