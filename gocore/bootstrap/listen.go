package bootstrap

import (
	"fmt"
	"net"
	"os"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// The errors of Listen, as gocore/unixsock defines them (errors.Is matches
// either name).
var (
	// ErrInUse means a live Manager already serves the socket path.
	ErrInUse = unixsock.ErrInUse
	// ErrNotSocket means the path exists and is not a socket; it is never
	// deleted.
	ErrNotSocket = unixsock.ErrNotSocket
	// ErrUnsafeDir means the socket's directory, or one above it, lets
	// another user replace the socket (unixsock.ErrUnsafeDir).
	ErrUnsafeDir = unixsock.ErrUnsafeDir
	// ErrNotOurs means the path, after bind(2), is not the Manager's own
	// 0600 socket: something swapped it meanwhile.
	ErrNotOurs = unixsock.ErrNotOurs
)

// Listen creates the bootstrap socket at path with mode 0600 set before
// listen(2) (unixsock.Listen: the directory must be safe, ErrUnsafeDir; an
// existing live socket gives ErrInUse, a dead one is removed, a non-socket
// gives ErrNotSocket, and after bind the path must be this process's own
// 0600 socket, ErrNotOurs). Errors read "bootstrap: ...".
func Listen(path string) (*net.UnixListener, error) {
	l, _, err := listen(path, 0o600)
	return l, err
}

// listen is Listen with the socket's mode (0600, or 0666 when tenants of
// other uids connect) that also returns the function removing the socket
// path while it is still the file bound here.
func listen(path string, mode os.FileMode) (*net.UnixListener, func(), error) {
	l, remove, err := unixsock.Listen(path, mode, -1)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	return l, remove, nil
}
