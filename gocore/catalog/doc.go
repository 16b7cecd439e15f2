// Package catalog is the cluster catalog of OrbitKV on etcd v3
// (go.etcd.io/etcd/client/v3): which Managers are alive (membership) and
// which of them may hold a (namespace, block hash) (inventory). The
// Manager's cluster (gocore/cluster) opens one Catalog, advertises the blocks it
// sealed, withdraws the ones it evicted, and asks Owners before it asks a
// peer for a block. It imports gocore/abi and gocore/limit only; the etcd
// servers of its tests come from internal/etcdtest, which the Manager
// binary never links.
//
// # Candidates only
//
// The catalog holds candidate owners, never data: no block bytes, no
// lengths or checksums, and no raw addresses (no arena offset, SSD slot
// or transfer segment of a block; the only address in it is each
// Manager's peer control endpoint). An advertisement says "node n, in
// epoch e, held h when it last wrote this shard"; it may be stale by a
// batch interval, by an eviction since, or by an etcd outage. Before any
// byte moves, peer control (gocore/peer) asks the source to pin the exact
// resident run under a transfer lease and to name each block's length and
// CRC32C, and refuses a requester that expects another epoch. So the
// catalog can never become a second source of KV truth: a wrong candidate
// costs one refused or short transfer, which is a miss, and nothing read
// from etcd is trusted as content. Keeping durable data out also keeps
// etcd small and write-light, which is what etcd is built for.
//
// # Key layout
//
// Every key lies under Spec.Prefix (P, default "/orbitkv/"); node is the
// node id (1..64 bytes of [A-Za-z0-9._-]), epoch 16 lowercase hex digits
// (nonzero), shard 4 lowercase hex digits (below 4096):
//
//	P m/<node>/<epoch>           member record, under the node's lease
//	P i/<node>/<epoch>/<shard>   one shard of the node's inventory, same lease
//
// With the default prefix a member key is 28+len(node) bytes and an
// inventory key 33+len(node). Epochs are fixed-width hex so that a node's
// older epochs sort before its current one: a Manager deletes its node's
// older-epoch records with a range delete of each kind when it
// registers.
//
// # Values
//
// All integers little-endian; every value starts with a version byte (1)
// and a reserved byte (0).
//
// Member value, 20+len(peer_addr) bytes (at most 275):
//
//	off  size  field
//	0    1     version = 1
//	1    1     reserved = 0
//	2    2     peer_addr_len, 1..255
//	4    8     epoch, equal to the key's
//	12   8     capacity_bytes
//	20   n     peer_addr, host:port of peer control
//
// Shard value, 16 + Σ(20 + 16·count) bytes, at most MaxShardValueBytes
// (1 MiB, under etcd's default 1.5 MiB request limit):
//
//	off  size  field
//	0    1     version = 1
//	1    1     reserved = 0
//	2    2     shards, 1..4096: the writer's shard count
//	4    2     shard, equal to the key's, below shards
//	6    2     groups, ≥ 1 (an empty shard is deleted, not written)
//	8    8     epoch, equal to the key's
//	16   ...   groups: namespace [16], count uint32 ≥ 1, count hashes [16]
//
// Namespaces are strictly ascending, and hashes within a group, and every
// (namespace, hash) lies in the value's shard: the decoder accepts only
// this canonical form (so decode and encode are inverse, which the fuzz
// targets check), naming the field and the limit of anything else.
//
// The shard of (ns, h) among S shards is mix64(ns, h) mod S, where mix64
// xors the four 64-bit little-endian words of h and ns (h[8:] rotated by
// 32 bits, ns[8:] by 16) and applies murmur3's fmix64. It is part of the
// wire contract (a test pins it); the reader takes S from each value, so
// Managers with different Spec.Shards still read each other.
//
// # Sizes
//
// A node's inventory costs, in etcd bytes of keys and values: per
// nonempty shard its key (33+len(node)) and a 16-byte header; per
// namespace present in a shard 20 bytes; per hash 16 bytes. With the
// defaults (64 shards, a 16 MiB budget), an 8-byte node id and one
// namespace, that is 64·77 bytes of overhead and about 1.05 million
// advertised blocks, some 16,400 per shard (a 256 KiB value); one shard
// holds at most about 65,500 hashes of one namespace before its 1 MiB
// limit. Stats.AdvertisedBytes is this sum, exactly: the budget test
// reads etcd back and compares.
//
// # Membership and epochs
//
// Open grants a lease of Spec.LeaseTTL and writes the member record under
// it, in the background, and keeps the lease alive (clientv3 KeepAlive,
// every TTL/3). A Manager that dies stops the keep-alive, its lease
// expires within one TTL, and etcd deletes its member record and its whole
// inventory at once; every Watch sees the deletes. Close revokes the lease
// (the same, at once). If the keep-alive ends while the process lives
// (etcd unreachable for a TTL), the catalog registers again under a new
// lease and rewrites every nonempty shard under it; what still hangs on
// the old lease goes at its expiry.
//
// A restarted Manager comes with a larger epoch (Spec.Self.Epoch, the
// Manager's own). A node's current epoch is the largest of its live
// member records; Owners returns a node only for advertisements written
// at that epoch, so the inventory of an older epoch (the dead process's
// records until its lease expires, or a late write of it) is ignored and
// never returned, and a requester is never sent to a restarted peer for
// blocks of its previous life.
//
// # Inventory
//
// Advertise and Withdraw only change this node's in-memory outbox, one
// set per shard, under a lock per shard: they never wait on etcd. A
// flusher writes the shards that changed: the first change after an idle
// spell (no flush for a whole Spec.BatchInterval) at once, later ones at
// most once per Spec.BatchInterval (batching under load), each shard as a
// whole value, in transactions of at most 128 shards and about 1.25 MiB
// (etcd's default --max-txn-ops and request limit; one that an etcd with
// lower limits refuses is split in halves, down to a shard each, and etcd
// must then take one shard of MaxShardValueBytes in a request); a failed
// transaction's shards stay marked and go in the next batch. Rewriting a whole shard
// trades write volume (at most the budget per interval, when every shard
// changes) for one key per shard: etcd holds Shards keys per node, not
// one per block, and a reader updates its index with one value per shard.
// etcd keeps old revisions until compaction; run it with
// --auto-compaction-retention (the catalog recovers from compactions).
//
// The outbox and etcd together are bounded by Spec.AdvertiseBudgetBytes
// (the sizes above) and each shard by MaxShardValueBytes. Past either,
// Advertise stops advertising: the block stays a local block that no
// peer is told about (a peer that needs it misses), nothing already
// advertised is displaced, the drop is counted in Stats.OverBudgetBlocks
// and logged once, and room comes back as Withdraw removes blocks.
//
// # The local index
//
// Owners and Members read a local index only, so they never wait on etcd
// and answer the same while etcd is down (from what was seen last). One
// goroutine fills it: a range read of the whole prefix at one revision (in
// pages of 64 keys), then a Watch from the next revision
// (WithRequireLeader, so a member that loses quorum ends the stream
// instead of holding it silently). Each inventory event replaces what its
// key indexed, by a merge of the old and new sorted values. A stream that
// ends resumes from the last revision applied; a resume refused with
// ErrCompacted (the revision is gone) rebuilds from a new range read,
// which also removes what was deleted while the watcher was behind. The
// index is split over 64 locks by the same mix64, so an Owners waits for
// at most one entry's update. A key or value that does not decode is
// counted (Stats.MalformedRecords), logged once per key, and indexes
// nothing. This node's own inventory is never indexed: Owners never
// returns this Manager.
//
// Whoever can write under the prefix is trusted to be a Manager of the
// cluster (etcd's TLS and authentication are the operator's, Spec.TLS);
// the decoders bound what a wrong writer can make a reader allocate to
// one value's size.
package catalog
