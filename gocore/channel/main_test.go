package channel

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): a dispatcher owns the doorbell memfd, and the
// sessions it serves own slot memfds and eventfds; stopping it must close
// them all.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "channel", 0, nil))
}
