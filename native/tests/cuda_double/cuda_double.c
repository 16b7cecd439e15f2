/*
 * cuda_double.c — a fault-injecting test double of the CUDA driver library
 * (libcuda.so.1), built by CMake as build/native/libokv_cuda_double.so and
 * loaded by the CUDA copy backend through its dlopen seam (okvi_cuda_open's
 * path, or ORBITKV_LIBCUDA). It exists to inject faults a real driver
 * cannot be made to produce on demand: a call failing at its n-th use,
 * and sticky errors after which every call fails (a lost device). It is
 * never a stand-in for proving GPU behaviour: the GPU rows of
 * docs/cuda.md come from scripts/gpu-check.sh on a real device only.
 *
 * Model: "device memory" (cuMemAlloc) is host memory, and so is every
 * address the backend hands to cuMemcpyAsync. A stream is a FIFO of copies
 * that do NOT run at issue: they run when cuStreamSynchronize is called on
 * the stream, or when an event recorded behind them is queried the second
 * time (the first query answers CUDA_ERROR_NOT_READY, so the backend's
 * polling path runs). So a copy "in flight" is observable: its bytes are
 * not at the destination yet.
 *
 * Faults: okv_cuda_double_fault(fn, nth, code, sticky) makes the nth call
 * (1-based, counted from the last okv_cuda_double_reset) of driver function
 * fn (its ABI name, e.g. "cuMemcpyAsync", "cuStreamDestroy_v2") return
 * code; with sticky set, every later call of any function returns code
 * too. The environment variable ORBITKV_CUDA_DOUBLE_FAULT="fn:nth:code[:s]"
 * sets one fault at cuInit (for tests of a whole Manager process), and
 * ORBITKV_CUDA_DOUBLE_DEVICES=N (default 1; 0: cuInit answers
 * CUDA_ERROR_NO_DEVICE) the device count.
 *
 * Sharing, across processes like the real driver's: cuMemAlloc backs each
 * "device allocation" with a memfd mapped MAP_SHARED, and cuIpcGetMemHandle
 * writes a "legacy IPC handle" naming it: 32 of the 64 bytes, the magic
 * "OKVDIPC1", then the exporting process's pid, the memfd's number in it and
 * the allocation's size (three little-endian uint64). cuIpcOpenMemHandle in
 * any process (the exporter's own included) opens /proc/<pid>/fd/<fd> and
 * maps it MAP_SHARED (only a memfd of the double's own name, sealed
 * against shrinking as cuMemAlloc seals it: a forged handle cannot name
 * another file), so bytes written through either mapping are seen
 * through the other: a Manager given an engine process's handle really
 * copies that process's "device memory". (A real driver refuses to open a
 * handle in its exporting process; the double allows it so that the C and
 * Go tests can map in one process.) A VMM "POSIX fd" is any mmap-able fd
 * (a memfd), which cuMemMap maps MAP_SHARED into the reserved range.
 * okv_cuda_double_ipc_handle(h, pid, fd, size) writes a handle for any
 * memfd, for tests that make the memory themselves.
 *
 * All state is behind one mutex; every function is thread-safe.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FAULTS 16
#define MAX_ALLOCS 256

struct fault {
	char fn[64];
	int nth, code, sticky, calls;
};

struct op {
	void *dst;
	const void *src;
	size_t len;
	int fault; /* cuLaunchKernel of the fault kernel: running it makes the device's error sticky */
};

struct CUstream_st {
	struct op *ops;
	size_t n, cap, done;
};

struct CUevent_st {
	struct CUstream_st *s;
	size_t upto;
	int recorded, queries;
};

struct CUctx_st {
	int dev;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fault faults[MAX_FAULTS];
static int nfaults;
static CUresult sticky;
static int ndev = 1;
static int inited;
static struct CUctx_st ctxs[8];
static long host_registered;
static struct {
	CUdeviceptr base;
	size_t size;
	int open; /* IPC-opened (not cuMemAlloc'd) */
	int fd;   /* cuMemAlloc'd: the memfd behind it (exported by IPC handle) */
} allocs[MAX_ALLOCS];
static int ipc_open;
static int track(CUdeviceptr base, size_t size, int open, int fd);

/* The name of the memfd behind each cuMemAlloc'd "device" allocation. */
#define DOUBLE_MEMFD_NAME "okv-cuda-double"

/* The double's IPC handle: bytes 0..7 the magic, then pid, fd, size. */
static const char ipc_magic[8] = {'O', 'K', 'V', 'D', 'I', 'P', 'C', '1'};
static char calls_fn[64][64];
static int calls_n[64];
static int ncalls;

/** Clear every fault, the sticky error and the call counts. */
void okv_cuda_double_reset(void)
{
	pthread_mutex_lock(&mu);
	nfaults = 0;
	sticky = CUDA_SUCCESS;
	ncalls = 0;
	pthread_mutex_unlock(&mu);
}

/** Make the nth call of fn return code (sticky: and every call after it).
 * Returns 0, or -1 when MAX_FAULTS are set already. */
int okv_cuda_double_fault(const char *fn, int nth, int code, int sticky_)
{
	pthread_mutex_lock(&mu);
	int rc = -1;
	if (nfaults < MAX_FAULTS) {
		struct fault *f = &faults[nfaults++];
		snprintf(f->fn, sizeof(f->fn), "%s", fn);
		f->nth = nth;
		f->code = code;
		f->sticky = sticky_;
		f->calls = 0;
		rc = 0;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

/** How many times fn was called since the last reset. */
int okv_cuda_double_calls(const char *fn)
{
	pthread_mutex_lock(&mu);
	int n = 0;
	for (int i = 0; i < ncalls; i++)
		if (strcmp(calls_fn[i], fn) == 0)
			n = calls_n[i];
	pthread_mutex_unlock(&mu);
	return n;
}

/** Bytes passed to cuMemHostRegister since the library was loaded. */
long okv_cuda_double_host_registered(void)
{
	pthread_mutex_lock(&mu);
	long n = host_registered;
	pthread_mutex_unlock(&mu);
	return n;
}

/* Count a call of fn and return its injected result (mu held). */
static CUresult enter(const char *fn)
{
	int i;
	for (i = 0; i < ncalls; i++)
		if (strcmp(calls_fn[i], fn) == 0)
			break;
	if (i == ncalls && ncalls < 64) {
		snprintf(calls_fn[ncalls], sizeof(calls_fn[0]), "%s", fn);
		calls_n[ncalls++] = 0;
	}
	if (i < 64)
		calls_n[i]++;
	if (sticky != CUDA_SUCCESS)
		return sticky;
	for (int k = 0; k < nfaults; k++) {
		struct fault *f = &faults[k];
		if (strcmp(f->fn, fn) == 0 && ++f->calls == f->nth) {
			if (f->sticky)
				sticky = (CUresult)f->code;
			return (CUresult)f->code;
		}
	}
	return CUDA_SUCCESS;
}

#define ENTER(name)                              \
	pthread_mutex_lock(&mu);                 \
	CUresult r_ = enter(name);               \
	if (r_ != CUDA_SUCCESS) {                \
		pthread_mutex_unlock(&mu);       \
		return r_;                       \
	}
#define LEAVE(rc)                  \
	pthread_mutex_unlock(&mu); \
	return rc

/* Run s's operations up to upto; a fault kernel met on the way makes
 * CUDA_ERROR_ILLEGAL_ADDRESS sticky (as a real device's wild write does)
 * and stops the stream there. Returns the stream's state. */
static CUresult run_until(struct CUstream_st *s, size_t upto)
{
	for (; s->done < upto && s->done < s->n; s->done++) {
		if (s->ops[s->done].fault) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			return sticky;
		}
		memcpy(s->ops[s->done].dst, s->ops[s->done].src, s->ops[s->done].len);
	}
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags)
{
	(void)flags;
	const char *f = getenv("ORBITKV_CUDA_DOUBLE_FAULT");
	const char *d = getenv("ORBITKV_CUDA_DOUBLE_DEVICES");
	pthread_mutex_lock(&mu);
	ndev = d ? atoi(d) : 1;
	if (ndev > 8)
		ndev = 8;
	pthread_mutex_unlock(&mu);
	if (!inited) {
		if (f) {
			char fn[64];
			int nth = 0, code = 0;
			char s = 0;
			if (sscanf(f, "%63[^:]:%d:%d:%c", fn, &nth, &code, &s) >= 3)
				okv_cuda_double_fault(fn, nth, code, s == 's');
		}
		inited = 1;
	}
	ENTER("cuInit");
	LEAVE(ndev == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS);
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	switch (error) {
	case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; break;
	case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CUDA_ERROR_NO_DEVICE: *pStr = "CUDA_ERROR_NO_DEVICE"; break;
	case CUDA_ERROR_ILLEGAL_ADDRESS: *pStr = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
	case CUDA_ERROR_LAUNCH_FAILED: *pStr = "CUDA_ERROR_LAUNCH_FAILED"; break;
	case CUDA_ERROR_NOT_READY: *pStr = "CUDA_ERROR_NOT_READY"; break;
	case CUDA_ERROR_FILE_NOT_FOUND: *pStr = "CUDA_ERROR_FILE_NOT_FOUND"; break;
	case CUDA_ERROR_NOT_FOUND: *pStr = "CUDA_ERROR_NOT_FOUND"; break;
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	ENTER("cuDeviceGetCount");
	*count = ndev;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	ENTER("cuDeviceGet");
	if (ordinal < 0 || ordinal >= ndev) {
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	}
	*device = ordinal;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	ENTER("cuDeviceGetUuid");
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(0xd0 + dev + i);
	LEAVE(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	ENTER("cuDevicePrimaryCtxRetain");
	ctxs[dev].dev = dev;
	*pctx = &ctxs[dev];
	LEAVE(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	(void)dev;
	ENTER("cuDevicePrimaryCtxRelease_v2");
	LEAVE(CUDA_SUCCESS);
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	(void)ctx;
	ENTER("cuCtxSetCurrent");
	LEAVE(CUDA_SUCCESS);
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	(void)Flags;
	ENTER("cuStreamCreate");
	*phStream = calloc(1, sizeof(struct CUstream_st));
	LEAVE(*phStream ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}

CUresult cuStreamDestroy(CUstream s)
{
	ENTER("cuStreamDestroy_v2");
	run_until(s, s->n);
	free(s->ops);
	free(s);
	LEAVE(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(CUstream s)
{
	ENTER("cuStreamSynchronize");
	CUresult r = run_until(s, s->n);
	LEAVE(r);
}

/* Append op to s (caller holds mu). */
static CUresult push_op(struct CUstream_st *s, struct op op)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct op *n = realloc(s->ops, cap * sizeof(*n));
		if (!n)
			return CUDA_ERROR_OUT_OF_MEMORY;
		s->ops = n;
		s->cap = cap;
	}
	s->ops[s->n++] = op;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream s)
{
	ENTER("cuMemcpyAsync");
	CUresult r = push_op(s, (struct op){(void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, 0});
	LEAVE(r);
}

/* Modules: any readable file is a module holding the one kernel the
 * backend's fault injection asks for, "okv_fault" (native/tests/gpu/fault.cu);
 * launching it on a stream queues a fault (run_until). */
static int module_token, fault_kernel_token;

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	ENTER("cuModuleLoad");
	if (!fname || access(fname, R_OK) != 0) {
		LEAVE(CUDA_ERROR_FILE_NOT_FOUND);
	}
	*module = (CUmodule)&module_token;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuModuleUnload(CUmodule hmod)
{
	ENTER("cuModuleUnload");
	if (hmod != (CUmodule)&module_token) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	LEAVE(CUDA_SUCCESS);
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	ENTER("cuModuleGetFunction");
	if (hmod != (CUmodule)&module_token || !name || strcmp(name, "okv_fault") != 0) {
		LEAVE(CUDA_ERROR_NOT_FOUND);
	}
	*hfunc = (CUfunction)&fault_kernel_token;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
			unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
			unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)kernelParams, (void)extra;
	ENTER("cuLaunchKernel");
	if (f != (CUfunction)&fault_kernel_token || !hStream) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	CUresult r = push_op(hStream, (struct op){NULL, NULL, 0, 1});
	LEAVE(r);
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	(void)Flags;
	ENTER("cuEventCreate");
	*phEvent = calloc(1, sizeof(struct CUevent_st));
	LEAVE(*phEvent ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}

CUresult cuEventRecord(CUevent ev, CUstream s)
{
	ENTER("cuEventRecord");
	ev->s = s;
	ev->upto = s->n;
	ev->recorded = 1;
	ev->queries = 0;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuEventQuery(CUevent ev)
{
	ENTER("cuEventQuery");
	if (ev->recorded && ++ev->queries < 2) {
		LEAVE(CUDA_ERROR_NOT_READY);
	}
	CUresult r = ev->recorded ? run_until(ev->s, ev->upto) : CUDA_SUCCESS;
	LEAVE(r);
}

CUresult cuEventDestroy(CUevent ev)
{
	ENTER("cuEventDestroy_v2");
	free(ev);
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	(void)p;
	(void)Flags;
	ENTER("cuMemHostRegister_v2");
	host_registered += (long)bytesize;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemHostUnregister(void *p)
{
	(void)p;
	ENTER("cuMemHostUnregister");
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	ENTER("cuMemAlloc_v2");
	size_t n = bytesize ? bytesize : 1;
	int fd = memfd_create(DOUBLE_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	void *m = MAP_FAILED;
	/* Sealed to its size, as device memory cannot shrink under an importer. */
	if (ftruncate(fd, (off_t)n) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
		m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		close(fd);
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	if (track((CUdeviceptr)(uintptr_t)m, n, 0, fd) != 0) {
		munmap(m, n);
		close(fd);
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	*dptr = (CUdeviceptr)(uintptr_t)m;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemFree(CUdeviceptr dptr)
{
	ENTER("cuMemFree_v2");
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base == dptr && !allocs[i].open) {
			munmap((void *)(uintptr_t)dptr, allocs[i].size);
			close(allocs[i].fd);
			allocs[i].base = 0;
			LEAVE(CUDA_SUCCESS);
		}
	LEAVE(CUDA_ERROR_INVALID_VALUE);
}

/* Record an allocation (mu held); -1 when the table is full. */
static int track(CUdeviceptr base, size_t size, int open, int fd)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base == 0) {
			allocs[i].base = base;
			allocs[i].size = size;
			allocs[i].open = open;
			allocs[i].fd = fd;
			return 0;
		}
	return -1;
}

/** Write the double's IPC handle of the size bytes of memfd fd of process
 * pid into h (64 bytes): what cuIpcGetMemHandle writes for a cuMemAlloc'd
 * allocation, for tests that make the shared memory themselves. */
void okv_cuda_double_ipc_handle(void *h, uint64_t pid, uint64_t fd, uint64_t size)
{
	memset(h, 0, 64);
	memcpy(h, ipc_magic, 8);
	memcpy((char *)h + 8, &pid, 8);
	memcpy((char *)h + 16, &fd, 8);
	memcpy((char *)h + 24, &size, 8);
}

/** IPC handles opened and not closed. */
int okv_cuda_double_ipc_open(void)
{
	pthread_mutex_lock(&mu);
	int n = ipc_open;
	pthread_mutex_unlock(&mu);
	return n;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	ENTER("cuIpcGetMemHandle");
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base && !allocs[i].open && dptr >= allocs[i].base &&
		    dptr < allocs[i].base + allocs[i].size) {
			okv_cuda_double_ipc_handle(pHandle->reserved, (uint64_t)getpid(), (uint64_t)allocs[i].fd,
						   allocs[i].size);
			LEAVE(CUDA_SUCCESS);
		}
	/* Memory the double did not cuMemAlloc (an opened handle among it). */
	LEAVE(CUDA_ERROR_INVALID_VALUE);
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	(void)Flags;
	ENTER("cuIpcOpenMemHandle_v2");
	uint64_t pid, fd, n;
	memcpy(&pid, handle.reserved + 8, 8);
	memcpy(&fd, handle.reserved + 16, 8);
	memcpy(&n, handle.reserved + 24, 8);
	if (memcmp(handle.reserved, ipc_magic, 8) != 0 || pid == 0 || n == 0) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	char path[64], link[128];
	snprintf(path, sizeof(path), "/proc/%llu/fd/%llu", (unsigned long long)pid, (unsigned long long)fd);
	/* Only the double's own "device memory" (a memfd cuMemAlloc made,
	 * sealed against shrinking), never another file a forged handle could
	 * name (an importer's RAM tier, an engine's buffer): a real handle
	 * names device memory only. The exporting process may be this one (a
	 * real driver refuses that; the one-process tests rely on it). */
	ssize_t ln = readlink(path, link, sizeof(link) - 1);
	if (ln < 0) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	link[ln] = '\0';
	if (strncmp(link, "/memfd:" DOUBLE_MEMFD_NAME " ", strlen("/memfd:" DOUBLE_MEMFD_NAME " ")) != 0) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	int f = open(path, O_RDWR | O_CLOEXEC);
	struct stat st;
	int seals = f < 0 ? -1 : fcntl(f, F_GET_SEALS);
	if (f < 0 || fstat(f, &st) != 0 || (uint64_t)st.st_size < n || seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
		if (f >= 0)
			close(f);
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	void *m = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	close(f); /* the mapping keeps the memory */
	if (m == MAP_FAILED) {
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	if (track((CUdeviceptr)(uintptr_t)m, (size_t)n, 1, -1) != 0) {
		munmap(m, (size_t)n);
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	ipc_open++;
	*pdptr = (CUdeviceptr)(uintptr_t)m;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	ENTER("cuIpcCloseMemHandle");
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base == dptr && allocs[i].open) {
			munmap((void *)(uintptr_t)dptr, allocs[i].size);
			allocs[i].base = 0;
			ipc_open--;
			LEAVE(CUDA_SUCCESS);
		}
	LEAVE(CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	ENTER("cuMemGetAddressRange_v2");
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base && dptr >= allocs[i].base && dptr < allocs[i].base + allocs[i].size) {
			*pbase = allocs[i].base;
			*psize = allocs[i].size;
			LEAVE(CUDA_SUCCESS);
		}
	LEAVE(CUDA_ERROR_NOT_FOUND);
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					CUmemAllocationHandleType shHandleType)
{
	ENTER("cuMemImportFromShareableHandle");
	if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	int fd = dup((int)(intptr_t)osHandle);
	if (fd < 0) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	*handle = (CUmemGenericAllocationHandle)fd + 1;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	(void)alignment;
	(void)addr;
	(void)flags;
	ENTER("cuMemAddressReserve");
	void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	*ptr = (CUdeviceptr)(uintptr_t)p;
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	(void)flags;
	ENTER("cuMemMap");
	void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       (int)(handle - 1), (off_t)offset);
	if (p == MAP_FAILED) {
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	}
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	(void)ptr;
	(void)size;
	(void)desc;
	(void)count;
	ENTER("cuMemSetAccess");
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	ENTER("cuMemUnmap");
	mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
	     -1, 0);
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	ENTER("cuMemAddressFree");
	munmap((void *)(uintptr_t)ptr, size);
	LEAVE(CUDA_SUCCESS);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	ENTER("cuMemRelease");
	close((int)(handle - 1));
	LEAVE(CUDA_SUCCESS);
}
