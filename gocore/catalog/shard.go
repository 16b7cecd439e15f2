package catalog

import (
	"encoding/binary"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// mix64 folds a (namespace, block hash) pair into 64 well-mixed bits:
// the four 64-bit words xor-ed, then murmur3's fmix64. It is part of the
// wire contract (every Manager must compute the same shard), so it never
// uses a per-process seed.
func mix64(ns abi.Namespace, h abi.BlockHash) uint64 {
	le := binary.LittleEndian
	x := le.Uint64(h[0:]) ^ (le.Uint64(h[8:])<<32 | le.Uint64(h[8:])>>32) ^ le.Uint64(ns[0:]) ^ (le.Uint64(ns[8:])<<16 | le.Uint64(ns[8:])>>48)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// shardOf is the inventory shard of (ns, h) among shards.
func shardOf(ns abi.Namespace, h abi.BlockHash, shards int) int {
	return int(mix64(ns, h) % uint64(shards))
}
