// Package admission decides which connections a listener keeps when
// anyone who can reach its port may connect: a Pool counts the open
// connections, all hosts together and per remote host, and holds those
// not yet proven (no TLS certificate verified, no capability presented)
// oldest first. A newcomer is made room for by closing unproven
// connections only: the host's own oldest at its per-host bound, else the
// oldest of the host with the most unproven. Proven connections are never
// closed for a newcomer, so idle connections that never prove anything
// cannot lock a legitimate client out: an attacker would have to outnumber
// the client's unproven connections from every address it holds.
//
// Peer control's listener (gocore/peer: proven = TLS handshake done) and
// the transfer engine's data port (gocore/transfer: proven = a READ passed
// its capability check) both admit connections through it. It owns no
// connection and closes nothing: Admit names the victims, the caller
// closes them. It imports only the standard library; any package may
// import it.
package admission
