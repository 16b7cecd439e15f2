package replay

import (
	"errors"
	"fmt"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// A replay client across a Manager's restart (workerInput.Reconnect), as
// an engine's connector behaves: a request the Manager's exit, drain or
// restart cut short is tried again on a new session, which the client
// opens with back-off from reconnectFirst doubling to reconnectMax; a
// request that finds no Manager for reconnectBound is given up (counted
// in RequestsFailed).
const (
	reconnectFirst = 5 * time.Millisecond
	reconnectMax   = 100 * time.Millisecond
	reconnectBound = time.Minute
)

// interruption reports whether err is the Manager going away (or
// draining): the request is to be tried again on a new session.
func interruption(err error) bool {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code {
	case client.CodeManagerDied, client.CodeClosed, client.CodeTimedOut, client.CodeUnadmitted, client.CodeFenced:
		return true
	}
	return false
}

// requestAcrossRestarts replays one request, again on a new session each
// time the Manager cuts it short; after says whether it counts in the
// second half's figures.
func (w *replayWorker) requestAcrossRestarts(ids []uint64, after bool) error {
	start := time.Now()
	if w.c == nil { // an earlier request found no Manager to reconnect to
		if err := w.reconnect(start.Add(reconnectBound)); err != nil {
			w.res.RequestsFailed++
			return nil
		}
	}
	for {
		saved := w.res
		err := w.request(ids)
		if err == nil {
			if after {
				w.res.BlocksAfter += uint64(len(ids))
				w.res.HitBlocksAfter += w.res.HitBlocks - saved.HitBlocks
			}
			if w.res.InterruptedNS != 0 && w.res.FirstRestoreNS == 0 && w.restoredAt.UnixNano() > w.res.InterruptedNS {
				w.res.FirstRestoreNS = w.restoredAt.UnixNano()
			}
			return nil
		}
		if !interruption(err) {
			return err
		}
		// The attempt's counts go; bytes it found wrong stay counted.
		mism := w.res.Mismatches
		w.res = saved
		w.res.Mismatches = mism
		if w.res.InterruptedNS == 0 {
			w.res.InterruptedNS = time.Now().UnixNano()
		}
		if err := w.reconnect(start.Add(reconnectBound)); err != nil {
			w.res.RequestsFailed++
			return nil
		}
	}
}

// reconnect closes the session and opens a new one, with its engine
// buffer registered, trying with back-off until deadline.
func (w *replayWorker) reconnect(deadline time.Time) error {
	for _, nc := range w.conns {
		nc.c.Close()
	}
	w.conns, w.c = nil, nil
	w.leases = w.leases[:0]
	wait := reconnectFirst
	for {
		c, err := client.Connect(client.Options{SocketPath: w.in.Socket, InstanceID: fmt.Sprintf("replay-%d", w.in.Index), Role: uint32(abi.RoleBench)})
		if err == nil {
			id, rerr := c.RegisterBuffer(w.buf)
			if rerr == nil {
				w.conns = []nodeConn{{c: c, bufID: id}}
				w.c, w.bufID = c, id
				w.res.Reconnects++
				return nil
			}
			c.Close()
			err = rerr
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("no Manager to reconnect to by the deadline: %w", err)
		}
		time.Sleep(wait)
		wait = min(2*wait, reconnectMax)
	}
}
