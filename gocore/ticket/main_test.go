package ticket_test

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open
// (CONTRIBUTING.md habit 15): the rigs own a RAM tier's memfd, an SSD
// tier's files and each session's slot memfd and eventfd.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "ticket", 0, nil))
}
