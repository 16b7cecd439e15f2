package cache

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): a Service owns its RAM tier's arenas, its SSD
// store's files and the registered client buffers' memfds, and closing it
// (or a failed open) must release every one.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "cache", 0, nil))
}
