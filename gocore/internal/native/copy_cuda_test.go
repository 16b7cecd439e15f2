//go:build cgo

package native

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cudaDouble returns the path of the fault-injecting double of the CUDA
// driver library that CMake builds (build/native/libokv_cuda_double.so, or
// $ORBITKV_CUDA_DOUBLE), skipping the test with the reason when it has not
// been built.
func cudaDouble(t *testing.T) string {
	t.Helper()
	p := os.Getenv("ORBITKV_CUDA_DOUBLE")
	if p == "" {
		_, file, _, _ := runtime.Caller(0)
		p = filepath.Join(filepath.Dir(file), "../../../build/native/libokv_cuda_double.so")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the CUDA driver double is not built (make native builds it): %v", err)
	}
	return p
}

// TestOpenCUDAErrors: a library that cannot be loaded and a driver without
// a device are refused with the step and the error named.
func TestOpenCUDAErrors(t *testing.T) {
	t.Run("a missing library names dlopen and the path", func(t *testing.T) {
		_, err := OpenCUDA("/nonexistent/libcuda.so.1")
		if err == nil || !strings.Contains(err.Error(), "dlopen /nonexistent/libcuda.so.1") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a driver without a device names cuInit and the error", func(t *testing.T) {
		t.Setenv("ORBITKV_CUDA_DOUBLE_DEVICES", "0")
		_, err := OpenCUDA(cudaDouble(t))
		if err == nil || !strings.Contains(err.Error(), "cuInit: CUDA_ERROR_NO_DEVICE (100)") {
			t.Fatalf("err = %v", err)
		}
	})
}

// waitToken polls Drain until token's completion arrives (30 s deadline).
func waitToken(t *testing.T, e *CopyEngine, token uint64) CopyCompletion {
	t.Helper()
	out := make([]CopyCompletion, 1)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if e.Drain(out) == 1 && out[0].Token == token {
			return out[0]
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("no completion of job %d in 30 s", token)
	return CopyCompletion{}
}

// TestCUDABackendRoundTrip: through the double (whose "device memory" is
// host memory announced with AddRange), an H2D then a D2H job of several
// segments on one lane bring every byte back, and completions flow through
// Drain like host copies'.
func TestCUDABackendRoundTrip(t *testing.T) {
	cu, err := OpenCUDA(cudaDouble(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cu.Close()
	e, err := NewCopyEngineCUDA(1, cu)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Backend() != "cuda" {
		t.Fatalf("backend %q", e.Backend())
	}
	const n, sz = 3, 1 << 20
	src, dev, back := mapAnon(t, n*sz), mapAnon(t, n*sz), mapAnon(t, n*sz)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	if err := cu.AddRange(0, addrOf(dev), n*sz); err != nil {
		t.Fatal(err)
	}
	if err := cu.PinHost(src); err != nil {
		t.Fatal(err)
	}
	var h2d, d2h []CopySeg
	for i := uintptr(0); i < n; i++ {
		h2d = append(h2d, CopySeg{Src: addrOf(src) + i*sz, Dst: addrOf(dev) + i*sz, Len: sz})
		d2h = append(d2h, CopySeg{Src: addrOf(dev) + i*sz, Dst: addrOf(back) + i*sz, Len: sz})
	}
	if err := e.SubmitLane(1, 5, h2d); err != nil {
		t.Fatal(err)
	}
	if c := waitToken(t, e, 1); c.Err() != nil || c.Bytes != n*sz {
		t.Fatalf("H2D completion %+v: %v", c, c.Err())
	}
	if err := e.SubmitLane(2, 5, d2h); err != nil {
		t.Fatal(err)
	}
	if c := waitToken(t, e, 2); c.Err() != nil {
		t.Fatalf("D2H completion: %v", c.Err())
	}
	if !bytes.Equal(src, back) {
		t.Fatal("bytes differ after H2D then D2H")
	}
	bad := []CopySeg{{Src: addrOf(src), Dst: addrOf(dev) + n*sz - 8, Len: 16}}
	if err := e.SubmitLane(3, 5, bad); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("a segment straddling the end of device memory: err = %v, want EINVAL", err)
	}
	e.Close()
	if err := cu.RemoveRange(addrOf(dev)); err != nil {
		t.Fatal(err)
	}
}

// TestCUDAFailStop: a lost device while a job is in flight (the double's
// cuEventQuery failing with a sticky CUDA_ERROR_LAUNCH_FAILED) must end the
// process with SIGABRT and the reason on stderr, not a completion. The test
// binary re-runs itself as the child.
func TestCUDAFailStop(t *testing.T) {
	if os.Getenv("OKV_TEST_CUDA_FAILSTOP_CHILD") == "1" {
		failStopChild(t)
		return
	}
	lib := cudaDouble(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCUDAFailStop$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OKV_TEST_CUDA_FAILSTOP_CHILD=1", CUDALibEnv+"="+lib,
		"ORBITKV_CUDA_DOUBLE_FAULT=cuEventQuery:1:719:s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v (want death by SIGABRT); stderr:\n%s", err, stderr.String())
	}
	ws, _ := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
		t.Fatalf("child ended with %v, want SIGABRT; stderr:\n%s", ee, stderr.String())
	}
	want := "orbitkv-manager: fail-stop: copy job 9: cuEventQuery failed with CUDA_ERROR_LAUNCH_FAILED (719)"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
	}
}

// failStopChild submits one device job through the library named by
// CUDALibEnv; reaching the end means no fail-stop happened.
func failStopChild(t *testing.T) {
	cu, err := OpenCUDA("")
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewCopyEngineCUDA(1, cu)
	if err != nil {
		t.Fatal(err)
	}
	src, dev := mapAnon(t, 4096), mapAnon(t, 4096)
	if err := cu.AddRange(0, addrOf(dev), 4096); err != nil {
		t.Fatal(err)
	}
	if err := e.SubmitLane(9, 1, []CopySeg{{Src: addrOf(src), Dst: addrOf(dev), Len: 4096}}); err != nil {
		t.Fatal(err)
	}
	c := waitToken(t, e, 9)
	t.Fatalf("the job completed (%v) instead of failing stop", c.Err())
}

// TestCUDAMapVMM: a VMM allocation exported as a POSIX fd (a memfd, for the
// double) is mapped, announced and copied into, and the bytes are in the
// fd; a range past the allocation and an unknown device UUID are refused
// saying why.
func TestCUDAMapVMM(t *testing.T) {
	cu, err := OpenCUDA(cudaDouble(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cu.Close()
	e, err := NewCopyEngineCUDA(1, cu)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	uuid, err := cu.DeviceUUID(0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.MemfdCreate("vmm", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const alloc, off, n = 1 << 21, 8192, 1 << 16
	if err := unix.Ftruncate(fd, alloc); err != nil {
		t.Fatal(err)
	}
	t.Run("a range past the allocation is refused", func(t *testing.T) {
		if _, err := cu.MapVMM(uuid, fd, alloc, alloc-8, n); !errors.Is(err, syscall.ERANGE) || !strings.Contains(err.Error(), "exceeds the allocation") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("an unknown device UUID is refused", func(t *testing.T) {
		bad := uuid
		bad[0] ^= 0xff
		if _, err := cu.MapVMM(bad, fd, alloc, off, n); !errors.Is(err, syscall.ENODEV) || !strings.Contains(err.Error(), "no CUDA device with UUID") {
			t.Fatalf("err = %v", err)
		}
	})
	m, err := cu.MapVMM(uuid, fd, alloc, off, n)
	if err != nil {
		t.Fatal(err)
	}
	src := mapAnon(t, n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	if err := e.SubmitLane(1, 1, []CopySeg{{Src: addrOf(src), Dst: m.Addr(), Len: n}}); err != nil {
		t.Fatal(err)
	}
	if c := waitToken(t, e, 1); c.Err() != nil {
		t.Fatal(c.Err())
	}
	got := make([]byte, n)
	if _, err := unix.Pread(fd, got, off); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("bytes copied into the mapping are not in the fd (pread err %v)", err)
	}
	m.Unmap()
	m.Unmap()
	if err := cu.RemoveRange(m.Addr()); err == nil {
		t.Fatal("Unmap left the range announced")
	}
}
