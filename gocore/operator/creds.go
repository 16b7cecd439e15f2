package operator

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// refusalBurst is how many refused (or over-limit) connections are logged
// per second; the rest are counted and reported on the next line logged.
const refusalBurst = 10

// authInfo carries a connection's peer and the policy's verdict from the
// handshake to every call on it.
type authInfo struct {
	credentials.CommonAuthInfo
	peer    Peer
	refused error // nil: allowed
	conn    *conn
}

func (authInfo) AuthType() string { return "peercred" }

// peerCreds is the gRPC server's TransportCredentials: the handshake judges
// the peer the listener read (connLimiter) by the policy (no TLS: the
// kernel vouches for the peer of a Unix socket). A refused connection is
// kept for refusedLinger, and closed right after its first call's reply,
// so that the call gets a clear PermissionDenied instead of a reset.
type peerCreds struct {
	pol     Policy
	log     *slog.Logger
	refusal *rateLog
}

func newPeerCreds(pol Policy, log *slog.Logger) *peerCreds {
	return &peerCreds{pol: pol, log: log, refusal: newRateLog(log, "operator socket refused a connection")}
}

func (c *peerCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cn, ok := raw.(*conn)
	if !ok {
		return nil, nil, errors.New("operator socket: not a counted Unix connection")
	}
	if cn.peerErr != nil {
		c.refusal.warn(slog.String("reason", "peer credentials unreadable"), slog.Any("err", cn.peerErr))
		return nil, nil, cn.peerErr
	}
	p := cn.peer
	info := authInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, peer: p, refused: c.pol.Check(p), conn: cn}
	if info.refused != nil {
		time.AfterFunc(refusedLinger, func() { cn.Close() })
		c.refusal.warn(slog.Int("pid", int(p.PID)), slog.Uint64("uid", uint64(p.UID)), slog.Uint64("gid", uint64(p.GID)),
			slog.Uint64("manager_uid", uint64(c.pol.UID)), slog.Int("operator_gid", c.pol.GID))
	}
	return raw, info, nil
}

func (c *peerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("operator: server-side credentials only")
}

func (c *peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

func (c *peerCreds) Clone() credentials.TransportCredentials {
	return newPeerCreds(c.pol, c.log)
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

// replyFlush is how long after a refused call ended its connection is
// closed: the status frame is queued when the call ends and written by the
// transport's writer goroutine just after.
const replyFlush = 50 * time.Millisecond

// callCounter is the gRPC server's stats.Handler: it counts each
// connection's calls in flight (Begin to End, End coming after the reply
// was queued), which Server.Close lets finish, and closes a refused
// peer's connection right after its call's reply.
type callCounter struct{}

func (callCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (callCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (callCounter) HandleConn(context.Context, stats.ConnStats) {}

func (callCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	info, ok := pr.AuthInfo.(authInfo)
	if !ok || info.conn == nil {
		return
	}
	switch s.(type) {
	case *stats.Begin:
		info.conn.calls.Add(1)
	case *stats.End:
		info.conn.calls.Add(-1)
		if info.refused != nil {
			time.AfterFunc(replyFlush, func() { info.conn.Close() })
		}
	}
}
