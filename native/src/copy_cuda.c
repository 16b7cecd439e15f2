/*
 * copy_cuda.c — the CUDA copy backend of copy_cuda.h.
 *
 * Locks: `mu` guards the device ranges and the lanes; `pmu` guards the
 * pending list, `inflight`, `stopping`, and signals `pcv` (the completion
 * thread waits there while nothing is pending, and quiesce waits there for
 * inflight to reach 0). Neither is held across a driver call that may
 * block on the device (cuStreamSynchronize); `mu` is held across
 * cuStreamCreate only.
 *
 * Job life: submit classifies the segments against the announced device
 * ranges, issues them on the lane's stream of the job's direction, records
 * an event and appends a pending entry; the completion thread queries the
 * pending entries' events in list order every OKVI_CUDA_POLL_NS, and for
 * each finished one destroys the event, unlinks it and pushes the
 * completion. An entry is owned by the list until unlinked.
 */
#define _GNU_SOURCE
#include "copy_cuda.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The driver functions the backend calls, resolved by dlsym under their
 * ABI names (cuda.h maps e.g. cuStreamDestroy to cuStreamDestroy_v2; the
 * prototypes come from cuda.h through typeof). */
#define OKVI_CUDA_FUNCS(X)                                           \
	X(cuInit, "cuInit")                                          \
	X(cuGetErrorName, "cuGetErrorName")                          \
	X(cuDeviceGetCount, "cuDeviceGetCount")                      \
	X(cuDeviceGet, "cuDeviceGet")                                \
	X(cuDeviceGetUuid, "cuDeviceGetUuid")                        \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")      \
	X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") \
	X(cuCtxSetCurrent, "cuCtxSetCurrent")                        \
	X(cuStreamCreate, "cuStreamCreate")                          \
	X(cuStreamDestroy, "cuStreamDestroy_v2")                     \
	X(cuStreamSynchronize, "cuStreamSynchronize")                \
	X(cuMemcpyAsync, "cuMemcpyAsync")                            \
	X(cuEventCreate, "cuEventCreate")                            \
	X(cuEventRecord, "cuEventRecord")                            \
	X(cuEventQuery, "cuEventQuery")                              \
	X(cuEventDestroy, "cuEventDestroy_v2")                       \
	X(cuMemHostRegister, "cuMemHostRegister_v2")                 \
	X(cuMemHostUnregister, "cuMemHostUnregister")                 \
	X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2")                \
	X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle")                 \
	X(cuMemGetAddressRange, "cuMemGetAddressRange_v2")            \
	X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle") \
	X(cuMemAddressReserve, "cuMemAddressReserve")                 \
	X(cuMemAddressFree, "cuMemAddressFree")                       \
	X(cuMemMap, "cuMemMap")                                       \
	X(cuMemUnmap, "cuMemUnmap")                                   \
	X(cuMemSetAccess, "cuMemSetAccess")                           \
	X(cuMemRelease, "cuMemRelease")

/* The driver functions only okvi_cuda_arm_device_fault calls, resolved
 * the same way but optional: a driver without them still serves copies. */
#define OKVI_CUDA_FAULT_FUNCS(X)                             \
	X(cuModuleLoad, "cuModuleLoad")                      \
	X(cuModuleGetFunction, "cuModuleGetFunction")        \
	X(cuLaunchKernel, "cuLaunchKernel")                  \
	X(cuModuleUnload, "cuModuleUnload")

struct drv {
#define X(fn, sym) __typeof__(&fn) fn;
	OKVI_CUDA_FUNCS(X)
	/* Optional (NULL when absent): OKVI_CUDA_FAULT_FUNCS. */
	OKVI_CUDA_FAULT_FUNCS(X)
#undef X
};

struct range {
	uint64_t base, len;
	int dev;
};

/* The streams of one (lane, device): [0] H2D, [1] D2H. */
struct lane {
	uint64_t key;
	int dev;
	CUstream s[2];
};

struct pend {
	struct pend *next;
	struct okvi_copy_engine *e;
	uint64_t token, bytes;
	CUevent ev;
};

struct okvi_cuda {
	void *lib;
	struct drv d;
	int ndev;
	CUcontext ctx[OKVI_CUDA_MAX_DEVICES];
	struct okvi_copy_backend backend;

	pthread_mutex_t mu;
	struct range *ranges; /* sorted by base; nranges of them */
	size_t nranges;
	struct lane *lanes;
	size_t nlanes, lanes_cap;

	pthread_mutex_t pmu;
	pthread_cond_t pcv;
	struct pend *head, *tail;
	uint64_t inflight;
	int stopping;
	pthread_t thread;
	int thread_started;

	/* okvi_cuda_arm_device_fault: the kernel the next device job launches
	 * ahead of its copies, and its module (under mu; NULL: none armed; the
	 * module of a launched fault stays loaded: the process is ending). */
	CUfunction fault_fn;
	CUmodule fault_mod;
};

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const char *cu_name(const struct okvi_cuda *c, CUresult r, char *buf, size_t n)
{
	const char *s = NULL;
	if (c->d.cuGetErrorName && c->d.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		snprintf(buf, n, "%s (%d)", s, (int)r);
	else
		snprintf(buf, n, "CUresult %d", (int)r);
	return buf;
}

/* docs/design.md §6 rule 9: completion cannot be established, so terminate
 * rather than let the Manager recycle memory a DMA may still write. */
__attribute__((noreturn, format(printf, 1, 2))) static void fail_stop(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "orbitkv-manager: fail-stop: %s\n", msg);
	fflush(stderr);
	abort();
}

static void *completion_main(void *arg);
static int cuda_submit(void *ctx, struct okvi_copy_engine *e, uint64_t token, uint64_t lane,
		       const struct okvi_copy_seg *segs, size_t n, uint64_t bytes);
static void cuda_quiesce(void *ctx);

/* The workers' copy for host jobs (OKVI_COPY_HOST): memcpy. */
static int cuda_host_copy(void *ctx, const struct okvi_copy_seg *segs, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		memcpy((void *)(uintptr_t)segs[i].dst, (const void *)(uintptr_t)segs[i].src,
		       (size_t)segs[i].len);
	return 0;
}

struct okvi_cuda *okvi_cuda_open(const char *path, char *err, size_t errlen)
{
	if (!path || !*path)
		path = getenv(OKVI_CUDA_LIB_ENV);
	if (!path || !*path)
		path = OKVI_CUDA_LIB_DEFAULT;
	struct okvi_cuda *c = calloc(1, sizeof(*c));
	if (!c) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->pmu, NULL);
	pthread_cond_init(&c->pcv, NULL);
	char nb[96];
	CUresult r;
	c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!c->lib) {
		errf(err, errlen, "dlopen %s: %s", path, dlerror());
		goto fail;
	}
#define X(fn, sym)                                                                 \
	*(void **)(&c->d.fn) = dlsym(c->lib, sym);                                 \
	if (!c->d.fn) {                                                            \
		errf(err, errlen, "dlsym %s in %s: %s", sym, path, dlerror());     \
		goto fail;                                                         \
	}
	OKVI_CUDA_FUNCS(X)
#undef X
#define X(fn, sym) *(void **)(&c->d.fn) = dlsym(c->lib, sym);
	OKVI_CUDA_FAULT_FUNCS(X)
#undef X
	if ((r = c->d.cuInit(0)) != CUDA_SUCCESS) {
		errf(err, errlen, "%s: cuInit: %s", path, cu_name(c, r, nb, sizeof(nb)));
		goto fail;
	}
	int n = 0;
	if ((r = c->d.cuDeviceGetCount(&n)) != CUDA_SUCCESS) {
		errf(err, errlen, "%s: cuDeviceGetCount: %s", path, cu_name(c, r, nb, sizeof(nb)));
		goto fail;
	}
	if (n < 1) {
		errf(err, errlen, "%s: cuDeviceGetCount: no CUDA device", path);
		goto fail;
	}
	if (n > OKVI_CUDA_MAX_DEVICES)
		n = OKVI_CUDA_MAX_DEVICES;
	for (int i = 0; i < n; i++) {
		CUdevice dev;
		if ((r = c->d.cuDeviceGet(&dev, i)) != CUDA_SUCCESS ||
		    (r = c->d.cuDevicePrimaryCtxRetain(&c->ctx[i], dev)) != CUDA_SUCCESS) {
			errf(err, errlen, "%s: device %d: cuDevicePrimaryCtxRetain: %s", path, i,
			     cu_name(c, r, nb, sizeof(nb)));
			goto fail;
		}
		c->ndev = i + 1;
	}
	c->backend.name = "cuda";
	c->backend.copy = cuda_host_copy;
	c->backend.ctx = c;
	c->backend.submit = cuda_submit;
	c->backend.quiesce = cuda_quiesce;
	int prc = pthread_create(&c->thread, NULL, completion_main, c);
	if (prc != 0) {
		errf(err, errlen, "starting the CUDA completion thread: %s", strerror(prc));
		goto fail;
	}
	c->thread_started = 1;
	return c;
fail:
	okvi_cuda_close(c);
	return NULL;
}

int okvi_cuda_device_count(const struct okvi_cuda *c)
{
	return c->ndev;
}

int okvi_cuda_device_uuid(const struct okvi_cuda *c, int dev, uint8_t uuid[16])
{
	if (dev < 0 || dev >= c->ndev)
		return -EINVAL;
	CUdevice d;
	CUuuid u;
	if (c->d.cuDeviceGet(&d, dev) != CUDA_SUCCESS || c->d.cuDeviceGetUuid(&u, d) != CUDA_SUCCESS)
		return -EIO;
	memcpy(uuid, u.bytes, 16);
	return 0;
}

const struct okvi_copy_backend *okvi_cuda_backend(struct okvi_cuda *c)
{
	return &c->backend;
}

int okvi_cuda_add_range(struct okvi_cuda *c, int dev, uint64_t base, uint64_t len)
{
	uint64_t end;
	if (dev < 0 || dev >= c->ndev || len == 0 || base == 0 ||
	    __builtin_add_overflow(base, len, &end))
		return -EINVAL;
	pthread_mutex_lock(&c->mu);
	int rc = 0;
	size_t i = 0;
	while (i < c->nranges && c->ranges[i].base < base)
		i++;
	if ((i > 0 && c->ranges[i - 1].base + c->ranges[i - 1].len > base) ||
	    (i < c->nranges && c->ranges[i].base < end)) {
		rc = -EINVAL;
	} else if (c->nranges == OKVI_CUDA_MAX_RANGES) {
		rc = -ENOSPC;
	} else {
		struct range *nr = realloc(c->ranges, (c->nranges + 1) * sizeof(*nr));
		if (!nr) {
			rc = -ENOMEM;
		} else {
			c->ranges = nr;
			memmove(&nr[i + 1], &nr[i], (c->nranges - i) * sizeof(*nr));
			nr[i] = (struct range){base, len, dev};
			c->nranges++;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int okvi_cuda_remove_range(struct okvi_cuda *c, uint64_t base)
{
	pthread_mutex_lock(&c->mu);
	int rc = -ENOENT;
	for (size_t i = 0; i < c->nranges; i++) {
		if (c->ranges[i].base == base) {
			memmove(&c->ranges[i], &c->ranges[i + 1],
				(c->nranges - i - 1) * sizeof(*c->ranges));
			c->nranges--;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The device of the announced range holding [a, a+len), or -1 (mu held). A
 * range that only partly lies in device memory is -2 (refused). */
static int range_dev(const struct okvi_cuda *c, uint64_t a, uint64_t len)
{
	size_t lo = 0, hi = c->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->ranges[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo: first range with base > a */
	if (lo > 0) {
		const struct range *r = &c->ranges[lo - 1];
		if (a < r->base + r->len)
			return a + len <= r->base + r->len ? r->dev : -2;
	}
	if (lo < c->nranges && c->ranges[lo].base < a + len)
		return -2;
	return -1;
}

/* The lane's streams for dev, created on first use (mu held). */
static struct lane *lane_get(struct okvi_cuda *c, uint64_t key, int dev, CUresult *r)
{
	for (size_t i = 0; i < c->nlanes; i++)
		if (c->lanes[i].key == key && c->lanes[i].dev == dev)
			return &c->lanes[i];
	if (c->nlanes == c->lanes_cap) {
		size_t cap = c->lanes_cap ? c->lanes_cap * 2 : 8;
		struct lane *nl = realloc(c->lanes, cap * sizeof(*nl));
		if (!nl) {
			*r = CUDA_ERROR_OUT_OF_MEMORY;
			return NULL;
		}
		c->lanes = nl;
		c->lanes_cap = cap;
	}
	struct lane *l = &c->lanes[c->nlanes];
	l->key = key;
	l->dev = dev;
	if ((*r = c->d.cuStreamCreate(&l->s[0], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
		return NULL;
	if ((*r = c->d.cuStreamCreate(&l->s[1], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
		c->d.cuStreamDestroy(l->s[0]);
		return NULL;
	}
	c->nlanes++;
	return l;
}

/* A call failed after `issued` of the job's copies went onto stream s:
 * wait for the stream, so nothing of the job is in flight, then report
 * -EIO; or terminate when even that cannot be established. */
static int fail_partway(struct okvi_cuda *c, struct okvi_copy_engine *e, uint64_t token,
			uint64_t bytes, CUstream s, const char *call, CUresult r, size_t issued,
			size_t n)
{
	char nb[96], sb[96];
	CUresult sr = c->d.cuStreamSynchronize(s);
	if (sr != CUDA_SUCCESS)
		fail_stop("copy job %llu: %s failed with %s after %zu of %zu copies were issued, "
			  "and cuStreamSynchronize failed with %s: completion of the issued copies "
			  "cannot be established",
			  (unsigned long long)token, call, cu_name(c, r, nb, sizeof(nb)), issued, n,
			  cu_name(c, sr, sb, sizeof(sb)));
	okvi_copy_complete(e, token, -EIO, bytes);
	return 0;
}

static int cuda_submit(void *ctx, struct okvi_copy_engine *e, uint64_t token, uint64_t lane,
		       const struct okvi_copy_seg *segs, size_t n, uint64_t bytes)
{
	struct okvi_cuda *c = ctx;
	int dev = -1, d2h = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		if (segs[i].len == 0)
			continue;
		int sd = range_dev(c, segs[i].src, segs[i].len);
		int dd = range_dev(c, segs[i].dst, segs[i].len);
		if (sd == -2 || dd == -2 || (sd >= 0 && dd >= 0 && sd != dd) ||
		    (dev >= 0 && ((sd >= 0 && sd != dev) || (dd >= 0 && dd != dev)))) {
			pthread_mutex_unlock(&c->mu);
			return -EINVAL; /* straddles device memory, or spans devices */
		}
		if (sd >= 0) {
			dev = sd;
			d2h = 1;
		} else if (dd >= 0) {
			dev = dd;
		}
	}
	if (dev < 0) {
		pthread_mutex_unlock(&c->mu);
		return OKVI_COPY_HOST;
	}
	CUresult r = c->d.cuCtxSetCurrent(c->ctx[dev]);
	struct lane *l = r == CUDA_SUCCESS ? lane_get(c, lane, dev, &r) : NULL;
	CUstream s = l ? l->s[d2h] : NULL;
	/* An armed device fault (okvi_cuda_arm_device_fault) goes to the next
	 * job that issues on device 0, whose context holds its module. */
	CUfunction fault = s && dev == 0 ? c->fault_fn : NULL;
	if (fault)
		c->fault_fn = NULL, c->fault_mod = NULL;
	pthread_mutex_unlock(&c->mu);
	if (!s)
		return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO; /* nothing issued */

	struct pend *p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (fault) {
		/* okvi_cuda_arm_device_fault: a kernel that faults on the device,
		 * ordered before this job's copies on its stream, so the job's
		 * event can never report completion. */
		void *args[] = {NULL};
		r = c->d.cuLaunchKernel(fault, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
		char nb[96];
		if (r != CUDA_SUCCESS) {
			/* No fault was injected: the job fails (EIO once the stream
			 * is synchronized) rather than complete as if nothing had
			 * been asked. */
			fprintf(stderr, "orbitkv-manager: failpoint: copy job %llu: the device fault kernel did not "
				"launch: %s; the job fails\n", (unsigned long long)token, cu_name(c, r, nb, sizeof(nb)));
			free(p);
			return fail_partway(c, e, token, bytes, s, "cuLaunchKernel", r, 0, n);
		}
		fprintf(stderr, "orbitkv-manager: failpoint: copy job %llu: launched the device fault kernel "
			"ahead of its copies\n", (unsigned long long)token);
	}
	size_t issued = 0;
	for (size_t i = 0; i < n; i++) {
		if (segs[i].len == 0)
			continue;
		r = c->d.cuMemcpyAsync((CUdeviceptr)segs[i].dst, (CUdeviceptr)segs[i].src,
				       (size_t)segs[i].len, s);
		if (r != CUDA_SUCCESS) {
			free(p);
			return fail_partway(c, e, token, bytes, s, "cuMemcpyAsync", r, issued, n);
		}
		issued++;
	}
	if ((r = c->d.cuEventCreate(&p->ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
		free(p);
		return fail_partway(c, e, token, bytes, s, "cuEventCreate", r, issued, n);
	}
	if ((r = c->d.cuEventRecord(p->ev, s)) != CUDA_SUCCESS) {
		c->d.cuEventDestroy(p->ev);
		free(p);
		return fail_partway(c, e, token, bytes, s, "cuEventRecord", r, issued, n);
	}
	p->e = e;
	p->token = token;
	p->bytes = bytes;
	p->next = NULL;
	pthread_mutex_lock(&c->pmu);
	if (c->tail)
		c->tail->next = p;
	else
		c->head = p;
	c->tail = p;
	c->inflight++;
	pthread_cond_broadcast(&c->pcv);
	pthread_mutex_unlock(&c->pmu);
	return 0;
}

/* One pass over the pending jobs; returns how many completed. Only this
 * thread unlinks entries, so the list may be walked between locks: submit
 * only appends. */
static int poll_pending(struct okvi_cuda *c)
{
	int done = 0;
	pthread_mutex_lock(&c->pmu);
	struct pend *p = c->head, *prev = NULL;
	pthread_mutex_unlock(&c->pmu);
	while (p) {
		CUresult r = c->d.cuEventQuery(p->ev);
		if (r == CUDA_ERROR_NOT_READY) {
			pthread_mutex_lock(&c->pmu);
			prev = p;
			p = p->next;
			pthread_mutex_unlock(&c->pmu);
			continue;
		}
		if (r != CUDA_SUCCESS) {
			char nb[96];
			fail_stop("copy job %llu: cuEventQuery failed with %s: completion of its "
				  "copies cannot be established",
				  (unsigned long long)p->token, cu_name(c, r, nb, sizeof(nb)));
		}
		c->d.cuEventDestroy(p->ev);
		okvi_copy_complete(p->e, p->token, 0, p->bytes);
		pthread_mutex_lock(&c->pmu);
		struct pend *next = p->next;
		if (prev)
			prev->next = next;
		else
			c->head = next;
		if (c->tail == p)
			c->tail = prev;
		c->inflight--;
		if (c->inflight == 0)
			pthread_cond_broadcast(&c->pcv);
		pthread_mutex_unlock(&c->pmu);
		free(p);
		p = next;
		done++;
	}
	return done;
}

static void *completion_main(void *arg)
{
	struct okvi_cuda *c = arg;
	for (;;) {
		pthread_mutex_lock(&c->pmu);
		while (!c->head && !c->stopping)
			pthread_cond_wait(&c->pcv, &c->pmu);
		int stop = c->stopping && !c->head;
		pthread_mutex_unlock(&c->pmu);
		if (stop)
			return NULL;
		if (poll_pending(c) == 0) {
			struct timespec ts = {0, OKVI_CUDA_POLL_NS};
			nanosleep(&ts, NULL);
		}
	}
}

static void cuda_quiesce(void *ctx)
{
	struct okvi_cuda *c = ctx;
	pthread_mutex_lock(&c->pmu);
	while (c->inflight > 0)
		pthread_cond_wait(&c->pcv, &c->pmu);
	pthread_mutex_unlock(&c->pmu);
}

uint64_t okvi_cuda_inflight(struct okvi_cuda *c)
{
	pthread_mutex_lock(&c->pmu);
	uint64_t n = c->inflight;
	pthread_mutex_unlock(&c->pmu);
	return n;
}

int okvi_cuda_host_register(struct okvi_cuda *c, void *addr, size_t len, char *err,
			    size_t errlen)
{
	char nb[96];
	CUresult r = c->d.cuCtxSetCurrent(c->ctx[0]);
	if (r == CUDA_SUCCESS)
		r = c->d.cuMemHostRegister(addr, len, CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) {
		errf(err, errlen, "cuMemHostRegister of %zu bytes: %s", len,
		     cu_name(c, r, nb, sizeof(nb)));
		return -EIO;
	}
	return 0;
}

int okvi_cuda_host_unregister(struct okvi_cuda *c, void *addr)
{
	if (c->d.cuCtxSetCurrent(c->ctx[0]) != CUDA_SUCCESS ||
	    c->d.cuMemHostUnregister(addr) != CUDA_SUCCESS)
		return -EIO;
	return 0;
}

int okvi_cuda_arm_device_fault(struct okvi_cuda *c, const char *module, char *err, size_t errlen)
{
	char nb[96];
	CUresult r;
	if (!c->d.cuModuleLoad || !c->d.cuModuleGetFunction || !c->d.cuLaunchKernel || !c->d.cuModuleUnload) {
		errf(err, errlen, "the driver library lacks cuModuleLoad, cuModuleGetFunction, cuLaunchKernel or cuModuleUnload");
		return -ENOSYS;
	}
	if (!module || !*module) {
		errf(err, errlen, "no module file named");
		return -EINVAL;
	}
	CUmodule mod;
	CUfunction fn;
	/* Loaded outside mu: a real driver JIT-compiles PTX here, which must
	 * not hold up submits. The context is per thread. */
	if ((r = c->d.cuCtxSetCurrent(c->ctx[0])) != CUDA_SUCCESS ||
	    (r = c->d.cuModuleLoad(&mod, module)) != CUDA_SUCCESS) {
		errf(err, errlen, "cuModuleLoad %s: %s", module, cu_name(c, r, nb, sizeof(nb)));
		return -EIO;
	}
	if ((r = c->d.cuModuleGetFunction(&fn, mod, OKVI_CUDA_FAULT_KERNEL)) != CUDA_SUCCESS) {
		errf(err, errlen, "cuModuleGetFunction %s in %s: %s", OKVI_CUDA_FAULT_KERNEL, module,
		     cu_name(c, r, nb, sizeof(nb)));
		c->d.cuModuleUnload(mod);
		return -EIO;
	}
	pthread_mutex_lock(&c->mu);
	CUmodule old = c->fault_mod;
	c->fault_fn = fn;
	c->fault_mod = mod;
	pthread_mutex_unlock(&c->mu);
	if (old)
		c->d.cuModuleUnload(old); /* re-armed before a job took the old one: it is unused */
	return 0;
}

void okvi_cuda_close(struct okvi_cuda *c)
{
	if (!c)
		return;
	if (c->thread_started) {
		pthread_mutex_lock(&c->pmu);
		c->stopping = 1;
		pthread_cond_broadcast(&c->pcv);
		pthread_mutex_unlock(&c->pmu);
		pthread_join(c->thread, NULL);
	}
	for (size_t i = 0; i < c->nlanes; i++) {
		c->d.cuCtxSetCurrent(c->ctx[c->lanes[i].dev]);
		c->d.cuStreamDestroy(c->lanes[i].s[0]);
		c->d.cuStreamDestroy(c->lanes[i].s[1]);
	}
	for (int i = 0; i < c->ndev; i++) {
		CUdevice dev;
		if (c->d.cuDeviceGet(&dev, i) == CUDA_SUCCESS)
			c->d.cuDevicePrimaryCtxRelease(dev);
	}
	if (c->lib)
		dlclose(c->lib);
	free(c->ranges);
	free(c->lanes);
	pthread_cond_destroy(&c->pcv);
	pthread_mutex_destroy(&c->pmu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* The ordinal of the device whose UUID is uuid, or -1. */
static int dev_by_uuid(const struct okvi_cuda *c, const uint8_t uuid[16])
{
	for (int i = 0; i < c->ndev; i++) {
		uint8_t u[16];
		if (okvi_cuda_device_uuid(c, i, u) == 0 && memcmp(u, uuid, 16) == 0)
			return i;
	}
	return -1;
}

static void uuid_hex(const uint8_t uuid[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", uuid[i]);
}

/* device_of is the ordinal of the device with this UUID, or -ENODEV with
 * the UUID named in err. */
static int device_of(struct okvi_cuda *c, const uint8_t uuid[16], char *err, size_t errlen)
{
	char hex[33];
	int dev = dev_by_uuid(c, uuid);
	if (dev < 0) {
		uuid_hex(uuid, hex);
		errf(err, errlen, "no CUDA device with UUID %s on this host", hex);
		return -ENODEV;
	}
	return dev;
}

int okvi_cuda_map_ipc(struct okvi_cuda *c, const uint8_t uuid[16], const uint8_t handle[64],
		      uint64_t offset, uint64_t len, struct okvi_cuda_mapping *m, char *err,
		      size_t errlen)
{
	char nb[96];
	memset(m, 0, sizeof(*m));
	int dev = device_of(c, uuid, err, errlen);
	if (dev < 0)
		return dev;
	CUipcMemHandle h;
	memcpy(h.reserved, handle, sizeof(h.reserved));
	CUdeviceptr p = 0, base = 0;
	size_t size = 0;
	CUresult r = c->d.cuCtxSetCurrent(c->ctx[dev]);
	if (r == CUDA_SUCCESS)
		r = c->d.cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (r != CUDA_SUCCESS) {
		errf(err, errlen, "cuIpcOpenMemHandle: %s", cu_name(c, r, nb, sizeof(nb)));
		return -EIO;
	}
	if ((r = c->d.cuMemGetAddressRange(&base, &size, p)) != CUDA_SUCCESS) {
		c->d.cuIpcCloseMemHandle(p);
		errf(err, errlen, "cuMemGetAddressRange: %s", cu_name(c, r, nb, sizeof(nb)));
		return -EIO;
	}
	uint64_t end;
	if (len == 0 || __builtin_add_overflow(offset, len, &end) || end > size) {
		c->d.cuIpcCloseMemHandle(p);
		errf(err, errlen, "offset %llu + bytes %llu exceeds the allocation of %zu bytes",
		     (unsigned long long)offset, (unsigned long long)len, size);
		return -ERANGE;
	}
	m->kind = OKVI_CUDA_MAP_IPC;
	m->dev = dev;
	m->base = p;
	m->size = size;
	m->addr = p + offset;
	m->len = len;
	int rc = okvi_cuda_add_range(c, dev, m->addr, len);
	if (rc != 0) {
		c->d.cuIpcCloseMemHandle(p);
		errf(err, errlen, "announcing the range: %s", strerror(-rc));
		memset(m, 0, sizeof(*m));
	}
	return rc;
}

int okvi_cuda_map_vmm_fd(struct okvi_cuda *c, const uint8_t uuid[16], int fd, uint64_t alloc_bytes,
			 uint64_t offset, uint64_t len, struct okvi_cuda_mapping *m, char *err,
			 size_t errlen)
{
	char nb[96];
	memset(m, 0, sizeof(*m));
	int dev = device_of(c, uuid, err, errlen);
	if (dev < 0)
		return dev;
	uint64_t end;
	if (len == 0 || alloc_bytes == 0 || __builtin_add_overflow(offset, len, &end) ||
	    end > alloc_bytes) {
		errf(err, errlen, "offset %llu + bytes %llu exceeds the allocation of %llu bytes",
		     (unsigned long long)offset, (unsigned long long)len,
		     (unsigned long long)alloc_bytes);
		return -ERANGE;
	}
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr p = 0;
	const char *call = "cuCtxSetCurrent";
	int stage = 0;
	CUresult r = c->d.cuCtxSetCurrent(c->ctx[dev]);
	if (r == CUDA_SUCCESS) {
		call = "cuMemImportFromShareableHandle";
		r = c->d.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	}
	if (r == CUDA_SUCCESS) {
		stage = 1;
		call = "cuMemAddressReserve";
		r = c->d.cuMemAddressReserve(&p, (size_t)alloc_bytes, 0, 0, 0);
	}
	if (r == CUDA_SUCCESS) {
		stage = 2;
		call = "cuMemMap";
		r = c->d.cuMemMap(p, (size_t)alloc_bytes, 0, h, 0);
	}
	if (r == CUDA_SUCCESS) {
		stage = 3;
		CUmemAccessDesc a;
		memset(&a, 0, sizeof(a));
		a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a.location.id = dev;
		a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		call = "cuMemSetAccess";
		r = c->d.cuMemSetAccess(p, (size_t)alloc_bytes, &a, 1);
	}
	if (r != CUDA_SUCCESS) {
		if (stage >= 3)
			c->d.cuMemUnmap(p, (size_t)alloc_bytes);
		if (stage >= 2)
			c->d.cuMemAddressFree(p, (size_t)alloc_bytes);
		if (stage >= 1)
			c->d.cuMemRelease(h);
		errf(err, errlen, "%s: %s", call, cu_name(c, r, nb, sizeof(nb)));
		return -EIO;
	}
	m->kind = OKVI_CUDA_MAP_VMM;
	m->dev = dev;
	m->base = p;
	m->size = alloc_bytes;
	m->addr = p + offset;
	m->len = len;
	m->handle = (uint64_t)h;
	int rc = okvi_cuda_add_range(c, dev, m->addr, len);
	if (rc != 0) {
		errf(err, errlen, "announcing the range: %s", strerror(-rc));
		okvi_cuda_unmap(c, m);
	}
	return rc;
}

void okvi_cuda_unmap(struct okvi_cuda *c, struct okvi_cuda_mapping *m)
{
	if (m->kind == OKVI_CUDA_MAP_NONE)
		return;
	okvi_cuda_remove_range(c, m->addr);
	c->d.cuCtxSetCurrent(c->ctx[m->dev]);
	if (m->kind == OKVI_CUDA_MAP_IPC) {
		c->d.cuIpcCloseMemHandle(m->base);
	} else {
		c->d.cuMemUnmap(m->base, (size_t)m->size);
		c->d.cuMemAddressFree(m->base, (size_t)m->size);
		c->d.cuMemRelease((CUmemGenericAllocationHandle)m->handle);
	}
	memset(m, 0, sizeof(*m));
}
