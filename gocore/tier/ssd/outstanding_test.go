package ssd

import (
	"testing"
	"time"
)

// TestOutstandingNamesQueuedAndIssuedIO holds the only worker in a read's
// done, so the reads after it wait in the queue, and checks that
// Outstanding names them (slot, offset, bytes, age), then that it names a
// worker's system call as issued, and that nothing is outstanding once
// everything finished.
func TestOutstandingNamesQueuedAndIssuedIO(t *testing.T) {
	spec := testSpec(directDir(t), 8)
	spec.IOWorkers = 1
	st := mustOpen(t, spec)
	defer st.Close()
	m := Meta{Bytes: 10000, Layers: 2} // 3 pages on disk, plus the header
	for i := range uint64(3) {
		if err := writeBlock(t, st, key(1, i), m); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if got := st.Outstanding(); len(got) != 0 {
		t.Fatalf("Outstanding of an idle store = %+v, want none", got)
	}

	release := make(chan struct{})
	held := make(chan struct{})
	dst := make([][][]byte, 3)
	for i := range dst {
		dst[i] = chunks(alignedBuf(t, int(roundUp(m.Bytes))), 4096)
	}
	st.Read(key(1, 0), m, dst[0], func(error) { close(held); <-release })
	<-held // the worker is in the first read's done: the next two queue
	done := make(chan error, 2)
	for i := 1; i < 3; i++ {
		st.Read(key(1, uint64(i)), m, dst[i], func(err error) { done <- err })
	}
	time.Sleep(10 * time.Millisecond)
	got := st.Outstanding()
	if len(got) != 2 {
		t.Fatalf("Outstanding = %+v, want the two queued reads", got)
	}
	for i, io := range got {
		k := key(1, uint64(i+1))
		switch {
		case io.Op != "read" || io.Key != k || io.Issued:
			t.Errorf("entry %d = %+v, want a queued read of key %x", i, io, k.Hash[:8])
		case io.Bytes != HeaderBytes+3*4096:
			t.Errorf("entry %d: Bytes %d, want %d (header and three pages)", i, io.Bytes, HeaderBytes+3*4096)
		case io.Offset != st.slotOff(io.Slot):
			t.Errorf("entry %d: Offset %d, want slot %d's %d", i, io.Offset, io.Slot, st.slotOff(io.Slot))
		case io.Age < 10*time.Millisecond:
			t.Errorf("entry %d: Age %v, want at least the 10ms it waited", i, io.Age)
		}
	}

	// What a worker stuck in preadv looks like: issue without the call.
	w := st.wks[0]
	st.mu.Lock()
	e := st.resident[key(1, 2)]
	st.mu.Unlock()
	o := getOp(opRead, e, nil, nil)
	st.issue(w, o)
	time.Sleep(time.Millisecond)
	got = st.Outstanding()
	st.retire(w, false)
	putOp(o)
	if len(got) != 3 || !got[0].Issued || got[0].Key != key(1, 2) || got[0].Age <= 0 {
		t.Errorf("Outstanding with a worker in a read = %+v, want it first, issued, with an age", got)
	}

	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("queued read: %v", err)
		}
	}
	if got := st.Outstanding(); len(got) != 0 {
		t.Errorf("Outstanding after every read finished = %+v, want none", got)
	}
}
