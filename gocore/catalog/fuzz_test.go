package catalog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// The fuzz targets feed the decoders of etcd keys and values arbitrary
// bytes: each either refuses them with a DecodeError (ErrMalformed) or
// accepts a record that encodes back to exactly the same bytes.

func FuzzDecodeKey(f *testing.F) {
	const p = "/orbitkv/"
	f.Add([]byte(memberKey(p, "node-1", 1)))
	f.Add([]byte(inventoryKey(p, "n", 0xffffffffffffffff, 63)))
	f.Add([]byte(p + "i/n/00000000000000/0000"))
	f.Add([]byte(p + "m/../0000000000000001"))
	f.Fuzz(func(t *testing.T, key []byte) {
		k, err := decodeKey(p, key)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		var again string
		switch k.kind {
		case kindMember:
			again = memberKey(p, k.node, k.epoch)
		case kindInventory:
			again = inventoryKey(p, k.node, k.epoch, k.shard)
		default:
			t.Fatalf("decoded kind %d", k.kind)
		}
		if again != string(key) {
			t.Fatalf("key %q decoded to %+v, which encodes to %q", key, k, again)
		}
	})
}

func FuzzDecodeMember(f *testing.F) {
	f.Add(uint64(1), encodeMember(Member{PeerAddr: "127.0.0.1:7480", Epoch: 1, CapacityBytes: 1 << 30}))
	f.Add(uint64(2), encodeMember(Member{PeerAddr: "[::1]:1", Epoch: 2}))
	f.Add(uint64(3), []byte{1, 0, 3, 0})
	f.Fuzz(func(t *testing.T, epoch uint64, b []byte) {
		k := recordKey{kind: kindMember, node: "n", epoch: epoch}
		m, err := decodeMember(k, b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if m.NodeID != "n" || m.Epoch != epoch || !bytes.Equal(encodeMember(m), b) {
			t.Fatalf("value %x decoded to %+v, which does not encode back", b, m)
		}
	})
}

func FuzzDecodeShard(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	ns := abi.Namespace{3}
	f.Add(uint16(4), encodeShard(&shardValue{shards: 8, shard: 4, epoch: 1, groups: []nsGroup{{ns, shardedHashes(r, ns, 4, 8, 2)}}}))
	f.Add(uint16(0), encodeShard(&shardValue{shards: 1, shard: 0, epoch: 1, groups: []nsGroup{{ns, shardedHashes(r, ns, 0, 1, 3)}, {abi.Namespace{4}, shardedHashes(r, abi.Namespace{4}, 0, 1, 1)}}}))
	f.Add(uint16(0), make([]byte, 52))
	f.Fuzz(func(t *testing.T, shard uint16, b []byte) {
		k := recordKey{kind: kindInventory, node: "n", epoch: 1, shard: int(shard)}
		v, err := decodeShard(k, b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if !bytes.Equal(encodeShard(v), b) || v.encodedBytes() != len(b) {
			t.Fatalf("value %x decoded to %+v, which does not encode back", b, v)
		}
	})
}
