package ssd

import (
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// iovMax is the kernel's limit on iovecs per preadv/pwritev (IOV_MAX);
// longer lists go out in several calls.
const iovMax = 1024

// alignBytes is the alignment Write and Read require of the caller's
// buffers: the page, at least what O_DIRECT asks on every filesystem Open
// accepts (it checks the filesystem's own figure with statx).
const alignBytes = 4096

// roundUp rounds n up to a whole number of 4 KiB pages: O_DIRECT moves
// whole pages, so a block of n bytes reads and writes roundUp(n) bytes.
func roundUp(n uint64) uint64 { return (n + alignBytes - 1) &^ (alignBytes - 1) }

// checkBufs checks that bufs are page-aligned, whole pages, and hold at
// least need bytes; it names the first offending buffer.
func checkBufs(bufs [][]byte, need uint64) error {
	var total uint64
	for i, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignBytes != 0 || len(b)%alignBytes != 0 {
			return fmt.Errorf("%w: buffer %d (address %p, %d bytes) is not whole 4096-byte pages on a page boundary",
				ErrAlign, i, unsafe.SliceData(b), len(b))
		}
		total += uint64(len(b))
	}
	if total < need {
		return fmt.Errorf("%w: buffers hold %d bytes, the block needs %d", ErrAlign, total, need)
	}
	return nil
}

// buildIov appends hdr (if not nil) and then the first n bytes of bufs to
// iov, as iovecs. n is a multiple of 4096 and every buffer is whole pages
// (checkBufs), so each iovec stays page-aligned.
func buildIov(iov []unix.Iovec, hdr []byte, bufs [][]byte, n uint64) []unix.Iovec {
	if hdr != nil {
		iov = append(iov, unix.Iovec{Base: &hdr[0], Len: uint64(len(hdr))})
	}
	for _, b := range bufs {
		if n == 0 {
			break
		}
		if len(b) == 0 {
			continue
		}
		l := min(uint64(len(b)), n)
		iov = append(iov, unix.Iovec{Base: &b[0], Len: l})
		n -= l
	}
	return iov
}

// rwv transfers every byte of iov at file offset off with preadv or
// pwritev (sysno), resuming after short transfers and EINTR, IOV_MAX
// iovecs per call. It rewrites iov's entries as it advances. Reading past
// the end of the file is io.ErrUnexpectedEOF.
func rwv(sysno uintptr, fd int, iov []unix.Iovec, off int64) error {
	for len(iov) > 0 {
		n := min(len(iov), iovMax)
		// pos_h is 0: on 64-bit kernels pos_l carries the whole offset.
		r, _, errno := unix.Syscall6(sysno, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(n), uintptr(off), 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return errno
		case r == 0:
			return io.ErrUnexpectedEOF
		}
		off += int64(r)
		for r > 0 && len(iov) > 0 {
			if uint64(r) < iov[0].Len {
				iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), r))
				iov[0].Len -= uint64(r)
				break
			}
			r -= uintptr(iov[0].Len)
			iov = iov[1:]
		}
	}
	return nil
}
