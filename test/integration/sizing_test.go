package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/hugepages"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// Sizing mistakes an operator makes are refused at start, naming the flag,
// before memory or disk is committed, and leave nothing behind: status 4
// (resources) for what the host cannot give, 2 for a value no host takes.
func TestSizingMistakesAreRefusedNamingTheFlag(t *testing.T) {
	_, avail, err := hugepages.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	tooMuchRAM := fmt.Sprintf("%dGiB", avail>>30+64)
	tmp := t.TempDir()
	type check func(t *testing.T)
	gone := func(path string) check {
		return func(t *testing.T) {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is left behind (stat: %v)", path, err)
			}
		}
	}
	cases := []struct {
		name   string
		args   []string
		status int
		want   []string
		after  check
		skip   func() string
	}{
		{name: "a missing --ssd-dir is not created unasked",
			args:   []string{"--ssd-dir", filepath.Join(tmp, "missing"), "--ssd-capacity", "64MiB", "--ssd-slot-bytes", "1MiB"},
			status: 4, want: []string{"--ssd-dir", "does not exist"}, after: gone(filepath.Join(tmp, "missing"))},
		{name: "an SSD capacity above the free space is refused before the directory is made",
			args:   []string{"--ssd-dir", filepath.Join(tmp, "big"), "--ssd-create-dir", "--ssd-capacity", "1PiB", "--ssd-slot-bytes", "1GiB"},
			status: 4, want: []string{"--ssd-capacity", "reserved for other files"}, after: gone(filepath.Join(tmp, "big"))},
		{name: "an SSD tier on tmpfs is refused",
			args:   []string{"--ssd-dir", "/dev/shm", "--ssd-capacity", "64MiB", "--ssd-slot-bytes", "1MiB"},
			status: 4, want: []string{"--ssd-dir", "memory-backed"}, after: gone("/dev/shm/blocks.dat"),
			skip: func() string {
				var fs unix.Statfs_t
				if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != 0x01021994 {
					return "/dev/shm is not a tmpfs here"
				}
				return ""
			}},
		{name: "a RAM tier above the available memory is refused before it is committed",
			args:   []string{"--ram-capacity", tooMuchRAM, "--hugepages", "off"},
			status: 4, want: []string{"--ram-capacity", "not enough available memory", "MemAvailable"}},
		{name: "a hugetlb shortfall in require mode names the flag and the fix",
			args:   []string{"--ram-capacity", "64GiB", "--hugepages", "require", "--prefault=false"},
			status: 4, want: []string{"--hugepages", "nr_hugepages"},
			skip: func() string {
				if p, err := hugepages.ReadPool(); err == nil && p.Available() >= 64<<30/hugepages.HugePageSize {
					return "this host has 64 GiB of free hugepages"
				}
				return ""
			}},
		{name: "an ambiguous size is refused rather than read as decimal",
			args: []string{"--ram-capacity", "4G"}, status: 2, want: []string{"--ram-capacity", "ambiguous"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != nil {
				if why := tc.skip(); why != "" {
					t.Skip(why)
				}
			}
			start := time.Now()
			out, err := launch.Run(launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(),
				Socket: filepath.Join(t.TempDir(), "okv.sock"), HTTPAddr: launch.NoHTTP, Args: tc.args}, time.Minute)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.status {
				t.Fatalf("exit %v, want status %d; output:\n%s", err, tc.status, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "ram tier ready") {
				t.Errorf("the RAM tier was committed before the refusal:\n%s", out)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("the refusal took %v", took)
			}
			if tc.after != nil {
				tc.after(t)
			}
		})
	}
}
