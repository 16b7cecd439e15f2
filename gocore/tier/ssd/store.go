package ssd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// Store is an open SSD block store. Its methods are safe for concurrent
// use; none blocks on I/O except Open and Close.
type Store struct {
	spec     Spec
	log      *slog.Logger
	stride   uint64
	data     *os.File // blocks.dat, O_DIRECT, flock'ed
	dataFd   int
	dataPath string
	idx      indexLog // owned by the committer after Open
	admit    *ghost   // nil under AdmitAll

	q       queue
	commitQ commitQueue
	workers sync.WaitGroup
	hdrs    [][]byte // the workers' header pages, unmapped by Close
	ioMu    sync.Mutex
	wks     []*worker // each worker's current system call (guarded by ioMu), for Outstanding

	mu        sync.Mutex
	closed    bool
	resident  map[Key]*entry // visible blocks
	writing   map[Key]*entry // blocks whose Write is in flight
	slots     []*entry       // occupant of each slot (resident, writing, or dead but pinned)
	free      []uint32       // free slots, a stack
	fifo      fifo
	pending   int // Writes queued or in flight
	nextGen   uint64
	dataBytes uint64
	classes   []classBlocks // by Class; [NoClass] unused (class.go)
	st        Stats
}

// Stats are the store's counters. Counts are since Open unless noted.
type Stats struct {
	Open          bool   // true until Close begins
	Blocks        uint64 // resident blocks now
	Slots         uint32 // slots in the data file
	CapacityBytes uint64 // data file bytes: Slots × (HeaderBytes + SlotBytes)
	UsedBytes     uint64 // bytes of the slots holding resident blocks or blocks being written
	DataBytes     uint64 // sum of the resident blocks' Meta.Bytes
	PendingWrites uint64 // Writes queued or in flight now

	Writes      uint64 // blocks written and made visible
	WriteBytes  uint64 // their Meta.Bytes
	WriteErrors uint64 // Writes that failed with an I/O error
	Present     uint64 // Writes of a block already resident (nothing written)
	NotAdmitted uint64 // Writes declined by the second-hit rule
	Busy        uint64 // Writes refused with ErrBusy
	// RecordTooLong counts Writes refused with ErrRecordTooLong: their
	// block record was over MaxRecordBytes (nothing written).
	RecordTooLong uint64
	Reads         uint64 // blocks read and verified
	ReadBytes     uint64 // their Meta.Bytes
	ReadErrors    uint64 // Reads and Records that failed with an I/O error (the block is dropped)
	Corrupt       uint64 // blocks that failed their integrity check at Read or Record (dropped)
	Evictions     uint64 // blocks evicted (FIFO) to make room
	// ClassEvictions counts blocks deleted to keep their class within its
	// quota (MakeClassRoom); they are not among Evictions or Deletes.
	ClassEvictions uint64
	Deletes        uint64 // blocks removed by Delete
	Recovered      uint64 // blocks the index gave back at Open and that passed the checks
	DroppedAtOpen  uint64 // recovered blocks dropped at Open: a slot beyond the data file, a bad Meta, or a failed check (VerifyOnOpen)
	IndexRecords   uint64 // records in the index log now, header excluded
	Compactions    uint64 // index log rewrites
}

// Open opens or creates the store in s.Dir. The data file is preallocated
// to its capacity and opened with O_DIRECT; the MAC key is read from
// mac.key, or made when there is none (and then the store starts empty:
// no record on disk can be checked under a new key); the index log is
// replayed (only complete records whose MAC checks count: a torn tail is
// cut off), a sample of the recovered blocks is read back and checked
// (Spec.VerifyOnOpen), and Stats().Recovered says how many blocks are
// resident. log may be nil. Errors: a Spec error naming the field,
// ErrNoDirectIO, ErrLocked, a refused tier file or key file (its path and
// what is wrong with it), or an I/O error naming the file.
func Open(s Spec, log *slog.Logger) (*Store, error) {
	s = s.withDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &Store{spec: s, log: log, stride: s.stride(),
		resident: make(map[Key]*entry), writing: make(map[Key]*entry),
		slots: make([]*entry, s.Slots())}
	pl, err := prepare(s)
	if err != nil {
		return nil, err
	}
	if err := st.openData(); err != nil {
		if st.data != nil {
			st.closeFiles()
		}
		pl.undo(s.Dir)
		return nil, err
	}
	secret, madeSecret, err := loadSecret(s.Dir)
	if err != nil {
		st.closeFiles()
		pl.undo(s.Dir)
		return nil, err
	}
	pl.madeSecret = madeSecret
	if err := st.recover(&secret, madeSecret); err != nil {
		st.closeFiles()
		pl.undo(s.Dir)
		return nil, err
	}
	if s.Admission == AdmitSecondHit {
		st.admit = newGhost(max(int(s.Slots()), 1024))
	}
	for range s.IOWorkers {
		hdr, err := unix.Mmap(-1, 0, HeaderBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			st.closeFiles()
			pl.undo(s.Dir)
			return nil, fmt.Errorf("ssd tier: mapping a header page: %w", err)
		}
		st.hdrs = append(st.hdrs, hdr)
	}
	st.q.init()
	st.commitQ.init()
	for _, hdr := range st.hdrs {
		w := &worker{hdr: hdr, mac: layout.NewMAC(&secret)}
		st.wks = append(st.wks, w)
		st.workers.Add(1)
		go st.runWorker(w)
	}
	go st.runCommitter()
	st.verifyOnOpen()
	stats := st.Stats()
	log.Info("ssd tier: open", "dir", s.Dir, "slots", stats.Slots, "slot_bytes", s.SlotBytes,
		"capacity_bytes", stats.CapacityBytes, "recovered", stats.Recovered, "io_workers", s.IOWorkers, "admission", s.Admission)
	return st, nil
}

// openData opens (creating if needed), locks, checks and sizes the data
// file.
func (s *Store) openData() error {
	s.dataPath = filepath.Join(s.spec.Dir, dataName)
	fd, err := unix.Open(s.dataPath, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: opening %s: %v", ErrNoDirectIO, s.dataPath, err)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return symlinkError(s.dataPath, err)
		}
		return fmt.Errorf("ssd tier: opening %s: %w", s.dataPath, err)
	}
	s.data, s.dataFd = os.NewFile(uintptr(fd), s.dataPath), fd
	if err := checkOwnFile(s.data); err != nil {
		s.data.Close()
		return err
	}
	if err := s.sizeData(); err != nil {
		s.data.Close()
		return err
	}
	return nil
}

func (s *Store) sizeData() error {
	if err := unix.Flock(s.dataFd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, s.dataPath)
		}
		return fmt.Errorf("ssd tier: flock %s: %w", s.dataPath, err)
	}
	var sx unix.Statx_t
	if err := unix.Statx(s.dataFd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN|unix.STATX_SIZE, &sx); err == nil && sx.Mask&unix.STATX_DIOALIGN != 0 {
		switch {
		case sx.Dio_offset_align == 0:
			return fmt.Errorf("%w: statx reports no direct I/O support for %s", ErrNoDirectIO, s.dataPath)
		case sx.Dio_offset_align > HeaderBytes || sx.Dio_mem_align > alignBytes:
			return fmt.Errorf("%w: %s needs direct I/O aligned to %d bytes in the file and %d in memory; this store aligns to %d",
				ErrNoDirectIO, s.dataPath, sx.Dio_offset_align, sx.Dio_mem_align, alignBytes)
		}
	}
	var fi unix.Stat_t
	if err := unix.Fstat(s.dataFd, &fi); err != nil {
		return fmt.Errorf("ssd tier: fstat %s: %w", s.dataPath, err)
	}
	want := int64(uint64(len(s.slots)) * s.stride)
	if fi.Size > want {
		if err := unix.Ftruncate(s.dataFd, want); err != nil {
			return fmt.Errorf("ssd tier: shrinking %s to %d bytes: %w", s.dataPath, want, err)
		}
	}
	s.spec.progress(StepPreallocate, 0, uint64(want))
	for off := int64(0); off < want; {
		n := min(want-off, PreallocateStep)
		if err := unix.Fallocate(s.dataFd, 0, off, n); err != nil {
			if !errors.Is(err, unix.EOPNOTSUPP) {
				return fmt.Errorf("ssd tier: fallocate %s to %d bytes: %w", s.dataPath, want, err)
			}
			s.log.Warn("ssd tier: the filesystem cannot preallocate; the data file is sparse", "file", s.dataPath)
			if err := unix.Ftruncate(s.dataFd, want); err != nil {
				return fmt.Errorf("ssd tier: sizing %s to %d bytes: %w", s.dataPath, want, err)
			}
			break
		}
		off += n
		if off < want {
			s.spec.progress(StepPreallocate, uint64(off), uint64(want))
		}
	}
	if want > 0 {
		s.spec.progress(StepPreallocate, uint64(want), uint64(want))
	}
	return nil
}

// Contains reports whether the store holds k, and its Meta. A block whose
// Write is still in flight is not contained.
func (s *Store) Contains(k Key) (Meta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.resident[k]; e != nil {
		return e.meta, true
	}
	return Meta{}, false
}

// Keys returns the resident keys, oldest first (the FIFO order of
// eviction). At start it is what the store recovered: Spec.Blocks hears
// no Resident for those, so a caller that announces blocks walks Keys
// and asks Record for each.
func (s *Store) Keys() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]Key, 0, s.fifo.n)
	for e := s.fifo.head; e != nil; e = e.next {
		keys = append(keys, e.key)
	}
	return keys
}

// Delete drops k if it is resident: it is no longer contained at once, and
// a delete record goes to the index with the next commit. A Write of k in
// flight is not cancelled. A read in flight on k still completes (its
// slot is reused only after it).
func (s *Store) Delete(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.resident[k]
	if e == nil || s.closed {
		return
	}
	s.drop(e)
	s.st.Deletes++
	s.commitQ.push(getOp(opDelete, e, nil, nil))
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Open = !s.closed
	st.Blocks = uint64(len(s.resident))
	st.Slots = uint32(len(s.slots))
	st.CapacityBytes = uint64(len(s.slots)) * s.stride
	st.UsedBytes = uint64(len(s.slots)-len(s.free)) * s.stride
	st.DataBytes = s.dataBytes
	st.PendingWrites = uint64(s.pending)
	return st
}

// Close refuses new operations (ErrClosed), waits for every queued Read and
// Write to finish and call its done, writes the last index records, syncs
// both files and closes them. It returns the first error of those steps;
// a second Close returns nil.
//
// Close has no deadline, on purpose: a read in flight still writes into its
// caller's dst, and a worker's header page, until the kernel answers it, so
// nothing it may write is released before then. A caller that must stop in
// bounded time while the disk does not answer (a Manager's shutdown) asks
// Outstanding what is stuck, reports it and exits the process instead of
// waiting; see Outstanding.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.q.close()
	s.workers.Wait()
	close(s.commitQ.stop)
	<-s.commitQ.done
	return s.closeFiles()
}

// closeFiles syncs and closes both files and unmaps the header pages.
func (s *Store) closeFiles() error {
	var errs []error
	if err := unix.Fdatasync(s.dataFd); err != nil {
		errs = append(errs, fmt.Errorf("ssd tier: fdatasync %s: %w", s.dataPath, err))
	}
	if err := s.data.Close(); err != nil {
		errs = append(errs, fmt.Errorf("ssd tier: closing %s: %w", s.dataPath, err))
	}
	if s.idx.f != nil {
		if err := s.idx.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("ssd tier: fsync %s: %w", s.idx.path, err))
		}
		if err := s.idx.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ssd tier: closing %s: %w", s.idx.path, err))
		}
	}
	for _, h := range s.hdrs {
		unix.Munmap(h)
	}
	s.hdrs = nil
	return errors.Join(errs...)
}

// slotOff is the file offset of a slot's header.
func (s *Store) slotOff(slot uint32) int64 { return int64(uint64(slot) * s.stride) }
