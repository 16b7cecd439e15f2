package channel

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveGRPCPeer serves google.golang.org/grpc/health on 127.0.0.1:0 and
// prints the port on stdout. It returns when stdin reaches EOF (the bench
// closed it), when the parent is gone, or after idle without a Check.
func serveGRPCPeer(parent int, idle time.Duration, stdout io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("grpc peer: %w", err)
	}
	srv := grpc.NewServer()
	hs := &countingHealth{Server: health.NewServer()}
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	fmt.Fprintf(stdout, "%d\n", lis.Addr().(*net.TCPAddr).Port)

	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := hs.calls.Load(), time.Now()
	for {
		select {
		case <-eof:
			srv.Stop()
			return nil
		case <-tick.C:
		}
		if os.Getppid() != parent {
			srv.Stop()
			return nil
		}
		if c := hs.calls.Load(); c != last {
			last, lastChange = c, time.Now()
		} else if time.Since(lastChange) > idle {
			srv.Stop()
			return fmt.Errorf("grpc peer: no Check for %v; exiting", idle)
		}
	}
}

// countingHealth counts Check calls so an idle peer can exit.
type countingHealth struct {
	*health.Server
	calls atomic.Uint64
}

func (h *countingHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	return h.Server.Check(ctx, req)
}

// grpcSubject is the parent's end of the grpc baseline: a unary health
// Check on loopback, timed in Go.
type grpcSubject struct {
	conn   *grpc.ClientConn
	client healthpb.HealthClient
}

func dialGRPC(port int) (*grpcSubject, error) {
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dialing the grpc peer: %w", err)
	}
	return &grpcSubject{conn: conn, client: healthpb.NewHealthClient(conn)}, nil
}

func (g *grpcSubject) check() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := g.client.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("grpc health Check: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health Check: status %v", resp.GetStatus())
	}
	return nil
}

// measure mirrors okvb_measure in Go: warmup untimed calls, then len(out)
// timed ones (monotonic clock, ns); period > 0 sleeps until the next
// absolute tick start+k·period before each call.
func (g *grpcSubject) measure(warmup int, period time.Duration, out []uint64) error {
	start := time.Now()
	for i := 0; i < warmup+len(out); i++ {
		if period > 0 {
			if d := time.Until(start.Add(time.Duration(i+1) * period)); d > 0 {
				time.Sleep(d)
			}
		}
		t0 := time.Now()
		if err := g.check(); err != nil {
			return err
		}
		if i >= warmup {
			out[i-warmup] = uint64(time.Since(t0).Nanoseconds())
		}
	}
	return nil
}

func (g *grpcSubject) close() { _ = g.conn.Close() }
