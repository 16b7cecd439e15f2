package operator

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// childEnv names the socket a child copy of the test binary calls Health
// on (the peer-credential tests start it as another uid).
const childEnv = "ORBITKV_OPERATOR_TEST_CHILD"

// TestMain runs the child's call when asked to, and otherwise fails the
// package when a test leaves a file descriptor open (CONVENTIONS.md #15):
// a Server owns its listener and connections.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(childHealth(path))
	}
	os.Exit(fdcheck.Run(m, "operator", 0, nil))
}

// childHealth calls Health on the operator socket at path and prints "ok
// <status>" or "error: <err>".
func childHealth(path string) int {
	c, cc, err := Dial(path)
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := c.Health(ctx, &operatorpb.HealthRequest{})
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	fmt.Println("ok", h.Status)
	return 0
}
