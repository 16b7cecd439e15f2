package ssd

import "testing"

// writeClass writes k's content as a block of class c and waits until it
// is durable.
func writeClass(tb testing.TB, s *Store, k Key, m Meta, c Class) {
	tb.Helper()
	src := alignedBuf(tb, int(roundUp(m.Bytes)))
	fill(src, k)
	if err := call(tb, func(done func(error)) { s.WriteAdmitted(k, m, c, chunks(src, 16<<10), nil, done) }); err != nil {
		tb.Fatalf("writing %v: %v", k, err)
	}
}

func TestMakeClassRoomDeletesTheClassesOldestUnpinnedBlocksOnly(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 16))
	defer st.Close()
	m := Meta{Bytes: 64 << 10, Layers: 1}
	for i := range 4 {
		writeClass(t, st, key(1, uint64(i)), m, 1)
	}
	for i := range 2 {
		writeClass(t, st, key(2, uint64(i)), m, 2)
	}
	writeClass(t, st, key(3, 0), m, NoClass)
	slot := HeaderBytes + st.spec.SlotBytes
	if st.ClassBytes(1) != 4*slot || st.ClassBytes(2) != 2*slot || st.ClassBytes(NoClass) != 0 {
		t.Fatalf("class bytes %d, %d, %d; want 4, 2 and 0 blocks'", st.ClassBytes(1), st.ClassBytes(2), st.ClassBytes(NoClass))
	}
	// Room for one more of class 1 within 3 blocks: its two oldest go.
	if !st.MakeClassRoom(1, 3*slot) {
		t.Fatal("room within the quota refused")
	}
	for i, want := range []bool{false, false, true, true} {
		if _, ok := st.Contains(key(1, uint64(i))); ok != want {
			t.Fatalf("class 1 block %d resident %v, want %v", i, ok, want)
		}
	}
	if st.ClassBytes(1) != 2*slot || st.Stats().ClassEvictions != 2 || st.ClassBytes(2) != 2*slot {
		t.Fatalf("after room: class 1 %d bytes, class 2 %d, %d deleted; want 2 blocks', 2 blocks', 2",
			st.ClassBytes(1), st.ClassBytes(2), st.Stats().ClassEvictions)
	}
	// A read in flight pins a block: with class 1's two blocks pinned,
	// room for two more within 2 blocks is refused, counted, and deletes
	// nothing.
	st.mu.Lock()
	pinned := []*entry{st.resident[key(1, 2)], st.resident[key(1, 3)]}
	for _, e := range pinned {
		e.pins++ // what Read does while its I/O runs
	}
	st.mu.Unlock()
	na := st.Stats().NotAdmitted
	if st.MakeClassRoom(1, 2*slot) {
		t.Fatal("room made though every block of the class is pinned")
	}
	if st.Stats().NotAdmitted != na+1 || st.ClassBytes(1) != 2*slot {
		t.Fatalf("refusal: not admitted %d (was %d), class bytes %d; want one more, nothing deleted", st.Stats().NotAdmitted, na, st.ClassBytes(1))
	}
	// One unpinned again: it alone is deleted.
	st.mu.Lock()
	pinned[0].pins--
	st.mu.Unlock()
	if !st.MakeClassRoom(1, 2*slot) {
		t.Fatal("room refused though one block of the class is unpinned")
	}
	if _, ok := st.Contains(key(1, 3)); !ok {
		t.Fatal("the pinned block was deleted")
	}
	if _, ok := st.Contains(key(1, 2)); ok {
		t.Fatal("the unpinned block stayed")
	}
	st.mu.Lock()
	pinned[1].pins--
	st.mu.Unlock()
	if st.MakeClassRoom(1, slot-1) {
		t.Fatal("room for a slot more than the whole quota was made")
	}
	if !st.MakeClassRoom(NoClass, 1) {
		t.Fatal("NoClass is bounded by no quota")
	}
}

func TestAClassCountsTheSlotEachBlockTakesNotItsBytes(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 16))
	defer st.Close()
	slot := HeaderBytes + st.spec.SlotBytes
	m := Meta{Bytes: 64, Layers: 1} // 64 bytes in a 64 KiB slot
	for i := range 4 {
		writeClass(t, st, key(1, uint64(i)), m, 1)
	}
	if got := st.ClassBytes(1); got != 4*slot {
		t.Fatalf("class 1 holds %d bytes for 4 blocks of %d bytes; want 4 slots, %d", got, m.Bytes, 4*slot)
	}
	// A quota of 3 slots takes 3 blocks: room for a fourth deletes two.
	if !st.MakeClassRoom(1, 3*slot) || st.Stats().ClassEvictions != 2 || st.ClassBytes(1) != 2*slot {
		t.Fatalf("after room within 3 slots: class 1 %d bytes, %d deleted; want 2 slots, 2 deleted",
			st.ClassBytes(1), st.Stats().ClassEvictions)
	}
}
