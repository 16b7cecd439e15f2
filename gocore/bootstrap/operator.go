package bootstrap

import (
	"net"
	"os"
)

// ListenOperator creates a Unix socket at path as Listen does (the
// directory rule of ErrUnsafeDir, a live socket is ErrInUse, a dead one is
// removed, a non-socket is ErrNotSocket), but with mode mode (0600 or
// 0660) and, when gid >= 0, group gid, both set before listen(2) so that
// nobody connects through the umask's mode. It is the operator socket's
// listener (gocore/operator), which is never handed to engines. remove
// deletes the path only while it is still the socket made here.
func ListenOperator(path string, mode os.FileMode, gid int) (l *net.UnixListener, remove func(), err error) {
	l, own, err := listenMode(path, mode, gid)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { removeIfSame(path, own) }, nil
}
