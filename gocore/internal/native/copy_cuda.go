//go:build cgo

package native

/*
#include <errno.h>
#include <stdlib.h>
#include "copy_cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CUDALibEnv is the environment variable naming the CUDA driver library
// OpenCUDA loads when given no path (OKVI_CUDA_LIB_ENV; default
// libcuda.so.1): the dlopen seam through which the C tests load the
// driver's fault-injecting double.
const CUDALibEnv = C.OKVI_CUDA_LIB_ENV

// CUDA is the CUDA copy backend (native/src/copy_cuda.c): the driver API,
// dlopened at run time, with one H2D and one D2H stream per (lane,
// device), an event per job and a native completion thread. Jobs that
// touch no device range announced with AddRange run on the engine's host
// workers. A copy failing partway synchronizes its stream and completes
// with EIO; when completion cannot be established (a sticky error, a lost
// device) the process aborts with "orbitkv-manager: fail-stop: <why>" on
// stderr (docs/design.md §6 rule 9). Close it after every engine using it.
type CUDA struct {
	c *C.struct_okvi_cuda // owned; nil after Close
}

// OpenCUDA loads the driver library at path (empty: $ORBITKV_LIBCUDA, else
// libcuda.so.1), cuInits it and retains every device's primary context.
// The error names the library and the failing step, e.g. "dlopen
// libcuda.so.1: libcuda.so.1: cannot open shared object file: No such file
// or directory" or "libcuda.so.1: cuInit: CUDA_ERROR_NO_DEVICE (100)".
func OpenCUDA(path string) (*CUDA, error) {
	var cpath *C.char
	if path != "" {
		cpath = C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
	}
	var buf [512]C.char
	c := C.okvi_cuda_open(cpath, &buf[0], C.size_t(len(buf)))
	if c == nil {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return &CUDA{c: c}, nil
}

// ArmDeviceFault is fault injection for the failpoint build (docs/design.md §6
// rule 9 on a device): it loads the module file at path (PTX or cubin
// holding the kernel okv_fault, native/tests/gpu/fault.cu) on device 0 and
// arms it, so that the next copy job on device 0 launches it on its stream
// ahead of its copies; the device then takes a sticky error and the
// process ends in fail-stop when the job's completion is looked for. The
// error names the driver call that failed (a missing file, a module
// without the kernel, a driver library without cuModuleLoad).
func (c *CUDA) ArmDeviceFault(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if rc := C.okvi_cuda_arm_device_fault(c.c, cpath, &buf[0], C.size_t(len(buf))); rc != 0 {
		return errors.New(C.GoString(&buf[0]))
	}
	return nil
}

// Devices returns the number of CUDA devices the driver reported (>= 1).
func (c *CUDA) Devices() int { return int(C.okvi_cuda_device_count(c.c)) }

// DeviceUUID returns device ordinal dev's 16-byte UUID (cuDeviceGetUuid),
// the identity that survives CUDA_VISIBLE_DEVICES renumbering. Errors wrap
// unix.EINVAL (dev out of range) or unix.EIO.
func (c *CUDA) DeviceUUID(dev int) ([16]byte, error) {
	var u [16]byte
	if rc := C.okvi_cuda_device_uuid(c.c, C.int(dev), (*C.uint8_t)(unsafe.Pointer(&u[0]))); rc != 0 {
		return u, fmt.Errorf("native: uuid of CUDA device %d: %w", dev, unix.Errno(-rc))
	}
	return u, nil
}

// AddRange announces n bytes of device memory of device ordinal dev mapped
// at address base in this process. Errors wrap unix.EINVAL (dev out of
// range, n 0, a wrapping range or one overlapping an announced range) or
// unix.ENOSPC (4096 ranges).
func (c *CUDA) AddRange(dev int, base uintptr, n uint64) error {
	if rc := C.okvi_cuda_add_range(c.c, C.int(dev), C.uint64_t(base), C.uint64_t(n)); rc != 0 {
		return fmt.Errorf("native: CUDA range of %d bytes at %#x on device %d: %w", n, base, dev, unix.Errno(-rc))
	}
	return nil
}

// RemoveRange forgets the range announced at base; every job touching it
// must have been drained. Errors wrap unix.ENOENT.
func (c *CUDA) RemoveRange(base uintptr) error {
	if rc := C.okvi_cuda_remove_range(c.c, C.uint64_t(base)); rc != 0 {
		return fmt.Errorf("native: CUDA range at %#x: %w", base, unix.Errno(-rc))
	}
	return nil
}

// PinHost page-locks mem (mmap'd memory, not the Go heap) for DMA with
// cuMemHostRegister: the RAM tier when the CUDA backend is active. The
// error carries the driver's error name.
func (c *CUDA) PinHost(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	var buf [256]C.char
	if rc := C.okvi_cuda_host_register(c.c, unsafe.Pointer(&mem[0]), C.size_t(len(mem)), &buf[0], C.size_t(len(buf))); rc != 0 {
		return fmt.Errorf("native: page-locking %d bytes: %s", len(mem), C.GoString(&buf[0]))
	}
	return nil
}

// UnpinHost undoes PinHost(mem). Errors wrap unix.EIO.
func (c *CUDA) UnpinHost(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	if rc := C.okvi_cuda_host_unregister(c.c, unsafe.Pointer(&mem[0])); rc != 0 {
		return fmt.Errorf("native: unpinning %d bytes: %w", len(mem), unix.Errno(-rc))
	}
	return nil
}

// Close stops the completion thread, destroys the streams and unloads the
// library; every engine using c must be closed first. Calling it again does
// nothing.
func (c *CUDA) Close() {
	if c.c == nil {
		return
	}
	C.okvi_cuda_close(c.c)
	c.c = nil
}

// NewCopyEngineForCUDA is NewCopyEngineFor with the CUDA backend cu (which
// must outlive the engine).
func NewCopyEngineForCUDA(srv *Server, workers int, cu *CUDA) (*CopyEngine, error) {
	e, err := newCopyEngine(C.okvi_cuda_backend(cu.c), srv.db, workers)
	if err != nil {
		return nil, err
	}
	C.okvi_copy_set_ring_word(e.e, srv.ctlWord())
	C.okvi_copy_set_wake_fd(e.e, C.okvi_server_wake_fd(srv.s))
	return e, nil
}

// NewCopyEngineCUDA starts an engine of workers threads (1..64) over the
// CUDA backend cu (which must outlive the engine) without a doorbell:
// completions are found by polling Drain (tests, benches).
func NewCopyEngineCUDA(workers int, cu *CUDA) (*CopyEngine, error) {
	return newCopyEngine(C.okvi_cuda_backend(cu.c), nil, workers)
}

// CUDAMapping is device memory of another process mapped into the Manager
// and announced to the backend (MapIPC, MapVMM); Unmap releases it.
type CUDAMapping struct {
	cu *CUDA
	m  C.struct_okvi_cuda_mapping
}

// Addr is the region's device address in this process (the copy
// segments' address for it).
func (m *CUDAMapping) Addr() uintptr { return uintptr(m.m.addr) }

// Device is the ordinal, in this process, of the device it lives on.
func (m *CUDAMapping) Device() int { return int(m.m.dev) }

// AllocBytes is the size of the whole base allocation mapped.
func (m *CUDAMapping) AllocBytes() uint64 { return uint64(m.m.size) }

// Unmap forgets the range and releases the mapping (cuIpcCloseMemHandle,
// or cuMemUnmap + cuMemAddressFree + cuMemRelease), so the exporting
// engine's memory is not kept alive. Every copy touching it must have been
// drained. Idempotent.
func (m *CUDAMapping) Unmap() {
	if m.cu == nil || m.cu.c == nil {
		return
	}
	C.okvi_cuda_unmap(m.cu.c, &m.m)
	m.cu = nil
}

// MapIPC opens a legacy CUDA IPC handle (64 bytes of cudaIpcMemHandle_t,
// for plain cudaMalloc memory) on the device whose UUID is uuid, checks
// that [offset, offset+n) lies inside the base allocation and announces
// it. The error says why it was refused: no device with that UUID
// (ENODEV), outside the allocation (ERANGE), or the driver's error.
func (c *CUDA) MapIPC(uuid [16]byte, handle []byte, offset, n uint64) (*CUDAMapping, error) {
	if len(handle) != 64 {
		return nil, fmt.Errorf("native: CUDA IPC handle of %d bytes, want 64: %w", len(handle), unix.EINVAL)
	}
	m := &CUDAMapping{cu: c}
	var buf [256]C.char
	rc := C.okvi_cuda_map_ipc(c.c, (*C.uint8_t)(unsafe.Pointer(&uuid[0])), (*C.uint8_t)(unsafe.Pointer(&handle[0])),
		C.uint64_t(offset), C.uint64_t(n), &m.m, &buf[0], C.size_t(len(buf)))
	if rc != 0 {
		return nil, fmt.Errorf("%s: %w", C.GoString(&buf[0]), unix.Errno(-rc))
	}
	return m, nil
}

// MapVMM imports a VMM allocation of allocBytes exported as a POSIX file
// descriptor (fd is borrowed: the caller closes it), maps it read-write on
// the device whose UUID is uuid and announces [offset, offset+n). Errors as
// MapIPC.
func (c *CUDA) MapVMM(uuid [16]byte, fd int, allocBytes, offset, n uint64) (*CUDAMapping, error) {
	m := &CUDAMapping{cu: c}
	var buf [256]C.char
	rc := C.okvi_cuda_map_vmm_fd(c.c, (*C.uint8_t)(unsafe.Pointer(&uuid[0])), C.int(fd), C.uint64_t(allocBytes),
		C.uint64_t(offset), C.uint64_t(n), &m.m, &buf[0], C.size_t(len(buf)))
	if rc != 0 {
		return nil, fmt.Errorf("%s: %w", C.GoString(&buf[0]), unix.Errno(-rc))
	}
	return m, nil
}
