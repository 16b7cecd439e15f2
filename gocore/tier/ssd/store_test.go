package ssd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{Dir: "/var/tmp/x", SlotBytes: 1 << 20, CapacityBytes: 1 << 30}
	tests := []struct {
		name   string
		modify func(*Spec)
		want   string
	}{
		{"an empty dir is refused", func(s *Spec) { s.Dir = "" }, `ssd.Dir "": want an absolute path`},
		{"a relative dir is refused", func(s *Spec) { s.Dir = "ssd" }, `ssd.Dir "ssd": want an absolute path`},
		{"slot bytes that are not whole pages are refused", func(s *Spec) { s.SlotBytes = 5000 }, "SlotBytes 5000"},
		{"a capacity below one slot is refused", func(s *Spec) { s.CapacityBytes = 1 << 20 }, "want at least one slot"},
		{"too many workers are refused", func(s *Spec) { s.IOWorkers = 1000 }, "IOWorkers 1000"},
		{"an unknown admission rule is refused", func(s *Spec) { s.Admission = "third-hit" }, `Admission "third-hit"`},
		{"a negative verify count below -1 is refused", func(s *Spec) { s.VerifyOnOpen = -2 }, "VerifyOnOpen -2"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
	if got := ok.Slots(); got != 1020 {
		t.Errorf("Slots = %d, want 1 GiB / (1 MiB + 4 KiB) = 1020", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.modify(&s)
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestRoundTripThroughODirect(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 8))
	defer st.Close()
	metas := []Meta{{Bytes: 4096, Layers: 1}, {Bytes: 64 << 10, Layers: 4}, {Bytes: 40000, Layers: 2}}
	for i, m := range metas {
		k := key(1, uint64(i))
		if err := writeBlock(t, st, k, m); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if got, ok := st.Contains(k); !ok || got != m {
			t.Fatalf("Contains = %+v, %v after Write; want %+v", got, ok, m)
		}
		mustRead(t, st, k, m)
	}
	stats := st.Stats()
	if stats.Blocks != 3 || stats.Writes != 3 || stats.Reads != 3 || stats.Slots != 8 || stats.UsedBytes != 3*(HeaderBytes+64<<10) ||
		stats.DataBytes != 4096+64<<10+40000 || stats.IndexRecords != 3 {
		t.Errorf("Stats = %+v", stats)
	}
	t.Run("a write of a resident block writes nothing", func(t *testing.T) {
		if err := writeBlock(t, st, key(1, 0), metas[0]); err != nil || st.Stats().Present != 1 || st.Stats().Writes != 3 {
			t.Errorf("Write = %v, stats %+v", err, st.Stats())
		}
	})
	t.Run("another namespace does not see the block", func(t *testing.T) {
		k := key(1, 0)
		k.NS[15] = 1
		if _, ok := st.Contains(k); ok {
			t.Error("Contains is true for another namespace")
		}
		if _, err := readBlock(t, st, k, metas[0]); !errors.Is(err, ErrNotFound) {
			t.Errorf("Read = %v, want ErrNotFound", err)
		}
	})
}

func TestBadArgumentsAreRefused(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 4))
	defer st.Close()
	k, m := key(1, 1), Meta{Bytes: 8192, Layers: 1}
	if err := writeBlock(t, st, k, m); err != nil {
		t.Fatal(err)
	}
	buf := alignedBuf(t, 64<<10)
	tests := []struct {
		name string
		op   func(done func(error))
		want error
	}{
		{"a read with another meta is a miss", func(d func(error)) { st.Read(k, Meta{Bytes: 8192, Layers: 2}, [][]byte{buf}, d) }, ErrMeta},
		{"a read of an absent key is a miss", func(d func(error)) { st.Read(key(1, 2), m, [][]byte{buf}, d) }, ErrNotFound},
		{"a read into an unaligned buffer is refused", func(d func(error)) { st.Read(k, m, [][]byte{buf[512 : 512+8192]}, d) }, ErrAlign},
		{"a read into a short buffer is refused", func(d func(error)) { st.Read(k, m, [][]byte{buf[:4096]}, d) }, ErrAlign},
		{"a write of a partial page buffer is refused", func(d func(error)) { st.Write(key(1, 3), m, [][]byte{buf[:4096], buf[4096:6000]}, nil, d) }, ErrAlign},
		{"a write larger than a slot is refused", func(d func(error)) { st.Write(key(1, 3), Meta{Bytes: 64<<10 + 1, Layers: 1}, [][]byte{buf}, nil, d) }, ErrMeta},
		{"a write with no layers is refused", func(d func(error)) { st.Write(key(1, 3), Meta{Bytes: 4096}, [][]byte{buf}, nil, d) }, ErrMeta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := call(t, tt.op); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// flipByte inverts one byte of the data file with ordinary (buffered) I/O.
func flipByte(t *testing.T, dir string, off int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestFlippedByteIsDetectedAndNotServed(t *testing.T) {
	m := Meta{Bytes: 48 << 10, Layers: 2}
	for _, tt := range []struct {
		name string
		off  int64 // within the slot
	}{
		{"a flipped data byte", HeaderBytes + 12345},
		{"a flipped last data byte", HeaderBytes + int64(m.Bytes) - 1},
		{"a flipped header byte", 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := directDir(t)
			st := mustOpen(t, testSpec(dir, 4))
			k := key(2, 7)
			if err := writeBlock(t, st, k, m); err != nil {
				t.Fatal(err)
			}
			flipByte(t, dir, st.slotOff(st.resident[k].slot)+tt.off)
			if _, err := readBlock(t, st, k, m); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read = %v, want ErrCorrupt", err)
			}
			if _, ok := st.Contains(k); ok {
				t.Error("the corrupt block is still contained")
			}
			if _, err := readBlock(t, st, k, m); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Read = %v, want ErrNotFound", err)
			}
			if s := st.Stats(); s.Corrupt != 1 || s.Reads != 0 || s.Blocks != 0 {
				t.Errorf("Stats = %+v, want Corrupt 1, Reads 0, Blocks 0", s)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = mustOpen(t, testSpec(dir, 4))
			defer st.Close()
			if s := st.Stats(); s.Recovered != 0 {
				t.Errorf("reopen recovered %d blocks, want 0: the corrupt block's delete record is lost", s.Recovered)
			}
		})
	}
}

func TestReopenRecoversEveryBlock(t *testing.T) {
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 16))
	metas := map[Key]Meta{}
	var order []Key
	for i := range 12 {
		k, m := key(3, uint64(i)), Meta{Bytes: uint64(4096 + i*5000), Layers: uint32(1 + i%4)}
		if err := writeBlock(t, st, k, m); err != nil {
			t.Fatal(err)
		}
		metas[k] = m
		order = append(order, k)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	spec := testSpec(dir, 16)
	spec.VerifyOnOpen = 100 // every block
	st = mustOpen(t, spec)
	defer st.Close()
	if s := st.Stats(); s.Recovered != 12 || s.Blocks != 12 || s.Corrupt != 0 {
		t.Fatalf("Stats after reopen = %+v, want 12 recovered", s)
	}
	if got := st.Keys(); !slices.Equal(got, order) {
		t.Errorf("Keys = %d keys, not the 12 written, oldest first", len(got))
	}
	for _, k := range order {
		if m, ok := st.Contains(k); !ok || m != metas[k] {
			t.Errorf("Contains = %+v, %v; want %+v", m, ok, metas[k])
		}
		mustRead(t, st, k, metas[k])
	}
	t.Run("writes after a reopen take other slots and a later generation", func(t *testing.T) {
		k := key(3, 100)
		if err := writeBlock(t, st, k, Meta{Bytes: 4096, Layers: 1}); err != nil {
			t.Fatal(err)
		}
		for _, old := range order {
			mustRead(t, st, old, metas[old])
		}
		if got := st.Keys(); got[len(got)-1] != k {
			t.Error("the new block is not the newest")
		}
	})
}

func TestAdmissionSecondHit(t *testing.T) {
	spec := testSpec(directDir(t), 4)
	spec.Admission = AdmitSecondHit
	st := mustOpen(t, spec)
	defer st.Close()
	k, m := key(4, 1), Meta{Bytes: 4096, Layers: 1}
	if err := writeBlock(t, st, k, m); !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("first Write = %v, want ErrNotAdmitted", err)
	}
	if _, ok := st.Contains(k); ok {
		t.Fatal("a declined block is contained")
	}
	if err := writeBlock(t, st, key(4, 2), m); !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("another key's first Write = %v, want ErrNotAdmitted", err)
	}
	if err := writeBlock(t, st, k, m); err != nil {
		t.Fatalf("second Write = %v, want nil", err)
	}
	mustRead(t, st, k, m)
	if s := st.Stats(); s.NotAdmitted != 2 || s.Writes != 1 {
		t.Errorf("Stats = %+v, want NotAdmitted 2, Writes 1", s)
	}
}

// Admit applies the rule once, before the caller copies the block, and
// WriteAdmitted writes without applying it again.
func TestAdmitThenWriteAdmitted(t *testing.T) {
	spec := testSpec(directDir(t), 4)
	spec.Admission = AdmitSecondHit
	st := mustOpen(t, spec)
	defer st.Close()
	k, m := key(5, 1), Meta{Bytes: 4096, Layers: 1}
	if st.Admit(k) {
		t.Fatal("first offer admitted under second-hit")
	}
	if !st.Admit(k) {
		t.Fatal("second offer declined")
	}
	src := alignedBuf(t, 4096)
	fill(src, k)
	if err := call(t, func(done func(error)) { st.WriteAdmitted(k, m, NoClass, [][]byte{src}, nil, done) }); err != nil {
		t.Fatalf("WriteAdmitted = %v", err)
	}
	mustRead(t, st, k, m)
	if !st.Admit(k) {
		t.Fatal("a resident block is declined")
	}
	if s := st.Stats(); s.NotAdmitted != 1 || s.Writes != 1 {
		t.Errorf("Stats = %+v, want NotAdmitted 1, Writes 1", s)
	}
}

func TestGhostForgetsTheOldest(t *testing.T) {
	g := newGhost(2)
	a, b, c := key(0, 1), key(0, 2), key(0, 3)
	for _, k := range []Key{a, b, c} {
		if g.offer(k) {
			t.Fatal("a first offer is admitted")
		}
	}
	if g.offer(a) {
		t.Error("a key pushed out of a 2-entry filter by 2 others is admitted")
	}
	if !g.offer(c) {
		t.Error("a remembered key is not admitted on its second offer")
	}
}

func TestFIFOEvictionWhenFull(t *testing.T) {
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 4))
	m := Meta{Bytes: 20000, Layers: 1}
	for i := range 6 {
		if err := writeBlock(t, st, key(5, uint64(i)), m); err != nil {
			t.Fatal(err)
		}
	}
	want := []Key{key(5, 2), key(5, 3), key(5, 4), key(5, 5)}
	if got := st.Keys(); !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want the 4 newest", got)
	}
	if s := st.Stats(); s.Evictions != 2 || s.Blocks != 4 {
		t.Errorf("Stats = %+v, want 2 evictions", s)
	}
	if _, ok := st.Contains(key(5, 0)); ok {
		t.Error("the oldest block was not evicted")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(dir, 4)
	spec.VerifyOnOpen = 4
	st = mustOpen(t, spec)
	defer st.Close()
	if got := st.Keys(); !slices.Equal(got, want) {
		t.Errorf("Keys after reopen = %v, want %v: a slot's later put record displaces the evicted block", got, want)
	}
	for _, k := range want {
		mustRead(t, st, k, m)
	}
}

func TestDeleteSurvivesReopen(t *testing.T) {
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 4))
	m := Meta{Bytes: 4096, Layers: 1}
	for i := range 3 {
		if err := writeBlock(t, st, key(6, uint64(i)), m); err != nil {
			t.Fatal(err)
		}
	}
	st.Delete(key(6, 1))
	st.Delete(key(6, 9)) // absent: nothing happens
	if _, ok := st.Contains(key(6, 1)); ok {
		t.Fatal("a deleted block is contained")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = mustOpen(t, testSpec(dir, 4))
	defer st.Close()
	if got, want := st.Keys(), []Key{key(6, 0), key(6, 2)}; !slices.Equal(got, want) {
		t.Errorf("Keys after reopen = %v, want %v", got, want)
	}
}

func TestAnotherLayoutNeverMatchesOldRecords(t *testing.T) {
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 8))
	for i := range 8 {
		if err := writeBlock(t, st, key(7, uint64(i)), Meta{Bytes: 4096, Layers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	t.Run("a smaller capacity drops the records beyond it", func(t *testing.T) {
		st := mustOpen(t, testSpec(dir, 5))
		defer st.Close()
		if s := st.Stats(); s.Recovered != 5 || s.DroppedAtOpen != 3 {
			t.Errorf("Stats = %+v, want 5 recovered and 3 dropped", s)
		}
	})
	t.Run("another slot size starts empty", func(t *testing.T) {
		spec := testSpec(dir, 8)
		spec.SlotBytes, spec.CapacityBytes = 128<<10, 8*(HeaderBytes+128<<10)
		st := mustOpen(t, spec)
		defer st.Close()
		if s := st.Stats(); s.Recovered != 0 {
			t.Errorf("recovered %d blocks written for 64 KiB slots into 128 KiB slots", s.Recovered)
		}
	})
}

func TestSecondOpenOfADirectoryIsRefused(t *testing.T) {
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 2))
	defer st.Close()
	if _, err := Open(testSpec(dir, 2), nil); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
}

func TestCloseWaitsAndThenRefuses(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 8))
	m := Meta{Bytes: 64 << 10, Layers: 1}
	src := alignedBuf(t, 64<<10)
	results := make(chan error, 8)
	for i := range 8 {
		st.Write(key(8, uint64(i)), m, [][]byte{src}, nil, func(err error) { results <- err })
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if len(results) != 8 {
		t.Fatalf("Close returned with %d of 8 writes answered", len(results))
	}
	for range 8 {
		if err := <-results; err != nil {
			t.Errorf("a write queued before Close: %v", err)
		}
	}
	if err := call(t, func(d func(error)) { st.Write(key(8, 100), m, [][]byte{src}, nil, d) }); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v", err)
	}
	if err := call(t, func(d func(error)) { st.Read(key(8, 1), m, [][]byte{src}, d) }); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close = %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestCompactionKeepsTheResidentBlocks(t *testing.T) {
	defer func(n int) { compactMinRecords = n }(compactMinRecords)
	compactMinRecords = 16
	dir := directDir(t)
	st := mustOpen(t, testSpec(dir, 4))
	m := Meta{Bytes: 4096, Layers: 1}
	for i := range 40 {
		k := key(9, uint64(i))
		if err := writeBlock(t, st, k, m); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			st.Delete(k)
		}
	}
	want := st.Keys()
	s := st.Stats()
	if s.Compactions == 0 || s.IndexRecords >= 40 {
		t.Errorf("Stats = %+v, want a compaction and fewer records than writes", s)
	}
	if _, err := os.Stat(filepath.Join(dir, indexName+tmpSuffix)); !os.IsNotExist(err) {
		t.Errorf("the compaction's temporary file is left: %v", err)
	}
	st.Close()
	st = mustOpen(t, testSpec(dir, 4))
	defer st.Close()
	if got := st.Keys(); !slices.Equal(got, want) {
		t.Errorf("Keys after reopen = %v, want %v", got, want)
	}
	for _, k := range want {
		mustRead(t, st, k, m)
	}
}
