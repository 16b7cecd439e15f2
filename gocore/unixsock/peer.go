package unixsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Cred is the process at the other end of a Unix socket connection, as the
// kernel recorded it at connect(2) (SO_PEERCRED). In a user namespace the
// ids are as mapped into the Manager's; an unmapped one reads as the
// overflow id.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// PeerCred reads c's peer credentials (getsockopt SO_PEERCRED). Errors:
// the connection's (closed), or the getsockopt error wrapped as
// "SO_PEERCRED: %w".
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var uc *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		uc, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if credErr != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}
