package tier

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// staging is a pool of page-aligned buffers (one anonymous mapping) that
// hold demoted blocks until the SSD write finished. Safe for concurrent use:
// store goroutines return buffers.
type staging struct {
	mu   sync.Mutex
	mem  []byte
	size uint64
	free []int
}

func newStaging(n int, size uint64) (*staging, error) {
	mem, err := unix.Mmap(-1, 0, n*int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ssd staging buffers (%d × %d bytes): %w", n, size, err)
	}
	s := &staging{mem: mem, size: size}
	for i := n - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	return s, nil
}

func (s *staging) get() (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		return -1, nil
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	off := uint64(i) * s.size
	return i, s.mem[off : off+s.size : off+s.size]
}

func (s *staging) put(i int) {
	s.mu.Lock()
	s.free = append(s.free, i)
	s.mu.Unlock()
}

func (s *staging) close() { unix.Munmap(s.mem) }
