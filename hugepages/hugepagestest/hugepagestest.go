// Package hugepagestest lends tests a 2 MiB hugepage pool of a known size
// and gives the host's pool back afterwards.
//
// Reserve and Drain need root: they write the pool size to
// hugepages.NrHugepagesFile (/proc/sys/vm/nr_hugepages when 2 MiB is the
// default size). They save the old size and restore it in the test's
// Cleanup, and hold an exclusive flock(2) on LockPath from the change to the
// restore, so test binaries of different packages, which `go test ./...`
// runs in parallel, take turns instead of restoring each other's values.
// The pool is global: a process outside the lock (a Manager started by
// another package's test with --hugepages prefer) may take lent pages, so a
// test should ask for a margin over what it allocates.
//
// Where the environment lacks something (not root, no 2 MiB pool, a
// read-only sysfs, or memory too fragmented for the pages) they skip the
// test and say why; what the test then does with the pool is its own
// assertion.
//
// Only test code imports this package.
package hugepagestest

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/hugepages"
)

// LockPath is the file whose flock serialises pool changes between test
// processes.
const LockPath = "/tmp/orbitkv-hugepages-test.lock"

const overcommitFile = hugepages.PoolDir + "/nr_overcommit_hugepages"

// Reserve grows the persistent 2 MiB pool by pages, so that at least pages
// hugepages are Available to the test, until its Cleanup restores the old
// size. It returns the pool as it stands after the change. The test is
// skipped when the change cannot be made.
func Reserve(tb testing.TB, pages uint64) hugepages.Pool {
	tb.Helper()
	old := begin(tb)
	p := set(tb, hugepages.NrHugepagesFile, old.Total+pages)
	if p.Available() < pages {
		tb.Skipf("asked for %d more 2 MiB hugepages, the pool grew from %d to %d and %d are available (memory short or fragmented)",
			pages, old.Total, p.Total, p.Available())
	}
	return p
}

// Drain empties the 2 MiB pool (no persistent free pages, no overcommit)
// until the test's Cleanup restores it, so nothing can be allocated from
// it. Pages other processes hold stay theirs (the kernel keeps them as
// surplus until they are freed). The test is skipped when the pool still has
// available pages after the change.
func Drain(tb testing.TB) hugepages.Pool {
	tb.Helper()
	old := begin(tb)
	if old.Overcommit != 0 {
		set(tb, overcommitFile, 0)
	}
	p := set(tb, hugepages.NrHugepagesFile, 0)
	if p.Available() != 0 {
		tb.Skipf("emptied the 2 MiB hugepage pool, but %d pages are still available", p.Available())
	}
	return p
}

// begin checks the environment, takes the lock, and registers the restore
// of the pool's present size and overcommit; it returns the pool before any
// change.
func begin(tb testing.TB) hugepages.Pool {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("changing the hugepage pool needs root (it writes %s)", hugepages.NrHugepagesFile)
	}
	if _, err := hugepages.ReadPool(); err != nil {
		tb.Skipf("kernel has no 2 MiB hugepage pool: %v", err)
	}
	lf, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatalf("hugepage pool lock: %v", err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		lf.Close()
		tb.Fatalf("hugepage pool lock %s: %v", LockPath, err)
	}
	tb.Cleanup(func() { lf.Close() }) // closing the last fd drops the flock
	old, err := hugepages.ReadPool()
	if err != nil {
		tb.Fatalf("hugepage pool: %v", err)
	}
	// Cleanups run last-in first-out: the restore runs before the unlock.
	tb.Cleanup(func() {
		if err := write(overcommitFile, old.Overcommit); err != nil {
			tb.Errorf("restoring %s to %d: %v", overcommitFile, old.Overcommit, err)
		}
		if err := write(hugepages.NrHugepagesFile, old.Total); err != nil {
			tb.Errorf("restoring %s to %d: %v", hugepages.NrHugepagesFile, old.Total, err)
		}
		// Pages still in use (a Manager another package's test started with
		// --hugepages prefer may have taken some) stay as surplus until they
		// are freed; that is not this test's failure.
		if p, err := hugepages.ReadPool(); err == nil && p.Total != old.Total {
			tb.Logf("hugepage pool is %d pages after the restore to %d: %d still in use as surplus", p.Total, old.Total, p.Surplus)
		}
	})
	return old
}

// set writes n to path and returns the pool afterwards; the test is skipped
// when the file cannot be written.
func set(tb testing.TB, path string, n uint64) hugepages.Pool {
	tb.Helper()
	if err := write(path, n); err != nil {
		tb.Skipf("cannot change the hugepage pool: %v", err)
	}
	p, err := hugepages.ReadPool()
	if err != nil {
		tb.Fatalf("hugepage pool: %v", err)
	}
	return p
}

func write(path string, n uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatUint(n, 10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %d to %s: %w", n, path, err)
	}
	return nil
}
