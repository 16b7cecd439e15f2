package discover

import (
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package if a test leaves a memfd open.
func TestMain(m *testing.M) { os.Exit(fdcheck.Run(m, "discover", 0, nil)) }
