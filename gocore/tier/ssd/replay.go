package ssd

import (
	"cmp"
	"fmt"
	"slices"
)

// replayed is what an index log says the data file holds.
type replayed struct {
	// entries are the resident blocks, oldest (lowest gen) first.
	entries []*entry
	// goodLen is the byte length of the log's header and complete,
	// checksummed records; anything after it is a torn tail or garbage.
	goodLen int64
	records int    // complete records after the header
	maxGen  uint64 // highest gen of any record
	// dropped counts put records that name a slot outside the data file or
	// a Meta outside the Spec's limits.
	dropped int
	// reset is why the whole log is unusable (no header, a torn header, or
	// another slot geometry), or "" when it is usable.
	reset string
}

// replay applies the index log b to an empty store of nslots slots of
// slotBytes each. It never fails: it stops at the first record that is
// incomplete or fails its checksum, and everything before that counts.
//
// Rules: a put of key K at slot S displaces K's earlier block and S's
// earlier occupant (the slot was reused after an eviction, which writes no
// record); a delete removes K only if K is still the block of that slot
// and gen (a stale delete never removes a newer block).
func replay(b []byte, slotBytes uint64, nslots uint32) replayed {
	var r replayed
	hdrSlotBytes, ok := parseIndexHeader(b)
	switch {
	case len(b) == 0:
		r.reset = "no index"
		return r
	case !ok:
		r.reset = "the index header is torn or not an OrbitKV SSD index of this version"
		return r
	case hdrSlotBytes != slotBytes:
		r.reset = fmt.Sprintf("the index was written for SlotBytes %d, not %d", hdrSlotBytes, slotBytes)
		return r
	}
	r.goodLen = RecordBytes
	byKey := make(map[Key]*entry)
	bySlot := make(map[uint32]*entry)
	for off := RecordBytes; off+RecordBytes <= len(b); off += RecordBytes {
		rec, ok := parseRecord(b[off : off+RecordBytes])
		if !ok {
			break
		}
		r.goodLen = int64(off + RecordBytes)
		r.records++
		r.maxGen = max(r.maxGen, rec.gen)
		switch rec.kind {
		case kindPut:
			if old := byKey[rec.key]; old != nil {
				delete(byKey, rec.key)
				delete(bySlot, old.slot)
			}
			if old := bySlot[rec.slot]; old != nil {
				delete(byKey, old.key)
				delete(bySlot, rec.slot)
			}
			if rec.slot >= nslots || rec.meta.Bytes == 0 || rec.meta.Bytes > slotBytes || rec.meta.Layers == 0 {
				r.dropped++
				continue
			}
			e := &entry{key: rec.key, meta: rec.meta, crc: rec.crc, gen: rec.gen, slot: rec.slot, state: stateResident}
			byKey[rec.key] = e
			bySlot[rec.slot] = e
		case kindDelete:
			if e := byKey[rec.key]; e != nil && e.gen == rec.gen && e.slot == rec.slot {
				delete(byKey, rec.key)
				delete(bySlot, rec.slot)
			}
		}
	}
	r.entries = make([]*entry, 0, len(byKey))
	for _, e := range byKey {
		r.entries = append(r.entries, e)
	}
	// Generation order (oldest first), slot number breaking ties so the
	// order is a function of the log alone: a damaged or hand-made log can
	// hold two records of one generation (FuzzReplay makes such logs).
	slices.SortFunc(r.entries, func(a, b *entry) int {
		if c := cmp.Compare(a.gen, b.gen); c != 0 {
			return c
		}
		return cmp.Compare(a.slot, b.slot)
	})
	return r
}
