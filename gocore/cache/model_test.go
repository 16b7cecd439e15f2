package cache

import (
	"encoding/binary"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/test/model"
)

var (
	modelSeeds = flag.Int("model.seeds", 20, "random seeds TestTicketsAgreeWithTheModel runs (make soak raises it)")
	modelSeed  = flag.Uint64("model.seed", 0, "run only this seed, logging every step")
)

// fakeClock is the expiry clock the tests move.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// ticketDesc builds a QueryBundle descriptor with a ticket.
func ticketDesc(ns abi.Namespace, opID uint64, rev uint32, flags uint16, reqID, group uint64, recFirst, recCount uint32, hashes ...abi.BlockHash) []byte {
	b := queryDesc(ns, hashes...)
	le := binary.LittleEndian
	le.PutUint16(b[6:], flags)
	le.PutUint64(b[8:], opID)
	le.PutUint32(b[16:], rev)
	le.PutUint64(b[24:], reqID)
	le.PutUint64(b[32:], group)
	le.PutUint32(b[40:], recFirst)
	le.PutUint32(b[44:], recCount)
	return b
}

// rigDriver runs the model against the cache service in process.
type rigDriver struct {
	r     *rig
	clock *fakeClock
	sess  map[int]*session.Session
	mem   map[int][]byte
	next  int
}

func (d *rigDriver) Open() (int, error) {
	s, mem := d.r.open()
	d.next++
	d.sess[d.next], d.mem[d.next] = s, mem
	return d.next, nil
}

func (d *rigDriver) Close(h int) error {
	d.r.close(d.sess[h])
	delete(d.sess, h)
	return nil
}

func (d *rigDriver) Publish(h, chain, n int) error {
	hs := make([]abi.BlockHash, n)
	pages := make([]uint32, n)
	for i := range hs {
		hs[i], pages[i] = model.Hash(chain, i), uint32(i)
		fill(d.mem[h], i, byte(chain*16+i))
	}
	resp := d.r.call(d.sess[h], abi.CmdPublish, publishDesc(ns1, tLayers, hs, pages), 0)
	if status(resp) != abi.StatusOK {
		return fmt.Errorf("publish answered %v", status(resp))
	}
	return nil
}

func (d *rigDriver) Do(h int, q model.Req) (model.Resp, error) {
	s := d.sess[h]
	var m abi.Message
	switch q.Kind {
	case model.Submit, model.Untracked:
		hs := make([]abi.BlockHash, q.Len)
		for i := range hs {
			hs[i] = model.Hash(q.Chain, i)
		}
		m = d.r.call(s, abi.CmdQueryBundle, ticketDesc(ns1, q.OpID, q.Rev, q.Flags, q.ReqID, q.Group, q.RecFirst, q.RecCount, hs...), 0)
	case model.Poll:
		m = d.r.call2(s, abi.CmdPoll, make([]byte, 64), q.OpID, uint64(q.Rev))
	case model.Claim:
		m = d.r.call2(s, abi.CmdClaim, make([]byte, 64), q.OpID, uint64(q.Rev))
	case model.Cancel:
		m = d.r.call2(s, abi.CmdCancelQuery, nil, q.OpID, uint64(q.Rev))
	case model.Release:
		m = d.r.call(s, abi.CmdRelease, nil, q.LeaseID)
	}
	return model.Resp{Status: abi.Status(m.Code), Arg0: m.Arg0, Arg1: m.Arg1}, nil
}

func (d *rigDriver) Expire() error {
	d.clock.Advance(ticket.DefaultOpExpiry + time.Second)
	d.r.svc.Complete(64, func(uint32, abi.Message) {}) // runs the sweep
	if n := d.r.svc.Stats().Tickets; n != 0 {
		return fmt.Errorf("%d tickets live after expiry", n)
	}
	return nil
}

func (d *rigDriver) Restart() (bool, error) { return false, nil }
func (d *rigDriver) InvalidField() bool     { return true }

func (d *rigDriver) Idle() error {
	st := d.r.svc.Stats()
	if !st.Idle() || len(d.r.svc.sessions) != 0 {
		return fmt.Errorf("idle invariant broken: %+v, %d sessions", st, len(d.r.svc.sessions))
	}
	return d.r.svc.Check()
}

// modelParams fit the rig: 8 pages per buffer, 16 KiB blocks, a lease
// budget of 16 blocks so tickets wait for budget, small operation bounds so
// Unadmitted happens.
func modelParams() model.Params {
	return model.Params{Sessions: 3, Steps: 600, Chains: 3, ChainLen: tPages, BlockBytes: tLayers * tPageBytes,
		LeaseBudget: 16 * tLayers * tPageBytes, MaxOpsSession: 8, MaxOps: 16}
}

// TestTicketsAgreeWithTheModel drives the cache service with random
// operations from several sessions and compares every answer with the
// reference model (test/model); a failing seed is printed: rerun it with
// -model.seed N and keep it below as a regression seed.
func TestTicketsAgreeWithTheModel(t *testing.T) {
	seeds := []uint64{}
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		for i := 0; i < *modelSeeds; i++ {
			seeds = append(seeds, uint64(time.Now().UnixNano())+uint64(i)*7919)
		}
	}
	p := modelParams()
	for _, seed := range seeds {
		clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
		r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 4 << 20}}, MaxOpsPerSession: p.MaxOpsSession, MaxOps: p.MaxOps,
			// The model keeps a lease until Release or teardown: it does
			// not model the idle revocation its clock jumps would trigger.
			LeaseBudget: p.LeaseBudget, LeaseIdleTimeout: LeaseIdleNever, Clock: clock.Now})
		d := &rigDriver{r: r, clock: clock, sess: map[int]*session.Session{}, mem: map[int][]byte{}}
		var logf func(string, ...any)
		if *modelSeed != 0 {
			logf = t.Logf
		}
		if err := model.Run(d, p, seed, logf); err != nil {
			t.Fatalf("seed %d: %v (rerun: go test ./gocore/cache -run TestTicketsAgreeWithTheModel -model.seed %d)", seed, err, seed)
		}
	}
}
