package operator

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// childEnv names the socket a child copy of the test binary calls Health
// on (the peer-credential tests start it as another uid).
const childEnv = "ORBITKV_OPERATOR_TEST_CHILD"

// childHoldEnv names the socket a child connects to and holds without a
// word until the server closes it.
const childHoldEnv = "ORBITKV_OPERATOR_TEST_HOLD"

// TestMain runs the child's call when asked to, and otherwise fails the
// package when a test leaves a file descriptor open (CONTRIBUTING.md habit 15):
// a Server owns its listener and connections.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(childHealth(path))
	}
	if path := os.Getenv(childHoldEnv); path != "" {
		os.Exit(childHold(path))
	}
	os.Exit(fdcheck.Run(m, "operator", 0, nil))
}

// childHealth calls Health on the operator socket at path and prints "ok
// <status>" or "error: <err>".
func childHealth(path string) int {
	c, err := Dial(path, NoTrust)
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	defer c.Close()
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

// childHold connects to path, sends nothing, and prints "closed by the
// server" once the server closed the connection (at most 10s).
func childHold(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); !os.IsTimeout(err) {
		fmt.Println("closed by the server:", err)
		return 0
	}
	fmt.Println("error: still open")
	return 0
}
