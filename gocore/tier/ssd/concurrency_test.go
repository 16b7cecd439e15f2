package ssd

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentWriteReadDelete runs Writes, Reads, Deletes, Contains and
// Keys from several goroutines over more keys than slots, so evictions
// race with reads. Run under -race. No read may fail its integrity check
// or return another block's bytes: a slot under a read is never reused.
func TestConcurrentWriteReadDelete(t *testing.T) {
	const (
		goroutines = 6
		ops        = 250
		keys       = 40
	)
	spec := testSpec(directDir(t), 16)
	spec.MaxPendingWrites = 8
	spec.VerifyOnOpen = 1000
	st := mustOpen(t, spec)
	meta := func(i uint64) Meta { return Meta{Bytes: 4096*(1+i%16) - i%3, Layers: uint32(1 + i%3)} }
	var wg sync.WaitGroup
	for g := range goroutines {
		buf := alignedBuf(t, 64<<10)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range ops {
				i := r.Uint64N(keys)
				k, m := key(30, i), meta(i)
				switch op := r.IntN(10); {
				case op < 4:
					fill(buf, k)
					err := call(t, func(d func(error)) { st.Write(k, m, chunks(buf, 16<<10), nil, d) })
					if err != nil && !errors.Is(err, ErrBusy) {
						t.Errorf("Write: %v", err)
					}
				case op < 8:
					clear(buf)
					err := call(t, func(d func(error)) { st.Read(k, m, chunks(buf, 8<<10), d) })
					switch {
					case err == nil && !same(buf, k, m.Bytes):
						t.Errorf("Read of block %d returned other bytes", i)
					case err != nil && !errors.Is(err, ErrNotFound):
						t.Errorf("Read: %v", err)
					}
				case op < 9:
					st.Delete(k)
				default:
					st.Contains(k)
					st.Keys()
					st.Stats()
				}
			}
		})
	}
	wg.Wait()
	s := st.Stats()
	if s.Corrupt != 0 || s.ReadErrors != 0 || s.WriteErrors != 0 || s.Reads == 0 || s.Writes == 0 || s.Evictions == 0 {
		t.Errorf("Stats = %+v, want reads, writes and evictions and no errors", s)
	}
	if s.PendingWrites != 0 || s.UsedBytes != s.Blocks*(HeaderBytes+spec.SlotBytes) {
		t.Errorf("Stats = %+v: slots held by no block", s)
	}
	want := st.Keys()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = mustOpen(t, spec)
	defer st.Close()
	got := st.Keys()
	if len(got) != len(want) || st.Stats().DroppedAtOpen != 0 {
		t.Fatalf("reopen: %d keys (%+v), want %d", len(got), st.Stats(), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("reopen: Keys differ at %d", i)
		}
	}
}

// TestWritesOfOneKeyShareTheOutcome: a Write of a key already being
// written waits for that write instead of writing again.
func TestWritesOfOneKeyShareTheOutcome(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 4))
	defer st.Close()
	k, m := key(31, 1), Meta{Bytes: 64 << 10, Layers: 1}
	src := alignedBuf(t, 64<<10)
	fill(src, k)
	results := make(chan error, 3)
	for range 3 {
		st.Write(k, m, [][]byte{src}, nil, func(err error) { results <- err })
	}
	for range 3 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if s := st.Stats(); s.Writes != 1 {
		t.Errorf("Stats = %+v, want one write for three Writes of one key", s)
	}
	mustRead(t, st, k, m)
}

func TestReadAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts are meaningless")
	}
	st := mustOpen(t, testSpec(directDir(t), 4))
	defer st.Close()
	k, m := key(32, 1), Meta{Bytes: 256 << 10 / 8, Layers: 1}
	if err := writeBlock(t, st, k, m); err != nil {
		t.Fatal(err)
	}
	dst := chunks(alignedBuf(t, 64<<10), 16<<10)
	ch := make(chan error, 1)
	done := func(err error) { ch <- err }
	read := func() {
		st.Read(k, m, dst, done)
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	read() // warm the op pool and the queue
	if n := testing.AllocsPerRun(200, read); n != 0 {
		t.Errorf("Read allocates %.1f times per block, want 0", n)
	}
}
