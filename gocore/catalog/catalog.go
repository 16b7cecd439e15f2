package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Catalog is this Manager's view of the cluster: its own membership and
// advertisements, kept in etcd by background goroutines, and the other
// Managers' members and advertisements, kept in a local index by a Watch.
// Every method is safe for concurrent use; none waits on etcd except
// Close (bounded by Spec.DialTimeout).
type Catalog struct {
	spec Spec
	log  *slog.Logger
	cli  *clientv3.Client

	ctx    context.Context // ends at Close; every background call derives from it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	kick   chan struct{} // Advertise and Withdraw wake the flusher (capacity 1)

	// lease is the membership lease (a clientv3.LeaseID) while this
	// Manager is registered, else 0. The session goroutine stores it; the
	// flusher writes inventory under it; Close revokes it.
	lease atomic.Int64
	// lastLease is the latest lease granted, kept after a lost keep-alive:
	// Close revokes it too, as its records may still hang on it.
	lastLease atomic.Int64

	advertiser // the outbox: what this node advertises (advertise.go)
	index      // the other Managers' members and advertisements (index.go)
	watch      watchState

	st counters
}

// Open validates s (each field outside its limit is a *limit.Error naming
// catalog.Field) and starts the catalog: registration, keep-alive, the
// Watch of the other Managers and the flushing of advertisements all run
// in the background and retry on their own, so Open returns at once even
// when no etcd endpoint answers (the etcd client dials lazily). ctx bounds
// Open only; the catalog lives until Close.
func Open(ctx context.Context, s Spec) (*Catalog, error) {
	s = s.withDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            s.Endpoints,
		DialTimeout:          s.DialTimeout,
		DialKeepAliveTime:    5 * time.Second, // etcd's server refuses pings more often than 5s
		DialKeepAliveTimeout: s.DialTimeout,
		TLS:                  s.TLS,
		Logger:               zap.NewNop(),
		// Reconnect within a second of an etcd member coming back:
		// grpc's default backoff grows to two minutes.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: s.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: etcd client for %v: %w", s.Endpoints, err)
	}
	c := &Catalog{spec: s, log: s.Logger.With(slog.String("component", "catalog")), cli: cli, kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.advertiser.init(s)
	c.index.init()
	c.watch.init()
	c.wg.Add(3)
	go c.sessionLoop()
	go c.flushLoop()
	go c.watchLoop()
	c.log.Info("catalog open", slog.Any("endpoints", s.Endpoints), slog.String("prefix", s.Prefix),
		slog.String("node", s.Self.NodeID), slog.Uint64("epoch", s.Self.Epoch), slog.Int("shards", s.Shards),
		slog.Uint64("advertise_budget_bytes", s.AdvertiseBudgetBytes), slog.Duration("lease_ttl", s.LeaseTTL))
	return c, nil
}

// Self returns this Manager's member record, as Spec.Self gave it.
func (c *Catalog) Self() Member { return c.spec.Self }

// Close stops the background goroutines and revokes the membership lease
// (the latest granted, even one whose keep-alive was lost),
// which removes this Manager's member record and every advertisement from
// etcd at once (the others' Watches see them go). With etcd unreachable
// the revoke gives up after Spec.DialTimeout and the records go at lease
// expiry instead; the error says so. Advertise and Withdraw do nothing
// after Close; Owners and Members answer from the last index.
func (c *Catalog) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	var err error
	c.lease.Store(0)
	if id := clientv3.LeaseID(c.lastLease.Load()); id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.spec.DialTimeout)
		if _, rerr := c.cli.Revoke(ctx, id); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("catalog: revoking the membership lease (its records go at its expiry, within %v): %w", c.spec.LeaseTTL, rerr)
		}
		cancel()
	}
	if cerr := c.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) && err == nil {
		err = fmt.Errorf("catalog: closing the etcd client: %w", cerr)
	}
	c.log.Info("catalog closed", slog.Any("err", err))
	return err
}

// opCtx is the context of one background etcd call.
func (c *Catalog) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.spec.DialTimeout)
}

// sleep waits d or until Close; false at Close.
func (c *Catalog) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retry is a capped exponential backoff with jitter for the background
// loops: 100ms doubling to max.
type retry struct {
	next, max time.Duration
}

func newRetry(max time.Duration) retry { return retry{next: 100 * time.Millisecond, max: max} }

func (r *retry) delay() time.Duration {
	d := r.next
	r.next = min(2*r.next, r.max)
	return d/2 + rand.N(d/2+1)
}

func (r *retry) reset() { r.next = 100 * time.Millisecond }
