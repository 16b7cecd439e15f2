package abi

import (
	"encoding/binary"
	"fmt"
)

// Descriptor constants; each equals the abi.h macro of the same meaning
// (checked by layout_test.go through gocore/internal/native).
const (
	QueryMagic       = 0x51564B4F // OKV_QUERY_MAGIC "OKVQ"
	QueryResultMagic = 0x41564B4F // OKV_QUERY_RESULT_MAGIC "OKVA"
	PublishMagic     = 0x50564B4F // OKV_PUBLISH_MAGIC "OKVP"
	RestoreMagic     = 0x52564B4F // OKV_RESTORE_MAGIC "OKVR"
	QuerySchema      = 5          // OKV_QUERY_SCHEMA (DESIGN.md §5.3)
	PublishSchema    = 1          // OKV_PUBLISH_SCHEMA
	RestoreSchema    = 1          // OKV_RESTORE_SCHEMA

	DescHeaderSize    = 64 // every descriptor header is one cache line
	HashSize          = 16 // struct okv_block_hash
	PublishEntrySize  = 24 // struct okv_publish_entry
	RestoreEntrySize  = 8  // struct okv_restore_entry
	QueryResultSize   = 64 // struct okv_query_result
	QueryFlagsAll     = 0x1F
	QueryWaitFullPref = 1 << 0 // OKV_QUERY_WAIT_FOR_FULL_PREFIX
)

// Descriptor fields named by an Invalid response (enum okv_field 9..21).
const (
	FieldDescMagic    Field = 9
	FieldDescSchema   Field = 10
	FieldDescFlags    Field = 11
	FieldDescReserved Field = 12
	FieldCount        Field = 13
	FieldBufferID     Field = 14
	FieldPage         Field = 15
	FieldLayers       Field = 16
	FieldLeaseID      Field = 17
	FieldBlock        Field = 18
	FieldBlockBytes   Field = 19
	FieldOpID         Field = 20
	FieldNamespace    Field = 21
	fieldMax                = FieldNamespace
)

// BlockHash is a 16-byte engine block hash (struct okv_block_hash).
type BlockHash [16]byte

// Namespace is a 16-byte cache-identity fingerprint (struct okv_namespace,
// DESIGN.md §5.4). The zero value is never valid.
type Namespace [16]byte

// DescError is a descriptor the Manager refuses: Invalid (or Unsupported
// for a flag this build does not serve) naming the field, with the entry
// index carried in arg1 of the response.
type DescError struct {
	Status Status
	Field  Field
	Index  uint64 // entry index, 0 for header fields
	Detail string
}

func (e *DescError) Error() string {
	return fmt.Sprintf("%s: %s (entry %d): %s", e.Status, e.Field, e.Index, e.Detail)
}

func descInvalid(f Field, idx uint64, format string, args ...any) *DescError {
	return &DescError{StatusInvalid, f, idx, fmt.Sprintf(format, args...)}
}

// checkHeader validates magic, schema and the entry count against the
// descriptor length: len(b) must be exactly 64 + count*entrySize.
func checkHeader(b []byte, magic uint32, schema uint16, countOff, entrySize int) (uint32, *DescError) {
	if len(b) < DescHeaderSize {
		return 0, descInvalid(FieldDescLength, 0, "%d bytes, shorter than the %d-byte descriptor header", len(b), DescHeaderSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != magic {
		return 0, descInvalid(FieldDescMagic, 0, "0x%08x, want 0x%08x", m, magic)
	}
	if s := le.Uint16(b[4:]); s != schema {
		return 0, descInvalid(FieldDescSchema, 0, "%d, want exactly %d", s, schema)
	}
	n := le.Uint32(b[countOff:])
	max := (len(b) - DescHeaderSize) / entrySize
	if n == 0 || uint64(n)*uint64(entrySize)+DescHeaderSize != uint64(len(b)) {
		return 0, descInvalid(FieldCount, 0, "%d entries of %d bytes do not fill desc_length %d (at most %d fit)", n, entrySize, len(b), max)
	}
	return n, nil
}

// QueryDesc is a decoded struct okv_query_desc; Hashes aliases the input.
type QueryDesc struct {
	Flags         uint16
	OpID          uint64
	Revision      uint32
	RequestID     uint64
	Group         uint64
	RecoveryFirst uint32
	RecoveryCount uint32
	NS            Namespace
	Hashes        []byte // hash_count * 16 bytes; Hash(i) reads one
}

// Len is the number of hashes.
func (q *QueryDesc) Len() int { return len(q.Hashes) / HashSize }

// Hash returns hash i (0 ≤ i < Len).
func (q *QueryDesc) Hash(i int) (h BlockHash) {
	copy(h[:], q.Hashes[i*HashSize:])
	return h
}

// DecodeQuery decodes a QueryBundle descriptor from b, a private copy of the
// descriptor bytes (never the shared slot: the client may rewrite it
// meanwhile). Flags outside OKV_QUERY_FLAGS_ALL are Invalid; known flags
// other than none are Unsupported in this build.
func DecodeQuery(b []byte) (QueryDesc, *DescError) {
	var q QueryDesc
	n, err := checkHeader(b, QueryMagic, QuerySchema, 20, HashSize)
	if err != nil {
		return q, err
	}
	le := binary.LittleEndian
	q.Flags = le.Uint16(b[6:])
	q.OpID = le.Uint64(b[8:])
	q.Revision = le.Uint32(b[16:])
	q.RequestID = le.Uint64(b[24:])
	q.Group = le.Uint64(b[32:])
	q.RecoveryFirst = le.Uint32(b[40:])
	q.RecoveryCount = le.Uint32(b[44:])
	copy(q.NS[:], b[48:64])
	switch {
	case q.Flags&^QueryFlagsAll != 0:
		return q, descInvalid(FieldDescFlags, 0, "0x%x has bits outside 0x%x", q.Flags, QueryFlagsAll)
	case q.Flags != 0:
		return q, &DescError{StatusUnsupported, FieldDescFlags, 0, fmt.Sprintf("0x%x: this build serves leased reads only (flags 0)", q.Flags)}
	case q.NS == Namespace{}:
		return q, descInvalid(FieldNamespace, 0, "all zero; use okv_namespace_fingerprint")
	}
	q.Hashes = b[DescHeaderSize : DescHeaderSize+int(n)*HashSize]
	return q, nil
}

// PutQueryResult writes a struct okv_query_result into b (≥ 64 bytes).
func PutQueryResult(b []byte, st Status, hits uint32, leaseID, leaseBytes, blockBytes uint64) {
	le := binary.LittleEndian
	clear(b[:QueryResultSize])
	le.PutUint32(b[0:], QueryResultMagic)
	le.PutUint16(b[4:], QuerySchema)
	le.PutUint16(b[6:], uint16(st))
	le.PutUint32(b[8:], hits)
	le.PutUint64(b[16:], leaseID)
	le.PutUint64(b[24:], leaseBytes)
	le.PutUint64(b[32:], blockBytes)
}

// PublishDesc is a decoded struct okv_publish_desc; entries alias the input.
type PublishDesc struct {
	BufferID   uint32
	NS         Namespace
	LayerFirst uint32
	LayerCount uint32
	entries    []byte
}

// Len is the number of (hash, page) entries.
func (p *PublishDesc) Len() int { return len(p.entries) / PublishEntrySize }

// Entry returns entry i: its block hash and source page.
func (p *PublishDesc) Entry(i int) (h BlockHash, page uint32) {
	e := p.entries[i*PublishEntrySize:]
	copy(h[:], e[:16])
	return h, binary.LittleEndian.Uint32(e[16:])
}

// DecodePublish decodes a Publish descriptor from a private copy b. Entry
// reserved words must be zero; page ranges are checked by the caller, who
// knows the buffer.
func DecodePublish(b []byte) (PublishDesc, *DescError) {
	var p PublishDesc
	n, err := checkHeader(b, PublishMagic, PublishSchema, 12, PublishEntrySize)
	if err != nil {
		return p, err
	}
	le := binary.LittleEndian
	if f := le.Uint16(b[6:]); f != 0 {
		return p, descInvalid(FieldDescFlags, 0, "0x%x, must be 0", f)
	}
	for off := 40; off < 64; off += 8 {
		if le.Uint64(b[off:]) != 0 {
			return p, descInvalid(FieldDescReserved, 0, "header bytes 40..63 must be zero")
		}
	}
	p.BufferID = le.Uint32(b[8:])
	copy(p.NS[:], b[16:32])
	p.LayerFirst = le.Uint32(b[32:])
	p.LayerCount = le.Uint32(b[36:])
	if p.NS == (Namespace{}) {
		return p, descInvalid(FieldNamespace, 0, "all zero; use okv_namespace_fingerprint")
	}
	p.entries = b[DescHeaderSize : DescHeaderSize+int(n)*PublishEntrySize]
	for i := 0; i < int(n); i++ {
		if le.Uint32(p.entries[i*PublishEntrySize+20:]) != 0 {
			return p, descInvalid(FieldDescReserved, uint64(i), "entry reserved word must be zero")
		}
	}
	return p, nil
}

// RestoreDesc is a decoded struct okv_restore_desc; entries alias the input.
type RestoreDesc struct {
	BufferID uint32
	LeaseID  uint64
	entries  []byte
}

// Len is the number of (block, page) entries.
func (r *RestoreDesc) Len() int { return len(r.entries) / RestoreEntrySize }

// Entry returns entry i: the lease block index and the destination page.
func (r *RestoreDesc) Entry(i int) (block, page uint32) {
	e := r.entries[i*RestoreEntrySize:]
	return binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
}

// DecodeRestore decodes a Restore descriptor from a private copy b.
func DecodeRestore(b []byte) (RestoreDesc, *DescError) {
	var r RestoreDesc
	n, err := checkHeader(b, RestoreMagic, RestoreSchema, 12, RestoreEntrySize)
	if err != nil {
		return r, err
	}
	le := binary.LittleEndian
	if f := le.Uint16(b[6:]); f != 0 {
		return r, descInvalid(FieldDescFlags, 0, "0x%x, must be 0", f)
	}
	for off := 24; off < 64; off += 8 {
		if le.Uint64(b[off:]) != 0 {
			return r, descInvalid(FieldDescReserved, 0, "header bytes 24..63 must be zero")
		}
	}
	r.BufferID = le.Uint32(b[8:])
	r.LeaseID = le.Uint64(b[16:])
	r.entries = b[DescHeaderSize : DescHeaderSize+int(n)*RestoreEntrySize]
	return r, nil
}
