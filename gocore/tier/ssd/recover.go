package ssd

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// recover replays the index log into the store's state under secret,
// cutting off a torn tail, or starts a fresh log when the old one is
// unusable. newSecret says the secret was made by this Open: no record on
// disk can be checked under it, so an existing log is discarded whole
// (logged with its size) and the store starts empty. No goroutine runs
// yet.
func (s *Store) recover(secret *[layout.SecretBytes]byte, newSecret bool) error {
	s.idx = indexLog{path: filepath.Join(s.spec.Dir, indexName), mac: layout.NewMAC(secret), slotBytes: s.spec.SlotBytes}
	// A compaction that crashed before its rename leaves its temporary
	// file; the log it was replacing is intact.
	if err := os.Remove(s.idx.path + tmpSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ssd tier: removing %s: %w", s.idx.path+tmpSuffix, err)
	}
	b, err := readOwnFile(s.idx.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ssd tier: reading %s: %w", s.idx.path, err)
	}
	var r layout.Replayed
	if newSecret {
		r.Reset = "no MAC key"
		if len(b) > 0 {
			s.log.Warn("ssd tier: the index and data file were written under a MAC key that is gone; their records cannot be verified: discarding them and starting empty",
				"key", filepath.Join(s.spec.Dir, keyName), "file", s.idx.path, "bytes", len(b), "records", max(len(b)/RecordBytes-1, 0))
		}
	} else {
		s.spec.progress(StepReplay, 0, uint64(len(b)))
		r = layout.Replay(s.idx.mac, b, s.spec.SlotBytes, uint32(len(s.slots)))
		if len(b) > 0 {
			s.spec.progress(StepReplay, uint64(len(b)), uint64(len(b)))
		}
	}
	if r.Reset != "" {
		if len(b) > 0 && !newSecret {
			s.log.Warn("ssd tier: the index is unusable; starting empty", "file", s.idx.path, "reason", r.Reset, "bytes", len(b))
		}
		if err := s.idx.rewrite(nil); err != nil {
			return fmt.Errorf("ssd tier: creating the index: %w", err)
		}
	} else {
		f, err := openOwnFile(s.idx.path, os.O_RDWR)
		if err != nil {
			return fmt.Errorf("ssd tier: opening %s: %w", s.idx.path, err)
		}
		s.idx.f, s.idx.off, s.idx.records = f, r.GoodLen, r.Records
		if int64(len(b)) > r.GoodLen {
			s.log.Warn("ssd tier: the index ends in a torn or damaged record, or one whose MAC does not check; keeping the complete records before it",
				"file", s.idx.path, "records_kept", r.Records, "bytes_dropped", int64(len(b))-r.GoodLen)
			if err := f.Truncate(r.GoodLen); err == nil {
				err = f.Sync()
			}
			if err != nil {
				return fmt.Errorf("ssd tier: cutting %s to %d bytes: %w", s.idx.path, r.GoodLen, err)
			}
		}
	}
	for _, b := range r.Blocks {
		e := &entry{key: b.Key, meta: b.Meta, gen: b.Gen, slot: b.Slot, state: stateResident}
		s.slots[e.slot] = e
		s.resident[e.key] = e
		s.fifo.insert(e)
		s.dataBytes += e.meta.Bytes
	}
	for i := len(s.slots) - 1; i >= 0; i-- {
		if s.slots[i] == nil {
			s.free = append(s.free, uint32(i)) // pops in ascending order
		}
	}
	s.nextGen = r.MaxGen + 1
	s.st.DroppedAtOpen = uint64(r.Dropped)
	if r.Dropped > 0 {
		s.log.Warn("ssd tier: index records dropped: slot beyond the data file or a bad Meta", "records", r.Dropped, "slots", len(s.slots))
	}
	if s.idx.records >= compactMinRecords && s.idx.records > compactFactor*len(s.resident) {
		s.compact()
	}
	s.st.IndexRecords = uint64(s.idx.records)
	return nil
}

// verifyOnOpen reads back a sample of the recovered blocks through the
// workers and drops those that fail (each is counted in DroppedAtOpen and
// logged, not in Corrupt: after a crash the FIFO victims of the writes in
// flight are expected to fail). The sample is the oldest half (a crash while writes were in
// flight left their FIFO victims' slots half overwritten, and the index
// still names the victims) and a random half of the rest. Every Read
// verifies too; this only keeps damaged blocks out of Keys from the start.
func (s *Store) verifyOnOpen() {
	defer func() {
		s.mu.Lock()
		s.st.Recovered = uint64(len(s.resident))
		s.mu.Unlock()
	}()
	n := s.spec.VerifyOnOpen
	if n < 0 || s.fifo.n == 0 {
		s.spec.progress(StepVerify, 0, 0)
		return
	}
	all := make([]*entry, 0, s.fifo.n)
	for e := s.fifo.head; e != nil; e = e.next {
		all = append(all, e)
	}
	pick := all
	if n < len(all) {
		oldest := (n + 1) / 2
		rest := all[oldest:]
		for i := range n - oldest { // a partial Fisher-Yates shuffle of rest
			j := i + rand.IntN(len(rest)-i)
			rest[i], rest[j] = rest[j], rest[i]
		}
		pick = all[:n]
	}
	bufBytes := int(roundUp(s.spec.SlotBytes))
	bufs := make(chan []byte, s.spec.IOWorkers)
	for range s.spec.IOWorkers {
		b, err := unix.Mmap(-1, 0, bufBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			s.log.Warn("ssd tier: no buffer to verify recovered blocks; skipped", "err", err)
			break
		}
		bufs <- b
	}
	held := len(bufs)
	if held == 0 {
		s.spec.progress(StepVerify, 0, 0)
		return
	}
	total := uint64(len(pick))
	// The workers complete verifications concurrently; the count and its
	// report go together under progressMu, so Spec.Progress hears done
	// rise one by one (1, 2, ... total) whichever worker finished.
	var (
		progressMu sync.Mutex
		verified   uint64
	)
	s.spec.progress(StepVerify, 0, total)
	for _, e := range pick {
		b := <-bufs
		s.mu.Lock()
		e.pins++
		s.q.push(getOp(opVerify, e, [][]byte{b}, func(error) {
			progressMu.Lock()
			verified++
			s.spec.progress(StepVerify, verified, total)
			progressMu.Unlock()
			bufs <- b
		}))
		s.mu.Unlock()
	}
	for range held {
		unix.Munmap(<-bufs)
	}
}
