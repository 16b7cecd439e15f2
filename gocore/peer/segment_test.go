package peer

import (
	"errors"
	"sync"
	"time"
)

// segDouble is a test double of SegmentServer, standing in for
// gocore/transfer's Server until that package is on main: it keeps the
// registered segments and reads them back as a READ would, refusing a
// wrong capability, an ended segment or one past its deadline.
type segDouble struct {
	mu    sync.Mutex
	next  uint64
	segs  map[uint64]*segEntry
	ended []uint64
}

type segEntry struct {
	bufs     [][]byte
	c        Capability
	deadline time.Time
}

func newSegDouble() *segDouble { return &segDouble{segs: map[uint64]*segEntry{}} }

func (d *segDouble) RegisterSegment(bufs [][]byte, deadline time.Time) (uint64, Capability, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	var c Capability
	for i := range c {
		c[i] = byte(d.next*31) + byte(i)
	}
	d.segs[d.next] = &segEntry{bufs: bufs, c: c, deadline: deadline}
	return d.next, c, nil
}

func (d *segDouble) UnregisterSegment(id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.segs[id]; ok {
		delete(d.segs, id)
		d.ended = append(d.ended, id)
	}
}

func (d *segDouble) Addr() string { return "127.0.0.1:1" }

func (d *segDouble) live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.segs)
}

// read copies [off, off+len(dst)) of segment id into dst.
func (d *segDouble) read(id uint64, c Capability, off uint64, dst []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.segs[id]
	switch {
	case !ok:
		return errors.New("no such segment")
	case s.c != c:
		return errors.New("wrong capability")
	case time.Now().After(s.deadline):
		return errors.New("segment expired")
	}
	var pos uint64
	n := 0
	for _, b := range s.bufs {
		for i := range b {
			if p := pos + uint64(i); p >= off && p < off+uint64(len(dst)) {
				dst[p-off] = b[i]
				n++
			}
		}
		pos += uint64(len(b))
	}
	if n != len(dst) {
		return errors.New("read past the segment's end")
	}
	return nil
}
