package peer

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

// FuzzParseOpen feeds OpenTransferRequest bytes from outside to parseOpen:
// it never panics, and what it accepts holds the request's fields exactly.
func FuzzParseOpen(f *testing.F) {
	h := hash(1)
	for _, q := range []*peerpb.OpenTransferRequest{
		{Namespace: testNS[:], Hashes: [][]byte{h[:]}, MaxBytes: 1, ExpectEpoch: 7},
		{Namespace: testNS[:15], Hashes: [][]byte{h[:], h[:3]}, MaxBytes: 0},
		{},
	} {
		b, err := proto.Marshal(q)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q peerpb.OpenTransferRequest
		if proto.Unmarshal(b, &q) != nil {
			return
		}
		r, err := parseOpen(&q)
		if err != nil {
			return
		}
		if !bytes.Equal(r.ns[:], q.Namespace) || len(r.hashes) != len(q.Hashes) || len(r.hashes) > MaxHashes || r.maxBytes == 0 || r.expectEpoch == 0 {
			t.Fatalf("accepted %v as %+v", &q, r)
		}
		for i := range r.hashes {
			if !bytes.Equal(r.hashes[i][:], q.Hashes[i]) {
				t.Fatalf("hash %d: %x, want %x", i, r.hashes[i], q.Hashes[i])
			}
		}
	})
}

// FuzzParseReply feeds OpenTransferReply bytes from outside to the
// client's check: it never panics, and an accepted run is a prefix of the
// hashes asked for, laid back to back within max_bytes.
func FuzzParseReply(f *testing.F) {
	asked := []abi.BlockHash{hash(0), hash(1)}
	good := &peerpb.OpenTransferReply{TransferId: 1, SegmentId: 2, Capability: make([]byte, 16), DataAddr: "127.0.0.1:9", Epoch: 7, TtlNs: uint64(time.Second),
		Blocks: []*peerpb.Block{{Hash: hashBytes(0), Length: 10, Crc32C: 1, Offset: 0}, {Hash: hashBytes(1), Length: 5, Offset: 10}}}
	for _, rep := range []*peerpb.OpenTransferReply{good, {Epoch: 7}, {TransferId: 1, Epoch: 7}} {
		b, err := proto.Marshal(rep)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(100))
	}
	f.Fuzz(func(t *testing.T, b []byte, maxBytes uint64) {
		var rep peerpb.OpenTransferReply
		if proto.Unmarshal(b, &rep) != nil {
			return
		}
		tr, err := parseReply(&rep, asked, maxBytes, 7, time.Now())
		if err != nil {
			return
		}
		var off uint64
		for i, blk := range tr.Blocks {
			if blk.Hash != asked[i] || blk.Offset != off || blk.Length == 0 {
				t.Fatalf("accepted block %d %+v", i, blk)
			}
			off += blk.Length
		}
		if off != tr.Bytes || tr.Bytes > maxBytes || (tr.ID == 0) != (len(tr.Blocks) == 0) {
			t.Fatalf("accepted %+v for %d bytes", tr, maxBytes)
		}
	})
}
