package cache

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// opRecorder is an OpObserver that keeps every sample.
type opRecorder struct {
	samples [NumOps][]time.Duration
}

func (o *opRecorder) ObserveOp(op Op, d time.Duration) { o.samples[op] = append(o.samples[op], d) }

// serve is rig.call through Serve, the dispatcher's entry point, which is
// the one that times requests; a deferred reply is completed as call does.
func (r *rig) serve(s *session.Session, cmd abi.Command, desc []byte, arg0 uint64) abi.Message {
	r.t.Helper()
	copy(s.Slot()[abi.SlotDescOffset:], desc)
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(cmd), Epoch: tEpoch, Generation: r.gen[s], Arg0: arg0}
	r.gen[s] += 2
	if len(desc) > 0 {
		m.DescOffset, m.DescLength = abi.SlotDescOffset, uint32(len(desc))
	}
	resp, ok := r.svc.Serve(s, m)
	deadline := time.Now().Add(5 * time.Second)
	for !ok {
		r.svc.Complete(64, func(slot uint32, msg abi.Message) {
			if slot == s.Index && msg.Generation == m.Generation+1 {
				resp, ok = msg, true
			}
		})
		if time.Now().After(deadline) {
			r.t.Fatal("deferred reply never posted")
		}
	}
	return resp
}

// Every TimedEvery-th operation of each kind is timed: TimedEvery rounds of
// publish, query, restore and release give one sample of each.
func TestTheObserverHearsEveryEighthOperationWithItsDuration(t *testing.T) {
	rec := &opRecorder{}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, Observer: rec})
	s, _ := r.open()
	for round := range TimedEvery {
		a, b := hash(2*round), hash(2*round+1)
		if resp := r.serve(s, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{a, b}, []uint32{0, 1}), 0); status(resp) != abi.StatusOK || resp.Arg0 != 2 {
			t.Fatalf("round %d publish: %v stored %d", round, status(resp), resp.Arg0)
		}
		q := r.serve(s, abi.CmdQueryBundle, queryDesc(ns1, a, b), 0)
		if status(q) != abi.StatusOK {
			t.Fatalf("round %d query: %v", round, status(q))
		}
		rs := r.serve(s, abi.CmdRestore, restoreDesc(q.Arg1, []uint32{0, 1}, []uint32{4, 5}), 0)
		if status(rs) != abi.StatusOK {
			t.Fatalf("round %d restore: %v", round, status(rs))
		}
		for deadline := time.Now().Add(5 * time.Second); ; {
			if p := r.serve(s, abi.CmdRestorePoll, nil, rs.Arg0); status(p) != abi.StatusLoading {
				break
			}
			r.svc.Complete(64, func(uint32, abi.Message) {})
			if time.Now().After(deadline) {
				t.Fatal("restore never completed")
			}
		}
		if resp := r.serve(s, abi.CmdRelease, nil, q.Arg1); status(resp) != abi.StatusOK {
			t.Fatalf("round %d release: %v", round, status(resp))
		}
		if round == TimedEvery-2 {
			for op := range NumOps {
				if n := len(rec.samples[op]); n != 0 {
					t.Fatalf("after %d rounds %s has %d samples, want none before the %dth", round+1, op, n, TimedEvery)
				}
			}
		}
	}
	want := [NumOps]int{OpQuery: 1, OpPublish: 1, OpRestore: 1, OpRelease: 1}
	for op := range NumOps {
		t.Run(op.String()+" is heard once in TimedEvery", func(t *testing.T) {
			if len(rec.samples[op]) != want[op] {
				t.Fatalf("%d samples, want %d", len(rec.samples[op]), want[op])
			}
			for _, d := range rec.samples[op] {
				if d <= 0 || d > 5*time.Second {
					t.Errorf("duration %v, want within (0, 5s]", d)
				}
			}
		})
	}
	r.close(s)
	r.idle()
}

func TestEveryTimedCommandMapsToItsOp(t *testing.T) {
	cases := []struct {
		cmd  abi.Command
		op   Op
		want bool
	}{
		{abi.CmdQueryBundle, OpQuery, true}, {abi.CmdPoll, OpPoll, true}, {abi.CmdClaim, OpClaim, true},
		{abi.CmdPublish, OpPublish, true}, {abi.CmdRestore, OpRestore, true}, {abi.CmdRelease, OpRelease, true},
		{abi.CmdRestorePoll, 0, false}, {abi.CmdCancelQuery, 0, false}, {abi.CmdPing, 0, false},
	}
	for _, c := range cases {
		name := c.cmd.String() + " is timed as " + c.op.String()
		if !c.want {
			name = c.cmd.String() + " is not timed"
		}
		t.Run(name, func(t *testing.T) {
			op, ok := opOf(uint16(c.cmd))
			if ok != c.want || (ok && op != c.op) {
				t.Fatalf("opOf = %v, %v; want %v, %v", op, ok, c.op, c.want)
			}
		})
	}
}

func TestLookupsCountTheRAMPrefixAsHitsAndTheRestAsMisses(t *testing.T) {
	r := newRig(t, 1<<20)
	s, _ := r.open()
	r.call(s, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2)}, []uint32{0, 1, 2}), 0)
	cases := []struct {
		name      string
		chain     []abi.BlockHash
		hit, miss uint64
	}{
		{"a chain all resident counts only hits", []abi.BlockHash{hash(0), hash(1)}, 2, 0},
		{"a chain past a gap counts the blocks after the prefix as misses", []abi.BlockHash{hash(0), hash(1), hash(2), hash(9), hash(3)}, 3, 2},
		{"a chain missing its first block counts all misses", []abi.BlockHash{hash(7), hash(0)}, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := r.svc.Stats().LookupBlocks
			resp := r.call(s, abi.CmdQueryBundle, queryDesc(ns1, c.chain...), 0)
			if status(resp) == abi.StatusOK {
				r.call(s, abi.CmdRelease, nil, resp.Arg1)
			}
			after := r.svc.Stats().LookupBlocks
			got := tier.LookupBlocks{RAMHit: after.RAMHit - before.RAMHit, RAMMiss: after.RAMMiss - before.RAMMiss,
				SSDHit: after.SSDHit - before.SSDHit, SSDMiss: after.SSDMiss - before.SSDMiss}
			if want := (tier.LookupBlocks{RAMHit: c.hit, RAMMiss: c.miss}); got != want {
				t.Fatalf("lookup counts moved by %+v, want %+v (no SSD tier: no SSD lookups)", got, want)
			}
		})
	}
	r.close(s)
	r.idle()
}

func TestLookupsCountSSDHitsForTheBlocksALookupReadsBack(t *testing.T) {
	blockBytes := uint64(tLayers * tPageBytes)
	spec := &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
	r := newRigSSD(t, 4*blockBytes, spec) // 4 blocks of RAM: the second publish demotes the first
	a, _ := r.open()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(4), hash(5), hash(6), hash(7)}, []uint32{4, 5, 6, 7}), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("demoted blocks not durable: %+v", r.svc.tiers.Counters().SSD)
		}
		time.Sleep(time.Millisecond)
	}
	q := queryDesc(ns1, hash(0), hash(1), hash(2), hash(3), hash(99)) // hash(99) is nowhere
	query := func() (abi.Message, tier.LookupBlocks) {
		before := r.svc.Stats().LookupBlocks
		resp := r.call(a, abi.CmdQueryBundle, q, 0)
		after := r.svc.Stats().LookupBlocks
		return resp, tier.LookupBlocks{RAMHit: after.RAMHit - before.RAMHit, RAMMiss: after.RAMMiss - before.RAMMiss,
			SSDHit: after.SSDHit - before.SSDHit, SSDMiss: after.SSDMiss - before.SSDMiss}
	}
	t.Run("the lookup that starts the reads counts them as SSD hits", func(t *testing.T) {
		resp, got := query()
		if status(resp) != abi.StatusLoading {
			t.Fatalf("query of demoted blocks: %v, want Loading", status(resp))
		}
		if want := (tier.LookupBlocks{RAMMiss: 5, SSDHit: 4, SSDMiss: 1}); got != want {
			t.Fatalf("counts moved by %+v, want %+v", got, want)
		}
	})
	var resp abi.Message
	for resp, _ = query(); status(resp) == abi.StatusLoading; resp, _ = query() {
		if time.Now().After(deadline) {
			t.Fatal("prefetch never finished")
		}
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
	r.call(a, abi.CmdRelease, nil, resp.Arg1)
	t.Run("once read back the blocks are RAM hits and the rest an SSD miss", func(t *testing.T) {
		resp, got := query()
		if status(resp) != abi.StatusOK || resp.Arg0 != 4 {
			t.Fatalf("query after the prefetch: %v hits %d, want Ok 4", status(resp), resp.Arg0)
		}
		r.call(a, abi.CmdRelease, nil, resp.Arg1)
		if want := (tier.LookupBlocks{RAMHit: 4, RAMMiss: 1, SSDMiss: 1}); got != want {
			t.Fatalf("counts moved by %+v, want %+v", got, want)
		}
	})
	r.close(a)
	r.idle()
}
