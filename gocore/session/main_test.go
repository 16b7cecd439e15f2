package session

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): every session owns a slot memfd and an eventfd, and
// freeing it, or failing to create it, must close both.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "session", 0, nil))
}
