package index

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

func replica(x *Index, i byte) *Block {
	b := x.InsertReplica(key(i), 100, 1, 0, []uint32{uint32(i)})
	x.Seal(b)
	return b
}

// Replicas (blocks fetched from a peer) go before any block this node
// produced, whatever the policy would choose among the latter; a pinned
// replica is skipped like a pinned own block.
func TestReplicasAreEvictedBeforeOwnBlocks(t *testing.T) {
	cases := []struct {
		name   string
		pinned []byte // replicas pinned before evicting
		want   []byte // eviction order
	}{
		{"with no replica pinned, replicas go first, oldest first, then own blocks", nil, []byte{10, 11, 1, 2}},
		{"a pinned replica is skipped and own blocks go after the unpinned replicas", []byte{10}, []byte{11, 1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := New(evict.NewLRU())
			sealed(x, 1)
			replica(x, 10)
			sealed(x, 2)
			replica(x, 11)
			if st := x.Stats(); st.Blocks != 4 || st.Replicas != 2 {
				t.Fatalf("stats %+v, want 4 blocks of which 2 replicas", st)
			}
			for _, p := range tc.pinned {
				x.Pin(x.Lookup(key(p)))
			}
			var got []byte
			for b := x.Evict(); b != nil; b = x.Evict() {
				if b.Replica() != (b.Key.Hash[0] >= 10) {
					t.Fatalf("block %d: Replica() = %v", b.Key.Hash[0], b.Replica())
				}
				got = append(got, b.Key.Hash[0])
			}
			if string(got) != string(tc.want) {
				t.Fatalf("evicted %v, want %v", got, tc.want)
			}
			if st := x.Stats(); st.Replicas != len(tc.pinned) {
				t.Fatalf("replicas left %d, want %d", st.Replicas, len(tc.pinned))
			}
		})
	}
}

// Removing a replica (operator drop) takes it out of the replica policy:
// it is not evicted again later.
func TestRemovingAReplicaTakesItOutOfTheReplicaPolicy(t *testing.T) {
	x := New(evict.NewLRU())
	sealed(x, 1)
	r := replica(x, 10)
	x.Remove(r)
	if b := x.Evict(); b == nil || b.Key != key(1) {
		t.Fatalf("evicted %v, want the own block 1", b)
	}
	if b := x.Evict(); b != nil {
		t.Fatalf("evicted %v from an empty index", b.Key)
	}
	if x.Stats().Replicas != 0 {
		t.Fatal("replica count not 0 after Remove")
	}
}
