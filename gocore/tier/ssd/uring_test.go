package ssd

// A minimal io_uring reader over raw system calls, for BenchmarkRead's
// comparison of I/O engines only. No Go io_uring library could be had from
// the module proxy (none is on the project's package list, and the ones
// asked for by name were refused), and the store does not depend on this
// code: see doc.go for the measurement and the decision.

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of io_uring (include/uapi/linux/io_uring.h).
const (
	ioringOffSQRing      = 0
	ioringOffCQRing      = 0x8000000
	ioringOffSQEs        = 0x10000000
	ioringFeatSingleMmap = 1 << 0
	ioringEnterGetevents = 1 << 0
	ioringOpReadv        = 1
)

type ioSQRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type ioCQRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  ioSQRingOffsets
	cqOff                                                                  ioCQRingOffsets
}

type ioUringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

type ioUringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// uring is one ring used by one goroutine. The head and tail words are
// shared with the kernel: the producer publishes a tail with a release
// store after filling the entries, the consumer reads the other side's
// tail with an acquire load (sync/atomic gives both).
type uring struct {
	fd                     int
	sqMem, cqMem, sqeMem   []byte
	sqTail, sqMask         *uint32
	sqArray                unsafe.Pointer
	sqes                   unsafe.Pointer
	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
	toSubmit               uint32
}

func newUring(entries uint32) (*uring, error) {
	var p ioUringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &uring{fd: int(fd)}
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(ioUringCQE{})))
	single := p.features&ioringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("mapping the SQ ring: %w", err)
	}
	r.cqMem = r.sqMem
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			r.close()
			return nil, fmt.Errorf("mapping the CQ ring: %w", err)
		}
	}
	if r.sqeMem, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(ioUringSQE{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("mapping the SQEs: %w", err)
	}
	word := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqTail, r.sqMask = word(r.sqMem, p.sqOff.tail), word(r.sqMem, p.sqOff.ringMask)
	r.sqArray = unsafe.Pointer(&r.sqMem[p.sqOff.array])
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	r.cqHead, r.cqTail, r.cqMask = word(r.cqMem, p.cqOff.head), word(r.cqMem, p.cqOff.tail), word(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&r.cqMem[p.cqOff.cqes])
	return r, nil
}

// readv queues a READV of iov at off; the caller keeps iov and its
// buffers alive until the completion carrying tag arrives.
func (r *uring) readv(fd int, iov []unix.Iovec, off int64, tag uint64) {
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & *r.sqMask
	sqe := (*ioUringSQE)(unsafe.Add(r.sqes, uintptr(idx)*unsafe.Sizeof(ioUringSQE{})))
	*sqe = ioUringSQE{opcode: ioringOpReadv, fd: int32(fd), off: uint64(off),
		addr: uint64(uintptr(unsafe.Pointer(&iov[0]))), len: uint32(len(iov)), userData: tag}
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(idx)*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1) // release: the entry is filled
	r.toSubmit++
}

// wait submits the queued entries and waits for at least min completions.
func (r *uring) wait(min uint32) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.toSubmit), uintptr(min), ioringEnterGetevents, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		r.toSubmit = 0
		return nil
	}
}

// reap calls f for each completion available.
func (r *uring) reap(f func(tag uint64, res int32)) {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // acquire: the kernel filled the CQEs before it
	for ; head != tail; head++ {
		c := (*ioUringCQE)(unsafe.Add(r.cqes, uintptr(head&*r.cqMask)*unsafe.Sizeof(ioUringCQE{})))
		f(c.userData, c.res)
	}
	atomic.StoreUint32(r.cqHead, head) // release: the kernel may reuse the CQEs
}

func (r *uring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && unsafe.SliceData(r.cqMem) != unsafe.SliceData(r.sqMem) {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	unix.Close(r.fd)
}
