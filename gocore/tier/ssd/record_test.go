package ssd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// blockLog is a BlockObserver that keeps what it hears, in order.
type blockLog struct {
	mu     sync.Mutex
	events []string
	recs   map[Key][]byte // the record of each Resident heard, by key
}

func newBlockLog() *blockLog { return &blockLog{recs: map[Key][]byte{}} }

func (l *blockLog) Resident(k Key, c Class, record []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("resident %d/%d class %d", k.NS[0], k.Hash[0], c))
	l.recs[k] = record
}

func (l *blockLog) Gone(k Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("gone %d/%d", k.NS[0], k.Hash[0]))
}

// take returns the events heard since the last take.
func (l *blockLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

func (l *blockLog) record(k Key) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[k]
}

// writeRecord writes k's content with record, of class c, and waits.
func writeRecord(tb testing.TB, s *Store, k Key, m Meta, c Class, record []byte) error {
	tb.Helper()
	src := alignedBuf(tb, int(roundUp(m.Bytes)))
	fill(src, k)
	return call(tb, func(done func(error)) { s.WriteAdmitted(k, m, c, chunks(src, 16<<10), record, done) })
}

// slotOf is the slot of resident block k.
func slotOf(t *testing.T, s *Store, k Key) uint32 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.resident[k]
	if e == nil {
		t.Fatalf("%v is not resident", k)
	}
	return e.slot
}

// flipSlotByte inverts the byte off bytes into slot's header page (off <
// HeaderBytes) or block, in a testSpec store's data file.
func flipSlotByte(t *testing.T, dir string, slot uint32, off int64) {
	t.Helper()
	flipByte(t, dir, int64(slot)*(HeaderBytes+64<<10)+off)
}

// A block record round-trips through Write and Record, from the first
// byte to MaxRecordBytes, and survives Close and Open; a block written
// without one has none; Record of a key not resident is ErrNotFound.
func TestRecordRoundTripsAndSurvivesReopen(t *testing.T) {
	dir := directDir(t)
	s := testSpec(dir, 8)
	st := mustOpen(t, s)
	m := Meta{Bytes: 20000, Layers: 2}
	recs := map[Key][]byte{
		key(1, 0): nil,
		key(1, 1): {0},
		key(1, 2): []byte("block hash, parent hash, token ids"),
		key(1, 3): bytes.Repeat([]byte{0xc3}, MaxRecordBytes),
	}
	for k, r := range recs {
		if err := writeRecord(t, st, k, m, NoClass, r); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	check := func(when string) {
		t.Helper()
		for k, want := range recs {
			got, err := st.Record(k)
			if err != nil || !bytes.Equal(got, want) || (want == nil) != (got == nil) {
				t.Errorf("%s: Record(%d) = %d bytes, %v; want %d bytes", when, k.Hash[0], len(got), err, len(want))
			}
		}
		if _, err := st.Record(key(2, 0)); !isErr(err, ErrNotFound) {
			t.Errorf("%s: Record of a key not resident = %v, want ErrNotFound", when, err)
		}
		for k := range recs {
			mustRead(t, st, k, m) // the record does not disturb the block
		}
	}
	check("after Write")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	s.VerifyOnOpen = 0
	st = mustOpen(t, s)
	defer st.Close()
	if got := st.Stats().Recovered; got != uint64(len(recs)) {
		t.Fatalf("recovered %d blocks, want %d", got, len(recs))
	}
	check("after Close and Open")
	if st.Stats().Corrupt != 0 || st.Stats().Blocks != uint64(len(recs)) {
		t.Errorf("stats %+v: Record dropped or counted a good block", st.Stats())
	}
	if _, err := st.Record(key(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Record(key(1, 2)); !isErr(err, ErrClosed) {
		t.Errorf("Record after Close = %v, want ErrClosed", err)
	}
}

// A record over MaxRecordBytes is refused through done with an error
// naming the limit, nothing is written, and the refusal is counted.
func TestRecordOverTheLimitIsRefused(t *testing.T) {
	log := newBlockLog()
	s := testSpec(directDir(t), 4)
	s.Blocks = log
	st := mustOpen(t, s)
	defer st.Close()
	m := Meta{Bytes: 4096, Layers: 1}
	err := writeRecord(t, st, key(1, 1), m, NoClass, make([]byte, MaxRecordBytes+1))
	if !isErr(err, ErrRecordTooLong) || !strings.Contains(err.Error(), "3840") {
		t.Fatalf("Write of a record of MaxRecordBytes+1 = %v, want ErrRecordTooLong naming 3840", err)
	}
	stats := st.Stats()
	if _, ok := st.Contains(key(1, 1)); ok || stats.RecordTooLong != 1 || stats.Writes != 0 || stats.PendingWrites != 0 || stats.UsedBytes != 0 {
		t.Errorf("after the refusal: %+v; want nothing written, RecordTooLong 1", stats)
	}
	if ev := log.take(); len(ev) != 0 {
		t.Errorf("the observer heard %q of a refused write", ev)
	}
}

// Spec.Blocks hears Resident with the class and a copy of the record when
// a written block becomes visible, and Gone when it leaves: evicted by a
// later write, deleted, displaced by a write of another Meta, deleted by
// MakeClassRoom, dropped after a corrupt read; a Write of a block already
// resident is not heard.
func TestBlockObserverHearsResidencyAndDepartures(t *testing.T) {
	log := newBlockLog()
	dir := directDir(t)
	s := testSpec(dir, 3)
	s.Blocks = log
	st := mustOpen(t, s)
	defer st.Close()
	m := Meta{Bytes: 8192, Layers: 1}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := log.take(); !slices.Equal(got, want) {
			t.Errorf("%s: heard %q, want %q", step, got, want)
		}
	}

	rec := []byte("record of 1/0")
	if err := writeRecord(t, st, key(1, 0), m, 2, rec); err != nil {
		t.Fatal(err)
	}
	expect("a write", "resident 1/0 class 2")
	want := slices.Clone(rec)
	rec[0] = 'X' // the caller's slice is its own again once Write returned
	if got := log.record(key(1, 0)); !bytes.Equal(got, want) {
		t.Errorf("Resident's record = %q, want %q", got, want)
	}
	if err := writeRecord(t, st, key(1, 0), m, 2, []byte("another")); err != nil {
		t.Fatal(err)
	}
	expect("a write of a block already resident")
	if got, err := st.Record(key(1, 0)); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Record after a write of the resident block = %q, %v; want the first record %q", got, err, want)
	}

	for i := range uint64(2) {
		if err := writeRecord(t, st, key(1, 1+i), m, NoClass, nil); err != nil {
			t.Fatal(err)
		}
	}
	expect("two writes", "resident 1/1 class 0", "resident 1/2 class 0")
	if log.record(key(1, 1)) != nil {
		t.Error("a write without a record is heard with one")
	}
	if err := writeRecord(t, st, key(1, 3), m, NoClass, nil); err != nil {
		t.Fatal(err)
	}
	expect("a write into a full store", "gone 1/0", "resident 1/3 class 0")

	st.Delete(key(1, 1))
	expect("Delete", "gone 1/1")
	st.Delete(key(1, 1))
	expect("a second Delete")

	if err := writeRecord(t, st, key(1, 2), Meta{Bytes: 4096, Layers: 3}, NoClass, []byte("new")); err != nil {
		t.Fatal(err)
	}
	expect("a write of another Meta", "gone 1/2", "resident 1/2 class 0")

	st.Delete(key(1, 2))
	st.Delete(key(1, 3))
	log.take()
	for i := range uint64(3) {
		if err := writeRecord(t, st, key(3, i), m, 5, nil); err != nil {
			t.Fatal(err)
		}
	}
	log.take()
	if !st.MakeClassRoom(5, 2*st.slotCost()) {
		t.Fatal("MakeClassRoom refused")
	}
	expect("MakeClassRoom", "gone 3/0", "gone 3/1")

	flipSlotByte(t, dir, slotOf(t, st, key(3, 2)), HeaderBytes+100)
	if _, err := readBlock(t, st, key(3, 2), m); !isErr(err, ErrCorrupt) {
		t.Fatalf("Read of a damaged block = %v, want ErrCorrupt", err)
	}
	expect("a corrupt read", "gone 3/2")
}

// Blocks recovered at Open are not heard as Resident (Keys and Record
// tell of them), and their departures after Open are heard as Gone; a
// recovered block that fails Open's verification is not heard at all.
func TestBlockObserverAfterReopen(t *testing.T) {
	dir := directDir(t)
	s := testSpec(dir, 4)
	st := mustOpen(t, s)
	m := Meta{Bytes: 8192, Layers: 1}
	for i := range uint64(3) {
		if err := writeRecord(t, st, key(1, i), m, NoClass, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	bad := slotOf(t, st, key(1, 2))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	flipSlotByte(t, dir, bad, HeaderBytes+1)
	log := newBlockLog()
	s.Blocks, s.VerifyOnOpen = log, 3
	st = mustOpen(t, s)
	defer st.Close()
	if ev := log.take(); len(ev) != 0 {
		t.Errorf("Open was heard: %q", ev)
	}
	if keys := st.Keys(); len(keys) != 2 || keys[0] != key(1, 0) || keys[1] != key(1, 1) {
		t.Fatalf("Keys = %v, want the two blocks that passed verification", keys)
	}
	for i, k := range st.Keys() {
		if r, err := st.Record(k); err != nil || !bytes.Equal(r, []byte{byte(i)}) {
			t.Errorf("Record(%d) = %v, %v", i, r, err)
		}
	}
	st.Delete(key(1, 0))
	if ev := log.take(); !slices.Equal(ev, []string{"gone 1/0"}) {
		t.Errorf("Delete of a recovered block: heard %q, want its Gone", ev)
	}
}

// A block record changed on disk (a flipped byte, or a forger without
// mac.key recomputing what it can) fails Record with ErrCorrupt: the
// block is dropped, counted in Corrupt and heard as Gone, and a damaged
// block (not header) does not fail Record, which does not read it.
func TestForgedRecordFailsRecord(t *testing.T) {
	log := newBlockLog()
	dir := directDir(t)
	s := testSpec(dir, 4)
	s.Blocks = log
	st := mustOpen(t, s)
	defer st.Close()
	m := Meta{Bytes: 8192, Layers: 1}
	for i := range uint64(4) {
		if err := writeRecord(t, st, key(1, i), m, NoClass, []byte("the record of a block")); err != nil {
			t.Fatal(err)
		}
	}
	log.take()

	flipSlotByte(t, dir, slotOf(t, st, key(1, 0)), 144+3) // a byte of the record
	if _, err := st.Record(key(1, 0)); !isErr(err, ErrCorrupt) {
		t.Fatalf("Record of a flipped record = %v, want ErrCorrupt", err)
	}
	flipSlotByte(t, dir, slotOf(t, st, key(1, 1)), 104) // its length
	if _, err := st.Record(key(1, 1)); !isErr(err, ErrCorrupt) {
		t.Fatalf("Record of a record with a changed length = %v, want ErrCorrupt", err)
	}
	if ev := log.take(); !slices.Equal(ev, []string{"gone 1/0", "gone 1/1"}) {
		t.Errorf("heard %q, want both blocks gone", ev)
	}
	stats := st.Stats()
	if stats.Corrupt != 2 || stats.Blocks != 2 {
		t.Errorf("Corrupt %d, Blocks %d; want 2 and 2", stats.Corrupt, stats.Blocks)
	}
	for _, k := range []Key{key(1, 0), key(1, 1)} {
		if _, err := st.Record(k); !isErr(err, ErrNotFound) {
			t.Errorf("Record of a dropped block = %v, want ErrNotFound", err)
		}
	}

	forgeRecord(t, dir, slotOf(t, st, key(1, 3)), []byte("another record, forged"))
	if _, err := st.Record(key(1, 3)); !isErr(err, ErrCorrupt) {
		t.Fatalf("Record of a record forged without mac.key = %v, want ErrCorrupt", err)
	}
	if c := st.Stats().Corrupt; c != 3 {
		t.Errorf("Corrupt %d, want 3", c)
	}

	flipSlotByte(t, dir, slotOf(t, st, key(1, 2)), HeaderBytes+5) // the block, not the header
	if r, err := st.Record(key(1, 2)); err != nil || string(r) != "the record of a block" {
		t.Errorf("Record of a block whose data is damaged = %q, %v; want its record", r, err)
	}
}

// forgeRecord replaces the block record in slot's header (a testSpec
// store's) and recomputes its record tag as a writer without mac.key
// would, under attackerKey.
func forgeRecord(t *testing.T, dir string, slot uint32, rec []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(slot) * (HeaderBytes + 64<<10)
	hdr := make([]byte, HeaderBytes)
	if _, err := f.ReadAt(hdr, off); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(hdr[104:], uint32(len(rec)))
	copy(hdr[144:], rec)
	copy(hdr[112:144], attackerTag([]byte("OKVSREC1"), hdr[8:72], hdr[104:112], rec))
	if _, err := f.WriteAt(hdr, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A block whose header has no record part (zero from byte 104 on, as a
// header written by a Manager that keeps no records) reads and checks, and
// Record answers that it has no record, without counting it corrupt.
func TestHeaderWithoutRecordPartReadsAsRecordless(t *testing.T) {
	dir := directDir(t)
	s := testSpec(dir, 4)
	st := mustOpen(t, s)
	m := Meta{Bytes: 8192, Layers: 1}
	if err := writeRecord(t, st, key(1, 0), m, NoClass, nil); err != nil {
		t.Fatal(err)
	}
	slot := slotOf(t, st, key(1, 0))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, HeaderBytes-104), int64(slot)*(HeaderBytes+64<<10)+104)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s.VerifyOnOpen = 0
	st = mustOpen(t, s)
	defer st.Close()
	if st.Stats().Recovered != 1 {
		t.Fatalf("the block with no record part failed Open's verification: %+v", st.Stats())
	}
	if r, err := st.Record(key(1, 0)); err != nil || r != nil {
		t.Errorf("Record of a header with no record part = %q, %v; want nil, nil", r, err)
	}
	mustRead(t, st, key(1, 0), m)
	if st.Stats().Corrupt != 0 {
		t.Errorf("Corrupt %d, want 0", st.Stats().Corrupt)
	}
}

// Record runs concurrently with writes that evict the blocks it reads:
// every answer is the block's own record or ErrNotFound, never another
// block's, and nothing is counted corrupt.
func TestRecordDuringEvictions(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 4))
	defer st.Close()
	m := Meta{Bytes: 4096, Layers: 1}
	recOf := func(i uint64) []byte { return []byte(fmt.Sprintf("record %d", i)) }
	const n = 64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range uint64(n) {
			if err := writeRecord(t, st, key(1, i), m, NoClass, recOf(i)); err != nil {
				t.Errorf("Write %d: %v", i, err)
				return
			}
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 * n {
				i := uint64(j % n)
				r, err := st.Record(key(1, i))
				switch {
				case isErr(err, ErrNotFound):
				case err != nil:
					t.Errorf("Record(%d): %v", i, err)
					return
				case !bytes.Equal(r, recOf(i)):
					t.Errorf("Record(%d) = %q, want %q", i, r, recOf(i))
					return
				}
			}
		}()
	}
	wg.Wait()
	if c := st.Stats().Corrupt; c != 0 {
		t.Errorf("Corrupt = %d, want 0", c)
	}
}
