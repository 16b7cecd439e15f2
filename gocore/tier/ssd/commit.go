package ssd

import (
	"fmt"
	"sync"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// commitQueue carries written blocks and delete records to the committer.
type commitQueue struct {
	mu   sync.Mutex
	ops  []*op
	wake chan struct{} // capacity 1: a pending wakeup
	stop chan struct{} // closed by Close once no worker can push any more
	done chan struct{} // closed when the committer has returned
}

func (c *commitQueue) init() {
	c.wake = make(chan struct{}, 1)
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
}

func (c *commitQueue) push(o *op) {
	c.mu.Lock()
	c.ops = append(c.ops, o)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take swaps the queued ops out, handing back the emptied slice of the
// previous batch for reuse.
func (c *commitQueue) take(spare []*op) []*op {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.ops
	c.ops = spare[:0]
	return b
}

// runCommitter is the only goroutine that appends to the index log. Each
// pass takes every op queued meanwhile (group commit): one fdatasync of
// the data file makes all of the batch's blocks durable, then their put
// records and any delete records go to the log in one write and one
// fdatasync, and only then are the blocks made visible and their done
// callbacks called. Data before index: a put record never reaches the disk
// before the data it points to.
func (s *Store) runCommitter() {
	defer close(s.commitQ.done)
	var batch, spare []*op
	var buf []byte
	for {
		select {
		case <-s.commitQ.wake:
		case <-s.commitQ.stop:
		}
		batch = s.commitQ.take(spare)
		if len(batch) > 0 {
			buf = s.commit(batch, buf[:0])
			clear(batch)
		}
		// The queue now appends into spare's array: the next take hands
		// back this batch's (empty) array in its place.
		spare = batch
		if len(batch) == 0 {
			select {
			case <-s.commitQ.stop:
				return
			default:
			}
		}
	}
}

// commit makes one batch durable and visible; it returns buf for reuse.
func (s *Store) commit(batch []*op, buf []byte) []byte {
	var syncErr error
	for _, o := range batch {
		if o.kind == opWrite && o.err == nil {
			if err := unix.Fdatasync(s.dataFd); err != nil {
				syncErr = fmt.Errorf("fdatasync %s: %w", s.dataPath, err)
			}
			break
		}
	}
	for _, o := range batch {
		switch {
		case o.kind == opDelete:
			buf = s.idx.mac.AppendRecord(buf, layout.Record{Kind: layout.KindDelete, Slot: o.e.slot, Gen: o.e.gen, Key: o.e.key})
		case o.err == nil && syncErr != nil:
			o.err = syncErr
		case o.err == nil:
			buf = s.idx.mac.AppendRecord(buf, layout.Record{Kind: layout.KindPut, Slot: o.e.slot, Gen: o.e.gen, Key: o.e.key, Meta: o.e.meta})
		}
	}
	if len(buf) > 0 {
		if err := s.idx.append(buf); err != nil {
			s.log.Error("ssd tier: appending to the index failed; the batch's blocks are not stored", "records", len(buf)/RecordBytes, "err", err)
			for _, o := range batch {
				if o.kind == opWrite && o.err == nil {
					o.err = err
				}
			}
		}
	}

	s.mu.Lock()
	for _, o := range batch {
		if o.kind != opWrite {
			continue
		}
		e := o.e
		delete(s.writing, e.key)
		s.pending--
		if o.err == nil {
			s.makeResident(e)
			if s.spec.Blocks != nil {
				s.spec.Blocks.Resident(e.key, e.class, o.record)
			}
			o.record = nil // the observer's now; the store keeps none
			s.st.Writes++
			s.st.WriteBytes += e.meta.Bytes
		} else {
			e.state = stateDead
			if e.class != NoClass {
				s.class(e.class).bytes -= s.slotCost()
			}
			s.freeSlot(e.slot)
			s.st.WriteErrors++
		}
	}
	s.st.IndexRecords = uint64(s.idx.records)
	compact := s.idx.records >= compactMinRecords && s.idx.records > compactFactor*len(s.resident)
	s.mu.Unlock()

	for _, o := range batch {
		if o.kind == opWrite {
			if o.err != nil && o.e.waiters == nil {
				s.log.Warn("ssd tier: write failed", "slot", o.e.slot, "err", o.err)
			}
			o.done(o.err)
			for _, w := range o.e.waiters {
				w(o.err)
			}
			o.e.waiters = nil
		}
		putOp(o)
	}
	if compact {
		s.compact()
	}
	return buf
}

// compact rewrites the index log with one put record per resident block.
// Deletes and evictions that happen meanwhile are either already out of
// the snapshot or reach the new log as records after it.
func (s *Store) compact() {
	s.mu.Lock()
	live := make([]layout.Record, 0, s.fifo.n)
	for e := s.fifo.head; e != nil; e = e.next {
		live = append(live, layout.Record{Kind: layout.KindPut, Slot: e.slot, Gen: e.gen, Key: e.key, Meta: e.meta})
	}
	s.mu.Unlock()
	before := s.idx.records
	if err := s.idx.rewrite(live); err != nil {
		s.log.Error("ssd tier: index compaction failed; the log keeps growing", "err", err)
		return
	}
	s.mu.Lock()
	s.st.Compactions++
	s.st.IndexRecords = uint64(s.idx.records)
	s.mu.Unlock()
	s.log.Info("ssd tier: compacted the index", "records_before", before, "records_after", len(live))
}
