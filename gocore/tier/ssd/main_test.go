package ssd

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails the package when a test leaves a file descriptor open:
// the store owns two files and every error path of Open must close them.
func TestMain(m *testing.M) {
	// The runtime opens its netpoller's fds (epoll and an eventfd) with the
	// first pollable file; open them now so they are not counted as leaked.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ssd test: counting fds:", err)
		os.Exit(1)
	}
	code := m.Run()
	after, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ssd test: counting fds:", err)
		os.Exit(1)
	}
	if code == 0 && after != before {
		fmt.Fprintf(os.Stderr, "ssd test: %d fds open before the tests, %d after: a test leaked fds\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// openFDs counts the entries of /proc/self/fd (minus the one ReadDir opens).
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil
}
