package ram

import (
	"cmp"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/hugepages"
)

// Handed is a RAM tier another Manager process made and passed to this
// one (an upgrade's handover over SCM_RIGHTS, or systemd's file
// descriptor store after a crash): the arena's and the ledger's memfds.
// New takes both files over (it closes them, adopted or refused).
type Handed struct{ Arena, Ledger *os.File }

// Adopted is one sealed block New adopted, with the chunks it occupies in
// byte order and the crc32c of its bytes taken at its seal. Its bytes are
// not verified yet: Verify does that, and the caller serves the block only
// once it passed.
type Adopted struct {
	BlockMeta
	Chunks []uint32
	Sum    uint32
}

// Verify reports whether b's bytes match the checksum taken at its seal.
// Safe on any goroutine while b's chunks stay allocated and unwritten.
func (a *Arena) Verify(b *Adopted) bool { return a.checksum(b.Chunks, b.Bytes) == b.Sum }

// Adoption is what New did with Spec.Handed.
type Adoption struct {
	// Refused is why the handed tier was not adopted (an error wrapping
	// ErrLedger or hugepages.ErrNotArena, or an errno): the tier then
	// started empty. nil when adopted (or nothing was handed).
	Refused error
	Blocks  []Adopted // in seal order, oldest first; emptied once the tiers took them
	Count   int       // blocks adopted (len(Blocks) before it was emptied)
	Bytes   uint64    // bytes of the blocks adopted
	// Blocks dropped, by reason: Torn, parts missing or disagreeing (a
	// seal or release the predecessor did not finish); Corrupt, an entry
	// whose check fails; Duplicate, a key a later entry holds too.
	Torn, Corrupt, Duplicate int
	Took                     time.Duration // mapping both memfds and scanning the ledger
}

// adopt maps the handed memfds and adopts the blocks the ledger holds
// whose entries agree. It reads the ledger, not the blocks' bytes: their
// checksums are the caller's to verify (Verify) before it serves them.
func adopt(s Spec, h Handed) (*Arena, error) {
	start := time.Now()
	n := s.CapacityBytes / s.ChunkBytes
	lm, err := hugepages.Adopt(h.Ledger, LedgerName, s.ledgerBytes())
	if err != nil {
		h.Arena.Close()
		return nil, err
	}
	if err := checkHeader(lm.Bytes(), s); err != nil {
		lm.Close()
		h.Arena.Close()
		return nil, err
	}
	mem, err := hugepages.Adopt(h.Arena, ArenaName, n*s.ChunkBytes)
	if err != nil {
		lm.Close()
		return nil, err
	}
	room := recordRoom(s.ChunkBytes)
	l := &ledger{mem: lm, b: lm.Bytes(), room: room, stride: entryHeadBytes + room}
	a := &Arena{spec: s, mem: mem, base: mem.Bytes(), total: uint32(n), ledger: l}
	ad := &a.adoption
	a.collect(a.scan(ad), ad)
	used := make([]bool, n)
	for _, c := range ad.Blocks {
		for _, id := range c.Chunks {
			used[id] = true
		}
	}
	for id := int64(n) - 1; id >= 0; id-- { // pop order: lowest id first
		if !used[id] {
			a.free = append(a.free, uint32(id))
		}
	}
	ad.Took = time.Since(start)
	if s.Prefault {
		// The pages are mapped in the background (they exist: this only
		// maps them), so the successor serves at once and later copies
		// take no faults; the verification faults the blocks' pages in
		// meanwhile. Close stops it and waits.
		a.stopMap, a.mapped = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(a.mapped)
			hugepages.MapAdopted(a.base, a.stopMap)
		}()
	}
	return a, nil
}

// candidate is a block the ledger scan assembled from its parts.
type candidate struct {
	seq    uint64
	head   [60]byte // entry bytes [0, 60): every part's must agree but the part
	sum    uint32
	chunks []uint32 // by part; none where a part is missing
	stray  []uint32 // entries of the same sequence that do not fit its parts
	bad    bool
}

const none = ^uint32(0)

// scan reads every entry, drops those whose check fails (Corrupt), and
// assembles the rest into complete, consistent blocks; the others are
// Torn or Duplicate. Every dropped entry is cleared. The result is in
// seal order.
func (a *Arena) scan(ad *Adoption) []*candidate {
	l := a.ledger
	// First the entries whose check holds, counted by sequence, so that a
	// block's part slots are allocated only when it has as many entries
	// as it claims parts: a forged or torn ledger costs no more memory
	// than its entries.
	valid := make([]bool, a.total)
	count := map[uint64]int{}
	for id := uint32(0); id < a.total; id++ {
		e := l.entry(id)
		seq := binary.LittleEndian.Uint64(e)
		if seq == 0 {
			continue
		}
		if binary.LittleEndian.Uint32(e[60:]) != entryCheck(e) {
			ad.Corrupt++
			l.clear([]uint32{id})
			continue
		}
		valid[id] = true
		count[seq]++
	}
	bySeq := map[uint64]*candidate{}
	for id := uint32(0); id < a.total; id++ {
		if !valid[id] {
			continue
		}
		e := l.entry(id)
		seq := binary.LittleEndian.Uint64(e)
		part, parts := binary.LittleEndian.Uint16(e[52:]), binary.LittleEndian.Uint16(e[54:])
		c := bySeq[seq]
		if c == nil {
			c = &candidate{seq: seq, sum: binary.LittleEndian.Uint32(e[48:])}
			copy(c.head[:], e[:60])
			if int(parts) == count[seq] {
				c.chunks = make([]uint32, parts)
				for i := range c.chunks {
					c.chunks[i] = none
				}
			} else {
				c.bad = true // fewer or more entries than parts: torn
			}
			bySeq[seq] = c
		}
		var h [60]byte
		copy(h[:], e[:60])
		binary.LittleEndian.PutUint16(h[52:], 0)
		binary.LittleEndian.PutUint16(c.head[52:], 0)
		if c.bad || h != c.head || int(part) >= len(c.chunks) || c.chunks[part] != none {
			c.bad = true
			c.stray = append(c.stray, id) // cleared with the candidate
			continue
		}
		c.chunks[part] = id
	}
	cands := make([]*candidate, 0, len(bySeq))
	for _, c := range bySeq {
		a.ledger.seq = max(a.ledger.seq, c.seq)
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(x, y *candidate) int { return cmp.Compare(x.seq, y.seq) })
	keys := map[[32]byte]int{} // key → index in kept
	kept := cands[:0]
	for _, c := range cands {
		bytes := binary.LittleEndian.Uint64(c.head[40:])
		parts := uint64(len(c.chunks))
		if c.bad || slices.Contains(c.chunks, none) || parts == 0 || bytes == 0 || binary.LittleEndian.Uint16(c.head[58:]) == 0 ||
			bytes > parts*a.spec.ChunkBytes || bytes <= (parts-1)*a.spec.ChunkBytes {
			ad.Torn++
			a.dropCandidate(c)
			continue
		}
		var k [32]byte
		copy(k[:], c.head[8:40])
		if i, dup := keys[k]; dup { // the later seal wins, in its own place in seal order
			ad.Duplicate++
			a.dropCandidate(kept[i]) // collect skips it
		}
		keys[k] = len(kept)
		kept = append(kept, c)
	}
	return kept
}

// dropCandidate clears the ledger entries of c's parts.
func (a *Arena) dropCandidate(c *candidate) {
	for _, id := range c.chunks {
		if id != none {
			a.ledger.clear([]uint32{id})
		}
	}
	a.ledger.clear(c.stray)
	c.chunks, c.stray = nil, nil
}

// collect appends the candidates that survived the scan to ad.Blocks, in
// seal order, with their records.
func (a *Arena) collect(cands []*candidate, ad *Adoption) {
	for _, c := range cands {
		if c.chunks == nil { // dropped as a duplicate
			continue
		}
		b := Adopted{Chunks: c.chunks, Sum: c.sum, BlockMeta: BlockMeta{
			Bytes: binary.LittleEndian.Uint64(c.head[40:]), Layers: uint32(binary.LittleEndian.Uint16(c.head[58:])),
			Domain: binary.LittleEndian.Uint16(c.head[56:])}}
		copy(b.NS[:], c.head[8:24])
		copy(b.Hash[:], c.head[24:40])
		b.Record = a.ledger.record(c.chunks)
		ad.Blocks = append(ad.Blocks, b)
		ad.Count++
		ad.Bytes += b.Bytes
	}
}

// record reassembles the record kept over chunks' rooms (a copy; nil when
// none, or when it does not parse as one abi block record).
func (l *ledger) record(chunks []uint32) []byte {
	first := l.entry(chunks[0])[entryHeadBytes:]
	n := uint64(binary.LittleEndian.Uint16(first))
	if n == 0 || n+2 > uint64(len(chunks))*l.room {
		return nil
	}
	rec := make([]byte, 0, n)
	rec = append(rec, first[2:min(uint64(len(first)), 2+n)]...)
	for _, id := range chunks[1:] {
		if uint64(len(rec)) == n {
			break
		}
		r := l.entry(id)[entryHeadBytes:]
		rec = append(rec, r[:min(uint64(len(r)), n-uint64(len(rec)))]...)
	}
	if _, m, err := abi.ParseRecord(rec); err != nil || m != len(rec) {
		return nil
	}
	return rec
}

// errNoHanded is adopt's answer to a Handed missing a file.
var errNoHanded = errors.New("ram tier: a handed-over tier needs both the arena and the ledger memfd")
