/*
 * copy_cuda.h — the CUDA copy backend of the copy engine (copy.h), on the
 * CUDA driver API. Compiled only into the Manager (cgo) and the C tests,
 * like copy.c; compiled against cuda.h (build/cuda/include, fetched by
 * ci/cuda-headers.sh), never linked against CUDA: libcuda.so.1 is dlopened
 * at run time by okvi_cuda_open, so a machine without a GPU builds and runs
 * everything else.
 *
 * The dlopen seam: okvi_cuda_open loads the library named by its `path`
 * argument, else by the environment variable ORBITKV_LIBCUDA, else
 * "libcuda.so.1" (the driver's SONAME, found by the dynamic loader). The
 * C tests load a fault-injecting double of the driver
 * (native/tests/cuda_double/) through the same seam.
 *
 * Device memory: the backend copies to and from device memory mapped in
 * this process and announced with okvi_cuda_add_range (device ordinal,
 * base, length). A job whose segments touch no announced range is a host
 * job: it goes to the copy engine's worker threads (OKVI_COPY_HOST).
 *
 * Streams: per (lane, device), where the Manager's lane is the session,
 * one H2D and one D2H stream, created on first use (non-blocking, so they
 * do not synchronize with the legacy default stream). A job's segments are
 * issued as cuMemcpyAsync calls on the stream of its direction, in one
 * submit call, then one event is recorded behind them. A native completion
 * thread queries the events of every job in flight (cuEventQuery; it
 * sleeps while none is in flight and polls every OKVI_CUDA_POLL_NS
 * otherwise) and pushes each finished job's completion with
 * okvi_copy_complete, the host copies' path.
 *
 * Failures (docs/design.md §6 rule 9):
 *  - a call failing partway through a job (cuMemcpyAsync of segment k, or
 *    cuEventCreate/cuEventRecord) synchronizes the job's stream
 *    (cuStreamSynchronize) before anything is reported; if that succeeds,
 *    nothing of the job is in flight and its completion carries -EIO;
 *  - when completion cannot be established — that synchronize fails, or
 *    an event query returns an error (a sticky error such as
 *    CUDA_ERROR_ILLEGAL_ADDRESS, a lost device) — the process terminates:
 *    it writes "orbitkv-manager: fail-stop: <why>" to stderr and aborts,
 *    rather than publish a terminal result and recycle memory a DMA may
 *    still write.
 *
 * Thread safety: submit (through the engine) may run on many threads at
 * once; okvi_cuda_add_range/remove_range/host_register may run beside it.
 * okvi_cuda_close must come after every engine using the backend is freed.
 */
#ifndef ORBITKV_COPY_CUDA_H
#define ORBITKV_COPY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"

/** The environment variable naming the driver library to dlopen. */
#define OKVI_CUDA_LIB_ENV "ORBITKV_LIBCUDA"
/** The library dlopened when neither a path nor OKVI_CUDA_LIB_ENV is given. */
#define OKVI_CUDA_LIB_DEFAULT "libcuda.so.1"
/** The completion thread's poll interval while jobs are in flight (ns). */
#define OKVI_CUDA_POLL_NS 20000
/** Most devices the backend addresses. */
#define OKVI_CUDA_MAX_DEVICES 64
/** Most device ranges announced at once. */
#define OKVI_CUDA_MAX_RANGES 4096

struct okvi_cuda;

/**
 * Load the driver library (path, else $ORBITKV_LIBCUDA, else libcuda.so.1),
 * resolve the driver functions the backend calls, cuInit(0), count the
 * devices and retain each one's primary context, and start the completion
 * thread. A machine with the driver but no device fails here. Returns NULL
 * with a message in err (errlen bytes, NUL-terminated; names the library
 * and the dlopen, dlsym or driver call and its error name, e.g.
 * "cuInit: CUDA_ERROR_NO_DEVICE (100)").
 */
struct okvi_cuda *okvi_cuda_open(const char *path, char *err, size_t errlen);

/** Devices seen by cuDeviceGetCount at open (>= 1). */
int okvi_cuda_device_count(const struct okvi_cuda *c);

/**
 * Write device `dev`'s 16-byte UUID (cuDeviceGetUuid) into uuid. Returns 0,
 * or -EINVAL (dev out of range), or -EIO (the driver call failed).
 */
int okvi_cuda_device_uuid(const struct okvi_cuda *c, int dev, uint8_t uuid[16]);

/** The copy backend ("cuda"; borrowed: valid until okvi_cuda_close). */
const struct okvi_copy_backend *okvi_cuda_backend(struct okvi_cuda *c);

/**
 * Announce len bytes of device memory of device ordinal dev at address base
 * (mapped in this process: cuMemAlloc, cuIpcOpenMemHandle or cuMemMap).
 * Returns 0, -EINVAL (dev out of range, len 0, a wrapping range, or one
 * overlapping an announced range) or -ENOSPC (OKVI_CUDA_MAX_RANGES).
 */
int okvi_cuda_add_range(struct okvi_cuda *c, int dev, uint64_t base, uint64_t len);

/**
 * Forget the range announced at base. The caller must have drained every
 * job touching it first. Returns 0 or -ENOENT.
 */
int okvi_cuda_remove_range(struct okvi_cuda *c, uint64_t base);

/**
 * Page-lock len bytes of host memory at addr for DMA (cuMemHostRegister,
 * portable, so every context sees it): the RAM tier when this backend is
 * active. Returns 0, or -EIO with the driver's error name in err.
 */
int okvi_cuda_host_register(struct okvi_cuda *c, void *addr, size_t len, char *err,
			    size_t errlen);

/** Undo okvi_cuda_host_register of addr. Returns 0 or -EIO. */
int okvi_cuda_host_unregister(struct okvi_cuda *c, void *addr);

/**
 * Jobs submitted to the backend and not yet completed (a snapshot).
 */
uint64_t okvi_cuda_inflight(struct okvi_cuda *c);

/** The kernel okvi_cuda_arm_device_fault launches (native/tests/gpu/fault.cu). */
#define OKVI_CUDA_FAULT_KERNEL "okv_fault"

/**
 * Fault injection for tests of docs/design.md §6 rule 9 on a device (the
 * Manager's failpoint build, POST /debug/failpoints/cuda-device-fault):
 * load the module file `module` (a PTX or cubin, cuModuleLoad) on device
 * 0's context, find its kernel OKVI_CUDA_FAULT_KERNEL (a write through a
 * wild pointer), and arm it: the next job on device 0 launches it (1 thread)
 * on its stream ahead of its copies, so the device takes a sticky error
 * (CUDA_ERROR_ILLEGAL_ADDRESS) and the job's completion can never be
 * established: the completion thread ends the process in fail-stop. One
 * arm serves one job; arming again before a job took it replaces it (the
 * older module is unloaded). A launch that fails injects nothing: that job
 * fails (EIO after its stream is synchronized) and the process goes on.
 * Returns 0; -ENOSYS when the driver library lacks the module or launch
 * calls; -EINVAL for no module name; -EIO when the module
 * does not load or holds no such kernel; err (errlen bytes) says which,
 * with the driver's error name.
 */
int okvi_cuda_arm_device_fault(struct okvi_cuda *c, const char *module, char *err, size_t errlen);

/** Kinds of okvi_cuda_mapping. */
enum { OKVI_CUDA_MAP_NONE = 0, OKVI_CUDA_MAP_IPC = 1, OKVI_CUDA_MAP_VMM = 2 };

/**
 * Device memory of another process mapped into this one (okvi_cuda_map_ipc,
 * okvi_cuda_map_vmm_fd) and announced as a range: the region is
 * [addr, addr+len) on device ordinal dev, inside the mapping [base,
 * base+size) of the whole base allocation.
 */
struct okvi_cuda_mapping {
	int kind; /* OKVI_CUDA_MAP_* */
	int dev;
	uint64_t base, size, addr, len;
	uint64_t handle; /* VMM: the imported CUmemGenericAllocationHandle */
};

/**
 * Open a legacy CUDA IPC handle (the 64 bytes of cudaIpcMemHandle_t /
 * CUipcMemHandle, made by the exporting process for a cudaMalloc base
 * allocation) on the device whose 16-byte UUID is uuid (ordinals differ
 * between processes under CUDA_VISIBLE_DEVICES), check that [offset,
 * offset+len) lies inside the allocation (cuMemGetAddressRange), and
 * announce it as a range. Returns 0, -ENODEV (no such device), -ERANGE
 * (outside the allocation, or len 0), -EIO (the driver refused), or
 * okvi_cuda_add_range's error; err says which and why.
 */
int okvi_cuda_map_ipc(struct okvi_cuda *c, const uint8_t uuid[16], const uint8_t handle[64],
		      uint64_t offset, uint64_t len, struct okvi_cuda_mapping *m, char *err,
		      size_t errlen);

/**
 * Import a VMM allocation exported as a POSIX file descriptor
 * (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; what expandable-segment
 * allocators produce; fd is borrowed, the caller closes it), reserve
 * alloc_bytes of address space, map it, grant the device read-write access
 * and announce [offset, offset+len) as a range. Returns as
 * okvi_cuda_map_ipc.
 */
int okvi_cuda_map_vmm_fd(struct okvi_cuda *c, const uint8_t uuid[16], int fd, uint64_t alloc_bytes,
			 uint64_t offset, uint64_t len, struct okvi_cuda_mapping *m, char *err,
			 size_t errlen);

/**
 * Forget the range and release the mapping (cuIpcCloseMemHandle, or
 * cuMemUnmap + cuMemAddressFree + cuMemRelease), so a dead engine's GPU
 * memory is not kept alive. Every job touching it must have been drained
 * first. A zeroed (or already unmapped) mapping is a no-op.
 */
void okvi_cuda_unmap(struct okvi_cuda *c, struct okvi_cuda_mapping *m);

/**
 * Stop the completion thread (after every job completed), destroy the
 * streams, release the primary contexts and dlclose the library. Every
 * engine using the backend must be freed first. NULL is a no-op.
 */
void okvi_cuda_close(struct okvi_cuda *c);

#endif /* ORBITKV_COPY_CUDA_H */
