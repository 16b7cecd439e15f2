//go:build linux

package ebpf

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves a file descriptor open: a
// loaded Probes owns program, map and link fds, and Close must free them.
func TestMain(m *testing.M) {
	if os.Getenv(readerEnv) != "" {
		os.Exit(reader())
	}
	if os.Getenv(checkEnv) != "" {
		os.Exit(printCheck())
	}
	if os.Getenv(loadEnv) != "" {
		os.Exit(printLoad())
	}
	os.Exit(fdcheck.Run(m, "ebpf", 0, nil))
}

// readerEnv makes the test binary the reader of wakeBlockedReader: it
// reads 8 bytes from fd 3 as many times as the variable says, on one
// thread, and reports its thread id, then one byte per read, on fd 4.
const readerEnv = "ORBITKV_EBPF_TEST_READER"

func reader() int {
	runtime.LockOSThread()
	n, err := strconv.Atoi(os.Getenv(readerEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		return 2
	}
	fmt.Fprintln(os.NewFile(4, "signal"), unix.Gettid())
	var v [8]byte
	for range n {
		if _, err := unix.Read(3, v[:]); err != nil {
			fmt.Fprintln(os.Stderr, "reader:", err)
			return 1
		}
		if _, err := unix.Write(4, v[:1]); err != nil {
			return 1
		}
	}
	return 0
}

// checkEnv makes the test binary print Check's error (or "ok") and exit:
// TestCheckNamesTheMissingCapabilities runs it without privileges.
const checkEnv = "ORBITKV_EBPF_TEST_CHECK"

func printCheck() int {
	if err := Check(); err != nil {
		fmt.Println(err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// loadEnv makes the test binary print Load's error for this process (or
// "ok") and exit: TestLoadRefusesAManagerInAnotherPidNamespace runs it in
// a pid namespace of its own.
const loadEnv = "ORBITKV_EBPF_TEST_LOAD"

func printLoad() int {
	p, err := Load(Spec{})
	if err != nil {
		fmt.Println(err)
		return 0
	}
	p.Close()
	fmt.Println("ok")
	return 0
}
