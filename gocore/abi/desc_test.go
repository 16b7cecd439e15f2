package abi

import (
	"encoding/binary"
	"testing"
)

func queryDesc(n int, ns byte) []byte {
	b := make([]byte, DescHeaderSize+n*HashSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], QueryMagic)
	le.PutUint16(b[4:], QuerySchema)
	le.PutUint32(b[20:], uint32(n))
	b[48] = ns
	for i := 0; i < n; i++ {
		b[DescHeaderSize+i*HashSize] = byte(i + 1)
	}
	return b
}

func publishDesc(n int) []byte {
	b := make([]byte, DescHeaderSize+n*PublishEntrySize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], PublishMagic)
	le.PutUint16(b[4:], PublishSchema)
	le.PutUint32(b[8:], 3)
	le.PutUint32(b[12:], uint32(n))
	b[16] = 7
	le.PutUint32(b[36:], 4)
	for i := 0; i < n; i++ {
		e := b[DescHeaderSize+i*PublishEntrySize:]
		e[0] = byte(i)
		le.PutUint32(e[16:], uint32(100+i))
	}
	return b
}

// publishWithRecords is publishDesc(n) with a block record per entry:
// record i has tokens[i] token ids (i*10+j), engine hash 1000+i, and the
// previous entry's as its parent (none for entry 0).
func publishWithRecords(tokens ...int) []byte {
	b := publishDesc(len(tokens))
	le := binary.LittleEndian
	le.PutUint16(b[6:], PublishRecords)
	for i, n := range tokens {
		r := make([]byte, RecordBytes(n))
		le.PutUint64(r[0:], uint64(1000+i))
		if i > 0 {
			le.PutUint64(r[8:], uint64(1000+i-1))
			le.PutUint32(r[16:], RecordParent)
		}
		le.PutUint32(r[20:], uint32(n))
		for j := 0; j < n; j++ {
			le.PutUint32(r[RecordHeaderSize+4*j:], uint32(i*10+j))
		}
		b = append(b, r...)
	}
	return b
}

func TestPublishBlockRecords(t *testing.T) {
	le := binary.LittleEndian
	t.Run("records decode in entry order", func(t *testing.T) {
		p, err := DecodePublish(publishWithRecords(3, 1, RecordMaxTokens))
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range []int{3, 1, RecordMaxTokens} {
			r, size, perr := ParseRecord(p.Record(i))
			if perr != nil || size != len(p.Record(i)) || r.EngineHash != uint64(1000+i) || r.HasParent != (i > 0) ||
				r.TokenCount() != n || r.Token(n-1) != uint32(i*10+n-1) {
				t.Fatalf("record %d: %+v size %d, %v", i, r, size, perr)
			}
			if i > 0 && r.ParentHash != uint64(1000+i-1) {
				t.Fatalf("record %d parent %d", i, r.ParentHash)
			}
		}
	})
	t.Run("schema 1 and schema 2 without the flag carry none", func(t *testing.T) {
		v1 := publishDesc(2)
		le.PutUint16(v1[4:], PublishSchemaV1)
		for _, b := range [][]byte{v1, publishDesc(2)} {
			p, err := DecodePublish(b)
			if err != nil || p.Len() != 2 || p.Record(0) != nil {
				t.Fatalf("%v, %d entries, record %x", err, p.Len(), p.Record(0))
			}
		}
		v1 = publishDesc(2)
		le.PutUint16(v1[4:], PublishSchemaV1)
		le.PutUint16(v1[6:], PublishRecords)
		if _, err := DecodePublish(v1); err == nil || err.Field != FieldDescFlags {
			t.Fatalf("schema 1 with the records flag: %v, want desc_flags", err)
		}
	})
	for _, tc := range []struct {
		name  string
		edit  func([]byte) []byte
		field Field
		index uint64
	}{
		{"a token count of 0", func(b []byte) []byte { le.PutUint32(b[len(b)-RecordBytes(2)+20:], 0); return b }, FieldRecord, 1},
		{"a token count over the limit", func(b []byte) []byte { le.PutUint32(b[len(b)-RecordBytes(2)+20:], RecordMaxTokens+1); return b }, FieldRecord, 1},
		{"a token count past the end", func(b []byte) []byte { le.PutUint32(b[len(b)-RecordBytes(2)+20:], 3); return b }, FieldRecord, 1},
		{"an unknown record flag", func(b []byte) []byte { b[len(b)-RecordBytes(2)+16] |= 2; return b }, FieldRecord, 1},
		{"a parent hash without the flag", func(b []byte) []byte {
			r := b[DescHeaderSize+2*PublishEntrySize:]
			le.PutUint64(r[8:], 5)
			return b
		}, FieldRecord, 0},
		{"nonzero padding", func(b []byte) []byte { return b }, FieldRecord, 0},
		{"bytes after the last record", func(b []byte) []byte { return append(b, make([]byte, 8)...) }, FieldCount, 0},
		{"a record missing", func(b []byte) []byte { return b[:len(b)-RecordBytes(2)] }, FieldCount, 0},
		{"an unknown publish flag", func(b []byte) []byte { le.PutUint16(b[6:], 3); return b }, FieldDescFlags, 0},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			b := publishWithRecords(2, 2)
			if tc.name == "nonzero padding" {
				b = publishWithRecords(1, 2)
				b[DescHeaderSize+2*PublishEntrySize+RecordBytes(1)-1] = 1
			}
			_, err := DecodePublish(tc.edit(b))
			if err == nil || err.Field != tc.field || err.Index != tc.index || err.Status != StatusInvalid {
				t.Fatalf("%v; want Invalid %v entry %d", err, tc.field, tc.index)
			}
		})
	}
}

func restoreDesc(n int) []byte {
	b := make([]byte, DescHeaderSize+n*RestoreEntrySize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], RestoreMagic)
	le.PutUint16(b[4:], RestoreSchema)
	le.PutUint32(b[8:], 1)
	le.PutUint32(b[12:], uint32(n))
	le.PutUint64(b[16:], 42)
	for i := 0; i < n; i++ {
		le.PutUint32(b[DescHeaderSize+i*RestoreEntrySize:], uint32(i))
		le.PutUint32(b[DescHeaderSize+i*RestoreEntrySize+4:], uint32(10+i))
	}
	return b
}

func TestDecodeQueryReadsEveryField(t *testing.T) {
	b := queryDesc(3, 9)
	q, err := DecodeQuery(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.Len() != 3 || q.NS[0] != 9 || q.Hash(2)[0] != 3 {
		t.Fatalf("decoded %+v", q)
	}
}

func TestDescriptorsRejectMalformedInputNamingTheField(t *testing.T) {
	le := binary.LittleEndian
	cases := []struct {
		name   string
		decode func([]byte) *DescError
		b      []byte
		edit   func([]byte) []byte
		field  Field
		status Status
	}{
		{"a short query is refused by length", qd, queryDesc(1, 1), func(b []byte) []byte { return b[:40] }, FieldDescLength, StatusInvalid},
		{"a query with a wrong magic", qd, queryDesc(1, 1), func(b []byte) []byte { b[0] ^= 1; return b }, FieldDescMagic, StatusInvalid},
		{"a query with another schema", qd, queryDesc(1, 1), func(b []byte) []byte { le.PutUint16(b[4:], 4); return b }, FieldDescSchema, StatusInvalid},
		{"a hash count beyond the descriptor", qd, queryDesc(2, 1), func(b []byte) []byte { le.PutUint32(b[20:], 3); return b }, FieldCount, StatusInvalid},
		{"a hash count of zero", qd, queryDesc(0, 1), nil, FieldCount, StatusInvalid},
		{"unknown query flags", qd, queryDesc(1, 1), func(b []byte) []byte { le.PutUint16(b[6:], 0x80); return b }, FieldDescFlags, StatusInvalid},
		{"flags without a ticket", qd, queryDesc(1, 1), func(b []byte) []byte { le.PutUint16(b[6:], QueryWaitFullPref); return b }, FieldOpID, StatusInvalid},
		{"a forbidden flag combination", qd, queryDesc(1, 1), func(b []byte) []byte {
			le.PutUint64(b[8:], 1)
			le.PutUint32(b[16:], 1)
			le.PutUint16(b[6:], QueryDiscover|QueryWarmup)
			return b
		}, FieldDescFlags, StatusInvalid},
		{"a ticket with revision 0", qd, queryDesc(1, 1), func(b []byte) []byte { le.PutUint64(b[8:], 5); return b }, FieldRevision, StatusInvalid},
		{"a revision without a ticket", qd, queryDesc(1, 1), func(b []byte) []byte { le.PutUint32(b[16:], 2); return b }, FieldRevision, StatusInvalid},
		{"a recovery range without the flag", qd, queryDesc(2, 1), func(b []byte) []byte { le.PutUint32(b[44:], 1); return b }, FieldRecovery, StatusInvalid},
		{"a recovery range past the hashes", qd, queryDesc(2, 1), func(b []byte) []byte {
			le.PutUint64(b[8:], 1)
			le.PutUint32(b[16:], 1)
			le.PutUint16(b[6:], QueryRecovery)
			le.PutUint32(b[40:], 1)
			le.PutUint32(b[44:], 2)
			return b
		}, FieldRecovery, StatusInvalid},
		{"an empty recovery range", qd, queryDesc(2, 1), func(b []byte) []byte {
			le.PutUint64(b[8:], 1)
			le.PutUint32(b[16:], 1)
			le.PutUint16(b[6:], QueryRecovery)
			return b
		}, FieldRecovery, StatusInvalid},
		{"an all-zero namespace", qd, queryDesc(1, 0), nil, FieldNamespace, StatusInvalid},
		{"a publish with trailing bytes", pd, publishDesc(2), func(b []byte) []byte { return append(b, 0) }, FieldCount, StatusInvalid},
		{"a publish with an unknown flag", pd, publishDesc(2), func(b []byte) []byte { b[6] = 2; return b }, FieldDescFlags, StatusInvalid},
		{"a publish with header reserved bytes", pd, publishDesc(2), func(b []byte) []byte { b[50] = 1; return b }, FieldDescReserved, StatusInvalid},
		{"a publish entry with its reserved word set", pd, publishDesc(2), func(b []byte) []byte { b[DescHeaderSize+PublishEntrySize+20] = 1; return b }, FieldDescReserved, StatusInvalid},
		{"a publish with an all-zero namespace", pd, publishDesc(1), func(b []byte) []byte { b[16] = 0; return b }, FieldNamespace, StatusInvalid},
		{"a restore with a wrong magic", rd, restoreDesc(1), func(b []byte) []byte { b[3] = 0; return b }, FieldDescMagic, StatusInvalid},
		{"a restore with header reserved bytes", rd, restoreDesc(1), func(b []byte) []byte { b[30] = 1; return b }, FieldDescReserved, StatusInvalid},
		{"a restore count larger than the entries", rd, restoreDesc(1), func(b []byte) []byte { le.PutUint32(b[12:], 1000); return b }, FieldCount, StatusInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.b
			if c.edit != nil {
				b = c.edit(b)
			}
			err := c.decode(b)
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Field != c.field || err.Status != c.status {
				t.Fatalf("got %v %v (%s), want %v %v", err.Status, err.Field, err.Detail, c.status, c.field)
			}
			if err.Detail == "" {
				t.Fatal("no detail")
			}
		})
	}
}

func qd(b []byte) *DescError { _, e := DecodeQuery(b); return e }
func pd(b []byte) *DescError { _, e := DecodePublish(b); return e }
func rd(b []byte) *DescError { _, e := DecodeRestore(b); return e }

func TestPublishAndRestoreEntriesDecode(t *testing.T) {
	p, err := DecodePublish(publishDesc(3))
	if err != nil {
		t.Fatal(err)
	}
	if h, page := p.Entry(2); h[0] != 2 || page != 102 || p.BufferID != 3 || p.LayerCount != 4 || p.Len() != 3 {
		t.Fatalf("publish entry 2: %v %d", h, page)
	}
	r, err := DecodeRestore(restoreDesc(4))
	if err != nil {
		t.Fatal(err)
	}
	if blk, page := r.Entry(3); blk != 3 || page != 13 || r.LeaseID != 42 || r.Len() != 4 {
		t.Fatalf("restore entry 3: %d %d", blk, page)
	}
}

func TestQueryResultLayout(t *testing.T) {
	b := make([]byte, 64)
	for i := range b {
		b[i] = 0xff
	}
	PutQueryResult(b, &QueryResult{Status: StatusOK, Hits: 7, RAMHits: 6, LeaseID: 9, LeaseBytes: 700, BlockBytes: 100, OpID: 11, Revision: 3, First: 2})
	le := binary.LittleEndian
	if le.Uint32(b) != QueryResultMagic || le.Uint32(b[8:]) != 7 || le.Uint32(b[12:]) != 6 || le.Uint64(b[16:]) != 9 || le.Uint64(b[24:]) != 700 ||
		le.Uint64(b[32:]) != 100 || le.Uint64(b[40:]) != 11 || le.Uint32(b[48:]) != 3 || le.Uint32(b[52:]) != 2 || b[56] != 0 || b[63] != 0 {
		t.Fatalf("result bytes %x", b)
	}
}

// FuzzDescriptors feeds arbitrary bytes to every descriptor decoder: none
// may panic, and an accepted descriptor's entries lie inside the input.
func FuzzDescriptors(f *testing.F) {
	f.Add(queryDesc(2, 1))
	f.Add(publishDesc(2))
	f.Add(publishWithRecords(1, 3))
	f.Add(restoreDesc(2))
	f.Add([]byte{})
	rec := queryDesc(3, 1)
	binary.LittleEndian.PutUint16(rec[6:], QueryRecovery|QueryPrepare)
	binary.LittleEndian.PutUint64(rec[8:], 9)
	binary.LittleEndian.PutUint32(rec[16:], 2)
	binary.LittleEndian.PutUint32(rec[40:], 1)
	binary.LittleEndian.PutUint32(rec[44:], 2)
	f.Add(rec)
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, err := DecodeQuery(b); err == nil {
			if DescHeaderSize+q.Len()*HashSize != len(b) || q.Len() == 0 {
				t.Fatalf("query of %d hashes accepted from %d bytes", q.Len(), len(b))
			}
			_ = q.Hash(q.Len() - 1)
			if (q.OpID == 0) != (q.Revision == 0) || (q.OpID == 0 && q.Flags != 0) || !validQueryFlags[q.Flags] {
				t.Fatalf("ticket fields accepted: op %d rev %d flags %#x", q.OpID, q.Revision, q.Flags)
			}
			if q.Flags&QueryRecovery != 0 && (q.RecoveryCount == 0 || int(q.RecoveryFirst)+int(q.RecoveryCount) > q.Len()) {
				t.Fatalf("recovery range [%d,+%d) accepted over %d hashes", q.RecoveryFirst, q.RecoveryCount, q.Len())
			}
		}
		if p, err := DecodePublish(b); err == nil {
			size := DescHeaderSize + p.Len()*PublishEntrySize
			for i := 0; p.Record(0) != nil && i < p.Len(); i++ {
				r, n, perr := ParseRecord(p.Record(i))
				if perr != nil || n != len(p.Record(i)) || r.TokenCount() < 1 || r.TokenCount() > RecordMaxTokens {
					t.Fatalf("record %d accepted: %+v, %d of %d bytes, %v", i, r, n, len(p.Record(i)), perr)
				}
				size += n
			}
			if size != len(b) {
				t.Fatalf("publish of %d entries accepted from %d bytes", p.Len(), len(b))
			}
			_, _ = p.Entry(p.Len() - 1)
		}
		if r, err := DecodeRestore(b); err == nil {
			if DescHeaderSize+r.Len()*RestoreEntrySize != len(b) {
				t.Fatalf("restore of %d entries accepted from %d bytes", r.Len(), len(b))
			}
			_, _ = r.Entry(r.Len() - 1)
		}
	})
}

// FuzzTicketRef feeds arbitrary Poll, Claim and CancelQuery arguments to
// DecodeTicketRef: an accepted reference names a ticket and a 32-bit
// revision, and a result area of 0 or ≥ 64 bytes.
func FuzzTicketRef(f *testing.F) {
	f.Add(uint16(CmdPoll), uint64(1), uint64(1), uint32(64))
	f.Add(uint16(CmdClaim), uint64(0), uint64(1), uint32(0))
	f.Add(uint16(CmdCancelQuery), uint64(3), uint64(1<<32), uint32(64))
	f.Fuzz(func(t *testing.T, code uint16, arg0, arg1 uint64, descLen uint32) {
		m := Message{Code: code, Arg0: arg0, Arg1: arg1, DescLength: descLen}
		r, err := DecodeTicketRef(&m)
		if err != nil {
			if err.Status != StatusInvalid || err.Field == FieldNone {
				t.Fatalf("refusal without a field: %v", err)
			}
			return
		}
		if r.OpID == 0 || r.Revision == 0 || uint64(r.Revision) != arg1 || (descLen != 0 && descLen < QueryResultSize) ||
			(Command(code) == CmdCancelQuery && descLen != 0) {
			t.Fatalf("accepted %+v from op %d rev %d desc %d", r, arg0, arg1, descLen)
		}
	})
}

func TestTicketRefsRejectMalformedArgumentsNamingTheField(t *testing.T) {
	for _, c := range []struct {
		m     Message
		field Field
	}{
		{Message{Code: uint16(CmdPoll), Arg0: 0, Arg1: 1}, FieldOpID},
		{Message{Code: uint16(CmdPoll), Arg0: 1, Arg1: 0}, FieldRevision},
		{Message{Code: uint16(CmdClaim), Arg0: 1, Arg1: 1 << 32}, FieldRevision},
		{Message{Code: uint16(CmdPoll), Arg0: 1, Arg1: 1, DescLength: 63}, FieldDescLength},
		{Message{Code: uint16(CmdCancelQuery), Arg0: 1, Arg1: 1, DescLength: 64}, FieldDescLength},
	} {
		if _, err := DecodeTicketRef(&c.m); err == nil || err.Field != c.field {
			t.Errorf("%+v: %v, want field %v", c.m, err, c.field)
		}
	}
}
