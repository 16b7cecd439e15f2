package ssd

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open:
// the store owns two files and every error path of Open must close them.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "ssd", 0, nil))
}
