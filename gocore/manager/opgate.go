package manager

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// startGate serves the operator socket from New's first steps (so a bad
// --operator-socket fails before the RAM tier is committed) but answers
// every command Unavailable, saying what the Manager is doing, until it
// serves: the commands read the cache, which New is still making. The
// readiness lock orders New's writes before the first command that passes.
type startGate struct {
	operatorpb.OperatorServer
	ready *readiness
}

func (g startGate) check() error {
	if phase, why := g.ready.get(); phase == PhaseStarting {
		return status.Errorf(codes.Unavailable, "the Manager is starting: %s", why)
	}
	return nil
}

func (g startGate) Sessions(ctx context.Context, r *operatorpb.SessionsRequest) (*operatorpb.SessionsReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Sessions(ctx, r)
}

func (g startGate) Stats(ctx context.Context, r *operatorpb.StatsRequest) (*operatorpb.StatsReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Stats(ctx, r)
}

func (g startGate) Health(ctx context.Context, r *operatorpb.HealthRequest) (*operatorpb.HealthReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Health(ctx, r)
}

func (g startGate) Evict(ctx context.Context, r *operatorpb.EvictRequest) (*operatorpb.EvictReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Evict(ctx, r)
}

func (g startGate) Flush(ctx context.Context, r *operatorpb.EvictRequest) (*operatorpb.EvictReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Flush(ctx, r)
}

func (g startGate) Drain(ctx context.Context, r *operatorpb.DrainRequest) (*operatorpb.DrainReply, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.OperatorServer.Drain(ctx, r)
}
