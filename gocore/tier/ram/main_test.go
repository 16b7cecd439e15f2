package ram

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): an Arena owns a memfd (and its mapping), and
// Close, or a failed New, must close it.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "ram", 0, nil))
}
