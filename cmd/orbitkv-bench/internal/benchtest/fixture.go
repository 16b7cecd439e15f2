package benchtest

import (
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DirectTestDir is a directory that accepts O_DIRECT, or the test skips.
func DirectTestDir(t *testing.T) string {
	for _, dir := range []string{t.TempDir(), "/var/tmp"} {
		fd, err := unix.Open(dir+"/.odirect-probe", unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
			os.Remove(dir + "/.odirect-probe")
			return dir
		}
	}
	t.Skip("neither the test's temporary directory nor /var/tmp accepts O_DIRECT")
	return ""
}

// SortedKeys is m's keys in ascending order.
func SortedKeys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// Seq is from, from+1, ..., to (empty when to < from).
func Seq(from, to uint64) []uint64 {
	var out []uint64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// FakeClock is a clock the test moves: Now returns T.
type FakeClock struct{ T time.Time }

// Now is c.T.
func (c *FakeClock) Now() time.Time { return c.T }
