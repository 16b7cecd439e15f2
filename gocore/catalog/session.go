package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sessionLoop keeps this Manager registered: it grants a lease of
// Spec.LeaseTTL, writes the member record under it, and keeps it alive.
// When the keep-alive ends before Close (etcd unreachable for a whole TTL,
// or the lease expired), it registers again under a new lease and has the
// flusher rewrite every shard under it: records of the old lease go at its
// expiry, so none outlives it for more than one TTL.
func (c *Catalog) sessionLoop() {
	defer c.wg.Done()
	ttl := int64(c.spec.LeaseTTL / time.Second)
	r := newRetry(c.spec.LeaseTTL / 2)
	failing := false
	for c.ctx.Err() == nil {
		id, err := c.register(ttl)
		if err != nil {
			c.st.registerErrors.Add(1)
			if !failing {
				c.log.Warn("catalog registration failed; retrying", slog.Any("err", err))
				failing = true
			}
			if !c.sleep(r.delay()) {
				return
			}
			continue
		}
		r.reset()
		failing = false
		// Every shard is marked before the lease is published: a flusher
		// that sees the new lease also sees the marks, so no flush under
		// it can clear a shard the marking would set again (a second,
		// redundant write of every shard).
		c.markAllDirty()
		c.lastLease.Store(int64(id))
		c.lease.Store(int64(id))
		c.st.registrations.Add(1)
		// An Advertise that came while no lease was held woke the flusher
		// to no effect (it writes nothing without a lease): wake it again,
		// or those blocks would wait for the next batch tick.
		c.wake()
		c.log.Info("catalog registered", slog.String("node", c.spec.Self.NodeID), slog.Uint64("epoch", c.spec.Self.Epoch),
			slog.String("lease", fmt.Sprintf("%x", int64(id))))
		if ka, err := c.cli.KeepAlive(c.ctx, id); err == nil {
			for range ka {
			}
		}
		if c.ctx.Err() != nil {
			return // Close revokes the lease
		}
		c.lease.CompareAndSwap(int64(id), 0)
		c.st.leasesLost.Add(1)
		c.log.Warn("catalog membership lease lost; registering again", slog.String("lease", fmt.Sprintf("%x", int64(id))))
	}
}

// register grants a lease, writes the member record under it, and
// deletes this node's records of older epochs (their Manager is gone:
// this process replaced it; were the deletes lost, those records would
// still go with their lease and be ignored meanwhile). Three plain calls,
// not one transaction, so that an etcd run with --max-txn-ops below 3
// still takes them.
func (c *Catalog) register(ttl int64) (clientv3.LeaseID, error) {
	ctx, cancel := c.opCtx()
	defer cancel()
	g, err := c.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("granting the membership lease: %w", err)
	}
	p, self := c.spec.Prefix, c.spec.Self
	if _, err = c.cli.Put(ctx, memberKey(p, self.NodeID, self.Epoch), string(encodeMember(self)), clientv3.WithLease(g.ID)); err != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), c.spec.DialTimeout)
		c.cli.Revoke(rctx, g.ID) // best effort: else it expires unused
		rcancel()
		return 0, fmt.Errorf("writing the member record: %w", err)
	}
	for _, kind := range []string{"m", "i"} {
		if _, err := c.cli.Delete(ctx, nodePrefix(p, kind, self.NodeID), clientv3.WithRange(epochKey(p, kind, self.NodeID, self.Epoch))); err != nil {
			c.log.Debug("catalog: deleting this node's older epochs failed (they go with their lease)", slog.Any("err", err))
		}
	}
	return g.ID, nil
}
