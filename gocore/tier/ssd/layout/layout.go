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
	// header and record; a file of another version is never read.
	FormatVersion = 2

	slotTagOff   = 72                     // the slot header's tag; the fields before it are MACed
	headerUsed   = slotTagOff + TagBytes  // bytes of the slot header that carry fields
	recordTagOff = RecordBytes - TagBytes // every record's tag; the 64 bytes before it are MACed
)

var (
	slotMagic  = [8]byte{'O', 'K', 'V', 'S', 'L', 'O', 'T', '1'}
	indexMagic = [8]byte{'O', 'K', 'V', 'I', 'N', 'D', 'X', '1'}
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
	Gen  uint64 // generation: the write's sequence number, also in its put record
	Slot uint32 // the slot the header was written to
	Tag  [TagBytes]byte
}

// PutSlotHeader encodes h (its Tag as given) into the first headerUsed
// bytes of b and zeroes the rest of the page. b holds at least
// HeaderBytes.
func PutSlotHeader(b []byte, h SlotHeader) {
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
}

// ParseSlotHeader decodes a slot header's fields; ok is false when b is
// shorter than the header's fields or its magic, version or reserved
// bytes are wrong. It does not check the tag: CheckSlot does, with the
// block's bytes.
func ParseSlotHeader(b []byte) (h SlotHeader, ok bool) {
	if len(b) < headerUsed || !bytes.Equal(b[0:8], slotMagic[:]) ||
		binary.LittleEndian.Uint32(b[8:]) != FormatVersion ||
		binary.LittleEndian.Uint32(b[68:]) != 0 {
		return h, false
	}
	h.Slot = binary.LittleEndian.Uint32(b[12:])
	copy(h.Key.NS[:], b[16:32])
	copy(h.Key.Hash[:], b[32:48])
	h.Meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	h.Gen = binary.LittleEndian.Uint64(b[56:])
	h.Meta.Layers = binary.LittleEndian.Uint32(b[64:])
	copy(h.Tag[:], b[slotTagOff:headerUsed])
	return h, true
}

// SealSlotHeader encodes h into b as PutSlotHeader does, with the tag of
// its fields and of the block: the first h.Meta.Bytes bytes of data.
func (m *MAC) SealSlotHeader(b []byte, h SlotHeader, data [][]byte) {
	h.Tag = [TagBytes]byte{}
	PutSlotHeader(b, h)
	copy(b[slotTagOff:headerUsed], m.tag(b[:slotTagOff], data, h.Meta.Bytes))
}

// CheckSlot reports whether the tag in slot header b is the MAC of the
// header's fields and the first Meta.Bytes bytes of data (Meta.Bytes as b
// names it): false for a header or block that was damaged, torn, or
// written without this secret. The comparison takes constant time. b
// must be a header ParseSlotHeader accepts.
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
