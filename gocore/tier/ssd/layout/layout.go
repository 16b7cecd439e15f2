package layout

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Key names a block: the namespace fingerprint and the block hash, the
// same fields as gocore/index.Key. A block of one namespace never answers
// for another (the namespace is part of every slot header and Record, and
// of the MAC over each).
type Key struct {
	NS   [16]byte
	Hash [16]byte
}

// Meta is a block's size and shape.
type Meta struct {
	Bytes  uint64 // block bytes, 1 to the store's SlotBytes
	Layers uint32 // layers the block spans, at least 1
}

// Sizes of the on-disk structures (doc.go draws them).
const (
	// HeaderBytes is the slot header in front of each slot's data: one 4 KiB
	// page, so the data that follows stays aligned for O_DIRECT.
	HeaderBytes = 4096
	// RecordBytes is the size of every index log record, the file header
	// included.
	RecordBytes = 96
	// SecretBytes is the length of the store's MAC key (the mac.key file).
	SecretBytes = 32
	// TagBytes is the length of every MAC tag: HMAC-SHA256's whole output.
	TagBytes = sha256.Size

	// FormatVersion is the layout version in every slot header, index
	// header and record; a file of another version is never read. The
	// block record (MaxRecordBytes) is part of version 2: a slot header
	// with zeros where the record goes reads as a block without a record
	// (doc.go, "Block record").
	FormatVersion = 2

	// MaxRecordBytes is the most bytes of a block record: opaque bytes
	// kept in the slot header after its fields (doc.go draws them), so
	// the record rides in the header page and costs no I/O of its own.
	// The page holds up to HeaderBytes - recordOff (3952); the limit is
	// the round 3840 (15 × 256) below that.
	MaxRecordBytes = 3840

	slotTagOff   = 72                     // the slot header's block tag; the fields before it are MACed
	headerUsed   = slotTagOff + TagBytes  // bytes of the slot header that carry the fields and the block tag
	recLenOff    = headerUsed             // the record's length, uint32
	recTagOff    = recLenOff + 8          // the record tag, after the length and 4 reserved bytes
	recordOff    = recTagOff + TagBytes   // the record's bytes
	recordTagOff = RecordBytes - TagBytes // every index record's tag; the 64 bytes before it are MACed
)

// The record must fit in the header page.
var _ [HeaderBytes - recordOff - MaxRecordBytes]struct{}

var (
	slotMagic  = [8]byte{'O', 'K', 'V', 'S', 'L', 'O', 'T', '1'}
	indexMagic = [8]byte{'O', 'K', 'V', 'I', 'N', 'D', 'X', '1'}
	// recMagic starts the record tag's input in place of slotMagic, so a
	// block tag is never a valid record tag (nor the other way round).
	recMagic = [8]byte{'O', 'K', 'V', 'S', 'R', 'E', 'C', '1'}
)

// Record kinds of the index log.
const (
	KindPut    = 1 // key → slot, written after the slot's data is durable
	KindDelete = 2 // key at slot with gen is gone
)

// MAC computes and checks the tags of one store's slot headers and index
// records: HMAC-SHA256 under the store's secret. It is not safe for
// concurrent use: each goroutine that writes or checks records holds its
// own (NewMAC is cheap; a MAC allocates nothing after its first tag).
type MAC struct {
	h   hash.Hash
	sum [TagBytes]byte
}

// NewMAC returns a MAC keyed by secret.
func NewMAC(secret *[SecretBytes]byte) *MAC {
	return &MAC{h: hmac.New(sha256.New, secret[:])}
}

// tag is the HMAC of head followed by the first n bytes of data (fewer if
// data holds fewer); the result is valid until the next call.
func (m *MAC) tag(head []byte, data [][]byte, n uint64) []byte {
	m.h.Reset()
	m.h.Write(head)
	for _, b := range data {
		if n == 0 {
			break
		}
		l := min(uint64(len(b)), n)
		m.h.Write(b[:l])
		n -= l
	}
	return m.h.Sum(m.sum[:0])
}

// SlotHeader is the decoded first page of a slot.
type SlotHeader struct {
	Key  Key
	Meta Meta
	Gen  uint64         // generation: the write's sequence number, also in its put record
	Slot uint32         // the slot the header was written to
	Tag  [TagBytes]byte // block tag: the fields and the block's bytes
	// Record is the block record: at most MaxRecordBytes opaque bytes,
	// nil or empty for none. ParseSlotHeader returns a subslice of its
	// input (valid while that is, and not checked: CheckRecord checks it).
	Record []byte
	// RecordTag is the record tag: the fields and the record. All zero
	// with no record in a header that has no record part (zero from
	// byte 104 on).
	RecordTag [TagBytes]byte
}

// PutSlotHeader encodes h (its tags as given) into b and zeroes the rest
// of the page. b holds at least HeaderBytes; h.Record holds at most
// MaxRecordBytes (more panics: the store refuses a longer record before
// it reaches here).
func PutSlotHeader(b []byte, h SlotHeader) {
	if len(h.Record) > MaxRecordBytes {
		panic("layout: a block record over MaxRecordBytes")
	}
	b = b[:HeaderBytes]
	clear(b)
	copy(b[0:8], slotMagic[:])
	binary.LittleEndian.PutUint32(b[8:], FormatVersion)
	binary.LittleEndian.PutUint32(b[12:], h.Slot)
	copy(b[16:32], h.Key.NS[:])
	copy(b[32:48], h.Key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], h.Meta.Bytes)
	binary.LittleEndian.PutUint64(b[56:], h.Gen)
	binary.LittleEndian.PutUint32(b[64:], h.Meta.Layers)
	// 68..71 reserved, zero.
	copy(b[slotTagOff:headerUsed], h.Tag[:])
	binary.LittleEndian.PutUint32(b[recLenOff:], uint32(len(h.Record)))
	// recLenOff+4 .. recTagOff reserved, zero.
	copy(b[recTagOff:recordOff], h.RecordTag[:])
	copy(b[recordOff:], h.Record)
}

// ParseSlotHeader decodes a slot header's fields and locates its record;
// ok is false when b is shorter than the header's fields and record, or
// its magic, version or reserved bytes are wrong, or its record length is
// over MaxRecordBytes. It checks neither tag: CheckSlot checks the block
// tag, with the block's bytes; CheckRecord the record tag.
func ParseSlotHeader(b []byte) (h SlotHeader, ok bool) {
	n, ok := recordLen(b)
	if !ok {
		return h, false
	}
	h.Slot = binary.LittleEndian.Uint32(b[12:])
	copy(h.Key.NS[:], b[16:32])
	copy(h.Key.Hash[:], b[32:48])
	h.Meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	h.Gen = binary.LittleEndian.Uint64(b[56:])
	h.Meta.Layers = binary.LittleEndian.Uint32(b[64:])
	copy(h.Tag[:], b[slotTagOff:headerUsed])
	copy(h.RecordTag[:], b[recTagOff:recordOff])
	if n > 0 {
		h.Record = b[recordOff : recordOff+n : recordOff+n]
	}
	return h, true
}

// recordLen checks what every slot header must be (magic, version, zero
// reserved bytes, a record length within MaxRecordBytes and within b) and
// returns its record length; ok is false otherwise.
func recordLen(b []byte) (n int, ok bool) {
	if len(b) < recordOff || !bytes.Equal(b[0:8], slotMagic[:]) ||
		binary.LittleEndian.Uint32(b[8:]) != FormatVersion ||
		binary.LittleEndian.Uint32(b[68:]) != 0 ||
		binary.LittleEndian.Uint32(b[recLenOff+4:]) != 0 {
		return 0, false
	}
	l := binary.LittleEndian.Uint32(b[recLenOff:])
	if l > MaxRecordBytes || len(b) < recordOff+int(l) {
		return 0, false
	}
	return int(l), true
}

// SealSlotHeader encodes h into b as PutSlotHeader does, with its two
// tags: the block tag of its fields and of the block (the first
// h.Meta.Bytes bytes of data), and the record tag of its fields and
// h.Record (sealed with no record too, so only a header with no record
// part has a zero one).
func (m *MAC) SealSlotHeader(b []byte, h SlotHeader, data [][]byte) {
	h.Tag, h.RecordTag = [TagBytes]byte{}, [TagBytes]byte{}
	PutSlotHeader(b, h)
	copy(b[slotTagOff:headerUsed], m.tag(b[:slotTagOff], data, h.Meta.Bytes))
	copy(b[recTagOff:recordOff], m.recordTag(b, len(h.Record)))
}

// recordTag is the record tag of header b with an n-byte record: the
// HMAC of recMagic, the header's fields after its magic (bytes 8..71),
// the record length and reserved bytes (recLenOff..recTagOff) and the
// record. It is valid until the next call.
func (m *MAC) recordTag(b []byte, n int) []byte {
	m.h.Reset()
	m.h.Write(recMagic[:])
	m.h.Write(b[8:slotTagOff])
	m.h.Write(b[recLenOff:recTagOff])
	m.h.Write(b[recordOff : recordOff+n])
	return m.h.Sum(m.sum[:0])
}

// CheckRecord checks slot header b's record tag and returns its record: a
// subslice of b, valid while b is (nil when the header has none). ok is
// false when b is not a slot header ParseSlotHeader accepts, or when the
// record tag is not the MAC of the header's fields and record under this
// secret (damaged, torn, or written without it). A header with no record
// and an all-zero record tag (a header with no record part) checks
// as having none. It does not read the block: the record tag does not
// cover it (CheckSlot checks the block). The comparison takes constant
// time.
func (m *MAC) CheckRecord(b []byte) (record []byte, ok bool) {
	n, ok := recordLen(b)
	if !ok {
		return nil, false
	}
	tag := b[recTagOff:recordOff]
	if n == 0 && allZero(tag) {
		return nil, true
	}
	if !hmac.Equal(m.recordTag(b, n), tag) {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	return b[recordOff : recordOff+n : recordOff+n], true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// CheckSlot reports whether the block tag in slot header b is the MAC of
// the header's fields and the first Meta.Bytes bytes of data (Meta.Bytes
// as b names it): false for a header or block that was damaged, torn, or
// written without this secret. It does not check the record (CheckRecord
// does). The comparison takes constant time. b must be a header
// ParseSlotHeader accepts.
func (m *MAC) CheckSlot(b []byte, data [][]byte) bool {
	if len(b) < headerUsed {
		return false
	}
	n := binary.LittleEndian.Uint64(b[48:])
	var have uint64
	for _, d := range data {
		have += uint64(len(d))
	}
	if have < n {
		return false
	}
	return hmac.Equal(m.tag(b[:slotTagOff], data, n), b[slotTagOff:headerUsed])
}

// Record is one decoded index log record.
type Record struct {
	Kind uint8 // KindPut or KindDelete
	Slot uint32
	Gen  uint64
	Key  Key
	Meta Meta // put only
}

// AppendRecord appends r's RecordBytes encoding, tag included, to dst.
func (m *MAC) AppendRecord(dst []byte, r Record) []byte {
	var b [RecordBytes]byte
	b[0] = r.Kind
	b[1] = FormatVersion
	binary.LittleEndian.PutUint32(b[4:], r.Slot)
	binary.LittleEndian.PutUint64(b[8:], r.Gen)
	copy(b[16:32], r.Key.NS[:])
	copy(b[32:48], r.Key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], r.Meta.Bytes)
	binary.LittleEndian.PutUint32(b[56:], r.Meta.Layers)
	copy(b[recordTagOff:], m.tag(b[:recordTagOff], nil, 0))
	return append(dst, b[:]...)
}

// ParseRecord decodes one record; ok is false when b is shorter than
// RecordBytes or its tag, version, kind or reserved bytes are wrong (a
// torn, damaged or foreign record, or one written without this secret).
func (m *MAC) ParseRecord(b []byte) (r Record, ok bool) {
	if len(b) < RecordBytes || b[1] != FormatVersion || b[2] != 0 || b[3] != 0 ||
		(b[0] != KindPut && b[0] != KindDelete) ||
		binary.LittleEndian.Uint32(b[60:]) != 0 ||
		!hmac.Equal(m.tag(b[:recordTagOff], nil, 0), b[recordTagOff:RecordBytes]) {
		return r, false
	}
	r.Kind = b[0]
	r.Slot = binary.LittleEndian.Uint32(b[4:])
	r.Gen = binary.LittleEndian.Uint64(b[8:])
	copy(r.Key.NS[:], b[16:32])
	copy(r.Key.Hash[:], b[32:48])
	r.Meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	r.Meta.Layers = binary.LittleEndian.Uint32(b[56:])
	return r, true
}

// AppendIndexHeader appends the index file's header record, tag included:
// it names the slot geometry, so a log written for another SlotBytes is
// never applied to this data file.
func (m *MAC) AppendIndexHeader(dst []byte, slotBytes uint64) []byte {
	var b [RecordBytes]byte
	copy(b[0:8], indexMagic[:])
	binary.LittleEndian.PutUint32(b[8:], FormatVersion)
	binary.LittleEndian.PutUint32(b[12:], HeaderBytes)
	binary.LittleEndian.PutUint64(b[16:], slotBytes)
	copy(b[recordTagOff:], m.tag(b[:recordTagOff], nil, 0))
	return append(dst, b[:]...)
}

// ParseIndexHeader returns the slot bytes the log was written for; ok is
// false when b is not a complete header of this version whose tag is the
// MAC of its fields under this secret.
func (m *MAC) ParseIndexHeader(b []byte) (slotBytes uint64, ok bool) {
	if len(b) < RecordBytes || !bytes.Equal(b[0:8], indexMagic[:]) ||
		binary.LittleEndian.Uint32(b[8:]) != FormatVersion ||
		binary.LittleEndian.Uint32(b[12:]) != HeaderBytes ||
		!hmac.Equal(m.tag(b[:recordTagOff], nil, 0), b[recordTagOff:RecordBytes]) {
		return 0, false
	}
	for _, c := range b[24:recordTagOff] {
		if c != 0 {
			return 0, false
		}
	}
	return binary.LittleEndian.Uint64(b[16:]), true
}

// indexVersion is the version field of what looks like an index header
// (its magic), so Replay can say which version it refused; ok is false
// when b does not start with the index magic.
func indexVersion(b []byte) (v uint32, ok bool) {
	if len(b) < 12 || !bytes.Equal(b[0:8], indexMagic[:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[8:]), true
}
