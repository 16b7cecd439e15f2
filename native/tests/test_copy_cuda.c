/*
 * test_copy_cuda.c — the CUDA copy backend (native/src/copy_cuda.c) driven
 * through the copy engine, against the fault-injecting double of the
 * driver library (native/tests/cuda_double/, path OKV_CUDA_DOUBLE, loaded
 * through the backend's dlopen seam): the open errors (no library, no
 * device), H2D and D2H jobs of several segments with every byte checked and
 * host jobs left to the workers, device range checks, a copy failing
 * partway (the stream synchronized before -EIO is reported, so the issued
 * copies are in place and the rest not), engine free waiting for jobs in
 * flight, page-locking, and the two fail-stop paths in a child process: a
 * sticky error at submit (the stream cannot be synchronized) and a lost
 * device found by the completion thread (cuEventQuery fails); each must
 * abort with "fail-stop" and the reason on stderr. What needs a real GPU is
 * in scripts/gpu-check.sh.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "copy.h"
#include "copy_cuda.h"

#define DEADLINE_NS (60ull * 1000000000ull)

static void *dbl;
static void (*d_reset)(void);
static int (*d_fault)(const char *, int, int, int);
static int (*d_calls)(const char *);
static long (*d_registered)(void);
static CUresult (*d_alloc)(CUdeviceptr *, size_t);
static CUresult (*d_free)(CUdeviceptr);
static CUresult (*d_ipc_get)(CUipcMemHandle *, CUdeviceptr);
static int (*d_ipc_open)(void);

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait for the completion of one job; status in *st. Returns 0 or -1 on
 * the deadline. */
static int wait_one(struct okvi_copy_engine *e, uint64_t token, struct okvi_copy_completion *out)
{
	uint64_t end = now_ns() + DEADLINE_NS;
	while (now_ns() < end) {
		if (okvi_copy_drain(e, out, 1) == 1) {
			if (out->token == token)
				return 0;
			continue;
		}
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

static struct okvi_cuda *open_double(void)
{
	char err[256] = "";
	struct okvi_cuda *c = okvi_cuda_open(OKV_CUDA_DOUBLE, err, sizeof(err));
	CHECK(c != NULL, "okvi_cuda_open(double): %s", err);
	return c;
}

static void test_open_errors(void)
{
	char err[256] = "";
	CHECK(okvi_cuda_open("/nonexistent/libcuda.so.1", err, sizeof(err)) == NULL, "opened");
	CHECK(strstr(err, "dlopen /nonexistent/libcuda.so.1") != NULL, "error '%s'", err);

	setenv("ORBITKV_CUDA_DOUBLE_DEVICES", "0", 1);
	err[0] = 0;
	CHECK(okvi_cuda_open(OKV_CUDA_DOUBLE, err, sizeof(err)) == NULL, "opened without a device");
	CHECK(strstr(err, "cuInit: CUDA_ERROR_NO_DEVICE (100)") != NULL, "error '%s'", err);
	unsetenv("ORBITKV_CUDA_DOUBLE_DEVICES");

	/* The seam's environment variable names the library when path is NULL. */
	setenv(OKVI_CUDA_LIB_ENV, "/nonexistent/by-env.so", 1);
	err[0] = 0;
	CHECK(okvi_cuda_open(NULL, err, sizeof(err)) == NULL, "opened");
	CHECK(strstr(err, "dlopen /nonexistent/by-env.so") != NULL, "error '%s'", err);
	setenv(OKVI_CUDA_LIB_ENV, OKV_CUDA_DOUBLE, 1);
	struct okvi_cuda *c = okvi_cuda_open(NULL, err, sizeof(err));
	CHECK(c != NULL, "open by %s: %s", OKVI_CUDA_LIB_ENV, err);
	unsetenv(OKVI_CUDA_LIB_ENV);
	if (c) {
		uint8_t u[16];
		CHECK(okvi_cuda_device_count(c) == 1, "devices %d", okvi_cuda_device_count(c));
		CHECK(okvi_cuda_device_uuid(c, 0, u) == 0 && u[0] == 0xd0, "uuid");
		CHECK(okvi_cuda_device_uuid(c, 1, u) == -EINVAL, "uuid of device 1");
		CHECK(strcmp(okvi_cuda_backend(c)->name, "cuda") == 0, "name");
	}
	okvi_cuda_close(c);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void test_round_trip(void)
{
	d_reset();
	struct okvi_cuda *c = open_double();
	if (!c)
		return;
	struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(c), 2, NULL);
	CHECK(e != NULL, "engine");
	CHECK(strcmp(okvi_copy_backend_name(e), "cuda") == 0, "backend name");
	enum { N = 4, SZ = 3 << 20 };
	CUdeviceptr dev;
	CHECK(d_alloc(&dev, N * SZ) == CUDA_SUCCESS, "alloc");
	uint8_t *host = malloc(N * SZ), *back = calloc(1, N * SZ);
	fill(host, N * SZ, 3);
	CHECK(okvi_cuda_add_range(c, 0, dev, N * SZ) == 0, "add range");
	CHECK(okvi_cuda_add_range(c, 0, dev + SZ, 10) == -EINVAL, "overlapping range accepted");
	CHECK(okvi_cuda_add_range(c, 1, dev + N * SZ, 10) == -EINVAL, "device 1 accepted");

	struct okvi_copy_seg h2d[N], d2h[N];
	for (int i = 0; i < N; i++) {
		h2d[i] = (struct okvi_copy_seg){(uint64_t)(uintptr_t)host + i * SZ, dev + i * SZ, SZ};
		d2h[i] = (struct okvi_copy_seg){dev + i * SZ, (uint64_t)(uintptr_t)back + i * SZ, SZ};
	}
	struct okvi_copy_completion cc;
	CHECK(okvi_copy_submit_lane(e, 1, 7, h2d, N) == 0, "submit h2d");
	CHECK(wait_one(e, 1, &cc) == 0 && cc.status == 0 && cc.bytes == (uint64_t)N * SZ,
	      "h2d completion status %d bytes %llu", cc.status, (unsigned long long)cc.bytes);
	CHECK(okvi_copy_submit_lane(e, 2, 7, d2h, N) == 0, "submit d2h");
	CHECK(wait_one(e, 2, &cc) == 0 && cc.status == 0, "d2h completion status %d", cc.status);
	CHECK(memcmp(host, back, N * SZ) == 0, "bytes differ after H2D then D2H");
	CHECK(d_calls("cuMemcpyAsync") == 2 * N, "cuMemcpyAsync calls %d", d_calls("cuMemcpyAsync"));
	/* One lane, two directions: two streams. */
	CHECK(d_calls("cuStreamCreate") == 2, "streams %d", d_calls("cuStreamCreate"));
	CHECK(d_calls("cuEventRecord") == 2, "events %d", d_calls("cuEventRecord"));
	CHECK(d_calls("cuEventQuery") >= 4, "event queries %d (the double answers NOT_READY first)",
	      d_calls("cuEventQuery"));

	/* Another lane gets its own streams. */
	CHECK(okvi_copy_submit_lane(e, 3, 8, h2d, 1) == 0, "submit lane 8");
	CHECK(wait_one(e, 3, &cc) == 0 && cc.status == 0, "lane 8 status %d", cc.status);
	CHECK(d_calls("cuStreamCreate") == 4, "streams %d", d_calls("cuStreamCreate"));

	/* A host job goes to the workers, not the driver. */
	memset(back, 0, SZ);
	struct okvi_copy_seg hh = {(uint64_t)(uintptr_t)host, (uint64_t)(uintptr_t)back, SZ};
	CHECK(okvi_copy_submit(e, 4, &hh, 1) == 0, "submit host");
	CHECK(wait_one(e, 4, &cc) == 0 && cc.status == 0, "host job status %d", cc.status);
	CHECK(memcmp(host, back, SZ) == 0, "host job bytes");
	CHECK(d_calls("cuMemcpyAsync") == 2 * N + 1, "host job reached the driver");

	/* A segment running off the end of device memory is refused. */
	struct okvi_copy_seg bad = {(uint64_t)(uintptr_t)host, dev + N * SZ - 16, 32};
	CHECK(okvi_copy_submit(e, 5, &bad, 1) == -EINVAL, "straddling segment accepted");
	CHECK(okvi_copy_inflight(e) == 0, "inflight %llu after a refused job",
	      (unsigned long long)okvi_copy_inflight(e));

	/* Page-locking the host side. */
	char err[128] = "";
	long before = d_registered();
	CHECK(okvi_cuda_host_register(c, host, SZ, err, sizeof(err)) == 0, "register: %s", err);
	CHECK(d_registered() - before == SZ, "registered %ld", d_registered() - before);
	CHECK(okvi_cuda_host_unregister(c, host) == 0, "unregister");

	/* Free with jobs in flight waits for them (quiesce). */
	for (int i = 0; i < 16; i++)
		CHECK(okvi_copy_submit_lane(e, 100 + i, 9, d2h, N) == 0, "submit %d", i);
	okvi_copy_engine_free(e);
	CHECK(okvi_cuda_inflight(c) == 0, "inflight %llu after engine free",
	      (unsigned long long)okvi_cuda_inflight(c));
	CHECK(okvi_cuda_remove_range(c, dev) == 0 && okvi_cuda_remove_range(c, dev) == -ENOENT,
	      "remove range");
	okvi_cuda_close(c);
	d_free(dev);
	free(host);
	free(back);
}

static void test_partial_failure(void)
{
	d_reset();
	struct okvi_cuda *c = open_double();
	if (!c)
		return;
	struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(c), 1, NULL);
	enum { N = 4, SZ = 4096 };
	CUdeviceptr dev;
	d_alloc(&dev, N * SZ);
	memset((void *)(uintptr_t)dev, 0, N * SZ);
	uint8_t *host = malloc(N * SZ);
	fill(host, N * SZ, 9);
	okvi_cuda_add_range(c, 0, dev, N * SZ);
	struct okvi_copy_seg segs[N];
	for (int i = 0; i < N; i++)
		segs[i] = (struct okvi_copy_seg){(uint64_t)(uintptr_t)host + i * SZ, dev + i * SZ, SZ};
	/* The third copy of the job fails: two were issued and must be done
	 * (the stream synchronized) before -EIO is reported. */
	d_fault("cuMemcpyAsync", 3, CUDA_ERROR_INVALID_VALUE, 0);
	struct okvi_copy_completion cc;
	CHECK(okvi_copy_submit_lane(e, 1, 1, segs, N) == 0, "submit");
	CHECK(wait_one(e, 1, &cc) == 0 && cc.status == -EIO && cc.bytes == N * SZ,
	      "completion status %d (want -EIO)", cc.status);
	CHECK(d_calls("cuStreamSynchronize") == 1, "cuStreamSynchronize calls %d",
	      d_calls("cuStreamSynchronize"));
	const uint8_t *d = (const uint8_t *)(uintptr_t)dev;
	CHECK(memcmp(d, host, 2 * SZ) == 0, "the issued copies were not complete at the report");
	static const uint8_t zero[SZ];
	CHECK(memcmp(d + 2 * SZ, zero, SZ) == 0 && memcmp(d + 3 * SZ, zero, SZ) == 0,
	      "copies after the failure ran");
	CHECK(d_calls("cuMemcpyAsync") == 3, "cuMemcpyAsync calls %d", d_calls("cuMemcpyAsync"));

	/* A failing event record synchronizes too; the next job then works. */
	d_fault("cuEventRecord", 1, CUDA_ERROR_INVALID_VALUE, 0);
	CHECK(okvi_copy_submit_lane(e, 2, 1, segs, N) == 0, "submit 2");
	CHECK(wait_one(e, 2, &cc) == 0 && cc.status == -EIO, "status %d", cc.status);
	CHECK(d_calls("cuStreamSynchronize") == 2, "syncs %d", d_calls("cuStreamSynchronize"));
	CHECK(memcmp(d, host, N * SZ) == 0, "issued copies incomplete at the report");
	CHECK(okvi_copy_submit_lane(e, 3, 1, segs, N) == 0, "submit 3");
	CHECK(wait_one(e, 3, &cc) == 0 && cc.status == 0, "status %d after recovery", cc.status);
	okvi_copy_engine_free(e);
	okvi_cuda_close(c);
	d_free(dev);
	free(host);
}

/* Device memory of "another process": a legacy IPC handle of a cuMemAlloc'd
 * allocation (cuIpcGetMemHandle; opened, the range inside the allocation
 * checked, announced, copied from and into, closed at unmap; the double
 * maps the exporter's memfd again, so the mapping is a second view of the
 * same bytes, as in a process that is not the exporter) and a VMM POSIX fd
 * (a memfd mapped through the reserved range, so bytes copied into the
 * mapping are in the fd). */
static void test_mappings(void)
{
	d_reset();
	struct okvi_cuda *c = open_double();
	if (!c)
		return;
	struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(c), 1, NULL);
	uint8_t uuid[16], wrong[16];
	okvi_cuda_device_uuid(c, 0, uuid);
	memcpy(wrong, uuid, 16);
	wrong[15] ^= 0xff;
	enum { ALLOC = 1 << 20, OFF = 4096, LEN = 64 << 10 };
	CUdeviceptr dev;
	d_alloc(&dev, ALLOC);
	fill((uint8_t *)(uintptr_t)dev, ALLOC, 5);
	CUipcMemHandle ipc;
	CHECK(d_ipc_get(&ipc, dev) == CUDA_SUCCESS, "cuIpcGetMemHandle");
	uint8_t h[64];
	memcpy(h, ipc.reserved, 64);
	char err[256] = "";
	struct okvi_cuda_mapping m;
	CHECK(okvi_cuda_map_ipc(c, wrong, h, OFF, LEN, &m, err, sizeof(err)) == -ENODEV &&
		      strstr(err, "no CUDA device with UUID") != NULL,
	      "wrong uuid: '%s'", err);
	CHECK(okvi_cuda_map_ipc(c, uuid, h, ALLOC - 8, LEN, &m, err, sizeof(err)) == -ERANGE &&
		      strstr(err, "exceeds the allocation of 1048576 bytes") != NULL,
	      "range past the allocation: '%s'", err);
	/* A forged handle naming a file that is not the double's device
	 * memory (here a plain memfd of this process, as an engine buffer or
	 * a RAM tier would be) is refused: the double maps device memory only. */
	int other = memfd_create("orbitkv-kv-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(other >= 0 && ftruncate(other, ALLOC) == 0 && fcntl(other, F_ADD_SEALS, F_SEAL_SHRINK) == 0,
	      "a sealed memfd"); /* sealed as the double's own: only its name tells them apart */
	uint8_t forged[64];
	memcpy(forged, h, 64);
	uint64_t ofd = (uint64_t)other;
	memcpy(forged + 16, &ofd, 8);
	CHECK(okvi_cuda_map_ipc(c, uuid, forged, OFF, LEN, &m, err, sizeof(err)) != 0 &&
		      strstr(err, "CUDA_ERROR_INVALID_VALUE") != NULL,
	      "a handle forged to name another memfd was mapped: '%s'", err);
	close(other);
	CHECK(d_ipc_open() == 0, "a refused handle stayed open (%d)", d_ipc_open());
	CHECK(okvi_cuda_map_ipc(c, uuid, h, OFF, LEN, &m, err, sizeof(err)) == 0, "map ipc: %s", err);
	CHECK(m.kind == OKVI_CUDA_MAP_IPC && m.addr != 0 && m.addr != dev + OFF && m.size == ALLOC &&
		      d_ipc_open() == 1,
	      "mapping kind %d addr %#llx size %llu (a new mapping of the allocation)", m.kind,
	      (unsigned long long)m.addr, (unsigned long long)m.size);
	uint8_t *host = calloc(1, LEN);
	struct okvi_copy_seg s = {m.addr, (uint64_t)(uintptr_t)host, LEN};
	struct okvi_copy_completion cc;
	CHECK(okvi_copy_submit_lane(e, 1, 1, &s, 1) == 0 && wait_one(e, 1, &cc) == 0 && cc.status == 0,
	      "d2h from the IPC mapping");
	CHECK(memcmp(host, (uint8_t *)(uintptr_t)dev + OFF, LEN) == 0, "IPC bytes differ");
	CHECK(d_calls("cuMemcpyAsync") == 1, "the job did not go to the driver");
	fill(host, LEN, 91);
	struct okvi_copy_seg in = {(uint64_t)(uintptr_t)host, m.addr, LEN};
	CHECK(okvi_copy_submit_lane(e, 1, 1, &in, 1) == 0 && wait_one(e, 1, &cc) == 0 && cc.status == 0,
	      "h2d into the IPC mapping");
	CHECK(memcmp(host, (uint8_t *)(uintptr_t)dev + OFF, LEN) == 0,
	      "bytes copied into the IPC mapping are not in the exporter's allocation");
	okvi_cuda_unmap(c, &m);
	CHECK(d_ipc_open() == 0, "unmap left the handle open");
	CHECK(okvi_cuda_remove_range(c, dev + OFF) == -ENOENT, "unmap left the range");
	okvi_cuda_unmap(c, &m); /* again: a no-op */

	int fd = memfd_create("vmm", 0);
	CHECK(fd >= 0 && ftruncate(fd, 2 * ALLOC) == 0, "memfd");
	CHECK(okvi_cuda_map_vmm_fd(c, uuid, fd, ALLOC, ALLOC - 8, LEN, &m, err, sizeof(err)) == -ERANGE,
	      "vmm range past the allocation accepted: %s", err);
	CHECK(okvi_cuda_map_vmm_fd(c, uuid, fd, 2 * ALLOC, OFF, LEN, &m, err, sizeof(err)) == 0,
	      "map vmm: %s", err);
	fill(host, LEN, 77);
	struct okvi_copy_seg w = {(uint64_t)(uintptr_t)host, m.addr, LEN};
	CHECK(okvi_copy_submit_lane(e, 2, 1, &w, 1) == 0 && wait_one(e, 2, &cc) == 0 && cc.status == 0,
	      "h2d into the VMM mapping");
	uint8_t *back = calloc(1, LEN);
	CHECK(pread(fd, back, LEN, OFF) == LEN && memcmp(back, host, LEN) == 0,
	      "bytes copied into the VMM mapping are not in the fd");
	okvi_cuda_unmap(c, &m);
	CHECK(d_calls("cuMemRelease") == 1 && d_calls("cuMemAddressFree") == 1, "vmm release");
	close(fd);
	okvi_copy_engine_free(e);
	okvi_cuda_close(c);
	d_free(dev);
	free(host);
	free(back);
}

/* Run a job in a child whose driver fails as set (fn's nth call returns a
 * sticky code; or, with module, the device fault armed from that module
 * file by okvi_cuda_arm_device_fault); the child must abort with
 * "fail-stop" and `want` on stderr. */
static void expect_fail_stop(const char *name, const char *fn, int nth, int code, const char *module,
			     const char *want)
{
	int pfd[2];
	if (pipe(pfd) != 0) {
		CHECK(0, "pipe");
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		d_reset();
		struct okvi_cuda *c = okvi_cuda_open(OKV_CUDA_DOUBLE, NULL, 0);
		if (!c)
			_exit(3);
		struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(c), 1, NULL);
		CUdeviceptr dev;
		static uint8_t host[8192];
		d_alloc(&dev, sizeof(host));
		okvi_cuda_add_range(c, 0, dev, sizeof(host));
		struct okvi_copy_seg s[2] = {{(uint64_t)(uintptr_t)host, dev, 4096},
					     {(uint64_t)(uintptr_t)host + 4096, dev + 4096, 4096}};
		if (fn)
			d_fault(fn, nth, code, 1);
		if (module && okvi_cuda_arm_device_fault(c, module, NULL, 0) != 0)
			_exit(7);
		okvi_copy_submit_lane(e, 42, 1, s, 2);
		struct okvi_copy_completion cc;
		if (wait_one(e, 42, &cc) == 0)
			_exit(cc.status == 0 ? 4 : 5); /* reported a result: not a fail-stop */
		_exit(6);
	}
	close(pfd[1]);
	char buf[2048];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(buf) - 1 && (k = read(pfd[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = 0;
	close(pfd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s: child status %#x (want SIGABRT); stderr: %s",
	      name, st, buf);
	CHECK(strstr(buf, "orbitkv-manager: fail-stop: ") != NULL && strstr(buf, want) != NULL,
	      "%s: stderr '%s' lacks '%s'", name, buf, want);
}

static void test_fail_stop(void)
{
	expect_fail_stop("a sticky error at submit", "cuMemcpyAsync", 2, CUDA_ERROR_ILLEGAL_ADDRESS, NULL,
			 "cuMemcpyAsync failed with CUDA_ERROR_ILLEGAL_ADDRESS (700) after 1 of 2 copies "
			 "were issued, and cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS");
	expect_fail_stop("a device lost while the job is in flight", "cuEventQuery", 1,
			 CUDA_ERROR_LAUNCH_FAILED, NULL,
			 "copy job 42: cuEventQuery failed with CUDA_ERROR_LAUNCH_FAILED (719)");
	/* The failpoint build's device fault: the kernel launched ahead of the
	 * job's copies faults on the device (the double: its stream reaches
	 * the kernel and the error turns sticky), so the job's event query
	 * fails and completion cannot be established. The double takes any
	 * readable file as the module. */
	expect_fail_stop("a device fault armed from a module", NULL, 0, 0, OKV_CUDA_DOUBLE,
			 "copy job 42: cuEventQuery failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)");
}

/* okvi_cuda_arm_device_fault refuses what cannot be armed, naming it, and
 * an armed fault waits for a device job: a host job does not take it. */
static void test_arm_device_fault(void)
{
	d_reset();
	struct okvi_cuda *c = open_double();
	if (!c)
		return;
	char err[256] = "";
	int rc = okvi_cuda_arm_device_fault(c, "", err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "no module file") != NULL, "empty module: rc %d, '%s'", rc, err);
	rc = okvi_cuda_arm_device_fault(c, "/nonexistent/fault.ptx", err, sizeof(err));
	CHECK(rc == -EIO && strstr(err, "cuModuleLoad /nonexistent/fault.ptx") != NULL &&
		      strstr(err, "CUDA_ERROR_FILE_NOT_FOUND") != NULL,
	      "missing module: rc %d, '%s'", rc, err);
	CHECK(okvi_cuda_arm_device_fault(c, OKV_CUDA_DOUBLE, err, sizeof(err)) == 0, "arm: %s", err);
	struct okvi_copy_engine *e = okvi_copy_engine_new(okvi_cuda_backend(c), 1, NULL);
	static uint8_t a[4096], b[4096];
	memset(a, 0x5A, sizeof(a));
	struct okvi_copy_seg seg = {(uint64_t)(uintptr_t)a, (uint64_t)(uintptr_t)b, sizeof(a)};
	okvi_copy_submit_lane(e, 7, 1, &seg, 1);
	struct okvi_copy_completion cc;
	CHECK(wait_one(e, 7, &cc) == 0 && cc.status == 0 && b[4095] == 0x5A,
	      "a host job with a fault armed: status %d", cc.status);
	CHECK(d_calls("cuLaunchKernel") == 0, "a host job launched the fault kernel (%d launches)",
	      d_calls("cuLaunchKernel"));
	/* Armed twice before a device job: the first module is unloaded. A
	 * launch that fails injects nothing: the job fails with EIO instead of
	 * completing as if no fault had been asked for, and the process goes
	 * on. */
	CHECK(okvi_cuda_arm_device_fault(c, OKV_CUDA_DOUBLE, err, sizeof(err)) == 0, "re-arm: %s", err);
	CHECK(d_calls("cuModuleUnload") == 1, "re-arming unloaded %d modules (want 1)", d_calls("cuModuleUnload"));
	CUdeviceptr dev;
	d_alloc(&dev, sizeof(a));
	okvi_cuda_add_range(c, 0, dev, sizeof(a));
	struct okvi_copy_seg h2d = {(uint64_t)(uintptr_t)a, dev, sizeof(a)};
	d_fault("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_FAILED, 0);
	okvi_copy_submit_lane(e, 8, 1, &h2d, 1);
	CHECK(wait_one(e, 8, &cc) == 0 && cc.status == -EIO, "a device job whose fault kernel did not launch: status %d",
	      cc.status);
	okvi_copy_submit_lane(e, 9, 1, &h2d, 1);
	CHECK(wait_one(e, 9, &cc) == 0 && cc.status == 0, "the next device job: status %d", cc.status);
	okvi_cuda_remove_range(c, dev);
	okvi_copy_engine_free(e);
	d_free(dev);
	okvi_cuda_close(c);
}

int main(void)
{
	test_open_errors();
	dbl = dlopen(OKV_CUDA_DOUBLE, RTLD_NOW);
	CHECK(dbl != NULL, "dlopen %s: %s", OKV_CUDA_DOUBLE, dlerror());
	if (!dbl)
		return 1;
	*(void **)&d_reset = dlsym(dbl, "okv_cuda_double_reset");
	*(void **)&d_fault = dlsym(dbl, "okv_cuda_double_fault");
	*(void **)&d_calls = dlsym(dbl, "okv_cuda_double_calls");
	*(void **)&d_registered = dlsym(dbl, "okv_cuda_double_host_registered");
	*(void **)&d_alloc = dlsym(dbl, "cuMemAlloc_v2");
	*(void **)&d_free = dlsym(dbl, "cuMemFree_v2");
	*(void **)&d_ipc_get = dlsym(dbl, "cuIpcGetMemHandle");
	*(void **)&d_ipc_open = dlsym(dbl, "okv_cuda_double_ipc_open");
	if (!d_reset || !d_fault || !d_calls || !d_registered || !d_alloc || !d_free || !d_ipc_get ||
	    !d_ipc_open) {
		fprintf(stderr, "test_copy_cuda: the double lacks its control functions\n");
		return 1;
	}
	test_round_trip();
	test_partial_failure();
	test_mappings();
	test_fail_stop();
	test_arm_device_fault();
	if (failures) {
		fprintf(stderr, "test_copy_cuda: %d failures\n", failures);
		return 1;
	}
	printf("test_copy_cuda: ok (%d checks; against the driver double, not a GPU)\n", checks);
	return 0;
}
