package cache

import "testing"

// A publish's record buffer is sized to its class up front, comes back
// for reuse by a publish of the same class, and each class keeps at most
// maxRecordKept bytes, so a burst of one class leaves the others' reuse
// as it was; a need past the largest class gets a buffer of its own that
// is not kept.
func TestRecordBuffersAreReusedByClassWithinTheirBound(t *testing.T) {
	var s Service
	for _, c := range []struct{ need, class int }{{0, 0}, {1, 0}, {minRecordBuf, 0}, {minRecordBuf + 1, 1}, {maxRecordBuf, recordClasses - 1}, {maxRecordBuf + 1, recordClasses}} {
		if got := recordClass(c.need); got != c.class {
			t.Errorf("recordClass(%d) = %d, want %d", c.need, got, c.class)
		}
	}
	b := s.recordBuf(3 * minRecordBuf)
	if cap(b) != 4*minRecordBuf || len(b) != 0 {
		t.Fatalf("recordBuf(%d): len %d cap %d, want an empty buffer of %d", 3*minRecordBuf, len(b), cap(b), 4*minRecordBuf)
	}
	b = append(b, 1, 2, 3)
	first := &b[:1][0]
	s.putRecords(&op{records: b})
	if recordKept(&s) != 4*minRecordBuf {
		t.Fatalf("kept %d bytes after one buffer of %d", recordKept(&s), 4*minRecordBuf)
	}
	if c := s.recordBuf(3*minRecordBuf + 5); &c[:1][0] != first || len(c) != 0 {
		t.Fatalf("a publish of the same class got a new buffer (or a non-empty one: len %d)", len(c))
	}
	if recordKept(&s) != 0 {
		t.Fatalf("kept %d bytes after the buffer was taken", recordKept(&s))
	}

	big := s.recordBuf(maxRecordBuf + 1)
	if cap(big) != maxRecordBuf+1 {
		t.Fatalf("a need over the largest class got cap %d", cap(big))
	}
	s.putRecords(&op{records: big})
	if recordKept(&s) != 0 {
		t.Fatalf("a buffer over the largest class was kept (%d bytes)", recordKept(&s))
	}

	for range 2 * maxRecordKept / maxRecordBuf {
		s.putRecords(&op{records: make([]byte, 0, maxRecordBuf)})
	}
	if recordKept(&s) != maxRecordKept {
		t.Fatalf("kept %d bytes after a burst of the largest class, bound %d a class", recordKept(&s), maxRecordKept)
	}
	s.putRecords(&op{records: make([]byte, 0, minRecordBuf)})
	if recordKept(&s) != maxRecordKept+minRecordBuf {
		t.Fatalf("after a burst of the largest class a buffer of the smallest was not kept (%d bytes kept)", recordKept(&s))
	}
	if allocs := testing.AllocsPerRun(100, func() { s.putRecords(&op{records: s.recordBuf(minRecordBuf)}) }); allocs != 0 {
		t.Fatalf("a publish of the smallest class after the burst allocates %.1f times", allocs)
	}
}

// recordKept is the bytes of the record buffers s keeps for reuse.
func recordKept(s *Service) int {
	n := 0
	for c, free := range s.recordBufs {
		n += len(free) * (minRecordBuf << c)
	}
	return n
}
