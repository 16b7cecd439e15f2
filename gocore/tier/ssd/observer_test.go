package ssd

import (
	"sync"
	"testing"
	"time"
)

// ioRecorder is an IOObserver that keeps every duration it hears.
type ioRecorder struct {
	mu   sync.Mutex
	took map[bool][]time.Duration // by write
}

func (r *ioRecorder) ObserveIO(write bool, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.took[write] = append(r.took[write], took)
}

func (r *ioRecorder) get(write bool) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.took[write]...)
}

// Spec.Observer hears one duration per pwritev and one per preadv of the
// data file, each positive and no longer than the call around it took; a
// Write of a block already resident and a Read that misses touch no file
// and are not heard.
func TestObserverHearsEveryDataFileIO(t *testing.T) {
	rec := &ioRecorder{took: map[bool][]time.Duration{}}
	s := testSpec(directDir(t), 8)
	s.Observer = rec
	st := mustOpen(t, s)
	defer st.Close()
	const writes, reads = 3, 5
	m := Meta{Bytes: 16 << 10, Layers: 1}
	var slowest time.Duration
	for i := range uint64(writes) {
		start := time.Now()
		if err := writeBlock(t, st, key(1, i), m); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	if err := writeBlock(t, st, key(1, 0), m); err != nil || st.Stats().Present != 1 {
		t.Fatalf("a Write of a resident block: %v, Present %d; want nil and 1", err, st.Stats().Present)
	}
	for i := range uint64(reads) {
		start := time.Now()
		mustRead(t, st, key(1, i%writes), m)
		slowest = max(slowest, time.Since(start))
	}
	if _, err := readBlock(t, st, key(2, 0), m); !isErr(err, ErrNotFound) {
		t.Fatalf("Read of an absent key = %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		name  string
		write bool
		want  int
	}{{"write", true, writes}, {"read", false, reads}} {
		t.Run(c.name, func(t *testing.T) {
			got := rec.get(c.write)
			if len(got) != c.want {
				t.Fatalf("%d durations heard, want %d (one per system call)", len(got), c.want)
			}
			for i, d := range got {
				if d <= 0 || d > slowest {
					t.Errorf("duration %d = %v, want in (0, %v] (the slowest call around it)", i, d, slowest)
				}
			}
		})
	}
}
