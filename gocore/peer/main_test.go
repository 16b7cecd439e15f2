package peer

import (
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): a Server owns its listener and connections, a
// Client its connection. gRPC closes connections asynchronously, hence the
// settle time.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "peer", 3*time.Second, nil))
}
