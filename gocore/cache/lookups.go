package cache

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// CountLookup counts one logical lookup of the chain ending in last
// (ticket.Host).
func (s *Service) CountLookup(ns abi.Namespace, last abi.BlockHash) { s.lookups.Add(ns, last) }

// idBase is the first lease and restore id of a Manager lifetime: the top
// 16 bits come from a hash of the epoch, so an id issued by an earlier
// lifetime is, but for a 2^-16 chance, unknown to this one (spec: "a Manager
// restart ... rejects every old lease and handle"); 2^48 ids per lifetime.
func idBase(epoch uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], epoch)
	h := sha256.Sum256(b[:])
	return uint64(binary.LittleEndian.Uint16(h[:]))<<48 | 1
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}
