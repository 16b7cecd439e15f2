package catalog

import (
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// The catalog owns network connections (its etcd client) and the tests
// run etcd servers in process: every one must be closed by the end.
func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "catalog", 5*time.Second, nil))
}
