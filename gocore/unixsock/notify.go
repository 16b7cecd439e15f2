package unixsock

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Notify sends state (newline-separated KEY=VALUE assignments of systemd's
// notify protocol, sd_notify(3)) to the datagram socket at path (systemd's
// NOTIFY_SOCKET; a name starting with '@' is an abstract socket, as
// x/sys/unix reads it), with
// files passed as SCM_RIGHTS: how a service hands fds to systemd's file
// descriptor store ("FDSTORE=1\nFDNAME=..."). The files stay open here.
// Errors: the socket cannot be reached, or the datagram was refused
// (ECONNREFUSED, EAGAIN), each naming path.
func Notify(path, state string, files ...*os.File) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Sendmsg(fd, []byte(state), Rights(files...), &unix.SockaddrUnix{Name: path}, 0); err != nil {
		return fmt.Errorf("notify socket %s: %w", path, err)
	}
	return nil
}

// Rights is the SCM_RIGHTS control message that passes files' descriptors
// with a message (nil for none).
func Rights(files ...*os.File) []byte {
	if len(files) == 0 {
		return nil
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return unix.UnixRights(fds...)
}
