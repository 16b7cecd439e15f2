package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// Suffix is appended to the bootstrap socket's path to name the operator
// socket when Config.Path is not given (manager.Spec.OperatorSocket).
const Suffix = ".operator"

// MaxPathBytes is the longest socket path (sun_path holds 108 bytes with
// the terminating NUL).
const MaxPathBytes = 107

// Config configures the operator socket; a plain value.
type Config struct {
	Path string // socket path (at most MaxPathBytes)
	// GID is the operator group: -1 makes the socket 0600 (root only, and
	// the Manager's uid with AdmitManagerUID); a group id makes it 0660 and
	// owned by that group, whose members are then allowed too.
	GID int
	// AdmitManagerUID admits processes of the Manager's own uid (Policy).
	AdmitManagerUID bool
	Service         operatorpb.OperatorServer
	// Gate, when set, is asked before every authorized call; an error
	// (a gRPC status) is the call's answer. The Manager refuses calls with
	// it while it starts, so the socket can be bound early.
	Gate   func() error
	Logger *slog.Logger
}

// Server is the operator socket being served.
type Server struct {
	grpc   *grpc.Server
	lim    *connLimiter
	remove func()
	done   chan struct{}
	// closing is set when Close begins: Serve's return after it is the
	// stop asked for, not a failure.
	closing atomic.Bool
}

// Listen binds the operator socket (unixsock.Listen: mode 0600,
// or 0660 and group GID, before listen) and serves c.Service on it on its
// own goroutine until Close. Errors name the path.
func Listen(c Config) (*Server, error) {
	if c.Path == "" || len(c.Path) > MaxPathBytes {
		return nil, fmt.Errorf("operator socket: path %q: want 1..%d bytes", c.Path, MaxPathBytes)
	}
	if c.Service == nil {
		return nil, errors.New("operator socket: no Service")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	mode := os.FileMode(0o600)
	if c.GID >= 0 {
		mode = 0o660
	}
	ln, remove, err := unixsock.Listen(c.Path, mode, c.GID)
	if err != nil {
		return nil, fmt.Errorf("operator socket: %w", err)
	}
	creds := newPeerCreds(Policy{UID: uint32(os.Geteuid()), GID: c.GID, AdmitUID: c.AdmitManagerUID}, c.Logger)
	lim := newConnLimiter(ln, c.Logger)
	g := grpc.NewServer(grpc.Creds(creds), grpc.ChainUnaryInterceptor(authorize, gate(c.Gate)), grpc.StatsHandler(callCounter{}),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: IdleTimeout, Time: time.Minute, Timeout: 20 * time.Second}))
	operatorpb.RegisterOperatorServer(g, c.Service)
	s := &Server{grpc: g, lim: lim, remove: remove, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// Close before Serve began (a start that failed after the
		// socket was bound) gives grpc.ErrServerStopped: no failure.
		switch err := g.Serve(lim); {
		case err == nil:
		case s.closing.Load() || errors.Is(err, grpc.ErrServerStopped):
			c.Logger.Debug("operator socket stopped", slog.Any("err", err))
		default:
			c.Logger.Error("operator socket stopped", slog.Any("err", err))
		}
	}()
	return s, nil
}

// HandshakeTimeout bounds a new connection's handshake and HTTP/2
// preface; a peer that sends nothing is closed after it.
const HandshakeTimeout = 5 * time.Second

// IdleTimeout is how long a connection without a call in flight stays
// open before the server closes it (gRPC MaxConnectionIdle).
const IdleTimeout = 5 * time.Minute

// closeGrace is how long Close lets calls in flight finish (a Drain's
// reply is written after its handler returned) before cutting them off.
const closeGrace = 2 * time.Second

// Close stops accepting, closes at once every connection without a call
// in flight (idle ones, and those not past their handshake or preface, so
// an operator client never holds shutdown up), lets calls in flight finish
// for at most closeGrace, then cuts the rest off and removes the socket.
func (s *Server) Close() {
	s.closing.Store(true)
	graceful := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(graceful) }()
	s.lim.closeIdle()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-graceful:
	case <-t.C:
		s.lim.closeAll()
		s.grpc.Stop()
		<-graceful
	}
	<-s.done
	s.remove()
}

// Open is how many connections the operator socket holds (at most
// MaxConns).
func (s *Server) Open() int { return s.lim.open() }

// gate is the interceptor asking Config.Gate (nil: every call passes).
func gate(g func() error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if g != nil {
			if err := g(); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}
