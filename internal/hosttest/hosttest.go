// Package hosttest makes the obstacles on this host that the Manager's
// start-time checks (and --check) must refuse: a RAM tier larger than the
// available memory, a TCP port in use, a Unix socket a live process
// serves. For tests only; each obstacle lasts until the test's cleanup.
package hosttest

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/orbitkv/orbitkv/hugepages"
)

// Obstacles are the values a test passes to the Manager's flags.
type Obstacles struct {
	// TooMuchRAM is a --ram-capacity value 64 GiB above MemAvailable
	// ("86GiB"), in whole GiB.
	TooMuchRAM string
	// TakenTCP is the host:port of a loopback listener held open.
	TakenTCP string
	// LiveSocket is the path of a Unix socket this process listens on.
	LiveSocket string
}

// New makes the obstacles; t's cleanup closes the listeners.
func New(t testing.TB) Obstacles {
	t.Helper()
	_, avail, err := hugepages.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	port, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	live := filepath.Join(t.TempDir(), "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return Obstacles{TooMuchRAM: fmt.Sprintf("%dGiB", avail>>30+64), TakenTCP: port.Addr().String(), LiveSocket: live}
}
