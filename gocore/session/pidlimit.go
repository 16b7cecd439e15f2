package session

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// Sessions per process (docs/security.md, "Sessions per process"): a
// Table admits at most Spec.MaxSessionsPerPID live sessions of one peer
// pid, so one process cannot take every slot. An engine process opens one
// session (a vLLM scheduler or worker, an SGLang rank; docs/adapters.md),
// and one more for a while after a reconnect; test clients open up to 8.
// Pid 0, SO_PEERCRED's pid of a peer in a pid namespace the Manager
// cannot see, is not counted: such peers cannot be told apart, and a cap
// on all of them together would lock them out as one.

// DefaultMaxSessionsPerPID is Spec.MaxSessionsPerPID's default.
const DefaultMaxSessionsPerPID = 64

// MaxSessionsPerPIDRange is the limit of Spec.MaxSessionsPerPID.
var MaxSessionsPerPIDRange = limit.Range[uint32]{Field: "session.MaxSessionsPerPID", Min: 1, Max: abi.ControlSlot,
	Zero: strconv.Itoa(DefaultMaxSessionsPerPID)}

// ErrPIDLimit is what a *PIDLimitError matches with errors.Is.
var ErrPIDLimit = errors.New("session: the peer process holds the most sessions one process may open")

// PIDLimitError is Open's refusal of a process that already holds Limit
// live sessions.
type PIDLimitError struct {
	PID   int32
	Limit uint32
}

func (e *PIDLimitError) Error() string {
	return fmt.Sprintf("session: process %d already holds %d live sessions, the most one process may open (--max-sessions-per-pid %d)", e.PID, e.Limit, e.Limit)
}

// Is makes errors.Is(err, ErrPIDLimit) true.
func (e *PIDLimitError) Is(target error) bool { return target == ErrPIDLimit }

// pidCount is the live sessions per peer pid, under Table.mu, and the
// refusals counted.
type pidCount struct {
	n       map[int32]uint32
	refused atomic.Uint64
}

// take counts one more session of pid within limit, or refuses it.
func (c *pidCount) take(pid int32, limit uint32) error {
	if pid == 0 {
		return nil
	}
	if c.n == nil {
		c.n = make(map[int32]uint32)
	}
	if c.n[pid] >= limit {
		c.refused.Add(1)
		return &PIDLimitError{PID: pid, Limit: limit}
	}
	c.n[pid]++
	return nil
}

// give uncounts one session of pid.
func (c *pidCount) give(pid int32) {
	if pid == 0 || c.n[pid] == 0 {
		return
	}
	if c.n[pid]--; c.n[pid] == 0 {
		delete(c.n, pid)
	}
}

// pidLimit is the per-pid limit in force.
func (t *Table) pidLimit() uint32 {
	if t.spec.MaxSessionsPerPID == 0 {
		return DefaultMaxSessionsPerPID
	}
	return t.spec.MaxSessionsPerPID
}

// PIDRefusals is the number of sessions Open refused for the per-pid
// limit. Safe for concurrent use.
func (t *Table) PIDRefusals() uint64 { return t.perPID.refused.Load() }
