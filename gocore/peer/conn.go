package peer

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
)

// peerConn is one authenticated gRPC connection from a peer. Its fields
// after node and addr are guarded by Server.mu.
type peerConn struct {
	node string // the client certificate's node id
	addr string // remote host:port

	ended     bool                // ConnEnd seen: no transfer may be added
	transfers map[uint64]struct{} // open transfers opened on it
}

// authInfo is the TLS handshake's result with the connection it belongs
// to; gRPC hands it to every call (peer.FromContext) and to the stats
// handler's TagConn.
type authInfo struct {
	credentials.TLSInfo
	conn *peerConn
}

// mtls is the server's transport credentials: the standard TLS handshake,
// then the node id read off the verified client certificate; a handshake
// without one is refused and logged.
type mtls struct {
	credentials.TransportCredentials
	s *Server
}

// ServerHandshake runs the TLS handshake (which verifies the client's
// certificate against ClientCAs) and reads the peer's node id.
func (m mtls) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	addr := raw.RemoteAddr().String()
	conn, info, err := m.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		m.s.refused(addr, err)
		return nil, nil, err
	}
	ti, ok := info.(credentials.TLSInfo)
	var node string
	if ok {
		node, err = stateNodeID(ti)
	} else {
		err = fmt.Errorf("%w: no TLS state", ErrUnauthenticated)
	}
	if err != nil {
		conn.Close()
		m.s.refused(addr, err)
		return nil, nil, err
	}
	if g, ok := raw.(*gateConn); ok {
		g.authenticated() // never closed for a newcomer from here on
	}
	m.s.st.connections.Add(1)
	m.s.log.Info("peer connected", slog.String("node", node), slog.String("addr", addr))
	return conn, authInfo{TLSInfo: ti, conn: &peerConn{node: node, addr: addr, transfers: map[uint64]struct{}{}}}, nil
}

// Clone keeps the wrapper around the clone.
func (m mtls) Clone() credentials.TransportCredentials {
	return mtls{TransportCredentials: m.TransportCredentials.Clone(), s: m.s}
}

// stateNodeID is the node id of a verified TLS client: the subject common
// name of the leaf of its first verified chain.
func stateNodeID(ti credentials.TLSInfo) (string, error) {
	if len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("%w: no verified client certificate", ErrUnauthenticated)
	}
	return CertNodeID(ti.State.VerifiedChains[0][0])
}

// connOf is the authenticated connection of a call.
func connOf(ctx context.Context) (*peerConn, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: no peer", ErrUnauthenticated)
	}
	ai, ok := p.AuthInfo.(authInfo)
	if !ok || ai.conn == nil {
		return nil, fmt.Errorf("%w: no verified client certificate", ErrUnauthenticated)
	}
	return ai.conn, nil
}

// connHandler is the gRPC server's stats.Handler: at ConnEnd it releases
// every transfer opened on the connection that ended.
type connHandler struct{ s *Server }

type connKey struct{}

// TagConn keeps the connection's peerConn in the connection's context
// (gRPC has put the handshake's peer there already).
func (h connHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	if c, err := connOf(ctx); err == nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// HandleConn releases the transfers of an ended connection.
func (h connHandler) HandleConn(ctx context.Context, cs stats.ConnStats) {
	if _, ok := cs.(*stats.ConnEnd); !ok {
		return
	}
	if c, ok := ctx.Value(connKey{}).(*peerConn); ok {
		n := h.s.endConn(c)
		h.s.log.Info("peer disconnected", slog.String("node", c.node), slog.String("addr", c.addr), slog.Int("transfers_released", n))
	}
}

// TagRPC passes the call's context on.
func (connHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC ignores calls.
func (connHandler) HandleRPC(context.Context, stats.RPCStats) {}

// refusalLogsPerSecond bounds the log lines of refused handshakes, so a
// scanner cannot flood the log; the rest are counted (Stats).
const refusalLogsPerSecond = 5

// refused counts and logs a refused handshake.
func (s *Server) refused(addr string, err error) {
	s.st.refusedHandshakes.Add(1)
	s.refusals.Log(s.log, slog.LevelWarn, "peer refused", slog.String("addr", addr), slog.Any("err", err))
}
