package operator

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// refusalBurst is how many refused connections are logged per second; the
// rest are counted and reported on the next line logged.
const refusalBurst = 10

// authInfo carries a connection's peer and the policy's verdict from the
// handshake to every call on it.
type authInfo struct {
	credentials.CommonAuthInfo
	peer    Peer
	refused error // nil: allowed
}

func (authInfo) AuthType() string { return "peercred" }

// peerCreds is the gRPC server's TransportCredentials: the handshake reads
// the peer's credentials and judges them by the policy (no TLS: the kernel
// vouches for the peer of a Unix socket). A refused connection is kept so
// that its calls get a clear PermissionDenied instead of a reset.
type peerCreds struct {
	pol Policy
	log *slog.Logger

	mu         sync.Mutex
	start      time.Time
	logged     int
	suppressed int
}

func (c *peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, nil, errors.New("operator socket: not a Unix connection")
	}
	p, err := peerOf(uc)
	if err != nil {
		c.warn(slog.String("reason", "peer credentials unreadable"), slog.Any("err", err))
		return nil, nil, err
	}
	info := authInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, peer: p, refused: c.pol.Check(p)}
	if info.refused != nil {
		c.warn(slog.Int("pid", int(p.PID)), slog.Uint64("uid", uint64(p.UID)), slog.Uint64("gid", uint64(p.GID)),
			slog.Uint64("manager_uid", uint64(c.pol.UID)), slog.Int("operator_gid", c.pol.GID))
	}
	return conn, info, nil
}

// warn logs a refused connection, at most refusalBurst lines a second.
func (c *peerCreds) warn(attrs ...any) {
	now := time.Now()
	c.mu.Lock()
	if now.Sub(c.start) >= time.Second {
		if c.suppressed > 0 {
			attrs = append(attrs, slog.Int("suppressed_last_second", c.suppressed))
		}
		c.start, c.logged, c.suppressed = now, 0, 0
	}
	if c.logged >= refusalBurst {
		c.suppressed++
		c.mu.Unlock()
		return
	}
	c.logged++
	c.mu.Unlock()
	c.log.Warn("operator socket refused a connection", attrs...)
}

func (c *peerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("operator: server-side credentials only")
}

func (c *peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

func (c *peerCreds) Clone() credentials.TransportCredentials {
	return &peerCreds{pol: c.pol, log: c.log}
}

func (c *peerCreds) OverrideServerName(string) error { return nil }

// authorize refuses every call of a connection the handshake refused.
func authorize(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.PermissionDenied, "operator socket: no peer credentials")
	}
	info, ok := pr.AuthInfo.(authInfo)
	if !ok {
		return nil, status.Error(codes.PermissionDenied, "operator socket: no peer credentials")
	}
	if info.refused != nil {
		return nil, status.Error(codes.PermissionDenied, info.refused.Error())
	}
	return next(ctx, req)
}
