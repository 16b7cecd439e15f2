package abi

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"unsafe"
)

// Descriptor constants; each equals the abi.h macro of the same meaning
// (checked by layout_test.go through gocore/internal/native).
const (
	QueryMagic       = 0x51564B4F // OKV_QUERY_MAGIC "OKVQ"
	QueryResultMagic = 0x41564B4F // OKV_QUERY_RESULT_MAGIC "OKVA"
	PublishMagic     = 0x50564B4F // OKV_PUBLISH_MAGIC "OKVP"
	RestoreMagic     = 0x52564B4F // OKV_RESTORE_MAGIC "OKVR"
	QuerySchema      = 5          // OKV_QUERY_SCHEMA (docs/design.md §5.3)
	PublishSchema    = 2          // OKV_PUBLISH_SCHEMA: may carry block records
	PublishSchemaV1  = 1          // OKV_PUBLISH_SCHEMA_V1: flags 0, no records
	RestoreSchema    = 1          // OKV_RESTORE_SCHEMA

	DescHeaderSize   = 64 // every descriptor header is one cache line
	HashSize         = 16 // struct okv_block_hash
	PublishEntrySize = 24 // struct okv_publish_entry
	RestoreEntrySize = 8  // struct okv_restore_entry
	QueryResultSize  = 64 // struct okv_query_result
	QueryFlagsAll    = 0x1F

	PublishRecords   = 1 << 0 // OKV_PUBLISH_RECORDS: a block record per entry after the entries
	PublishFlagsAll  = 0x1    // OKV_PUBLISH_FLAGS_ALL
	RecordParent     = 1 << 0 // OKV_RECORD_PARENT: parent_hash is set
	RecordFlagsAll   = 0x1    // OKV_RECORD_FLAGS_ALL
	RecordMaxTokens  = 512    // OKV_RECORD_MAX_TOKENS
	RecordHeaderSize = 24     // struct okv_block_record
)

// QueryBundle flags (enum okv_query_flags; semantics in abi.h "Query
// tickets").
const (
	QueryWaitFullPref = 1 << 0 // OKV_QUERY_WAIT_FOR_FULL_PREFIX
	QueryWarmup       = 1 << 1 // OKV_QUERY_WARMUP
	QueryDiscover     = 1 << 2 // OKV_QUERY_DISCOVER
	QueryRecovery     = 1 << 3 // OKV_QUERY_RECOVERY
	QueryPrepare      = 1 << 4 // OKV_QUERY_PREPARE
)

// validQueryFlags are the flag sets a QueryBundle may carry (abi.h).
var validQueryFlags = map[uint16]bool{
	0: true, QueryWaitFullPref: true, QueryDiscover: true, QueryWarmup: true, QueryRecovery: true,
	QueryPrepare: true, QueryPrepare | QueryWaitFullPref: true, QueryPrepare | QueryRecovery: true,
}

// Byte offsets of the descriptor fields (abi.h); DescOffsets lists them for
// the layout test against the C compiler's offsetof.
const (
	qFlags, qOpID, qRevision, qHashCount     = 6, 8, 16, 20
	qRequestID, qGroup, qRecFirst, qRecCount = 24, 32, 40, 44
	qNS                                      = 48
	rsStatus, rsHits, rsLease, rsLeaseBytes  = 6, 8, 16, 24
	rsBlockBytes, rsRAMHits, rsOpID          = 32, 12, 40
	rsRevision, rsFirst                      = 48, 52
	pBuffer, pCount, pNS, pLayerFirst        = 8, 12, 16, 32
	pLayerCount, pReserved                   = 36, 40
	peHash, pePage, peReserved               = 0, 16, 20
	rBuffer, rCount, rLease, rReserved       = 8, 12, 16, 24
	reBlock, rePage                          = 0, 4
	brParent, brFlags, brTokens              = 8, 16, 20
)

// DescOffsets maps "struct.field" (as gocore/internal/native.Layout names
// them) to the offsets this package's decoders use.
var DescOffsets = map[string]uintptr{
	"okv_query_desc.flags": qFlags, "okv_query_desc.op_id": qOpID, "okv_query_desc.revision": qRevision,
	"okv_query_desc.hash_count": qHashCount, "okv_query_desc.request_id": qRequestID,
	"okv_query_desc.group": qGroup, "okv_query_desc.recovery_first": qRecFirst,
	"okv_query_desc.recovery_count": qRecCount, "okv_query_desc.ns": qNS,
	"sizeof(okv_query_desc)":  DescHeaderSize,
	"okv_query_result.status": rsStatus, "okv_query_result.hit_count": rsHits,
	"okv_query_result.lease_id": rsLease, "okv_query_result.lease_bytes": rsLeaseBytes,
	"okv_query_result.block_bytes": rsBlockBytes, "sizeof(okv_query_result)": QueryResultSize,
	"okv_query_result.ram_hits": rsRAMHits, "okv_query_result.op_id": rsOpID,
	"okv_query_result.revision": rsRevision, "okv_query_result.first": rsFirst,
	"okv_publish_desc.buffer_id": pBuffer, "okv_publish_desc.count": pCount, "okv_publish_desc.ns": pNS,
	"okv_publish_desc.layer_first": pLayerFirst, "okv_publish_desc.layer_count": pLayerCount,
	"okv_publish_desc.reserved": pReserved, "sizeof(okv_publish_desc)": DescHeaderSize,
	"okv_publish_entry.hash": peHash, "okv_publish_entry.page": pePage, "okv_publish_entry.reserved": peReserved,
	"sizeof(okv_publish_entry)": PublishEntrySize,
	"sizeof(okv_block_record)":  RecordHeaderSize, "okv_block_record.parent_hash": brParent,
	"okv_block_record.flags": brFlags, "okv_block_record.token_count": brTokens,
	"okv_restore_desc.buffer_id": rBuffer, "okv_restore_desc.count": rCount, "okv_restore_desc.lease_id": rLease,
	"okv_restore_desc.reserved": rReserved, "sizeof(okv_restore_desc)": DescHeaderSize,
	"okv_restore_entry.block": reBlock, "okv_restore_entry.page": rePage, "sizeof(okv_restore_entry)": RestoreEntrySize,
	"sizeof(okv_block_hash)": HashSize,
}

// Descriptor fields named by an Invalid response (enum okv_field 9..24).
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
	FieldRevision     Field = 22 // ticket revision: zero, stale, or reused with a changed request
	FieldRequest      Field = 23 // a revision changed request_id or group
	FieldRecovery     Field = 24 // recovery range empty or outside the hashes
	FieldRecord       Field = 25 // a Publish block record: token count, flags, padding or length
	fieldMax                = FieldRecord
)

// BlockHash is a 16-byte engine block hash (struct okv_block_hash);
// native.BlockHash is an alias of it.
type BlockHash [16]byte

// HashBytes is hs as the bytes of a descriptor's hash list (HashSize per
// hash, in order): a view sharing hs's memory, not a copy.
func HashBytes(hs []BlockHash) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs)*HashSize)
}

// Namespace is a 16-byte cache-identity fingerprint (struct okv_namespace,
// docs/design.md §5.4; gocore/identity computes it). The zero value is never
// valid. It is the one namespace type: identity.Namespace and
// native.Namespace are aliases of it.
type Namespace [16]byte

// String returns the namespace as 32 lowercase hex digits.
func (n Namespace) String() string { return hex.EncodeToString(n[:]) }

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

// checkCopyHeader is checkHeader for the copy descriptors (Publish,
// Restore), which also have no flags (bytes 6..7 zero) and a reserved tail
// of the header, from reservedOff to byte 63, that must be zero.
func checkCopyHeader(b []byte, magic uint32, schema uint16, countOff, entrySize, reservedOff int) (uint32, *DescError) {
	n, err := checkHeader(b, magic, schema, countOff, entrySize)
	if err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	if f := le.Uint16(b[6:]); f != 0 {
		return 0, descInvalid(FieldDescFlags, 0, "0x%x, must be 0", f)
	}
	for off := reservedOff; off < DescHeaderSize; off += 8 {
		if le.Uint64(b[off:]) != 0 {
			return 0, descInvalid(FieldDescReserved, 0, "header bytes %d..%d must be zero", reservedOff, DescHeaderSize-1)
		}
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
// meanwhile). It checks each field alone (abi.h "Query tickets"): flags a
// valid set, flags only with a ticket (op_id ≠ 0), revision ≥ 1 exactly
// with a ticket, the recovery range only with the recovery flag and then
// non-empty inside the hashes. Ticket state is the caller's to check.
func DecodeQuery(b []byte) (QueryDesc, *DescError) {
	var q QueryDesc
	n, err := checkHeader(b, QueryMagic, QuerySchema, qHashCount, HashSize)
	if err != nil {
		return q, err
	}
	le := binary.LittleEndian
	q.Flags = le.Uint16(b[qFlags:])
	q.OpID = le.Uint64(b[qOpID:])
	q.Revision = le.Uint32(b[qRevision:])
	q.RequestID = le.Uint64(b[qRequestID:])
	q.Group = le.Uint64(b[qGroup:])
	q.RecoveryFirst = le.Uint32(b[qRecFirst:])
	q.RecoveryCount = le.Uint32(b[qRecCount:])
	copy(q.NS[:], b[qNS:qNS+16])
	rec := q.Flags&QueryRecovery != 0
	switch {
	case q.Flags&^QueryFlagsAll != 0:
		return q, descInvalid(FieldDescFlags, 0, "0x%x has bits outside 0x%x", q.Flags, QueryFlagsAll)
	case !validQueryFlags[q.Flags]:
		return q, descInvalid(FieldDescFlags, 0, "0x%x is not an allowed combination (one of wait, warmup, discover, recovery, prepare; prepare may add wait or recovery)", q.Flags)
	case q.NS == Namespace{}:
		return q, descInvalid(FieldNamespace, 0, "all zero; use okv_namespace_fingerprint")
	case q.OpID == 0 && q.Flags != 0:
		return q, descInvalid(FieldOpID, 0, "flags 0x%x need a ticket (op_id ≠ 0)", q.Flags)
	case q.OpID == 0 && q.Revision != 0:
		return q, descInvalid(FieldRevision, 0, "%d without a ticket (op_id 0), want 0", q.Revision)
	case q.OpID != 0 && q.Revision == 0:
		return q, descInvalid(FieldRevision, 0, "0 for ticket %d, want ≥ 1", q.OpID)
	case !rec && (q.RecoveryFirst != 0 || q.RecoveryCount != 0):
		return q, descInvalid(FieldRecovery, 0, "[%d, +%d) set without the recovery flag", q.RecoveryFirst, q.RecoveryCount)
	case rec && (q.RecoveryCount == 0 || uint64(q.RecoveryFirst)+uint64(q.RecoveryCount) > uint64(n)):
		return q, descInvalid(FieldRecovery, 0, "[%d, +%d) must be non-empty and inside the %d hashes", q.RecoveryFirst, q.RecoveryCount, n)
	}
	q.Hashes = b[DescHeaderSize : DescHeaderSize+int(n)*HashSize]
	return q, nil
}

// QueryResult is a struct okv_query_result as the Manager writes it.
type QueryResult struct {
	Status     Status
	Hits       uint32 // blocks leased (Ok), available (Candidates), warming (warmup Ok)
	RAMHits    uint32 // leading blocks resident in RAM
	LeaseID    uint64
	LeaseBytes uint64
	BlockBytes uint64
	OpID       uint64
	Revision   uint32
	First      uint32 // chain position of lease block 0
}

// PutQueryResult writes r as a struct okv_query_result into b (≥ 64 bytes).
func PutQueryResult(b []byte, r *QueryResult) {
	le := binary.LittleEndian
	clear(b[:QueryResultSize])
	le.PutUint32(b[0:], QueryResultMagic)
	le.PutUint16(b[4:], QuerySchema)
	le.PutUint16(b[rsStatus:], uint16(r.Status))
	le.PutUint32(b[rsHits:], r.Hits)
	le.PutUint32(b[rsRAMHits:], r.RAMHits)
	le.PutUint64(b[rsLease:], r.LeaseID)
	le.PutUint64(b[rsLeaseBytes:], r.LeaseBytes)
	le.PutUint64(b[rsBlockBytes:], r.BlockBytes)
	le.PutUint64(b[rsOpID:], r.OpID)
	le.PutUint32(b[rsRevision:], r.Revision)
	le.PutUint32(b[rsFirst:], r.First)
}

// PublishDesc is a decoded struct okv_publish_desc; entries and records
// alias the input.
type PublishDesc struct {
	BufferID   uint32
	NS         Namespace
	LayerFirst uint32
	LayerCount uint32
	entries    []byte
	records    []uint32 // with block records: the offset of record i in recs, and len(recs) last
	recs       []byte
}

// Len is the number of (hash, page) entries.
func (p *PublishDesc) Len() int { return len(p.entries) / PublishEntrySize }

// Entry returns entry i: its block hash and source page.
func (p *PublishDesc) Entry(i int) (h BlockHash, page uint32) {
	e := p.entries[i*PublishEntrySize:]
	copy(h[:], e[peHash:peHash+16])
	return h, binary.LittleEndian.Uint32(e[pePage:])
}

// Record returns entry i's block record (struct okv_block_record, its
// token ids and padding; checked by DecodePublish), or nil when the
// Publish carries none. It aliases the descriptor copy.
func (p *PublishDesc) Record(i int) []byte {
	if p.records == nil {
		return nil
	}
	return p.recs[p.records[i]:p.records[i+1]]
}

// RecordBytes is the size of a block record of n tokens, padding included
// (okv_block_record_bytes).
func RecordBytes(n int) int { return (RecordHeaderSize + 4*n + 7) &^ 7 }

// BlockRecord is a decoded block record.
type BlockRecord struct {
	EngineHash uint64
	ParentHash uint64
	HasParent  bool
	Tokens     []byte // token_count little-endian uint32 token ids
}

// TokenCount is the number of token ids.
func (r *BlockRecord) TokenCount() int { return len(r.Tokens) / 4 }

// Token returns token id i.
func (r *BlockRecord) Token(i int) uint32 { return binary.LittleEndian.Uint32(r.Tokens[4*i:]) }

// ParseRecord decodes one block record that starts b; n is its length
// with padding. Every rule DecodePublish applies is checked here: the
// token count (1..RecordMaxTokens), known flags, a parent hash of zero
// without RecordParent, zero padding, and that b holds all of it. The
// error names the rule and the limit.
func ParseRecord(b []byte) (r BlockRecord, n int, err error) {
	if len(b) < RecordHeaderSize {
		return r, 0, fmt.Errorf("%d bytes left, shorter than the %d-byte record header", len(b), RecordHeaderSize)
	}
	le := binary.LittleEndian
	flags, count := le.Uint32(b[brFlags:]), le.Uint32(b[brTokens:])
	if flags&^RecordFlagsAll != 0 {
		return r, 0, fmt.Errorf("flags 0x%x, known 0x%x", flags, RecordFlagsAll)
	}
	if count == 0 || count > RecordMaxTokens {
		return r, 0, fmt.Errorf("token_count %d, want 1..%d", count, RecordMaxTokens)
	}
	n = RecordBytes(int(count))
	if len(b) < n {
		return r, 0, fmt.Errorf("%d tokens need %d bytes, %d left", count, n, len(b))
	}
	r.EngineHash, r.ParentHash = le.Uint64(b[0:]), le.Uint64(b[brParent:])
	r.HasParent = flags&RecordParent != 0
	if !r.HasParent && r.ParentHash != 0 {
		return r, 0, fmt.Errorf("parent_hash %#x without the parent flag", r.ParentHash)
	}
	end := RecordHeaderSize + 4*int(count)
	for _, c := range b[end:n] {
		if c != 0 {
			return r, 0, fmt.Errorf("padding bytes %d..%d must be zero", end, n-1)
		}
	}
	r.Tokens = b[RecordHeaderSize:end]
	return r, n, nil
}

// DecodePublish decodes a Publish descriptor from a private copy b. Entry
// reserved words must be zero; page ranges are checked by the caller, who
// knows the buffer. Schema 1 has no flags; schema 2 may carry
// PublishRecords, and then every record is checked (ParseRecord) and the
// records must end exactly at len(b).
func DecodePublish(b []byte) (PublishDesc, *DescError) {
	var p PublishDesc
	if len(b) >= DescHeaderSize && binary.LittleEndian.Uint32(b[0:]) == PublishMagic && binary.LittleEndian.Uint16(b[4:]) == PublishSchema {
		return decodePublishV2(b)
	}
	n, err := checkCopyHeader(b, PublishMagic, PublishSchemaV1, pCount, PublishEntrySize, pReserved)
	if err != nil {
		if err.Field == FieldDescSchema {
			err.Detail = fmt.Sprintf("%d, want %d (block records) or %d", binary.LittleEndian.Uint16(b[4:]), PublishSchema, PublishSchemaV1)
		}
		return p, err
	}
	return p, p.decodeBody(b, n)
}

// decodePublishV2 is DecodePublish of schema 2: the header and entries as
// schema 1, then the block records when the flags ask for them.
func decodePublishV2(b []byte) (PublishDesc, *DescError) {
	var p PublishDesc
	le := binary.LittleEndian
	flags := le.Uint16(b[6:])
	if flags&^PublishFlagsAll != 0 {
		return p, descInvalid(FieldDescFlags, 0, "0x%x, known 0x%x", flags, PublishFlagsAll)
	}
	for off := pReserved; off < DescHeaderSize; off += 8 {
		if le.Uint64(b[off:]) != 0 {
			return p, descInvalid(FieldDescReserved, 0, "header bytes %d..%d must be zero", pReserved, DescHeaderSize-1)
		}
	}
	if flags&PublishRecords == 0 {
		n, err := checkHeader(b, PublishMagic, PublishSchema, pCount, PublishEntrySize)
		if err != nil {
			return p, err
		}
		return p, p.decodeBody(b, n)
	}
	n := le.Uint32(b[pCount:])
	end := uint64(DescHeaderSize) + uint64(n)*PublishEntrySize
	// Each record takes at least 32 bytes: a count the length cannot hold
	// is refused before anything is allocated for it.
	if n == 0 || end+uint64(n)*uint64(RecordBytes(1)) > uint64(len(b)) {
		return p, descInvalid(FieldCount, 0, "%d entries of %d bytes and their block records (at least %d bytes each) do not fit desc_length %d", n, PublishEntrySize, RecordBytes(1), len(b))
	}
	if err := p.decodeBody(b[:end], n); err != nil {
		return p, err
	}
	p.recs = b[end:]
	p.records = make([]uint32, 0, n+1)
	off := 0
	for i := 0; i < int(n); i++ {
		_, size, err := ParseRecord(p.recs[off:])
		if err != nil {
			return p, descInvalid(FieldRecord, uint64(i), "%v", err)
		}
		p.records = append(p.records, uint32(off))
		off += size
	}
	if off != len(p.recs) {
		return p, descInvalid(FieldCount, 0, "%d bytes after the %d block records; desc_length must end with the last record", len(p.recs)-off, n)
	}
	p.records = append(p.records, uint32(off))
	return p, nil
}

// decodeBody decodes the header fields and n entries of a Publish whose
// header was checked; b ends with the entries.
func (p *PublishDesc) decodeBody(b []byte, n uint32) *DescError {
	le := binary.LittleEndian
	p.BufferID = le.Uint32(b[pBuffer:])
	copy(p.NS[:], b[pNS:pNS+16])
	p.LayerFirst = le.Uint32(b[pLayerFirst:])
	p.LayerCount = le.Uint32(b[pLayerCount:])
	if p.NS == (Namespace{}) {
		return descInvalid(FieldNamespace, 0, "all zero; use okv_namespace_fingerprint")
	}
	p.entries = b[DescHeaderSize : DescHeaderSize+int(n)*PublishEntrySize]
	for i := 0; i < int(n); i++ {
		if le.Uint32(p.entries[i*PublishEntrySize+peReserved:]) != 0 {
			return descInvalid(FieldDescReserved, uint64(i), "entry reserved word must be zero")
		}
	}
	return nil
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
	return binary.LittleEndian.Uint32(e[reBlock:]), binary.LittleEndian.Uint32(e[rePage:])
}

// DecodeRestore decodes a Restore descriptor from a private copy b.
func DecodeRestore(b []byte) (RestoreDesc, *DescError) {
	var r RestoreDesc
	n, err := checkCopyHeader(b, RestoreMagic, RestoreSchema, rCount, RestoreEntrySize, rReserved)
	if err != nil {
		return r, err
	}
	le := binary.LittleEndian
	r.BufferID = le.Uint32(b[rBuffer:])
	r.LeaseID = le.Uint64(b[rLease:])
	r.entries = b[DescHeaderSize : DescHeaderSize+int(n)*RestoreEntrySize]
	return r, nil
}

// TicketRef names a ticket in a Poll, Claim or CancelQuery message (abi.h
// "Query tickets"): arg0 = op id, arg1 = revision, and for Poll and Claim
// an optional result area of ≥ 64 bytes.
type TicketRef struct {
	OpID     uint64
	Revision uint32
	Result   bool // the message names a result area (desc_length ≥ 64)
}

// DecodeTicketRef checks a Poll, Claim or CancelQuery message that already
// passed ValidateRequest: op id ≠ 0, revision 1..2^32-1, desc_length 0 or
// ≥ 64 (CancelQuery: 0). Ticket state is the caller's to check.
func DecodeTicketRef(m *Message) (TicketRef, *DescError) {
	r := TicketRef{OpID: m.Arg0, Revision: uint32(m.Arg1), Result: m.DescLength >= QueryResultSize}
	switch {
	case m.Arg0 == 0:
		return r, descInvalid(FieldOpID, 0, "0: a %s names a ticket (op_id ≥ 1)", Command(m.Code))
	case m.Arg1 == 0 || m.Arg1 > 0xFFFF_FFFF:
		return r, descInvalid(FieldRevision, 0, "%d: want 1..%d", m.Arg1, uint32(0xFFFF_FFFF))
	case Command(m.Code) == CmdCancelQuery && m.DescLength != 0:
		return r, descInvalid(FieldDescLength, 0, "%d: CancelQuery carries no descriptor", m.DescLength)
	case m.DescLength != 0 && m.DescLength < QueryResultSize:
		return r, descInvalid(FieldDescLength, 0, "%d: want 0 or ≥ %d (the result area)", m.DescLength, QueryResultSize)
	}
	return r, nil
}
