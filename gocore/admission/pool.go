package admission

import (
	"container/list"
	"iter"
	"net"
	"net/netip"
)

// Limits bounds a Pool. Each bound is a count of connections.
type Limits struct {
	// MaxConns bounds the open connections, all hosts together (≥ 1).
	MaxConns int
	// MaxConnsPerHost bounds the open connections of one host; 0: no
	// bound.
	MaxConnsPerHost int
	// MaxUnproven bounds the unproven connections, all hosts together
	// (≥ 1): at the bound the oldest unproven of the busiest host is
	// closed to admit a newcomer.
	MaxUnproven int
	// MaxUnprovenPerHost bounds the unproven connections of one host
	// (≥ 1): at the bound the host's own oldest unproven is closed to
	// admit its newcomer.
	MaxUnprovenPerHost int
}

// Verdict is Admit's decision on a newcomer.
type Verdict uint8

// The verdicts of Admit.
const (
	// Admitted: the newcomer is in the pool, unproven.
	Admitted Verdict = iota
	// OverConnsPerHost: its host holds MaxConnsPerHost connections, none
	// of them unproven; the newcomer is not in the pool.
	OverConnsPerHost
	// OverConns: MaxConns are open, none of them unproven; the newcomer is
	// not in the pool.
	OverConns
)

// Pool is the admission bookkeeping of one listener, keyed by connection
// (C: a comparable handle, such as a net.Conn or a pointer). Not safe for
// concurrent use: its owner's lock guards it.
type Pool[C comparable] struct {
	lim   Limits
	quiet func(C) bool
	conns map[C]*entry
	hosts map[string]int // open connections per host; a host with none has no entry
	// unproven holds the unproven connections oldest first, and unprovenOf
	// those of each host (a host with none has no entry).
	unproven   *list.List
	unprovenOf map[string]*list.List
	seq        uint64 // connections admitted: each one's entry.seq
}

// entry is an open connection's state: its host, its order of admission
// and, while it is unproven, its elements in Pool.unproven and
// Pool.unprovenOf[host] (both nil once proven).
type entry struct {
	host      string
	seq       uint64
	all, mine *list.Element
}

// New makes an empty pool bounded by lim. quiet, when not nil, marks the
// connections to close first among a host's unproven ones (a connection
// that has sent nothing yet); without it, or when none is quiet, the
// oldest goes first.
func New[C comparable](lim Limits, quiet func(C) bool) *Pool[C] {
	return &Pool[C]{lim: lim, quiet: quiet, conns: map[C]*entry{}, hosts: map[string]int{},
		unproven: list.New(), unprovenOf: map[string]*list.List{}}
}

// Admit decides newcomer c from host. Room is made from unproven
// connections only: first the host's own (at MaxUnprovenPerHost or
// MaxConnsPerHost), which makes room under every bound at once, then the
// busiest host's (at MaxUnproven or MaxConns). victims are the connections
// taken out of the pool to make room, in the order chosen; the caller
// closes them. They are out of the pool even when c is refused (the bound
// stays full of proven connections). c must not be in the pool already.
func (p *Pool[C]) Admit(c C, host string) (v Verdict, victims []C) {
	evict := func(l *list.List) {
		victim := p.victim(l)
		p.Drop(victim)
		victims = append(victims, victim)
	}
	overHost := func() bool { return p.lim.MaxConnsPerHost > 0 && p.hosts[host] >= p.lim.MaxConnsPerHost }
	if mine := p.unprovenOf[host]; mine != nil && (mine.Len() >= p.lim.MaxUnprovenPerHost || overHost()) {
		evict(mine)
	}
	if overHost() {
		return OverConnsPerHost, victims
	}
	if p.unproven.Len() > 0 && (p.unproven.Len() >= p.lim.MaxUnproven || len(p.conns) >= p.lim.MaxConns) {
		evict(p.busiest())
	}
	if len(p.conns) >= p.lim.MaxConns {
		return OverConns, victims
	}
	p.seq++
	e := &entry{host: host, seq: p.seq, all: p.unproven.PushBack(c)}
	mine := p.unprovenOf[host]
	if mine == nil {
		mine = list.New()
		p.unprovenOf[host] = mine
	}
	e.mine = mine.PushBack(c)
	p.conns[c] = e
	p.hosts[host]++
	return Admitted, victims
}

// Prove marks c proven: it is never again closed for a newcomer. It
// reports whether c is in the pool (false: it was taken out, for a
// newcomer or by Drop). Proving a proven connection does nothing.
func (p *Pool[C]) Prove(c C) bool {
	e, ok := p.conns[c]
	if ok {
		p.prove(e)
	}
	return ok
}

// Drop takes c out of the pool (it closed); a no-op when it is out
// already.
func (p *Pool[C]) Drop(c C) {
	e, ok := p.conns[c]
	if !ok {
		return
	}
	delete(p.conns, c)
	if p.hosts[e.host]--; p.hosts[e.host] <= 0 {
		delete(p.hosts, e.host)
	}
	p.prove(e)
}

// Contains reports whether c is in the pool.
func (p *Pool[C]) Contains(c C) bool {
	_, ok := p.conns[c]
	return ok
}

// Len is the number of connections in the pool.
func (p *Pool[C]) Len() int { return len(p.conns) }

// Unproven is the number of unproven connections in the pool.
func (p *Pool[C]) Unproven() int { return p.unproven.Len() }

// All yields the connections in the pool, in no order. The pool must not
// change while it runs.
func (p *Pool[C]) All() iter.Seq[C] {
	return func(yield func(C) bool) {
		for c := range p.conns {
			if !yield(c) {
				return
			}
		}
	}
}

// prove takes e out of the unproven lists (a no-op once proven).
func (p *Pool[C]) prove(e *entry) {
	if e.all == nil {
		return
	}
	p.unproven.Remove(e.all)
	mine := p.unprovenOf[e.host]
	mine.Remove(e.mine)
	if mine.Len() == 0 {
		delete(p.unprovenOf, e.host)
	}
	e.all, e.mine = nil, nil
}

// victim is the connection of l (a host's unproven list, not empty) to
// close for a newcomer: the oldest quiet one, else the oldest.
func (p *Pool[C]) victim(l *list.List) C {
	if p.quiet != nil {
		for e := l.Front(); e != nil; e = e.Next() {
			if c := e.Value.(C); p.quiet(c) {
				return c
			}
		}
	}
	return l.Front().Value.(C)
}

// busiest is the unproven list of the host with the most unproven
// connections, of those the one whose oldest is oldest (p.unproven not
// empty): a host with few, as a legitimate client's, loses one only when
// no host has more.
func (p *Pool[C]) busiest() *list.List {
	var best *list.List
	for _, l := range p.unprovenOf {
		if best == nil || l.Len() > best.Len() || l.Len() == best.Len() && p.oldest(l) < p.oldest(best) {
			best = l
		}
	}
	return best
}

// oldest is the admission order of l's first connection.
func (p *Pool[C]) oldest(l *list.List) uint64 { return p.conns[l.Front().Value.(C)].seq }

// HostOf is the IP address of a remote address, the key of the per-host
// bounds (an IPv4-mapped IPv6 address as IPv4); the whole address when it
// has no IP (a pipe, a Unix socket).
func HostOf(a net.Addr) string { return Host(a.String()) }

// Host is HostOf for an address in text ("host:port"); addr itself when
// it is not an IP address and port.
func Host(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().Unmap().String()
	}
	return addr
}
