package lifecycle

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open: the
// codec owns fds received with frames and must close every one on error.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "lifecycle", 0, func() {
		if devNull != nil {
			devNull.Close()
		}
	}))
}

// socketpair returns both ends of a connected AF_UNIX SOCK_STREAM pair, the
// socket type of the bootstrap socket; both are closed when tb ends.
func socketpair(tb testing.TB) (*net.UnixConn, *net.UnixConn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("socketpair: %v", err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), fmt.Sprintf("socketpair-%d", i))
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			tb.Fatalf("FileConn: %v", err)
		}
		conns[i] = c.(*net.UnixConn)
	}
	tb.Cleanup(func() {
		conns[0].Close()
		conns[1].Close()
	})
	return conns[0], conns[1]
}

// rawHeader encodes a header with arbitrary field values.
func rawHeader(code Code, epoch uint64, length uint32) []byte {
	return NewHeader(code, epoch, length).AppendTo(nil)
}
