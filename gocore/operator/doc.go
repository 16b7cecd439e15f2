// Package operator serves the Manager's operator API (proto/operator.proto:
// Sessions, Stats, Health, Evict, Flush, Drain) by gRPC on the operator
// socket, a Unix socket of its own path that is never handed to engines
// (engines use the bootstrap socket, gocore/bootstrap). orbitkvctl is its
// client (Dial). It owns the socket, the peer check and the gRPC server;
// the commands themselves are the caller's operatorpb.OperatorServer
// (gocore/manager's, which runs whatever touches cache state on the
// dispatcher goroutine). Only gocore/manager and cmd/ import it.
//
// # Trust model
//
// Loopback TCP carries no peer credentials, so it cannot authorise evict,
// flush or drain: the HTTP endpoint stays read-only. The operator socket
// authorises by two independent checks:
//
//   - its mode: 0600 (the Manager's uid only), or 0660 and group-owned by
//     the operator group (Config.GID), set before listen(2), in a directory
//     another user cannot replace it in (unixsock.Listen);
//   - the peer's credentials, read on every connection in the gRPC
//     server handshake (SO_PEERCRED: pid, uid, gid; SO_PEERGROUPS: the
//     supplementary groups, both as they were at connect(2), so no pid
//     reuse race; /proc/PID/status "Groups:" only where the kernel lacks
//     SO_PEERGROUPS): root, the Manager's uid, or a member of the operator
//     group (primary or supplementary) is allowed, anyone else is refused.
//
// A refused peer's every call answers codes.PermissionDenied with a message
// naming its uid and who is allowed, and the Manager logs one line per
// refused connection, at most refusalBurst a second; the connection is
// closed right after its first call's reply (refusedLinger at most).
//
// # Limits
//
// The socket holds at most MaxConns connections, MaxConnsPerUID per peer
// uid; one beyond is closed at accept and logged (rate-limited), so a peer
// cannot take the Manager's file descriptors from the bootstrap socket. A
// connection must finish its handshake and HTTP/2 preface within
// HandshakeTimeout and is closed after IdleTimeout without a call.
// Server.Close closes every connection without a call in flight at once,
// so an operator client never holds the Manager's shutdown up.
//
// # Wire
//
// gRPC (HTTP/2) over the Unix socket, without TLS: the kernel vouches for
// the peer. Messages are operatorpb's; orbitkvctl prints them with
// protojson, so 64-bit integers are JSON strings.
package operator
