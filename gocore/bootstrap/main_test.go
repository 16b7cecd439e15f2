package bootstrap_test

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// childSocketEnv, when set, makes the test binary act as a bootstrap client
// of that socket instead of running tests (TestPeerWithAnotherUIDIsRefused
// re-executes it under another uid).
const childSocketEnv = "OKV_BOOTSTRAP_TEST_CHILD_SOCKET"

// TestMain runs the child client when asked to, and otherwise fails the
// package when a test leaves a file descriptor open (CONVENTIONS.md #15):
// sessions own memfds, eventfds and sockets, and every one must be closed
// by the time its scenario ends.
func TestMain(m *testing.M) {
	if path := os.Getenv(childSocketEnv); path != "" {
		os.Exit(runChildClient(path))
	}
	warmPoller()
	before, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap test: counting fds:", err)
		os.Exit(1)
	}
	code := m.Run()
	// Connections close asynchronously in the runtime's poller; give the last
	// ones a moment before counting.
	after := before
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if after, err = openFDs(); err != nil || after <= before || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap test: counting fds:", err)
		os.Exit(1)
	}
	if code == 0 && after != before {
		fmt.Fprintf(os.Stderr, "bootstrap test: %d fds open before the tests, %d after: a test leaked fds\n", before, after)
		listFDs()
		code = 1
	}
	os.Exit(code)
}

// warmPoller makes the runtime open its netpoller fds (epoll, eventfd), which
// stay open for the life of the process, before the "before" count.
func warmPoller() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	r.SetReadDeadline(time.Now())
	r.Close()
	w.Close()
}

// openFDs counts the entries of /proc/self/fd (minus the one ReadDir opens).
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil
}

func listFDs() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(os.Stderr, "  fd %s -> %s\n", e.Name(), target)
	}
}
