// Package fdcheck is a test helper shared by the packages that own file
// descriptors (CONTRIBUTING.md habit 15): their TestMain runs the tests through
// Run, which fails the run when the tests leave descriptors open.
//
// It lives in the module root's internal/, not in gocore/internal/: Go's
// internal rule lets every package of the module import it, hugepages/ and
// test/ included (gocore/internal/ would refuse hugepages/), and nothing
// outside the module. Only tests import it; the Manager binary does not
// depend on it.
package fdcheck

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Run opens the runtime's netpoller descriptors (epoll and an eventfd,
// opened with the first pollable file and kept for the life of the
// process), counts /proc/self/fd, runs m, runs cleanup (may be nil), and
// counts again, allowing up to settle for descriptors the runtime closes
// asynchronously (network connections; a collection runs between counts, for
// pooled descriptors such as splice pipes). It returns m's exit code, or 1
// when the count grew or could not be taken; the report names pkg and
// lists the open descriptors. Call it as os.Exit(fdcheck.Run(m, ...)).
func Run(m *testing.M, pkg string, settle time.Duration, cleanup func()) int {
	if r, w, err := os.Pipe(); err == nil {
		r.SetReadDeadline(time.Now())
		r.Close()
		w.Close()
	}
	before, err := Count()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s test: counting fds: %v\n", pkg, err)
		return 1
	}
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	after := before
	for deadline := time.Now().Add(settle); ; time.Sleep(10 * time.Millisecond) {
		if after, err = Count(); err != nil || after <= before || !time.Now().Before(deadline) {
			break
		}
		// Pooled descriptors the runtime closes only when a collection
		// empties their pool (internal/poll's splice pipes, taken by an
		// io.Copy between TCP connections) are not leaks.
		runtime.GC()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s test: counting fds: %v\n", pkg, err)
		return 1
	}
	if code == 0 && after != before {
		fmt.Fprintf(os.Stderr, "%s test: %d fds open before the tests, %d after: a test leaked fds\n", pkg, before, after)
		list()
		return 1
	}
	return code
}

// Count returns the number of open descriptors of this process (the
// entries of /proc/self/fd, minus the one reading the directory opens).
func Count() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents) - 1, nil
}

// list prints every open descriptor and what it refers to.
func list() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(os.Stderr, "  fd %s -> %s\n", e.Name(), target)
	}
}
