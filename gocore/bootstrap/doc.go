// Package bootstrap is the Manager's Unix-socket front door (docs/design.md §5.1,
// bootstrap protocol version 2).
//
// Listen derives nothing and trusts nothing about the path it is given:
//   - the socket is bound, chmod'ed to 0600 and only then put in listen
//     state, so there is no moment in which a peer could connect through a
//     wider mode (connect(2) to a bound, non-listening socket is refused);
//   - an existing socket at the path that accepts a connection belongs to a
//     live Manager: Listen refuses with ErrInUse; one that refuses is dead and
//     is removed; a regular file (or anything not a socket) is never deleted
//     (ErrNotSocket).
//
// Per connection (Server.serveConn):
//  1. SO_PEERCRED: a peer whose uid differs from the Manager's is refused
//     with a reply and a log line naming the uid.
//  2. Hello (96 bytes, abi.DecodeHello) within HelloTimeout; a client that
//     connects and sends nothing is closed when it expires.
//  3. The session is created (gocore/session), attached to the dispatcher,
//     and the reply (208 bytes) travels with SCM_RIGHTS carrying the slot
//     memfd, the session eventfd and the doorbell memfd, in that order.
//  4. Lifecycle frames (gocore/lifecycle): RegisterInstance,
//     RegisterBuffers (+fds), Health, WatchSession, Unregister. A malformed
//     frame (bad header, stale epoch, oversize or truncated body, unknown
//     code, undecodable protobuf) closes the connection; an application error
//     is answered with an error frame and the connection stays.
//  5. Socket close means process death: the session is detached from the
//     dispatcher and its resources released at once.
//
// Importers: cmd/orbitkv-manager and tests.
package bootstrap
