package layout

import (
	"cmp"
	"fmt"
	"slices"
)

// Replayed is what an index log says the data file holds.
type Replayed struct {
	// Blocks are the put records of the resident blocks, oldest (lowest
	// Gen) first, the slot breaking ties.
	Blocks []Record
	// GoodLen is the byte length of the log's header and complete records
	// whose tags check; anything after it is a torn tail, damage, or
	// records written without the secret.
	GoodLen int64
	Records int    // complete records after the header
	MaxGen  uint64 // highest Gen of any record
	// Dropped counts put records that name a slot outside the data file or
	// an impossible Meta (0 bytes, more than slotBytes, 0 layers).
	Dropped int
	// Reset is why the whole log is unusable (no header, a torn or damaged
	// header, one of another layout version or written under another
	// secret, or another slot geometry), or "" when it is usable.
	Reset string
}

// Replay applies the index log b to an empty store of nslots slots of
// slotBytes each, checking every record's tag with m. It never fails: it
// stops at the first record that is incomplete or fails its check, and
// everything before that counts.
//
// Rules: a put of key K at slot S displaces K's earlier block and S's
// earlier occupant (the slot was reused after an eviction, which writes no
// record); a delete removes K only if K is still the block of that slot
// and gen (a stale delete never removes a newer block).
func Replay(m *MAC, b []byte, slotBytes uint64, nslots uint32) Replayed {
	var r Replayed
	hdrSlotBytes, ok := m.ParseIndexHeader(b)
	v, magic := indexVersion(b)
	switch {
	case len(b) == 0:
		r.Reset = "no index"
		return r
	case magic && v != FormatVersion:
		r.Reset = fmt.Sprintf("the index is layout version %d; this Manager reads version %d only", v, FormatVersion)
		return r
	case !ok:
		r.Reset = "the index header is torn, damaged, not an OrbitKV SSD index, or written under another secret (mac.key)"
		return r
	case hdrSlotBytes != slotBytes:
		r.Reset = fmt.Sprintf("the index was written for SlotBytes %d, not %d", hdrSlotBytes, slotBytes)
		return r
	}
	r.GoodLen = RecordBytes
	byKey := make(map[Key]*Record)
	bySlot := make(map[uint32]*Record)
	for off := RecordBytes; off+RecordBytes <= len(b); off += RecordBytes {
		rec, ok := m.ParseRecord(b[off : off+RecordBytes])
		if !ok {
			break
		}
		r.GoodLen = int64(off + RecordBytes)
		r.Records++
		r.MaxGen = max(r.MaxGen, rec.Gen)
		switch rec.Kind {
		case KindPut:
			if old := byKey[rec.Key]; old != nil {
				delete(byKey, rec.Key)
				delete(bySlot, old.Slot)
			}
			if old := bySlot[rec.Slot]; old != nil {
				delete(byKey, old.Key)
				delete(bySlot, rec.Slot)
			}
			if rec.Slot >= nslots || rec.Meta.Bytes == 0 || rec.Meta.Bytes > slotBytes || rec.Meta.Layers == 0 {
				r.Dropped++
				continue
			}
			e := rec
			byKey[rec.Key] = &e
			bySlot[rec.Slot] = &e
		case KindDelete:
			if e := byKey[rec.Key]; e != nil && e.Gen == rec.Gen && e.Slot == rec.Slot {
				delete(byKey, rec.Key)
				delete(bySlot, rec.Slot)
			}
		}
	}
	r.Blocks = make([]Record, 0, len(byKey))
	for _, e := range byKey {
		r.Blocks = append(r.Blocks, *e)
	}
	// Generation order (oldest first), slot number breaking ties so the
	// order is a function of the log alone: a damaged or hand-made log can
	// hold two records of one generation (FuzzReplay makes such logs).
	slices.SortFunc(r.Blocks, func(a, b Record) int {
		if c := cmp.Compare(a.Gen, b.Gen); c != 0 {
			return c
		}
		return cmp.Compare(a.Slot, b.Slot)
	})
	return r
}
