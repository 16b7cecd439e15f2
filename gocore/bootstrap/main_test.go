package bootstrap_test

import (
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// childSocketEnv, when set, makes the test binary act as a bootstrap client
// of that socket instead of running tests (TestPeerWithAnotherUIDIsRefused
// re-executes it under another uid).
const childSocketEnv = "OKV_BOOTSTRAP_TEST_CHILD_SOCKET"

// TestMain runs the child client when asked to, and otherwise fails the
// package when a test leaves a file descriptor open (CONTRIBUTING.md habit 15):
// sessions own memfds, eventfds and sockets, and every one must be closed
// by the time its scenario ends.
func TestMain(m *testing.M) {
	if path := os.Getenv(childSocketEnv); path != "" {
		os.Exit(runChildClient(path))
	}
	// Connections close asynchronously in the runtime's poller: allow the
	// last ones 2 s before counting.
	os.Exit(fdcheck.Run(m, "bootstrap", 2*time.Second, nil))
}
