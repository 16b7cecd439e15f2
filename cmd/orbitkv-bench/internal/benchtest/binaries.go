package benchtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestTrace is the Mooncake conversation trace the suites default to
// (suite.DefaultTrace), as an absolute path.
var TestTrace = Path("bench/traces/mooncake-conversation.jsonl.gz")

// Path is rel (slash-separated, relative to the repository root) as an
// absolute path. The root is the nearest directory at or above the working
// directory holding go.mod; Path panics when there is none (a test run
// outside the module).
func Path(rel string) string {
	return filepath.Join(root(), filepath.FromSlash(rel))
}

var root = sync.OnceValue(func() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("benchtest: no go.mod at or above the working directory")
		}
		dir = parent
	}
})

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binaries builds orbitkv-manager, orbitkv-etcd and orbitkv-bench into one
// temporary directory once per test binary (the bench finds the Manager
// beside itself) and returns it; with -short the test skips. A package
// that calls it removes the directory with Main in its TestMain.
func Binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the Manager; skipped with -short")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "orbitkv-bench-test-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir, "./cmd/orbitkv-manager", "./cmd/orbitkv-etcd", "./cmd/orbitkv-bench")
		cmd.Dir = root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// Main runs m's tests, removes what Binaries built and returns the exit
// status for os.Exit: `func TestMain(m *testing.M) { os.Exit(benchtest.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}
