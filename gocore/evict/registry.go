package evict

import (
	"errors"
	"fmt"
	"strings"
)

// Default is the --eviction policy a Manager uses unless told otherwise: the
// one that came closest to the offline optimum on the Mooncake conversation
// trace (bench/README.md, policy).
const Default = NameSLRU

// ErrUnknownPolicy is wrapped by New's error for a name it does not know.
var ErrUnknownPolicy = errors.New("unknown eviction policy")

// constructors, in the order Names lists them.
var constructors = []struct {
	name string
	make func(capacityBlocks int) Policy
}{
	{NameLRU, func(int) Policy { return NewLRU() }},
	{NameS3FIFO, NewS3FIFO},
	{NameSLRU, NewSLRU},
}

// Names returns the --eviction values New accepts, LRU first. The slice is
// the caller's.
func Names() []string {
	out := make([]string, len(constructors))
	for i, c := range constructors {
		out[i] = c.name
	}
	return out
}

// New returns a fresh policy by its --eviction name for a cache of about
// capacityBlocks blocks (policies that size internal queues use it; <= 0
// sizes them by the resident blocks). An unknown name is an error wrapping
// ErrUnknownPolicy that lists the known ones.
func New(name string, capacityBlocks int) (Policy, error) {
	for _, c := range constructors {
		if c.name == name {
			return c.make(capacityBlocks), nil
		}
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPolicy, name, strings.Join(Names(), ", "))
}
