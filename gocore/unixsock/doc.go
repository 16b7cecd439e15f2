// Package unixsock owns the Manager's Unix stream sockets as files and
// their peers as processes: Listen creates a socket only in a directory
// nobody else can rewrite, reclaims a dead socket but never a live one or
// a non-socket, sets the socket's mode (and group) before listen(2) and
// checks after bind that the path is still its own; the remove function
// it returns deletes the path only while it is that very socket. PeerCred
// reads the credentials the kernel recorded for a connected peer
// (SO_PEERCRED).
//
// The bootstrap socket (gocore/bootstrap, 0600) and the operator socket
// (gocore/operator, 0600 or 0660 for the operator group) both listen
// through it. It imports only the standard library and
// golang.org/x/sys/unix: no cgo, so the operator socket does not link the
// C library.
//
// Errors carry no package prefix: each caller wraps them with the name of
// its socket ("bootstrap: %w", "operator socket: %w"); the sentinels are
// matched with errors.Is.
package unixsock
