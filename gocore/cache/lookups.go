package cache

import "github.com/orbitkv/orbitkv/gocore/abi"

// CountLookup counts one logical lookup of the chain ending in last
// (ticket.Host).
func (s *Service) CountLookup(ns abi.Namespace, last abi.BlockHash) { s.lookups.Add(ns, last) }

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}
