package catalog

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// One flush transaction holds at most maxTxnOps shards (etcd's default
// --max-txn-ops) and, past its first shard, at most maxTxnBytes of keys
// and values (under etcd's default 1.5 MiB request limit).
const (
	maxTxnOps   = 128
	maxTxnBytes = 1<<20 + 256<<10
)

// entry is one advertised (namespace, block hash).
type entry struct {
	ns abi.Namespace
	h  abi.BlockHash
}

// outShard is what this node advertises in one shard: the set etcd should
// hold, its encoded size, and whether etcd is behind it.
type outShard struct {
	mu         sync.Mutex
	set        map[entry]struct{}
	perNS      map[abi.Namespace]int // hashes per namespace in set
	valueBytes int                   // encoded value length; 0 when set is empty
	dirty      bool                  // set changed since it was last written
}

// advertiser is the Catalog's outbox. Its memory is bounded by the budget:
// an entry is only kept while its bytes are reserved in used.
type advertiser struct {
	out      []outShard
	keyBytes int // length of every inventory key of this node and epoch
	budget   uint64
	used     atomic.Uint64 // bytes of keys and values of the nonempty shards
	blocks   atomic.Int64  // entries in all sets
}

func (a *advertiser) init(s Spec) {
	a.out = make([]outShard, s.Shards)
	for i := range a.out {
		a.out[i].set = map[entry]struct{}{}
		a.out[i].perNS = map[abi.Namespace]int{}
	}
	a.keyBytes = len(inventoryKey(s.Prefix, s.Self.NodeID, s.Self.Epoch, 0))
	a.budget = s.AdvertiseBudgetBytes
}

// reserve takes n bytes of the budget; false when they do not fit.
func (a *advertiser) reserve(n uint64) bool {
	for {
		u := a.used.Load()
		if u+n > a.budget {
			return false
		}
		if a.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Advertise offers hashes of namespace ns as blocks this node holds: other
// Managers' Owners list this node for them once the next batch (within
// Spec.BatchInterval, at once after an idle spell, while etcd answers)
// reaches etcd. It only updates
// memory and never waits on etcd. A hash already advertised is kept once.
// Past Spec.AdvertiseBudgetBytes, or past MaxShardValueBytes in its shard,
// a hash is not advertised at all (it stays a local block that no peer is
// told about) and is counted in Stats.OverBudgetBlocks; room comes back
// as Withdraw removes hashes. Nothing after Close.
func (c *Catalog) Advertise(ns abi.Namespace, hashes []abi.BlockHash) {
	if c.closed.Load() {
		return
	}
	changed := false
	for _, h := range hashes {
		e := entry{ns, h}
		s := &c.out[shardOf(ns, h, len(c.out))]
		s.mu.Lock()
		if _, ok := s.set[e]; ok {
			s.mu.Unlock()
			continue
		}
		value := hashBytes
		if s.perNS[ns] == 0 {
			value += groupHeaderBytes
		}
		cost := value
		if len(s.set) == 0 {
			value += shardHeaderBytes
			cost = value + c.keyBytes
		}
		if s.valueBytes+value > MaxShardValueBytes || !c.reserve(uint64(cost)) {
			s.mu.Unlock()
			if c.st.overBudget.Add(1) == 1 {
				c.log.Warn("catalog advertise budget full: further blocks are not advertised (Stats.OverBudgetBlocks)",
					slog.Uint64("budget_bytes", c.budget))
			}
			continue
		}
		s.set[e] = struct{}{}
		s.perNS[ns]++
		s.valueBytes += value
		s.dirty = true
		s.mu.Unlock()
		c.blocks.Add(1)
		changed = true
	}
	if changed {
		c.wake()
	}
}

// Withdraw takes hashes of namespace ns back (evicted, dropped): the next
// batch removes them from etcd. Hashes not advertised are ignored. It only
// updates memory and never waits on etcd. Nothing after Close (the lease's
// revoke removes everything).
func (c *Catalog) Withdraw(ns abi.Namespace, hashes []abi.BlockHash) {
	if c.closed.Load() {
		return
	}
	changed := false
	for _, h := range hashes {
		e := entry{ns, h}
		s := &c.out[shardOf(ns, h, len(c.out))]
		s.mu.Lock()
		if _, ok := s.set[e]; !ok {
			s.mu.Unlock()
			continue
		}
		delete(s.set, e)
		value := hashBytes
		if s.perNS[ns]--; s.perNS[ns] == 0 {
			delete(s.perNS, ns)
			value += groupHeaderBytes
		}
		refund := value
		if len(s.set) == 0 {
			value += shardHeaderBytes
			refund = value + c.keyBytes
		}
		s.valueBytes -= value
		s.dirty = true
		s.mu.Unlock()
		c.used.Add(^uint64(refund - 1))
		c.blocks.Add(-1)
		changed = true
	}
	if changed {
		c.wake()
	}
}

// markAllDirty has the flusher write every shard again (a new lease).
func (a *advertiser) markAllDirty() {
	for i := range a.out {
		s := &a.out[i]
		s.mu.Lock()
		s.dirty = s.dirty || len(s.set) > 0
		s.mu.Unlock()
	}
}

// pendingShards counts the shards etcd is behind on.
func (a *advertiser) pendingShards() int {
	n := 0
	for i := range a.out {
		s := &a.out[i]
		s.mu.Lock()
		if s.dirty {
			n++
		}
		s.mu.Unlock()
	}
	return n
}

// write is one shard's change in a flush: value nil deletes the key.
type write struct {
	shard int
	key   string
	value []byte
}

// take returns shard i's write and clears its dirty mark; false when etcd
// is not behind. The set is copied under the lock and encoded outside it,
// so Advertise waits for a copy, never for sorting or etcd.
func (c *Catalog) take(i int) (write, bool) {
	s := &c.out[i]
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return write{}, false
	}
	s.dirty = false
	entries := make([]entry, 0, len(s.set))
	for e := range s.set {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	w := write{shard: i, key: inventoryKey(c.spec.Prefix, c.spec.Self.NodeID, c.spec.Self.Epoch, i)}
	if len(entries) == 0 {
		return w, true
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if r := bytes.Compare(a.ns[:], b.ns[:]); r != 0 {
			return r
		}
		return bytes.Compare(a.h[:], b.h[:])
	})
	v := &shardValue{shards: len(c.out), shard: i, epoch: c.spec.Self.Epoch}
	for _, e := range entries {
		if n := len(v.groups); n == 0 || v.groups[n-1].ns != e.ns {
			v.groups = append(v.groups, nsGroup{ns: e.ns})
		}
		g := &v.groups[len(v.groups)-1]
		g.hashes = append(g.hashes, e.h)
	}
	w.value = encodeShard(v)
	return w, true
}

func (c *Catalog) markDirty(i int) {
	s := &c.out[i]
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
}

// flushLoop writes the changed shards while registered: the first change
// after an idle spell (no flush for a whole Spec.BatchInterval) at once,
// so a peer sees a block one etcd round trip and one Watch event after it
// was sealed; under load the changes that come within an interval of the
// last flush wait for the next tick and go together, one transaction per
// interval. The tick also retries failed shards and writes everything
// again after a re-registration.
func (c *Catalog) flushLoop() {
	defer c.wg.Done()
	t := time.NewTimer(c.spec.BatchInterval)
	defer t.Stop()
	var last time.Time // the end of the last flush that wrote or tried to
	failing := false
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
			if time.Since(last) < c.spec.BatchInterval {
				continue // batching: the next tick takes it, within an interval
			}
		case <-t.C:
		}
		if !t.Stop() {
			select { // a tick that fired while a kick was served
			case <-t.C:
			default:
			}
		}
		t.Reset(c.spec.BatchInterval)
		lease := clientv3.LeaseID(c.lease.Load())
		if lease == 0 || c.pendingShards() == 0 {
			continue
		}
		ok := c.flush(lease)
		last = time.Now()
		if clientv3.LeaseID(c.lease.Load()) != lease {
			// Lease lost or replaced meanwhile: what this flush wrote hangs on
			// the old lease, and may have cleared the marks that the new
			// registration set. Everything goes again under the new one.
			c.markAllDirty()
		}
		switch {
		case !ok && !failing:
			c.log.Warn("catalog advertisements not written; retrying each batch interval")
		case ok && failing:
			c.log.Info("catalog advertisements written again")
		}
		failing = !ok
	}
}

// wake tells the flusher that a shard changed (never blocks: one pending
// wake-up is enough).
func (c *Catalog) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// flush writes every changed shard under lease, in transactions of at
// most maxTxnOps shards and maxTxnBytes; a failed transaction's shards
// stay changed for the next flush. It reports whether all went through.
func (c *Catalog) flush(lease clientv3.LeaseID) bool {
	var batch []write
	size, ok := 0, true
	for i := range c.out {
		w, dirty := c.take(i)
		if !dirty {
			continue
		}
		n := len(w.key) + len(w.value)
		if len(batch) > 0 && (len(batch) == maxTxnOps || size+n > maxTxnBytes) {
			ok = c.commit(lease, batch) && ok
			batch, size = batch[:0], 0
		}
		batch = append(batch, w)
		size += n
	}
	if len(batch) > 0 {
		ok = c.commit(lease, batch) && ok
	}
	return ok
}

// commit writes batch in one transaction. One that etcd refuses as too
// large or of too many operations (an etcd run with --max-request-bytes or
// --max-txn-ops below the defaults) is split in halves, down to one shard
// per transaction.
func (c *Catalog) commit(lease clientv3.LeaseID, batch []write) bool {
	ops := make([]clientv3.Op, len(batch))
	for i, w := range batch {
		if w.value == nil {
			ops[i] = clientv3.OpDelete(w.key)
		} else {
			ops[i] = clientv3.OpPut(w.key, string(w.value), clientv3.WithLease(lease))
		}
	}
	ctx, cancel := c.opCtx()
	_, err := c.cli.Txn(ctx).Then(ops...).Commit()
	cancel()
	if err == nil {
		c.st.flushes.Add(1)
		return true
	}
	if len(batch) > 1 && (errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrTooManyOps)) {
		h := len(batch) / 2
		first := c.commit(lease, batch[:h])
		return c.commit(lease, batch[h:]) && first
	}
	c.st.flushErrors.Add(1)
	c.log.Debug("catalog flush failed", slog.Int("shards", len(batch)), slog.Any("err", err))
	for _, w := range batch {
		c.markDirty(w.shard)
	}
	return false
}
