package manager

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): a Manager owns the bootstrap socket, the HTTP
// listener, the RAM tier's memfd and every session's fds, and New's error
// paths must close what they opened. Idle HTTP client connections are
// closed first: they are the test's, not the Manager's.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "manager", 100*time.Millisecond, func() {
		http.DefaultClient.CloseIdleConnections()
	}))
}
