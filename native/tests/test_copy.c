/*
 * test_copy.c — the copy engine of native/src/copy.c: copies of many sizes
 * and segment counts (every byte checked, and the bytes around each
 * destination untouched), pieces split at 1 MiB across 1..3 workers, empty
 * segments, many jobs submitted from several threads at once (each token
 * completed once with its byte count), a failing backend's -errno in the
 * completion, free finishing queued jobs, the doorbell's control slot rung
 * once per empty-to-non-empty transition, argument checks, and the two bench
 * loops. Every wait has a deadline, so a lost completion fails instead of
 * hanging. Standalone: prints each failed check, exits 1 if any failed.
 *
 * Built by CMake as a ctest (with server.c and copy.c); by hand:
 *   gcc -std=gnu11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -pthread \
 *     -Inative/include -Inative/src native/tests/test_copy.c \
 *     native/src/{copy,server,channel}.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "check.h"

#define DEADLINE_NS (20ull * 1000000000ull) /* generous: sanitizers are slow */
#define MIB (1ull << 20)
#define GUARD 64 /* bytes checked on each side of a destination */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		perror("malloc");
		exit(2);
	}
	return p;
}

static uint64_t addr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* Byte i of the pattern for seed s: varies within and across buffers. */
static uint8_t pat(uint64_t s, uint64_t i)
{
	uint64_t x = (s + 1) * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
	return (uint8_t)(x >> 56 ^ x >> 17 ^ i);
}

/* Drain until `want` completions arrived or the deadline passed; returns how
 * many were stored in out. */
static int wait_completions(struct okvi_copy_engine *e, struct okvi_copy_completion *out,
			    int want)
{
	int got = 0;
	uint64_t deadline = now_ns() + DEADLINE_NS;
	while (got < want && now_ns() < deadline) {
		int n = okvi_copy_drain(e, out + got, want - got);
		CHECK(n >= 0 && n <= want - got, "drain returned %d", n);
		got += n;
		if (n == 0)
			sleep_us(50);
	}
	CHECK(got == want, "got %d of %d completions before the deadline", got, want);
	return got;
}

/* ---- sizes x segment counts x workers ------------------------------------ */

/* One job of nseg segments of `size` bytes each; destinations are laid out in
 * reverse order with a guard gap between them. */
static void copy_and_verify(struct okvi_copy_engine *e, uint64_t size, size_t nseg,
			    uint64_t token)
{
	uint64_t stride = size + GUARD;
	uint8_t *src = xmalloc(size * nseg);
	uint8_t *dst = xmalloc(stride * nseg + GUARD);
	struct okvi_copy_seg *segs = xmalloc(nseg * sizeof(*segs));
	for (uint64_t i = 0; i < size * nseg; i++)
		src[i] = pat(token, i);
	memset(dst, 0xa5, stride * nseg + GUARD);
	for (size_t k = 0; k < nseg; k++) {
		segs[k].src = addr(src + k * size);
		segs[k].dst = addr(dst + GUARD + (nseg - 1 - k) * stride);
		segs[k].len = size;
	}
	int rc = okvi_copy_submit(e, token, segs, nseg);
	CHECK(rc == 0, "submit size %llu x %zu: %d", (unsigned long long)size, nseg, rc);
	memset(segs, 0, nseg * sizeof(*segs)); /* the engine has its own copy */
	free(segs);
	struct okvi_copy_completion c;
	if (rc == 0 && wait_completions(e, &c, 1) == 1) {
		CHECK(c.token == token && c.status == 0 && c.reserved == 0 &&
			      c.bytes == size * nseg,
		      "completion token %llu status %d bytes %llu, want %llu 0 %llu",
		      (unsigned long long)c.token, c.status, (unsigned long long)c.bytes,
		      (unsigned long long)token, (unsigned long long)(size * nseg));
		size_t bad = 0;
		for (size_t k = 0; k < nseg; k++) {
			const uint8_t *d = dst + GUARD + (nseg - 1 - k) * stride;
			if (memcmp(d, src + k * size, size) != 0)
				bad++;
			for (int g = 1; g <= GUARD; g++)
				if (d[-g] != 0xa5)
					bad++;
		}
		for (int g = 0; g < GUARD; g++)
			if (dst[stride * nseg + g] != 0xa5)
				bad++;
		CHECK(bad == 0, "size %llu x %zu segments: %zu segments or guard bytes wrong",
		      (unsigned long long)size, nseg, bad);
	}
	CHECK(okvi_copy_inflight(e) == 0, "inflight %llu after drain",
	      (unsigned long long)okvi_copy_inflight(e));
	free(src);
	free(dst);
}

static void test_sizes_and_segments(void)
{
	static const uint64_t sizes[] = {1, 7, 64, 4096, 65537, MIB - 1, MIB, MIB + 1,
					 3 * MIB + 123};
	static const size_t counts[] = {1, 2, 5, 33, 300};
	uint64_t token = 1000;
	for (int w = 1; w <= 3; w++) {
		struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, w, NULL);
		CHECK(e != NULL, "engine with %d workers: errno %d", w, errno);
		if (!e)
			continue;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				if (sizes[s] * counts[c] <= 8 * MIB) /* a 2-vCPU box */
					copy_and_verify(e, sizes[s], counts[c], token++);
		okvi_copy_engine_free(e);
	}
}

/* Empty segments copy nothing and are skipped; an all-empty job completes
 * at once with 0 bytes. */
static void test_empty_segments(void)
{
	struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, 2, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (!e)
		return;
	uint8_t src[300], dst[300];
	for (int i = 0; i < 300; i++)
		src[i] = (uint8_t)i, dst[i] = 0;
	struct okvi_copy_seg segs[] = {
		{0, 0, 0}, {addr(src), addr(dst), 100}, {0, 0, 0}, {0, 0, 0},
		{addr(src + 100), addr(dst + 100), 200}, {0, 0, 0},
	};
	CHECK(okvi_copy_submit(e, 7, segs, 6) == 0, "submit with empty segments");
	struct okvi_copy_completion c;
	if (wait_completions(e, &c, 1) == 1)
		CHECK(c.token == 7 && c.status == 0 && c.bytes == 300, "token %llu status %d bytes %llu",
		      (unsigned long long)c.token, c.status, (unsigned long long)c.bytes);
	CHECK(memcmp(src, dst, 300) == 0, "bytes around empty segments");
	CHECK(okvi_copy_submit(e, 8, segs, 1) == 0, "submit of one empty segment");
	if (wait_completions(e, &c, 1) == 1)
		CHECK(c.token == 8 && c.status == 0 && c.bytes == 0, "empty job: token %llu bytes %llu",
		      (unsigned long long)c.token, (unsigned long long)c.bytes);
	okvi_copy_engine_free(e);
}

/* ---- many jobs from several threads --------------------------------------- */

#define SUBMITTERS 3
#define JOBS_PER_SUBMITTER 150
#define JOB_MAX (48 * 1024)

struct submitter {
	struct okvi_copy_engine *e;
	int id;
	uint8_t *src; /* JOB_MAX bytes, shared read-only */
	uint8_t *dst; /* JOBS_PER_SUBMITTER * JOB_MAX bytes */
	uint64_t len[JOBS_PER_SUBMITTER];
	pthread_t thr;
};

static void *submit_run(void *arg)
{
	struct submitter *s = arg;
	unsigned seed = (unsigned)s->id * 7919u + 1;
	for (int j = 0; j < JOBS_PER_SUBMITTER; j++) {
		uint64_t len = 1 + (uint64_t)rand_r(&seed) % JOB_MAX;
		s->len[j] = len;
		/* 1..4 segments splitting len */
		struct okvi_copy_seg segs[4];
		size_t nseg = 1 + (size_t)rand_r(&seed) % 4;
		uint64_t off = 0;
		uint8_t *d = s->dst + (uint64_t)j * JOB_MAX;
		for (size_t k = 0; k < nseg; k++) {
			uint64_t part = k + 1 == nseg ? len - off : (len - off) / 2;
			segs[k] = (struct okvi_copy_seg){addr(s->src + off), addr(d + off), part};
			off += part;
		}
		uint64_t token = ((uint64_t)s->id << 32) | (uint64_t)j;
		int rc = okvi_copy_submit(s->e, token, segs, nseg);
		CHECK(rc == 0, "submitter %d job %d: %d", s->id, j, rc);
		if ((j & 15) == 0)
			sched_yield();
	}
	return NULL;
}

static void test_concurrent_jobs(void)
{
	struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, 2, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (!e)
		return;
	uint8_t *src = xmalloc(JOB_MAX);
	for (int i = 0; i < JOB_MAX; i++)
		src[i] = pat(99, (uint64_t)i);
	static struct submitter subs[SUBMITTERS];
	for (int i = 0; i < SUBMITTERS; i++) {
		subs[i].e = e;
		subs[i].id = i + 1;
		subs[i].src = src;
		subs[i].dst = calloc(JOBS_PER_SUBMITTER, JOB_MAX);
		if (!subs[i].dst)
			exit(2);
		pthread_create(&subs[i].thr, NULL, submit_run, &subs[i]);
	}
	/* Drain while the submitters run, in small batches. */
	const int total = SUBMITTERS * JOBS_PER_SUBMITTER;
	static struct okvi_copy_completion got[SUBMITTERS * JOBS_PER_SUBMITTER];
	int n = 0;
	uint64_t deadline = now_ns() + DEADLINE_NS;
	while (n < total && now_ns() < deadline) {
		int k = okvi_copy_drain(e, got + n, total - n < 7 ? total - n : 7);
		n += k;
		if (k == 0)
			sched_yield();
	}
	for (int i = 0; i < SUBMITTERS; i++)
		pthread_join(subs[i].thr, NULL);
	CHECK(n == total, "%d of %d completions", n, total);
	static uint8_t seen[SUBMITTERS + 1][JOBS_PER_SUBMITTER];
	int bad = 0;
	for (int i = 0; i < n; i++) {
		uint64_t id = got[i].token >> 32, j = got[i].token & 0xffffffffu;
		if (id < 1 || id > SUBMITTERS || j >= JOBS_PER_SUBMITTER || seen[id][j]++ ||
		    got[i].status != 0 || got[i].bytes != subs[id - 1].len[j]) {
			bad++;
			continue;
		}
		const uint8_t *d = subs[id - 1].dst + j * JOB_MAX;
		if (memcmp(d, src, got[i].bytes) != 0 ||
		    (got[i].bytes < JOB_MAX && d[got[i].bytes] != 0))
			bad++;
	}
	CHECK(bad == 0, "%d completions with a wrong token, status, byte count or data", bad);
	CHECK(okvi_copy_inflight(e) == 0, "inflight %llu", (unsigned long long)okvi_copy_inflight(e));
	okvi_copy_engine_free(e);
	for (int i = 0; i < SUBMITTERS; i++)
		free(subs[i].dst);
	free(src);
}

/* ---- backends ---------------------------------------------------------------- */

/* Fails every piece whose destination is ctx (or every piece if ctx is NULL),
 * copies the others. */
static int failing_copy(void *ctx, const struct okvi_copy_seg *segs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!ctx || segs[i].dst == addr(ctx))
			return -EIO;
		memcpy((void *)(uintptr_t)segs[i].dst, (const void *)(uintptr_t)segs[i].src,
		       (size_t)segs[i].len);
	}
	return 0;
}

static int positive_copy(void *ctx, const struct okvi_copy_seg *segs, size_t n)
{
	(void)ctx, (void)segs, (void)n;
	return 1;
}

static void test_failing_backend(void)
{
	size_t len = 3 * MIB + 5; /* four pieces */
	uint8_t *src = xmalloc(len), *dst = xmalloc(len);
	memset(src, 1, len);
	struct okvi_copy_seg seg = {addr(src), addr(dst), len};
	struct okvi_copy_completion c;

	struct okvi_copy_backend all = {.name = "fail", .copy = failing_copy, .ctx = NULL};
	struct okvi_copy_engine *e = okvi_copy_engine_new(&all, 2, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (e) {
		CHECK(strcmp(okvi_copy_backend_name(e), "fail") == 0, "backend name %s",
		      okvi_copy_backend_name(e));
		CHECK(okvi_copy_submit(e, 41, &seg, 1) == 0, "submit");
		if (wait_completions(e, &c, 1) == 1)
			CHECK(c.token == 41 && c.status == -EIO && c.bytes == len,
			      "failing backend: token %llu status %d bytes %llu",
			      (unsigned long long)c.token, c.status, (unsigned long long)c.bytes);
		CHECK(okvi_copy_bench(e, &seg, 1, 3) == 0, "bench of a failing backend is 0");
		okvi_copy_engine_free(e);
	}

	/* Only the third piece fails: the job still reports -EIO. */
	struct okvi_copy_backend one = {.name = "fail-one", .copy = failing_copy, .ctx = dst + 2 * MIB};
	e = okvi_copy_engine_new(&one, 3, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (e) {
		CHECK(okvi_copy_submit(e, 42, &seg, 1) == 0, "submit");
		if (wait_completions(e, &c, 1) == 1)
			CHECK(c.token == 42 && c.status == -EIO, "one failing piece: status %d", c.status);
		CHECK(memcmp(dst, src, 2 * MIB) == 0, "the pieces before the failing one were copied");
		okvi_copy_engine_free(e);
	}

	struct okvi_copy_backend pos = {.name = "positive", .copy = positive_copy, .ctx = NULL};
	e = okvi_copy_engine_new(&pos, 1, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (e) {
		CHECK(okvi_copy_submit(e, 43, &seg, 1) == 0, "submit");
		if (wait_completions(e, &c, 1) == 1)
			CHECK(c.status == -EIO, "a positive backend return became %d, want -EIO", c.status);
		okvi_copy_engine_free(e);
	}
	free(src);
	free(dst);
}

/* A slow backend: free must still finish every queued job. */
static int slow_calls;

static int slow_copy(void *ctx, const struct okvi_copy_seg *segs, size_t n)
{
	sleep_us(200);
	__atomic_fetch_add(&slow_calls, 1, __ATOMIC_RELAXED);
	return okvi_copy_host_backend()->copy(ctx, segs, n);
}

static void test_free_finishes_queued_jobs(void)
{
	enum { JOBS = 40, LEN = 1000 };
	struct okvi_copy_backend slow = {.name = "slow", .copy = slow_copy, .ctx = NULL};
	struct okvi_copy_engine *e = okvi_copy_engine_new(&slow, 1, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (!e)
		return;
	uint8_t *src = xmalloc(LEN), *dst = calloc(JOBS, LEN);
	if (!dst)
		exit(2);
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	for (int j = 0; j < JOBS; j++) {
		struct okvi_copy_seg seg = {addr(src), addr(dst + j * LEN), LEN};
		CHECK(okvi_copy_submit(e, (uint64_t)j, &seg, 1) == 0, "submit %d", j);
	}
	CHECK(okvi_copy_inflight(e) == JOBS, "inflight %llu, want %d",
	      (unsigned long long)okvi_copy_inflight(e), JOBS);
	okvi_copy_engine_free(e); /* most jobs are still queued */
	CHECK(slow_calls == JOBS, "backend called %d times, want %d", slow_calls, JOBS);
	int bad = 0;
	for (int j = 0; j < JOBS; j++)
		bad += memcmp(dst + j * LEN, src, LEN) != 0;
	CHECK(bad == 0, "%d of %d queued jobs not copied by free", bad, JOBS);
	free(src);
	free(dst);
}

/* ---- doorbell ----------------------------------------------------------------- */

static int control_rung(const struct okv_doorbell *db)
{
	uint32_t w = OKV_CONTROL_SLOT / 64u, b = OKV_CONTROL_SLOT % 64u;
	return (__atomic_load_n(&db->pending[w], __ATOMIC_SEQ_CST) >> b & 1) &&
	       (__atomic_load_n(&db->summary, __ATOMIC_SEQ_CST) >> w & 1);
}

static uint32_t seq_of(const struct okv_doorbell *db)
{
	return __atomic_load_n(&db->seq, __ATOMIC_SEQ_CST);
}

static void test_doorbell(void)
{
	struct okv_doorbell *db = calloc(1, sizeof(*db));
	if (!db)
		exit(2);
	struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, 2, db);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (!e) {
		free(db);
		return;
	}
	uint8_t src[4096], dst[4096];
	memset(src, 0x3c, sizeof(src));
	struct okvi_copy_seg seg = {addr(src), addr(dst), sizeof(src)};
	CHECK(okvi_copy_submit(e, 5, &seg, 1) == 0, "submit");
	uint64_t deadline = now_ns() + DEADLINE_NS;
	while (seq_of(db) == 0 && now_ns() < deadline)
		sleep_us(50);
	CHECK(seq_of(db) == 1, "seq %u after one completion, want 1", seq_of(db));
	CHECK(control_rung(db), "control slot not rung");
	CHECK(memcmp(src, dst, sizeof(src)) == 0, "bytes not in place when the doorbell rang");

	/* A second completion onto the non-empty queue does not ring. */
	CHECK(okvi_copy_submit(e, 6, &seg, 1) == 0, "submit");
	sleep_us(20000);
	struct okvi_copy_completion c[2];
	int n = okvi_copy_drain(e, c, 2);
	if (n == 2)
		CHECK(seq_of(db) == 1, "seq %u: a push onto a non-empty queue rang", seq_of(db));
	if (n < 2)
		n += wait_completions(e, c + n, 2 - n);
	CHECK(n == 2 && c[0].token == 5 && c[1].token == 6, "tokens in completion order");

	/* After a drain empties the queue, the next completion rings again. */
	uint32_t before = seq_of(db);
	/* Nothing rings while the queue is empty and no job runs. */
	memset(db->pending, 0, sizeof(db->pending));
	__atomic_store_n(&db->summary, 0, __ATOMIC_SEQ_CST);
	CHECK(okvi_copy_submit(e, 7, &seg, 1) == 0, "submit");
	if (wait_completions(e, c, 1) == 1)
		CHECK(c[0].token == 7, "token %llu", (unsigned long long)c[0].token);
	CHECK(seq_of(db) == before + 1, "seq %u, want %u", seq_of(db), before + 1);
	CHECK(control_rung(db), "control slot not rung after the queue emptied");
	okvi_copy_engine_free(e);
	free(db);
}

/* ---- arguments and benches ------------------------------------------------------ */

static void test_bad_arguments(void)
{
	errno = 0;
	CHECK(okvi_copy_engine_new(NULL, 0, NULL) == NULL && errno == EINVAL, "0 workers");
	errno = 0;
	CHECK(okvi_copy_engine_new(NULL, OKVI_COPY_MAX_WORKERS + 1, NULL) == NULL && errno == EINVAL,
	      "too many workers");
	struct okvi_copy_backend nocopy = {.name = "none", .copy = NULL, .ctx = NULL};
	CHECK(okvi_copy_engine_new(&nocopy, 1, NULL) == NULL, "backend without copy");

	struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, 1, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (!e)
		return;
	CHECK(strcmp(okvi_copy_backend_name(e), "host") == 0, "backend %s", okvi_copy_backend_name(e));
	uint8_t buf[256];
	struct okvi_copy_seg ok = {addr(buf), addr(buf + 128), 128};
	struct {
		const char *what;
		struct okvi_copy_seg seg;
		size_t n;
	} bad[] = {
		{"no segments", ok, 0},
		{"too many segments", ok, (size_t)OKVI_COPY_MAX_SEGS + 1},
		{"overlapping ranges", {addr(buf), addr(buf + 64), 128}, 1},
		{"same range", {addr(buf), addr(buf), 1}, 1},
		{"NULL source", {0, addr(buf), 16}, 1},
		{"NULL destination", {addr(buf), 0, 16}, 1},
		{"a source that wraps", {UINT64_MAX - 8, addr(buf), 16}, 1},
		{"a destination that wraps", {addr(buf), UINT64_MAX - 8, 16}, 1},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = okvi_copy_submit(e, 1, &bad[i].seg, bad[i].n);
		CHECK(rc == -EINVAL, "%s: submit returned %d, want -EINVAL", bad[i].what, rc);
	}
	CHECK(okvi_copy_submit(e, 1, NULL, 1) == -EINVAL, "NULL segment array");
	/* A bad segment after good ones refuses the whole job. */
	struct okvi_copy_seg two[2] = {ok, {addr(buf), addr(buf + 1), 2}};
	CHECK(okvi_copy_submit(e, 1, two, 2) == -EINVAL, "a bad second segment");
	CHECK(okvi_copy_inflight(e) == 0, "refused jobs counted in flight");
	struct okvi_copy_completion c;
	CHECK(okvi_copy_drain(e, &c, 0) == 0 && okvi_copy_drain(e, NULL, 4) == 0 &&
		      okvi_copy_drain(e, &c, 1) == 0,
	      "drain of nothing");
	okvi_copy_engine_free(e);
	okvi_copy_engine_free(NULL);
}

static void test_benches(void)
{
	size_t len = 256 * 1024;
	uint8_t *src = xmalloc(len), *dst = xmalloc(len);
	memset(src, 9, len);
	CHECK(okvi_memcpy_bench(addr(dst), addr(src), len, 4) > 0, "memcpy bench took no time");
	CHECK(memcmp(src, dst, len) == 0, "memcpy bench did not copy");
	struct okvi_copy_engine *e = okvi_copy_engine_new(NULL, 2, NULL);
	CHECK(e != NULL, "engine: errno %d", errno);
	if (e) {
		memset(dst, 0, len);
		struct okvi_copy_seg seg = {addr(src), addr(dst), len};
		CHECK(okvi_copy_bench(e, &seg, 1, 8) > 0, "engine bench failed");
		CHECK(memcmp(src, dst, len) == 0, "engine bench did not copy");
		CHECK(okvi_copy_inflight(e) == 0, "bench left %llu in flight",
		      (unsigned long long)okvi_copy_inflight(e));
		okvi_copy_engine_free(e);
	}
	free(src);
	free(dst);
}

int main(void)
{
	test_bad_arguments();
	test_sizes_and_segments();
	test_empty_segments();
	test_concurrent_jobs();
	test_failing_backend();
	test_free_finishes_queued_jobs();
	test_doorbell();
	test_benches();
	if (failures) {
		fprintf(stderr, "test_copy: %d failures\n", failures);
		return 1;
	}
	printf("test_copy: ok\n");
	return 0;
}
