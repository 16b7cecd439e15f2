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
		c.lastLease.Store(int64(id))
		c.lease.Store(int64(id))
		c.st.registrations.Add(1)
		c.markAllDirty()
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

// register grants a lease and, in one transaction, writes the member
// record under it and deletes this node's records of older epochs (their
// Manager is gone: this process replaced it).
func (c *Catalog) register(ttl int64) (clientv3.LeaseID, error) {
	ctx, cancel := c.opCtx()
	defer cancel()
	g, err := c.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("granting the membership lease: %w", err)
	}
	p, self := c.spec.Prefix, c.spec.Self
	_, err = c.cli.Txn(ctx).Then(
		clientv3.OpPut(memberKey(p, self.NodeID, self.Epoch), string(encodeMember(self)), clientv3.WithLease(g.ID)),
		clientv3.OpDelete(nodePrefix(p, "m", self.NodeID), clientv3.WithRange(epochKey(p, "m", self.NodeID, self.Epoch))),
		clientv3.OpDelete(nodePrefix(p, "i", self.NodeID), clientv3.WithRange(epochKey(p, "i", self.NodeID, self.Epoch))),
	).Commit()
	if err != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), c.spec.DialTimeout)
		c.cli.Revoke(rctx, g.ID) // best effort: else it expires unused
		rcancel()
		return 0, fmt.Errorf("writing the member record: %w", err)
	}
	return g.ID, nil
}
