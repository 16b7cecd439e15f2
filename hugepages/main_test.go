package hugepages_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when a test leaves an fd open or an arena
// mapped (CONVENTIONS.md #15): every Arena owns a memfd and a mapping, and
// a leaked hugetlb arena would also keep its pages out of the pool.
func TestMain(m *testing.M) {
	warmPoller()
	before, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hugepages test: counting fds:", err)
		os.Exit(1)
	}
	code := m.Run()
	after, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hugepages test: counting fds:", err)
		os.Exit(1)
	}
	if code == 0 && after != before {
		fmt.Fprintf(os.Stderr, "hugepages test: %d fds open before the tests, %d after: a test leaked fds\n", before, after)
		code = 1
	}
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil && code == 0 {
		for _, l := range strings.Split(string(maps), "\n") {
			if strings.Contains(l, "memfd:okv-test") {
				fmt.Fprintf(os.Stderr, "hugepages test: an arena is still mapped: %s\n", l)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// warmPoller makes the runtime open its netpoller fds (epoll, eventfd),
// which stay open for the life of the process, before the "before" count.
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
