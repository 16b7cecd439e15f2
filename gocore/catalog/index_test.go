package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// offline is a Catalog with no etcd client, whose index the tests feed
// through apply as the watch goroutine would.
func offline(node string) *Catalog {
	s := Spec{Endpoints: []string{"127.0.0.1:1"}, Self: Member{NodeID: node, PeerAddr: "127.0.0.1:7480", Epoch: 1}, Logger: slog.New(slog.DiscardHandler)}.withDefaults()
	c := &Catalog{spec: s, log: s.Logger}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.advertiser.init(s)
	c.index.init()
	c.watch.init()
	return c
}

func putMember(c *Catalog, node string, epoch uint64) {
	c.apply([]byte(memberKey(c.spec.Prefix, node, epoch)), encodeMember(Member{PeerAddr: "127.0.0.9:1", Epoch: epoch}))
}

func putShard(c *Catalog, node string, epoch uint64, shards, shard int, groups ...nsGroup) {
	var v []byte
	if len(groups) > 0 {
		v = encodeShard(&shardValue{shards: shards, shard: shard, epoch: epoch, groups: groups})
	}
	c.apply([]byte(inventoryKey(c.spec.Prefix, node, epoch, shard)), v)
}

func TestTheIndexFollowsRecordsAsTheWatchDeliversThem(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	ns := abi.Namespace{5}
	const shards = 4
	hs := shardedHashes(r, ns, 2, shards, 6)
	owners := func(c *Catalog, h abi.BlockHash) []string { return nodes(c.Owners(ns, h)) }

	t.Run("an advertisement counts only once its node's member record is live", func(t *testing.T) {
		c := offline("self")
		putShard(c, "n", 1, shards, 2, nsGroup{ns, hs[:3]})
		if got := owners(c, hs[0]); got != nil {
			t.Fatalf("owners %v without a member record", got)
		}
		putMember(c, "n", 1)
		if got := owners(c, hs[0]); !slices.Equal(got, []string{"n@1"}) {
			t.Fatalf("owners %v", got)
		}
		c.apply([]byte(memberKey(c.spec.Prefix, "n", 1)), nil)
		if got := owners(c, hs[0]); got != nil || len(c.Members()) != 0 {
			t.Fatalf("owners %v, members %v after the member record went", got, c.Members())
		}
	})

	t.Run("a new value of a shard replaces the old one entry by entry", func(t *testing.T) {
		c := offline("self")
		putMember(c, "n", 1)
		putShard(c, "n", 1, shards, 2, nsGroup{ns, hs[:4]})
		putShard(c, "n", 1, shards, 2, nsGroup{ns, hs[2:6]})
		for i, h := range hs {
			want := []string{"n@1"}
			if i < 2 {
				want = nil
			}
			if got := owners(c, h); !slices.Equal(got, want) {
				t.Fatalf("hash %d: owners %v; want %v", i, got, want)
			}
		}
		putShard(c, "n", 1, shards, 2) // deleted
		if n := c.entries.Load(); n != 0 || len(c.watch.records) != 0 || len(c.watch.owners) != 0 {
			t.Fatalf("after the delete: %d entries, %d records, %d owners", n, len(c.watch.records), len(c.watch.owners))
		}
	})

	t.Run("a newer epoch hides the older one's advertisements", func(t *testing.T) {
		c := offline("self")
		putMember(c, "n", 1)
		putShard(c, "n", 1, shards, 2, nsGroup{ns, hs[:3]})
		putMember(c, "n", 2)
		putShard(c, "n", 2, shards, 2, nsGroup{ns, hs[3:]})
		if got := owners(c, hs[0]); got != nil {
			t.Fatalf("owners %v of an epoch-1 block with epoch 2 live", got)
		}
		if n := testing.AllocsPerRun(100, func() { c.Owners(ns, hs[0]) }); n != 0 {
			t.Fatalf("Owners of a block only an older epoch holds allocates %v times", n)
		}
		if got := owners(c, hs[3]); !slices.Equal(got, []string{"n@2"}) {
			t.Fatalf("owners %v", got)
		}
		if m := c.Members(); len(m) != 1 || m[0].Epoch != 2 {
			t.Fatalf("members %+v", m)
		}
		// An older member record arriving late does not take over.
		c.apply([]byte(memberKey(c.spec.Prefix, "n", 2)), nil)
		putMember(c, "n", 1)
		putMember(c, "n", 3)
		if got := owners(c, hs[3]); got != nil {
			t.Fatalf("owners %v of an epoch-2 block with epoch 3 live", got)
		}
	})

	t.Run("this node's own advertisements are never indexed", func(t *testing.T) {
		c := offline("self")
		putMember(c, "self", 1)
		putShard(c, "self", 1, shards, 2, nsGroup{ns, hs})
		putShard(c, "self", 7, shards, 2, nsGroup{ns, hs})
		if got := owners(c, hs[0]); got != nil || c.entries.Load() != 0 {
			t.Fatalf("owners %v, %d entries", got, c.entries.Load())
		}
		if m := c.Members(); len(m) != 1 || m[0].NodeID != "self" {
			t.Fatalf("members %+v; want this node", m)
		}
	})

	t.Run("a malformed record is counted and indexes nothing, and removes what its key indexed", func(t *testing.T) {
		c := offline("self")
		putMember(c, "n", 1)
		putShard(c, "n", 1, shards, 2, nsGroup{ns, hs})
		k := inventoryKey(c.spec.Prefix, "n", 1, 2)
		c.apply([]byte(k), []byte("garbage"))
		c.apply([]byte(c.spec.Prefix+"zzz"), []byte("x"))
		c.apply([]byte(memberKey(c.spec.Prefix, "m", 1)), []byte{1})
		if got := owners(c, hs[0]); got != nil || c.entries.Load() != 0 {
			t.Fatalf("owners %v, %d entries after a malformed value replaced the shard", got, c.entries.Load())
		}
		if n := c.st.malformed.Load(); n != 3 {
			t.Fatalf("%d malformed records counted; want 3", n)
		}
		if m := c.Members(); len(m) != 1 {
			t.Fatalf("members %+v; the malformed member record is not one", m)
		}
	})

	t.Run("several owners of one block are all listed", func(t *testing.T) {
		c := offline("self")
		for i := 0; i < 5; i++ {
			node := fmt.Sprintf("n%d", i)
			putMember(c, node, 1)
			putShard(c, node, 1, shards, 2, nsGroup{ns, hs[:1]})
		}
		got := owners(c, hs[0])
		slices.Sort(got)
		if !slices.Equal(got, []string{"n0@1", "n1@1", "n2@1", "n3@1", "n4@1"}) {
			t.Fatalf("owners %v", got)
		}
	})
}
