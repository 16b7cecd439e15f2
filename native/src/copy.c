/*
 * copy.c — the copy engine of copy.h: a worker pool, a job queue and a
 * completion queue.
 *
 * Locks: `mu` guards the job queue, `stopping`, `idle` and each job's
 * `users` and `queued`; `cq_mu` guards the completion ring and `inflight`'s
 * writes. Order: mu before cq_mu (only submit holds both).
 *
 * Job life: submit allocates one block (job header, a copy of the segments,
 * and each segment's first piece index) and appends it to the queue. A job
 * stays at the head of the queue until every piece is claimed, so idle
 * workers join it; a worker holding it counts in `users`. The worker that
 * finishes the last piece pushes the completion; the last user to leave a
 * dequeued job frees it. A worker never waits while the queue is non-empty,
 * and submit signals a waiting worker for each piece (up to the number
 * waiting), so a queued job always has an awake worker.
 *
 * Completion capacity is reserved at submit (the ring holds at least as many
 * entries as jobs in flight), so a worker's push never allocates and never
 * fails.
 */
#define _GNU_SOURCE
#include "copy.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct copy_job {
	struct copy_job *next; /* queue link (mu) */
	uint64_t token;
	uint64_t bytes;        /* total of the segments' lengths */
	uint64_t npieces;      /* >= 1 for a queued job */
	size_t nseg;
	uint32_t users;        /* workers holding this job (mu) */
	uint32_t queued;       /* 1 while on the job queue (mu) */
	/*
	 * next_piece: the claim counter. fetch_add RELAXED: each value is
	 * handed out once (atomicity is all a claim needs); the segments it
	 * indexes were published by the queue mutex before any worker could
	 * see the job. Other workers increment it concurrently.
	 */
	char pad0[64];
	uint64_t next_piece;
	/*
	 * done_pieces: pieces finished. fetch_add ACQ_REL: the worker that
	 * makes it reach npieces acquires every other worker's release (the
	 * RMWs form one release sequence), so it sees their `status` stores
	 * and the order "all bytes copied, then completion pushed" holds.
	 */
	char pad1[56];
	uint64_t done_pieces;
	/*
	 * status: the first error, set by a compare-exchange from 0 (RELAXED:
	 * published to the finishing worker by done_pieces' ACQ_REL above).
	 */
	int32_t status;
	char pad2[52];
	/* followed by: struct okvi_copy_seg segs[nseg]; uint64_t first[nseg] */
	struct okvi_copy_seg segs[];
};

struct okvi_copy_engine {
	const struct okvi_copy_backend *backend;
	struct okv_doorbell *db; /* borrowed; may be NULL */
	uint32_t *ring_word;     /* borrowed; Manager-private "control pending" word, may be NULL */
	int wake_fd;             /* borrowed eventfd written with each ring, or -1 */
	int nworkers;            /* threads started */
	pthread_t *threads;

	pthread_mutex_t mu;
	pthread_cond_t cv;       /* workers wait here while the queue is empty */
	struct copy_job *head, *tail;
	int idle;                /* workers in pthread_cond_wait */
	int stopping;

	pthread_mutex_t cq_mu;
	struct okvi_copy_completion *cq; /* ring of cq_cap entries (power of 2) */
	size_t cq_cap, cq_head, cq_count;
	/*
	 * inflight: jobs submitted and not drained. Written under cq_mu (so it
	 * and cq_cap move together), read without a lock by okvi_copy_inflight
	 * with a RELAXED load: a statistic, ordering nothing.
	 */
	uint64_t inflight;
};

static int host_copy(void *ctx, const struct okvi_copy_seg *segs, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		memcpy((void *)(uintptr_t)segs[i].dst, (const void *)(uintptr_t)segs[i].src,
		       (size_t)segs[i].len);
	return 0;
}

static const struct okvi_copy_backend host_backend = {.name = "host", .copy = host_copy};

const struct okvi_copy_backend *okvi_copy_host_backend(void)
{
	return &host_backend;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t *job_first(struct copy_job *j)
{
	return (uint64_t *)(void *)(j->segs + j->nseg);
}

/* Push a completion; capacity was reserved by submit. Rings the doorbell
 * only when the queue goes from empty to non-empty, and only after the
 * mutex is released: the unlock publishes the entry (release), and the
 * dispatcher woken by the ring takes cq_mu (acquire) before reading it. */
static void push_completion(struct okvi_copy_engine *e, uint64_t token, int32_t status,
			    uint64_t bytes)
{
	pthread_mutex_lock(&e->cq_mu);
	int was_empty = e->cq_count == 0;
	struct okvi_copy_completion *c = &e->cq[(e->cq_head + e->cq_count) & (e->cq_cap - 1)];
	c->token = token;
	c->status = status;
	c->reserved = 0;
	c->bytes = bytes;
	e->cq_count++;
	pthread_mutex_unlock(&e->cq_mu);
	if (was_empty && e->db) {
		/* The private word first (seq_cst, read by the dispatcher's collect):
		 * the doorbell bit lives in client-writable memory and a client
		 * could clear it, which would lose this completion's wakeup. */
		if (e->ring_word)
			__atomic_store_n(e->ring_word, 1u, __ATOMIC_SEQ_CST);
		okvi_server_control_ring(e->db);
		if (e->wake_fd >= 0) {
			uint64_t one = 1;
			if (write(e->wake_fd, &one, sizeof(one)) < 0) {
				/* EAGAIN: the counter is full, a wake is pending */
			}
		}
	}
}

void okvi_copy_set_wake_fd(struct okvi_copy_engine *e, int fd)
{
	e->wake_fd = fd;
}

void okvi_copy_set_ring_word(struct okvi_copy_engine *e, uint32_t *word)
{
	e->ring_word = word;
}

/* Copy piece p of j: find its segment (last i with first[i] <= p; empty
 * segments share their successor's first index and are skipped this way). */
static void run_piece(struct okvi_copy_engine *e, struct copy_job *j, uint64_t p)
{
	const uint64_t *first = job_first(j);
	size_t lo = 0, hi = j->nseg;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (first[mid] <= p)
			lo = mid;
		else
			hi = mid;
	}
	const struct okvi_copy_seg *s = &j->segs[lo];
	uint64_t off = (p - first[lo]) * OKVI_COPY_CHUNK;
	uint64_t len = s->len - off < OKVI_COPY_CHUNK ? s->len - off : OKVI_COPY_CHUNK;
	struct okvi_copy_seg piece = {s->src + off, s->dst + off, len};
	int rc = e->backend->copy(e->backend->ctx, &piece, 1);
	if (rc > 0)
		rc = -EIO;
	if (rc != 0) {
		int32_t zero = 0;
		__atomic_compare_exchange_n(&j->status, &zero, rc, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
	if (__atomic_fetch_add(&j->done_pieces, 1, __ATOMIC_ACQ_REL) + 1 == j->npieces)
		push_completion(e, j->token, __atomic_load_n(&j->status, __ATOMIC_RELAXED),
				j->bytes);
}

/* Remove the head job (mu held). Only the head is ever claimed from, so an
 * exhausted job still queued is the head. */
static void dequeue_head(struct okvi_copy_engine *e)
{
	struct copy_job *j = e->head;
	e->head = j->next;
	if (!e->head)
		e->tail = NULL;
	j->next = NULL;
	j->queued = 0;
}

static void *worker_main(void *arg)
{
	struct okvi_copy_engine *e = arg;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		struct copy_job *j = e->head;
		if (!j) {
			if (e->stopping)
				break;
			e->idle++;
			pthread_cond_wait(&e->cv, &e->mu);
			e->idle--;
			continue;
		}
		uint64_t p = __atomic_fetch_add(&j->next_piece, 1, __ATOMIC_RELAXED);
		if (p + 1 >= j->npieces)
			dequeue_head(e); /* nothing left to claim: let others move on */
		if (p >= j->npieces)
			continue; /* exhausted by a holder who will free it */
		j->users++;
		pthread_mutex_unlock(&e->mu);
		do {
			run_piece(e, j, p);
			p = __atomic_fetch_add(&j->next_piece, 1, __ATOMIC_RELAXED);
		} while (p < j->npieces);
		pthread_mutex_lock(&e->mu);
		if (j->queued)
			dequeue_head(e);
		/* Every piece was claimed by a user, and each user finishes its
		 * piece before leaving: the last user out frees the job. */
		if (--j->users == 0)
			free(j);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

struct okvi_copy_engine *okvi_copy_engine_new(const struct okvi_copy_backend *backend,
					      int workers, struct okv_doorbell *db)
{
	if (!backend)
		backend = &host_backend;
	if (!backend->copy || workers < 1 || workers > OKVI_COPY_MAX_WORKERS) {
		errno = EINVAL;
		return NULL;
	}
	struct okvi_copy_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->backend = backend;
	e->db = db;
	e->wake_fd = -1;
	e->cq_cap = 16;
	e->cq = calloc(e->cq_cap, sizeof(*e->cq));
	e->threads = calloc((size_t)workers, sizeof(*e->threads));
	if (!e->cq || !e->threads) {
		free(e->cq);
		free(e->threads);
		free(e);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->cq_mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	for (int i = 0; i < workers; i++) {
		int rc = pthread_create(&e->threads[i], NULL, worker_main, e);
		if (rc != 0) {
			okvi_copy_engine_free(e); /* joins the e->nworkers started */
			errno = rc;
			return NULL;
		}
		e->nworkers++;
	}
	return e;
}

/* Make room for one more in-flight job's completion (cq_mu held). */
static int reserve_completion(struct okvi_copy_engine *e)
{
	if (e->inflight + 1 <= e->cq_cap)
		return 0;
	size_t cap = e->cq_cap * 2;
	struct okvi_copy_completion *n = malloc(cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	/* Unwrap the ring into the front of the new array. */
	for (size_t i = 0; i < e->cq_count; i++)
		n[i] = e->cq[(e->cq_head + i) & (e->cq_cap - 1)];
	free(e->cq);
	e->cq = n;
	e->cq_cap = cap;
	e->cq_head = 0;
	return 0;
}

/* Validate one segment and count its pieces. */
static int check_seg(const struct okvi_copy_seg *s, uint64_t *pieces)
{
	*pieces = (s->len + OKVI_COPY_CHUNK - 1) / OKVI_COPY_CHUNK;
	if (s->len == 0)
		return 0;
	uint64_t send, dend;
	if (s->src == 0 || s->dst == 0 || __builtin_add_overflow(s->src, s->len, &send) ||
	    __builtin_add_overflow(s->dst, s->len, &dend))
		return -EINVAL;
	if (s->src < dend && s->dst < send)
		return -EINVAL; /* overlap: memcpy's behaviour would be undefined */
	return 0;
}

void okvi_copy_complete(struct okvi_copy_engine *e, uint64_t token, int32_t status,
			uint64_t bytes)
{
	push_completion(e, token, status, bytes);
}

int okvi_copy_submit(struct okvi_copy_engine *e, uint64_t token,
		     const struct okvi_copy_seg *segs, size_t n)
{
	return okvi_copy_submit_lane(e, token, 0, segs, n);
}

/* Offer a validated job of pieces > 0 to the backend's asynchronous path
 * (copy.h): reserve its completion, then call submit without any lock held.
 * Returns 0 (taken), -errno, or OKVI_COPY_HOST with the reservation kept
 * (*reserved = 1) for the worker queue. */
static int submit_async(struct okvi_copy_engine *e, struct copy_job *j, uint64_t lane,
			int *reserved)
{
	pthread_mutex_lock(&e->mu);
	if (e->stopping) {
		pthread_mutex_unlock(&e->mu);
		return -ESHUTDOWN;
	}
	pthread_mutex_lock(&e->cq_mu);
	int rc = reserve_completion(e);
	if (rc == 0)
		__atomic_store_n(&e->inflight, e->inflight + 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->cq_mu);
	pthread_mutex_unlock(&e->mu);
	if (rc != 0)
		return rc;
	rc = e->backend->submit(e->backend->ctx, e, j->token, lane, j->segs, j->nseg, j->bytes);
	if (rc == OKVI_COPY_HOST) {
		*reserved = 1;
		return rc;
	}
	if (rc > 0)
		rc = -EIO;
	if (rc < 0) {
		pthread_mutex_lock(&e->cq_mu);
		__atomic_store_n(&e->inflight, e->inflight - 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&e->cq_mu);
	}
	return rc;
}

int okvi_copy_submit_lane(struct okvi_copy_engine *e, uint64_t token, uint64_t lane,
			  const struct okvi_copy_seg *segs, size_t n)
{
	if (!e || !segs || n < 1 || n > OKVI_COPY_MAX_SEGS)
		return -EINVAL;
	struct copy_job *j = malloc(sizeof(*j) + n * (sizeof(*segs) + sizeof(uint64_t)));
	if (!j)
		return -ENOMEM;
	memset(j, 0, sizeof(*j));
	j->token = token;
	j->nseg = n;
	memcpy(j->segs, segs, n * sizeof(*segs));
	uint64_t *first = job_first(j);
	uint64_t pieces = 0, bytes = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t k;
		int rc = check_seg(&j->segs[i], &k);
		if (rc == 0 && __builtin_add_overflow(bytes, j->segs[i].len, &bytes))
			rc = -EINVAL;
		if (rc != 0) {
			free(j);
			return rc;
		}
		first[i] = pieces;
		pieces += k;
	}
	j->npieces = pieces;
	j->bytes = bytes;

	int reserved = 0;
	if (pieces > 0 && e->backend->submit) {
		int arc = submit_async(e, j, lane, &reserved);
		if (arc != OKVI_COPY_HOST) {
			free(j);
			return arc;
		}
	}
	pthread_mutex_lock(&e->mu);
	if (e->stopping) {
		if (reserved) {
			pthread_mutex_lock(&e->cq_mu);
			__atomic_store_n(&e->inflight, e->inflight - 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&e->cq_mu);
		}
		pthread_mutex_unlock(&e->mu);
		free(j);
		return -ESHUTDOWN;
	}
	int rc = 0;
	if (!reserved) {
		pthread_mutex_lock(&e->cq_mu);
		rc = reserve_completion(e);
		if (rc == 0)
			__atomic_store_n(&e->inflight, e->inflight + 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&e->cq_mu);
	}
	if (rc != 0) {
		pthread_mutex_unlock(&e->mu);
		free(j);
		return rc;
	}
	if (pieces == 0) {
		pthread_mutex_unlock(&e->mu);
		free(j);
		push_completion(e, token, 0, 0);
		return 0;
	}
	j->queued = 1;
	if (e->tail)
		e->tail->next = j;
	else
		e->head = j;
	e->tail = j;
	/* Wake one waiting worker per piece, at most all of them. */
	uint64_t wake = pieces < (uint64_t)e->idle ? pieces : (uint64_t)e->idle;
	for (uint64_t i = 0; i < wake; i++)
		pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int okvi_copy_drain(struct okvi_copy_engine *e, struct okvi_copy_completion *out, int max)
{
	if (!e || !out || max <= 0)
		return 0;
	pthread_mutex_lock(&e->cq_mu);
	size_t k = e->cq_count < (size_t)max ? e->cq_count : (size_t)max;
	for (size_t i = 0; i < k; i++)
		out[i] = e->cq[(e->cq_head + i) & (e->cq_cap - 1)];
	e->cq_head = (e->cq_head + k) & (e->cq_cap - 1);
	e->cq_count -= k;
	__atomic_store_n(&e->inflight, e->inflight - k, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->cq_mu);
	return (int)k;
}

uint64_t okvi_copy_inflight(const struct okvi_copy_engine *e)
{
	return __atomic_load_n(&e->inflight, __ATOMIC_RELAXED);
}

const char *okvi_copy_backend_name(const struct okvi_copy_engine *e)
{
	return e->backend->name;
}

void okvi_copy_engine_free(struct okvi_copy_engine *e)
{
	if (!e)
		return;
	/* A device backend's jobs complete into this engine: wait for them
	 * before anything is torn down. */
	if (e->backend->quiesce)
		e->backend->quiesce(e->backend->ctx);
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	/* Workers leave only when the queue is empty, and a job leaves the
	 * queue only when its last piece is claimed by a worker that then
	 * finishes it: after the joins every job is done and freed. */
	for (int i = 0; i < e->nworkers; i++)
		pthread_join(e->threads[i], NULL);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->cq_mu);
	pthread_mutex_destroy(&e->mu);
	free(e->threads);
	free(e->cq);
	free(e);
}

uint64_t okvi_memcpy_bench(uint64_t dst, uint64_t src, uint64_t len, int iters)
{
	uint64_t t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, (size_t)len);
		/* Keep every iteration: the compiler may not merge the copies. */
		__asm__ __volatile__("" ::: "memory");
	}
	return now_ns() - t0;
}

uint64_t okvi_copy_bench(struct okvi_copy_engine *e, const struct okvi_copy_seg *segs,
			 size_t n, int iters)
{
	uint64_t t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		uint64_t token = UINT64_MAX - (uint64_t)i;
		if (okvi_copy_submit(e, token, segs, n) != 0)
			return 0;
		struct okvi_copy_completion c;
		for (;;) {
			if (okvi_copy_drain(e, &c, 1) == 1) {
				if (c.token != token)
					continue; /* another job's: dropped (see copy.h) */
				if (c.status != 0)
					return 0;
				break;
			}
			/* Let the workers run on a machine with few CPUs. */
			sched_yield();
		}
	}
	return now_ns() - t0;
}
