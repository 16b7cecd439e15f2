package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// shardedHashes returns n distinct random hashes of ns that fall in shard
// of shards, sorted.
func shardedHashes(r *rand.Rand, ns abi.Namespace, shard, shards, n int) []abi.BlockHash {
	var hs []abi.BlockHash
	for len(hs) < n {
		var h abi.BlockHash
		binary.LittleEndian.PutUint64(h[:], r.Uint64())
		binary.LittleEndian.PutUint64(h[8:], r.Uint64())
		if shardOf(ns, h, shards) == shard && !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b abi.BlockHash) int { return bytes.Compare(a[:], b[:]) })
	return hs
}

func TestKeysRoundTripAndMalformedKeysNameTheirField(t *testing.T) {
	const p = "/orbitkv/"
	good := []struct {
		key  string
		want recordKey
	}{
		{memberKey(p, "node-1", 7), recordKey{kind: kindMember, node: "node-1", epoch: 7}},
		{inventoryKey(p, "n.2_x", 0xdeadbeef, 4095), recordKey{kind: kindInventory, node: "n.2_x", epoch: 0xdeadbeef, shard: 4095}},
	}
	for _, tc := range good {
		t.Run("the key "+tc.key+" decodes to what encoded it", func(t *testing.T) {
			k, err := decodeKey(p, []byte(tc.key))
			if err != nil || k != tc.want {
				t.Fatalf("decodeKey = %+v, %v; want %+v", k, err, tc.want)
			}
		})
	}
	bad := []struct{ name, key, field string }{
		{"a key outside the prefix", "/other/m/n/0000000000000001", "prefix"},
		{"an unknown kind", p + "x/n/0000000000000001", "kind"},
		{"a member key with a shard", p + "m/n/0000000000000001/0000", "parts"},
		{"an inventory key without a shard", p + "i/n/0000000000000001", "parts"},
		{"an empty node id", p + "m//0000000000000001", "node"},
		{"a node id with a space", p + "m/a b/0000000000000001", "node"},
		{"a node id of 65 bytes", p + "m/" + strings.Repeat("a", 65) + "/0000000000000001", "node"},
		{"a short epoch", p + "m/n/1", "epoch"},
		{"an uppercase epoch", p + "m/n/000000000000000A", "epoch"},
		{"epoch zero", p + "m/n/0000000000000000", "epoch"},
		{"a shard of 3 digits", p + "i/n/0000000000000001/000", "shard"},
		{"shard 4096", p + "i/n/0000000000000001/1000", "shard"},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is refused naming "+tc.field, func(t *testing.T) {
			_, err := decodeKey(p, []byte(tc.key))
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tc.field || de.Record != "key" || !errors.Is(err, ErrMalformed) {
				t.Fatalf("decodeKey(%q) = %v; want a key DecodeError on %s", tc.key, err, tc.field)
			}
			if de.Want == "" {
				t.Fatalf("error %v names no limit", err)
			}
		})
	}
}

func TestMemberValuesRoundTripAndMalformedOnesNameTheirField(t *testing.T) {
	k := recordKey{kind: kindMember, node: "n1", epoch: 9}
	m := Member{NodeID: "n1", PeerAddr: "127.0.0.2:7480", Epoch: 9, CapacityBytes: 4 << 30}
	t.Run("a member value decodes to the member that encoded it", func(t *testing.T) {
		got, err := decodeMember(k, encodeMember(m))
		if err != nil || got != m {
			t.Fatalf("decodeMember = %+v, %v; want %+v", got, err, m)
		}
	})
	good := encodeMember(m)
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	bad := []struct {
		name, field string
		b           []byte
	}{
		{"an empty value", "length", nil},
		{"a value too long", "length", make([]byte, maxMemberBytes+1)},
		{"another version", "version", mutate(func(b []byte) []byte { b[0] = 2; return b })},
		{"a reserved byte set", "reserved", mutate(func(b []byte) []byte { b[1] = 1; return b })},
		{"an address length past the end", "peer_addr_len", mutate(func(b []byte) []byte { b[2]++; return b })},
		{"an address length of 0", "peer_addr_len", mutate(func(b []byte) []byte { b[2], b[3] = 0, 0; return b[:memberHeaderBytes] })},
		{"an epoch other than the key's", "epoch", mutate(func(b []byte) []byte { b[4] = 8; return b })},
		{"an address without a port", "peer_addr", encodeMember(Member{PeerAddr: "127.0.0.2", Epoch: 9})},
		{"an address with a space", "peer_addr", encodeMember(Member{PeerAddr: "a b:1", Epoch: 9})},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is refused naming "+tc.field, func(t *testing.T) {
			_, err := decodeMember(k, tc.b)
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tc.field || de.Record != "member value" {
				t.Fatalf("decodeMember = %v; want a member value DecodeError on %s", err, tc.field)
			}
		})
	}
}

func TestShardValuesRoundTripAndMalformedOnesNameTheirField(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const shards, shard = 8, 3
	k := recordKey{kind: kindInventory, node: "n1", epoch: 5, shard: shard}
	ns1, ns2 := abi.Namespace{1}, abi.Namespace{2}
	v := &shardValue{shards: shards, shard: shard, epoch: 5, groups: []nsGroup{
		{ns1, shardedHashes(r, ns1, shard, shards, 3)},
		{ns2, shardedHashes(r, ns2, shard, shards, 5)},
	}}
	good := encodeShard(v)
	t.Run("a shard value decodes to the groups that encoded it", func(t *testing.T) {
		if len(good) != v.encodedBytes() || len(good) != shardHeaderBytes+2*groupHeaderBytes+8*hashBytes {
			t.Fatalf("encoded %d bytes, encodedBytes %d", len(good), v.encodedBytes())
		}
		got, err := decodeShard(k, good)
		if err != nil || !bytes.Equal(encodeShard(got), good) || len(got.groups) != 2 || !slices.Equal(got.groups[1].hashes, v.groups[1].hashes) {
			t.Fatalf("decodeShard = %+v, %v", got, err)
		}
	})
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	other := shardedHashes(r, ns1, shard+1, shards, 1)[0]
	g0 := shardHeaderBytes      // group 0's namespace
	h0 := g0 + groupHeaderBytes // group 0's first hash
	g1 := h0 + 3*hashBytes      // group 1's namespace
	bad := []struct {
		name, field string
		b           []byte
	}{
		{"a value shorter than one hash", "length", good[:shardHeaderBytes+groupHeaderBytes]},
		{"a value past MaxShardValueBytes", "length", make([]byte, MaxShardValueBytes+1)},
		{"another version", "version", mutate(func(b []byte) []byte { b[0] = 0; return b })},
		{"a reserved byte set", "reserved", mutate(func(b []byte) []byte { b[1] = 9; return b })},
		{"zero shards", "shards", mutate(func(b []byte) []byte { b[2], b[3] = 0, 0; return b })},
		{"a shard count past MaxShards", "shards", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[2:], MaxShards+1); return b })},
		{"a shard other than the key's", "shard", mutate(func(b []byte) []byte { b[4] = 2; return b })},
		{"an epoch other than the key's", "epoch", mutate(func(b []byte) []byte { b[8] = 6; return b })},
		{"no groups", "groups", mutate(func(b []byte) []byte { b[6] = 0; return b })},
		{"more groups than bytes", "groups[2]", mutate(func(b []byte) []byte { b[6] = 3; return b })},
		{"namespaces out of order", "groups[1].namespace", mutate(func(b []byte) []byte { b[g1] = 1; return b })},
		{"a group of zero hashes", "groups[0].count", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[g0+16:], 0); return b })},
		{"a count past the end", "groups[1].count", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[g1+16:], 6); return b })},
		{"a duplicate hash", "groups[0].hashes[1]", mutate(func(b []byte) []byte { copy(b[h0+hashBytes:], b[h0:h0+hashBytes]); return b })},
		{"a hash of another shard", "groups[0].hashes[0]", mutate(func(b []byte) []byte { copy(b[h0:], other[:]); return b })},
		{"bytes after the last group", "length", append(slices.Clone(good), 0)},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is refused naming "+tc.field, func(t *testing.T) {
			_, err := decodeShard(k, tc.b)
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tc.field || de.Record != "shard value" {
				t.Fatalf("decodeShard = %v; want a shard value DecodeError on %s", err, tc.field)
			}
		})
	}
}

// The shard function is part of the wire contract between Managers: these
// values pin it, so a change to it fails here rather than between nodes
// of different versions.
func TestTheShardFunctionIsStable(t *testing.T) {
	var h abi.BlockHash
	var ns abi.Namespace
	for i := range h {
		h[i], ns[i] = byte(i), byte(0xf0+i)
	}
	got := []uint64{mix64(abi.Namespace{}, abi.BlockHash{}), mix64(ns, h), mix64(ns, abi.BlockHash{1})}
	want := []uint64{0, 0xf15fecfe67b72708, 0x953fe546cefac6c3}
	if !slices.Equal(got, want) {
		t.Fatalf("mix64 = %#x; want %#x", got, want)
	}
	if s := shardOf(ns, h, 64); s != int(0xf15fecfe67b72708%64) {
		t.Fatalf("shardOf = %d", s)
	}
}

func TestShardsSpreadHashesEvenly(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const shards, n = 64, 64 * 1000
	var counts [shards]int
	for i := 0; i < n; i++ {
		var h abi.BlockHash
		binary.LittleEndian.PutUint64(h[:], r.Uint64())
		binary.LittleEndian.PutUint64(h[8:], r.Uint64())
		counts[shardOf(abi.Namespace{7}, h, shards)]++
	}
	for s, c := range counts {
		if c < 800 || c > 1200 { // mean 1000, sd ~31
			t.Fatalf("shard %d holds %d of %d hashes; want about %d", s, c, n, n/shards)
		}
	}
}

func TestDiffGroupsFindsExactlyTheAddedAndRemovedEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 200; round++ {
		universe := map[entry]bool{}
		var a, b []entry
		for i := 0; i < 40; i++ {
			e := entry{abi.Namespace{byte(r.IntN(3))}, abi.BlockHash{byte(r.IntN(16)), byte(r.IntN(4))}}
			if universe[e] {
				continue
			}
			universe[e] = true
			switch r.IntN(3) {
			case 0:
				a = append(a, e)
			case 1:
				b = append(b, e)
			default:
				a, b = append(a, e), append(b, e)
			}
		}
		added, removed := map[entry]bool{}, map[entry]bool{}
		diffGroups(groupsOf(a), groupsOf(b), func(e entry) { added[e] = true }, func(e entry) { removed[e] = true })
		for e := range universe {
			inA, inB := slices.Contains(a, e), slices.Contains(b, e)
			if added[e] != (inB && !inA) || removed[e] != (inA && !inB) {
				t.Fatalf("round %d: entry %v in a %v, in b %v: added %v, removed %v", round, e, inA, inB, added[e], removed[e])
			}
		}
	}
}

// groupsOf sorts entries into canonical groups.
func groupsOf(es []entry) []nsGroup {
	es = slices.Clone(es)
	slices.SortFunc(es, func(x, y entry) int {
		if c := bytes.Compare(x.ns[:], y.ns[:]); c != 0 {
			return c
		}
		return bytes.Compare(x.h[:], y.h[:])
	})
	var gs []nsGroup
	for _, e := range es {
		if len(gs) == 0 || gs[len(gs)-1].ns != e.ns {
			gs = append(gs, nsGroup{ns: e.ns})
		}
		gs[len(gs)-1].hashes = append(gs[len(gs)-1].hashes, e.h)
	}
	return gs
}
