package lifecycle

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestMain fails the package when a test leaves a file descriptor open: the
// codec owns fds received with frames and must close every one on error.
func TestMain(m *testing.M) {
	before, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle test: counting fds:", err)
		os.Exit(1)
	}
	code := m.Run()
	if devNull != nil {
		devNull.Close()
	}
	after, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle test: counting fds:", err)
		os.Exit(1)
	}
	if code == 0 && after != before {
		fmt.Fprintf(os.Stderr, "lifecycle test: %d fds open before the tests, %d after: a test leaked fds\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// openFDs counts the entries of /proc/self/fd (minus the one ReadDir opens).
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil
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
