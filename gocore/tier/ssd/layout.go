package ssd

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// castagnoli is the CRC32C table (hash/crc32 uses the SSE4.2 CRC32
// instruction for it on amd64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	kindPut    = 1 // key → slot, written after the slot's data is durable
	kindDelete = 2 // key at slot with gen is gone
)

// slotHeader is the decoded first page of a slot.
type slotHeader struct {
	key  Key
	meta Meta
	crc  uint32 // CRC32C of the meta.Bytes data bytes
	gen  uint64
}

// putSlotHeader encodes h into the first headerUsed bytes of b and zeroes
// the rest of the page.
func putSlotHeader(b []byte, h slotHeader) {
	b = b[:HeaderBytes]
	clear(b)
	copy(b[0:8], slotMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVer)
	binary.LittleEndian.PutUint32(b[12:], h.crc)
	copy(b[16:32], h.key.NS[:])
	copy(b[32:48], h.key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], h.meta.Bytes)
	binary.LittleEndian.PutUint64(b[56:], h.gen)
	binary.LittleEndian.PutUint32(b[64:], h.meta.Layers)
	// 68..71 reserved, zero.
	binary.LittleEndian.PutUint32(b[72:], crc32.Checksum(b[:72], castagnoli))
}

// parseSlotHeader decodes a slot header; ok is false when the magic,
// version or header checksum is wrong.
func parseSlotHeader(b []byte) (h slotHeader, ok bool) {
	if len(b) < headerUsed || !bytes.Equal(b[0:8], slotMagic[:]) ||
		binary.LittleEndian.Uint32(b[8:]) != formatVer ||
		binary.LittleEndian.Uint32(b[72:]) != crc32.Checksum(b[:72], castagnoli) ||
		binary.LittleEndian.Uint32(b[68:]) != 0 {
		return h, false
	}
	h.crc = binary.LittleEndian.Uint32(b[12:])
	copy(h.key.NS[:], b[16:32])
	copy(h.key.Hash[:], b[32:48])
	h.meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	h.gen = binary.LittleEndian.Uint64(b[56:])
	h.meta.Layers = binary.LittleEndian.Uint32(b[64:])
	return h, true
}

// record is one decoded index log record.
type record struct {
	kind uint8
	slot uint32
	gen  uint64
	key  Key
	meta Meta   // put only
	crc  uint32 // put only: the data's CRC32C
}

// appendRecord appends r's RecordBytes encoding to dst.
func appendRecord(dst []byte, r record) []byte {
	var b [RecordBytes]byte
	b[0] = r.kind
	b[1] = formatVer
	binary.LittleEndian.PutUint32(b[4:], r.slot)
	binary.LittleEndian.PutUint64(b[8:], r.gen)
	copy(b[16:32], r.key.NS[:])
	copy(b[32:48], r.key.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], r.meta.Bytes)
	binary.LittleEndian.PutUint32(b[56:], r.meta.Layers)
	binary.LittleEndian.PutUint32(b[60:], r.crc)
	binary.LittleEndian.PutUint32(b[recordCRCOff:], crc32.Checksum(b[:recordCRCOff], castagnoli))
	return append(dst, b[:]...)
}

// parseRecord decodes one record; ok is false when its checksum, version,
// kind or reserved bytes are wrong (a torn or foreign record).
func parseRecord(b []byte) (r record, ok bool) {
	if len(b) < RecordBytes ||
		binary.LittleEndian.Uint32(b[recordCRCOff:]) != crc32.Checksum(b[:recordCRCOff], castagnoli) ||
		b[1] != formatVer || b[2] != 0 || b[3] != 0 || (b[0] != kindPut && b[0] != kindDelete) {
		return r, false
	}
	for _, c := range b[64:recordCRCOff] {
		if c != 0 {
			return r, false
		}
	}
	r.kind = b[0]
	r.slot = binary.LittleEndian.Uint32(b[4:])
	r.gen = binary.LittleEndian.Uint64(b[8:])
	copy(r.key.NS[:], b[16:32])
	copy(r.key.Hash[:], b[32:48])
	r.meta.Bytes = binary.LittleEndian.Uint64(b[48:])
	r.meta.Layers = binary.LittleEndian.Uint32(b[56:])
	r.crc = binary.LittleEndian.Uint32(b[60:])
	return r, true
}

// appendIndexHeader appends the index file's header record: it names the
// slot geometry, so a log written for another SlotBytes is never applied
// to this data file.
func appendIndexHeader(dst []byte, slotBytes uint64) []byte {
	var b [RecordBytes]byte
	copy(b[0:8], indexMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVer)
	binary.LittleEndian.PutUint32(b[12:], HeaderBytes)
	binary.LittleEndian.PutUint64(b[16:], slotBytes)
	binary.LittleEndian.PutUint32(b[recordCRCOff:], crc32.Checksum(b[:recordCRCOff], castagnoli))
	return append(dst, b[:]...)
}

// parseIndexHeader returns the slot bytes the log was written for; ok is
// false when b is not a complete, checksummed header of this version.
func parseIndexHeader(b []byte) (slotBytes uint64, ok bool) {
	if len(b) < RecordBytes || !bytes.Equal(b[0:8], indexMagic[:]) ||
		binary.LittleEndian.Uint32(b[recordCRCOff:]) != crc32.Checksum(b[:recordCRCOff], castagnoli) ||
		binary.LittleEndian.Uint32(b[8:]) != formatVer ||
		binary.LittleEndian.Uint32(b[12:]) != HeaderBytes {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[16:]), true
}
