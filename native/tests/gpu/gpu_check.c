/*
 * gpu_check.c — the device half of scripts/gpu-check.sh: the CUDA copy
 * backend (native/src/copy_cuda.c) through the copy engine against a real
 * driver and device. Built by CMake as okv_gpu_check (not a ctest: it needs
 * a GPU); carried to the GPU machine in the bundle of `make gpu-bundle`.
 *
 *   okv_gpu_check roundtrip         H2D then D2H through the engine, 64 KiB..
 *                                   2 MiB blocks, every byte compared
 *   okv_gpu_check bench             per block size: the engine's H2D and D2H
 *                                   GB/s beside plain cuMemcpyAsync of the
 *                                   same page-locked buffers on one stream,
 *                                   same run, and the ratio
 *   okv_gpu_check fault FILE.cubin  launch the kernel okv_fault of FILE (a
 *                                   write through a wild pointer, compiled by
 *                                   nvcc on the GPU machine) behind a copy
 *                                   job on the same context: the sticky
 *                                   error must end the process in fail-stop
 *                                   (SIGABRT, "orbitkv-manager: fail-stop"
 *                                   on stderr); the script checks that
 *
 * The driver library is $ORBITKV_LIBCUDA or libcuda.so.1 (the backend's
 * seam); the check dlopens the same library for allocation and the kernel.
 * Exit status: 0 pass, 1 a check failed, 2 setup failed (message says why).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "copy_cuda.h"

static struct {
	__typeof__(&cuMemAlloc) alloc;
	__typeof__(&cuMemFree) free_;
	__typeof__(&cuCtxSetCurrent) set_current;
	__typeof__(&cuDevicePrimaryCtxRetain) retain;
	__typeof__(&cuStreamCreate) stream_create;
	__typeof__(&cuStreamSynchronize) stream_sync;
	__typeof__(&cuMemcpyAsync) memcpy_async;
	__typeof__(&cuModuleLoad) module_load;
	__typeof__(&cuModuleGetFunction) get_function;
	__typeof__(&cuLaunchKernel) launch;
} d;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *sym(void *lib, const char *name, int need)
{
	void *p = dlsym(lib, name);
	if (!p && need) {
		fprintf(stderr, "okv_gpu_check: dlsym %s: %s\n", name, dlerror());
		exit(2);
	}
	return p;
}

static int wait_token(struct okvi_copy_engine *e, uint64_t token)
{
	struct okvi_copy_completion c;
	uint64_t end = now_ns() + 60ull * 1000000000ull;
	while (now_ns() < end) {
		if (okvi_copy_drain(e, &c, 1) == 1 && c.token == token)
			return c.status;
	}
	fprintf(stderr, "okv_gpu_check: job %llu: no completion in 60 s\n", (unsigned long long)token);
	exit(1);
}

#define NSIZES 6
static const uint64_t sizes[NSIZES] = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20};
#define TOTAL (256ull << 20) /* bytes per direction per size */

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "roundtrip";
	char err[512];
	struct okvi_cuda *cu = okvi_cuda_open(NULL, err, sizeof(err));
	if (!cu) {
		fprintf(stderr, "okv_gpu_check: %s\n", err);
		return 2;
	}
	const char *path = getenv(OKVI_CUDA_LIB_ENV);
	void *lib = dlopen(path && *path ? path : OKVI_CUDA_LIB_DEFAULT, RTLD_NOW);
	*(void **)&d.alloc = sym(lib, "cuMemAlloc_v2", 1);
	*(void **)&d.free_ = sym(lib, "cuMemFree_v2", 1);
	*(void **)&d.set_current = sym(lib, "cuCtxSetCurrent", 1);
	*(void **)&d.retain = sym(lib, "cuDevicePrimaryCtxRetain", 1);
	*(void **)&d.stream_create = sym(lib, "cuStreamCreate", 1);
	*(void **)&d.stream_sync = sym(lib, "cuStreamSynchronize", 1);
	*(void **)&d.memcpy_async = sym(lib, "cuMemcpyAsync", 1);
	*(void **)&d.module_load = sym(lib, "cuModuleLoad", 0);
	*(void **)&d.get_function = sym(lib, "cuModuleGetFunction", 0);
	*(void **)&d.launch = sym(lib, "cuLaunchKernel", 0);
	CUcontext ctx;
	if (d.retain(&ctx, 0) != CUDA_SUCCESS || d.set_current(ctx) != CUDA_SUCCESS) {
		fprintf(stderr, "okv_gpu_check: device 0's primary context\n");
		return 2;
	}
	uint8_t uuid[16];
	okvi_cuda_device_uuid(cu, 0, uuid);
	printf("device 0 of %d, uuid ", okvi_cuda_device_count(cu));
	for (int i = 0; i < 16; i++)
		printf("%02x", uuid[i]);
	printf("\n");

	struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(cu), 2, NULL);
	uint64_t span = 64ull << 20;
	CUdeviceptr dev;
	uint8_t *host = NULL, *back = NULL;
	if (d.alloc(&dev, span) != CUDA_SUCCESS || posix_memalign((void **)&host, 4096, span) ||
	    posix_memalign((void **)&back, 4096, span)) {
		fprintf(stderr, "okv_gpu_check: allocating 2 x %llu bytes\n", (unsigned long long)span);
		return 2;
	}
	if (okvi_cuda_add_range(cu, 0, dev, span) != 0 ||
	    okvi_cuda_host_register(cu, host, span, err, sizeof(err)) != 0 ||
	    okvi_cuda_host_register(cu, back, span, err, sizeof(err)) != 0) {
		fprintf(stderr, "okv_gpu_check: %s\n", err);
		return 2;
	}
	for (uint64_t i = 0; i < span; i++)
		host[i] = (uint8_t)(i * 31 + 7);
	int fails = 0;
	uint64_t token = 1;

	if (strcmp(mode, "roundtrip") == 0) {
		for (int s = 0; s < NSIZES; s++) {
			uint64_t bs = sizes[s], n = span / bs;
			struct okvi_copy_seg *h2d = calloc(n, sizeof(*h2d)), *d2h = calloc(n, sizeof(*d2h));
			for (uint64_t i = 0; i < n; i++) {
				h2d[i] = (struct okvi_copy_seg){(uint64_t)(uintptr_t)host + i * bs, dev + i * bs, bs};
				d2h[i] = (struct okvi_copy_seg){dev + i * bs, (uint64_t)(uintptr_t)back + i * bs, bs};
			}
			memset(back, 0, span);
			int a = okvi_copy_submit_lane(e, token, 1, h2d, n) ?: wait_token(e, token);
			token++;
			int b = okvi_copy_submit_lane(e, token, 1, d2h, n) ?: wait_token(e, token);
			token++;
			int same = memcmp(host, back, span) == 0;
			printf("roundtrip %7llu B blocks x %llu: h2d %d d2h %d bytes %s\n",
			       (unsigned long long)bs, (unsigned long long)n, a, b, same ? "equal" : "DIFFER");
			fails += a != 0 || b != 0 || !same;
			free(h2d);
			free(d2h);
		}
	} else if (strcmp(mode, "bench") == 0) {
		CUstream st;
		d.stream_create(&st, CU_STREAM_NON_BLOCKING);
		printf("%-9s %-4s %12s %12s %7s\n", "block", "dir", "engine GB/s", "plain GB/s", "ratio");
		for (int s = 0; s < NSIZES; s++) {
			uint64_t bs = sizes[s], n = span / bs, reps = TOTAL / span;
			struct okvi_copy_seg *seg[2] = {calloc(n, sizeof(struct okvi_copy_seg)),
							calloc(n, sizeof(struct okvi_copy_seg))};
			for (uint64_t i = 0; i < n; i++) {
				seg[0][i] = (struct okvi_copy_seg){(uint64_t)(uintptr_t)host + i * bs, dev + i * bs, bs};
				seg[1][i] = (struct okvi_copy_seg){dev + i * bs, (uint64_t)(uintptr_t)back + i * bs, bs};
			}
			for (int dir = 0; dir < 2; dir++) {
				/* plain: the same segments, cuMemcpyAsync on one stream, one sync per job */
				uint64_t t0 = now_ns();
				for (uint64_t r = 0; r < reps; r++) {
					for (uint64_t i = 0; i < n; i++)
						d.memcpy_async(seg[dir][i].dst, seg[dir][i].src, bs, st);
					d.stream_sync(st);
				}
				uint64_t plain = now_ns() - t0;
				t0 = now_ns();
				for (uint64_t r = 0; r < reps; r++) {
					int rc = okvi_copy_submit_lane(e, token, 2, seg[dir], n) ?: wait_token(e, token);
					token++;
					fails += rc != 0;
				}
				uint64_t eng = now_ns() - t0;
				double bytes = (double)(reps * span);
				printf("%-9llu %-4s %12.2f %12.2f %7.3f\n", (unsigned long long)bs,
				       dir ? "d2h" : "h2d", bytes / (double)eng, bytes / (double)plain,
				       (double)plain / (double)eng);
			}
			free(seg[0]);
			free(seg[1]);
		}
	} else if (strcmp(mode, "fault") == 0 && argc > 2) {
		CUmodule mod;
		CUfunction fn;
		if (!d.module_load || d.module_load(&mod, argv[2]) != CUDA_SUCCESS ||
		    d.get_function(&fn, mod, "okv_fault") != CUDA_SUCCESS) {
			fprintf(stderr, "okv_gpu_check: loading okv_fault from %s\n", argv[2]);
			return 2;
		}
		/* A long job in flight, then the faulting kernel on the legacy stream
		 * of the same context: the context's sticky error must reach the
		 * backend's event query or its next submit. */
		struct okvi_copy_seg big = {(uint64_t)(uintptr_t)host, dev, span};
		okvi_copy_submit_lane(e, token, 3, &big, 1);
		void *args[] = {NULL};
		CUresult lr = d.launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
		fprintf(stderr, "okv_gpu_check: launched okv_fault: %d\n", (int)lr);
		for (int i = 0; i < 100; i++) {
			token++;
			okvi_copy_submit_lane(e, token, 3, &big, 1);
			wait_token(e, token);
		}
		fprintf(stderr, "okv_gpu_check: FAIL: 100 jobs completed after the device fault\n");
		return 1;
	} else {
		fprintf(stderr, "usage: okv_gpu_check roundtrip|bench|fault FILE.cubin\n");
		return 2;
	}
	okvi_copy_engine_free(e);
	okvi_cuda_host_unregister(cu, host);
	okvi_cuda_host_unregister(cu, back);
	okvi_cuda_remove_range(cu, dev);
	d.free_(dev);
	okvi_cuda_close(cu);
	printf("okv_gpu_check %s: %s\n", mode, fails ? "FAIL" : "ok");
	return fails ? 1 : 0;
}
