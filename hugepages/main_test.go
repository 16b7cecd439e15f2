package hugepages_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the package when a test leaves an fd open or an arena
// mapped (CONTRIBUTING.md habit 15): every Arena owns a memfd and a mapping, and
// a leaked hugetlb arena would also keep its pages out of the pool.
func TestMain(m *testing.M) {
	code := fdcheck.Run(m, "hugepages", 0, nil)
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
