//go:build cgo

package native

/*
#include <stdlib.h>
#include <errno.h>
#include <unistd.h>
#include "orbitkv/client.h"
#include "pingpong.h"

// okvb_noop: the empty C function behind BenchCgoNoop; returns x + 1.
static uint64_t okvb_noop(uint64_t x) { return x + 1; }
*/
import "C"

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// BenchPingPong is the parent's end of a raw baseline. It is not safe for
// concurrent use.
type BenchPingPong struct {
	kind BenchKind
	fd   int                 // owned: memfd or socket
	ch   *C.struct_okvb_chan // owned C memory (and mapping)
}

// NewBenchPingPong creates the shared resource of a baseline (a memfd for
// shm_spin and futex, a SOCK_SEQPACKET socketpair for uds, a memfd holding
// a fresh service name for iceoryx2_raw) and opens the
// parent's end. peer is the file to hand to the peer process (through
// exec.Cmd.ExtraFiles) that runs BenchPeer; the caller owns it and should
// close it once the peer has started. Errors are syscall.Errno values,
// wrapped, or ErrNoIceoryx2 for iceoryx2_raw in a build without it.
func NewBenchPingPong(kind BenchKind) (pp *BenchPingPong, peer *os.File, err error) {
	var fd, peerFD int
	switch kind {
	case BenchShmSpin, BenchFutex, BenchIceoryx2:
		var rc int
		if kind == BenchIceoryx2 {
			if !Iceoryx2Built {
				return nil, nil, fmt.Errorf("opening %s baseline: %w", kind, ErrNoIceoryx2)
			}
			rc = int(C.okvb_iox2_create())
		} else {
			rc = int(C.okvb_shm_create())
		}
		if rc < 0 {
			return nil, nil, fmt.Errorf("creating bench memfd: %w", syscall.Errno(-rc))
		}
		fd = rc
		syscall.ForkLock.RLock()
		peerFD, err = syscall.Dup(fd)
		if err == nil {
			syscall.CloseOnExec(peerFD)
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			syscall.Close(fd)
			return nil, nil, fmt.Errorf("duplicating bench memfd: %w", err)
		}
	case BenchUDS:
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("creating bench socketpair: %w", err)
		}
		fd, peerFD = fds[0], fds[1]
	default:
		return nil, nil, fmt.Errorf("opening bench baseline: unknown kind %d", int(kind))
	}
	pp = &BenchPingPong{kind: kind, fd: fd}
	if rc := int(C.okvb_chan_open(C.int(kind), C.int(fd), &pp.ch)); rc != 0 {
		syscall.Close(fd)
		syscall.Close(peerFD)
		return nil, nil, fmt.Errorf("opening %s baseline: %w", kind, syscall.Errno(-rc))
	}
	return pp, os.NewFile(uintptr(peerFD), kind.String()+"-peer"), nil
}

// Kind returns the baseline of pp.
func (pp *BenchPingPong) Kind() BenchKind { return pp.kind }

// Measure runs warmup untimed round trips and then len(out) timed ones in
// one cgo call, writing each round trip in nanoseconds to out. period 0 is
// back-to-back; period > 0 starts one round trip per period on absolute
// CLOCK_MONOTONIC ticks. The peer must be running BenchPeer. Returns
// syscall.ETIMEDOUT (wrapped) when the peer did not answer within 10 s,
// syscall.EPROTO when an echo differed, syscall.EPIPE when the peer is gone.
func (pp *BenchPingPong) Measure(warmup int, period time.Duration, out []uint64) error {
	if pp.ch == nil {
		return fmt.Errorf("measuring %s: closed", pp.kind)
	}
	rc := measure(func(n, w, p C.uint64_t, o *C.uint64_t) C.int {
		return C.okvb_chan_measure(pp.ch, n, w, p, o)
	}, warmup, period, out)
	if rc != 0 {
		return fmt.Errorf("measuring %s round trips: %w", pp.kind, syscall.Errno(-rc))
	}
	return nil
}

// Close tells the peer to stop (stop flag and futex wake, or EOF on the
// socket), unmaps and closes the parent's fd. Idempotent.
func (pp *BenchPingPong) Close() error {
	if pp.ch == nil {
		return nil
	}
	C.okvb_chan_close(pp.ch)
	pp.ch = nil
	return syscall.Close(pp.fd)
}

// BenchPeer runs the echoing side of a baseline on fd (borrowed) in the
// calling process until the parent stops it (nil), the parent process
// parentPID is gone (syscall.ESRCH), or no request arrived for idle
// (syscall.ETIMEDOUT). It arms PR_SET_PDEATHSIG(SIGKILL) first. It blocks
// the calling goroutine's thread for the whole run (one cgo call).
func BenchPeer(kind BenchKind, fd int, parentPID int, idle time.Duration) error {
	rc := int(C.okvb_peer_run(C.int(kind), C.int(fd), C.pid_t(parentPID), C.uint64_t(idle.Nanoseconds())))
	if rc != 0 {
		return fmt.Errorf("%s peer: %w", kind, syscall.Errno(-rc))
	}
	return nil
}

// BenchPing times okv_ping round trips of c through the shared-memory
// channel in one cgo call: warmup untimed, then len(out) timed, each in
// nanoseconds into out; cadence as in BenchPingPong.Measure. Values sent are
// first, first+1, ...; each echo is checked. c must not be used
// concurrently. Errors: *ClientError from okv_ping, or syscall.EPROTO
// (wrapped) when an echo differed.
func BenchPing(c *Client, first uint64, warmup int, period time.Duration, out []uint64) error {
	if c == nil || c.c == nil {
		return fmt.Errorf("bench ping: %w", newClientError(nil, C.OKV_ECLOSED))
	}
	rc := measure(func(n, w, p C.uint64_t, o *C.uint64_t) C.int {
		return C.okvb_ping_measure(c.c, C.uint64_t(first), n, w, p, o)
	}, warmup, period, out)
	switch {
	case rc == 0:
		return nil
	case rc == -C.EPROTO:
		return fmt.Errorf("bench ping: echo differs: %w", syscall.EPROTO)
	case rc > -1000:
		return fmt.Errorf("bench ping: %w", syscall.Errno(-rc))
	default:
		return fmt.Errorf("bench ping: %w", newClientError(c.c, rc))
	}
}

// measure validates the arguments and makes the one cgo call of a run. out
// is Go memory borrowed by C for the call only (no Go pointers inside).
func measure(call func(n, warmup, period C.uint64_t, out *C.uint64_t) C.int,
	warmup int, period time.Duration, out []uint64) C.int {
	if warmup < 0 || period < 0 {
		return -C.EINVAL
	}
	var p *C.uint64_t
	if len(out) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&out[0]))
	}
	return call(C.uint64_t(len(out)), C.uint64_t(warmup), C.uint64_t(period.Nanoseconds()), p)
}

// ClockTicksPerSecond returns sysconf(_SC_CLK_TCK): the unit of utime and
// stime in /proc/PID/stat.
func ClockTicksPerSecond() int {
	return int(C.sysconf(C._SC_CLK_TCK))
}

// BenchRole is the role a bench session announces in its hello
// (OKV_ROLE_BENCH), for ConnectOptions.Role.
const BenchRole = uint32(C.OKV_ROLE_BENCH)

// BenchCgoNoop makes one cgo call to an empty C function and returns x+1:
// what the Go runtime's cgo crossing alone costs (orbitkv-bench wake).
// The error is always nil here; without cgo it is ErrNoCgo.
func BenchCgoNoop(x uint64) (uint64, error) { return uint64(C.okvb_noop(C.uint64_t(x))), nil }
