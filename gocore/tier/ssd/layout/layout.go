package layout

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// Castagnoli is the CRC32C table of every checksum of the store (hash/crc32
// uses the SSE4.2 CRC32 instruction for it on amd64).
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Key names a block: the namespace fingerprint and the block hash, the
// same fields as gocore/index.Key. A block of one namespace never answers
// for another (the namespace is part of every slot header and Record).
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
	RecordBytes = 80

	headerUsed   = 76 // bytes of the slot header that carry fields
	formatVer    = 1
	recordCRCOff = RecordBytes - 4
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

// SlotHeader is the decoded first page of a slot.
type SlotHeader struct {
	Key  Key
	Meta Meta
	CRC  uint32 // CRC32C of the Meta.Bytes data bytes
	Gen  uint64 // generation: the write's sequence number, also in its put record
}

// PutSlotHeader encodes h into the first headerUsed bytes of b and zeroes
// the rest of the page.
func PutSlotHeader(b []byte, h SlotHeader) {
	b = b[:HeaderBytes]
	clear(b)
	copy(b[0:8], slotMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVer)
	binary.LittleEndian.PutUint32(b[12:], h.CRC)
	copy(b[16:32], h.Key.NS[:])
	copy(b[32:48], h.Key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], h.Meta.Bytes)
	binary.LittleEndian.PutUint64(b[56:], h.Gen)
	binary.LittleEndian.PutUint32(b[64:], h.Meta.Layers)
	// 68..71 reserved, zero.
	binary.LittleEndian.PutUint32(b[72:], crc32.Checksum(b[:72], Castagnoli))
}

// ParseSlotHeader decodes a slot header; ok is false when the magic,
// version or header checksum is wrong.
func ParseSlotHeader(b []byte) (h SlotHeader, ok bool) {
	if len(b) < headerUsed || !bytes.Equal(b[0:8], slotMagic[:]) ||
		binary.LittleEndian.Uint32(b[8:]) != formatVer ||
		binary.LittleEndian.Uint32(b[72:]) != crc32.Checksum(b[:72], Castagnoli) ||
		binary.LittleEndian.Uint32(b[68:]) != 0 {
		return h, false
	}
	h.CRC = binary.LittleEndian.Uint32(b[12:])
	copy(h.Key.NS[:], b[16:32])
	copy(h.Key.Hash[:], b[32:48])
	h.Meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	h.Gen = binary.LittleEndian.Uint64(b[56:])
	h.Meta.Layers = binary.LittleEndian.Uint32(b[64:])
	return h, true
}

// Record is one decoded index log record.
type Record struct {
	Kind uint8 // KindPut or KindDelete
	Slot uint32
	Gen  uint64
	Key  Key
	Meta Meta   // put only
	CRC  uint32 // put only: the data's CRC32C
}

// AppendRecord appends r's RecordBytes encoding to dst.
func AppendRecord(dst []byte, r Record) []byte {
	var b [RecordBytes]byte
	b[0] = r.Kind
	b[1] = formatVer
	binary.LittleEndian.PutUint32(b[4:], r.Slot)
	binary.LittleEndian.PutUint64(b[8:], r.Gen)
	copy(b[16:32], r.Key.NS[:])
	copy(b[32:48], r.Key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], r.Meta.Bytes)
	binary.LittleEndian.PutUint32(b[56:], r.Meta.Layers)
	binary.LittleEndian.PutUint32(b[60:], r.CRC)
	binary.LittleEndian.PutUint32(b[recordCRCOff:], crc32.Checksum(b[:recordCRCOff], Castagnoli))
	return append(dst, b[:]...)
}

// ParseRecord decodes one record; ok is false when its checksum, version,
// kind or reserved bytes are wrong (a torn or foreign Record).
func ParseRecord(b []byte) (r Record, ok bool) {
	if len(b) < RecordBytes ||
		binary.LittleEndian.Uint32(b[recordCRCOff:]) != crc32.Checksum(b[:recordCRCOff], Castagnoli) ||
		b[1] != formatVer || b[2] != 0 || b[3] != 0 || (b[0] != KindPut && b[0] != KindDelete) {
		return r, false
	}
	for _, c := range b[64:recordCRCOff] {
		if c != 0 {
			return r, false
		}
	}
	r.Kind = b[0]
	r.Slot = binary.LittleEndian.Uint32(b[4:])
	r.Gen = binary.LittleEndian.Uint64(b[8:])
	copy(r.Key.NS[:], b[16:32])
	copy(r.Key.Hash[:], b[32:48])
	r.Meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	r.Meta.Layers = binary.LittleEndian.Uint32(b[56:])
	r.CRC = binary.LittleEndian.Uint32(b[60:])
	return r, true
}

// AppendIndexHeader appends the index file's header Record: it names the
// slot geometry, so a log written for another SlotBytes is never applied
// to this data file.
func AppendIndexHeader(dst []byte, slotBytes uint64) []byte {
	var b [RecordBytes]byte
	copy(b[0:8], indexMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVer)
	binary.LittleEndian.PutUint32(b[12:], HeaderBytes)
	binary.LittleEndian.PutUint64(b[16:], slotBytes)
	binary.LittleEndian.PutUint32(b[recordCRCOff:], crc32.Checksum(b[:recordCRCOff], Castagnoli))
	return append(dst, b[:]...)
}

// ParseIndexHeader returns the slot bytes the log was written for; ok is
// false when b is not a complete, checksummed header of this version.
func ParseIndexHeader(b []byte) (slotBytes uint64, ok bool) {
	if len(b) < RecordBytes || !bytes.Equal(b[0:8], indexMagic[:]) ||
		binary.LittleEndian.Uint32(b[recordCRCOff:]) != crc32.Checksum(b[:recordCRCOff], Castagnoli) ||
		binary.LittleEndian.Uint32(b[8:]) != formatVer ||
		binary.LittleEndian.Uint32(b[12:]) != HeaderBytes {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[16:]), true
}
