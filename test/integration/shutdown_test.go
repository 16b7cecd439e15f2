package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/internal/launch"
)

// shutdownBound is the Manager's documented default --shutdown-timeout
// (docs/operating.md, docs/cache.md "Shutdown"); the stall test relies on the
// default so that it runs unchanged against a Manager without the flag.
const shutdownBound = 10 * time.Second

func TestShutdownTimeoutFlagNamesItsLimits(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"0s", "--shutdown-timeout 0s: want 1s..10m"},
		{"500ms", "--shutdown-timeout 500ms: want 1s..10m"},
		{"11m", "--shutdown-timeout 11m0s: want 1s..10m"},
	} {
		t.Run("a timeout of "+tc.value+" is refused", func(t *testing.T) {
			out, err := launch.Run(launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(),
				Socket: filepath.Join(t.TempDir(), "okv.sock"), HTTPAddr: launch.NoHTTP, Args: []string{"--shutdown-timeout", tc.value}}, time.Minute)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %v, output %q; want status 2 and %q", err, out, tc.want)
			}
		})
	}
}

// TestSIGTERMStopsAManagerWhoseSSDReadsAreStuck stalls the SSD tier's
// reads in the kernel and checks that SIGTERM still stops the Manager
// within --shutdown-timeout: sessions closed, socket removed, the stuck
// reads logged, exit called (status 3). The stall: the SSD directory is an
// ext4 filesystem on a loop device, and the Manager is moved into an I/O
// cgroup that throttles reads of that device to 4 KiB/s and 1 I/O per
// second (cgroup v2 io.max, or the v1 blkio throttle where the io
// controller is bound to v1), so each 1 MiB prefetch read would take over
// four minutes: its worker sits in preadv, uninterruptible (state D),
// until the test lifts the throttle.
func TestSIGTERMStopsAManagerWhoseSSDReadsAreStuck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: losetup, mount and an I/O cgroup")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: %v", tool, err)
		}
	}
	th := findIOThrottle(t)
	testStart := time.Now()

	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-stall-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the loop image: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	img := filepath.Join(dir, "ssd.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: losetup -f --show: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", loop, err, out)
		}
	})
	mustRun(t, "mkfs.ext4", "-q", "-F", loop)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "mount", "-t", "ext4", loop, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	if fd, err := unix.Open(filepath.Join(mnt, "probe"), unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o600); err != nil {
		t.Skipf("ext4 on %s refuses O_DIRECT: %v", loop, err)
	} else {
		unix.Close(fd)
		os.Remove(filepath.Join(mnt, "probe"))
	}
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	th.dev = fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	th.create(t)

	if err := os.Mkdir(filepath.Join(mnt, "ssd"), 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, launch.NoHTTP, 10*time.Second, "--hugepages", "off",
		"--ram-capacity", "16MiB", "--ssd-dir", filepath.Join(mnt, "ssd"), "--ssd-capacity", "128MiB", "--ssd-slot-bytes", "1MiB")
	// Cleanups run last-registered first: the throttle is lifted before
	// startManagerBin's cleanup kills the Manager and waits for it, which a thread in
	// a throttled read would otherwise hold up for minutes. The watchdog
	// bounds the test if it hangs elsewhere.
	t.Cleanup(th.lift)
	watchdog := time.AfterFunc(3*time.Minute, th.lift)
	t.Cleanup(func() { watchdog.Stop() })

	const blocks = 64 // 64 MiB through a 16 MiB RAM tier: most are demoted
	c, stdin := startWithStdin(t, "testclient", "ssdstall", sock, strconv.Itoa(blocks))
	c.waitOutput(t, "ready", 60*time.Second)

	th.add(t, m.Pid())
	th.limit(t)
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatalf("telling the client to query: %v", err)
	}
	c.waitOutput(t, "loading", 10*time.Second)
	stuck := waitBlockedThread(t, m.Pid(), 10*time.Second)
	t.Logf("stall: %s via %s; Manager threads in uninterruptible sleep: %s", th.dev, th.kind(), stuck)

	t0 := time.Now()
	m.Signal(syscall.SIGTERM)
	m.waitOutput(t, "shutdown forced", shutdownBound+5*time.Second)
	took := time.Since(t0)
	if took < shutdownBound-500*time.Millisecond {
		t.Errorf("the shutdown was forced %v after SIGTERM, before its %v bound", took, shutdownBound)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s still exists when the shutdown is forced (stat err %v)", sock, err)
	}
	log := m.Output()
	closed, forced := strings.Index(log, "session closed"), strings.Index(log, "shutdown forced")
	if closed < 0 || closed > forced {
		t.Errorf("want the session closed before the forced exit; log:\n%s", log)
	}
	ioLine := regexp.MustCompile(`ssd i/o still outstanding" op=read in_kernel=true slot=\d+ offset=\d+ bytes=1052672 age=\d`)
	if !ioLine.MatchString(log) {
		t.Errorf("the log names no stuck read (op, slot, offset, bytes, age):\n%s", log)
	}
	var reads int
	if sm := regexp.MustCompile(`stuck_reads=(\d+)`).FindStringSubmatch(log); sm != nil {
		reads, _ = strconv.Atoi(sm[1])
	}
	if reads < 1 {
		t.Errorf("the forced-exit line counts no stuck reads:\n%s", log)
	}
	held := "gone"
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", m.Pid())); err == nil {
		held = "still held by the kernel (a read in preadv)"
	}
	t.Logf("forced exit logged %v after SIGTERM (bound %v), %d stuck reads; process %s; the shutdown's log:\n%s",
		took.Round(time.Millisecond), shutdownBound, reads, held, log[strings.Index(log, "shutdown requested"):])

	// The exit was called; the process goes once the disk answers.
	th.lift()
	err = m.wait(t, 15*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Manager exited with %v, want status 3 (shutdown forced); log:\n%s", err, log)
	}
	if err := c.wait(t, 15*time.Second); err != nil || !strings.Contains(c.Output(), "session ended") {
		t.Errorf("client: %v, want it told its session ended; output:\n%s", err, c.Output())
	}
	t.Logf("client: %s", strings.TrimSpace(c.Output()))
	if d := time.Since(testStart); d > 2*time.Minute {
		t.Errorf("the test took %v", d)
	}
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// waitBlockedThread waits until a thread of pid is in uninterruptible
// sleep (state D: a read the throttle holds) and describes those threads.
func waitBlockedThread(t *testing.T, pid int, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var blocked []string
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(task, "stat"))
			if err != nil {
				continue
			}
			// Field 3, after the parenthesised command name.
			if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "D" {
				wchan, _ := os.ReadFile(filepath.Join(task, "wchan"))
				blocked = append(blocked, fmt.Sprintf("tid %s (wchan %s)", filepath.Base(task), wchan))
			}
		}
		if len(blocked) > 0 {
			return strings.Join(blocked, ", ")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Manager thread in uninterruptible sleep %v after the query: the throttle did not stall its reads", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ioThrottle is a cgroup throttling reads of one block device: cgroup v2
// io.max, or the v1 blkio controller's read throttle on hosts that bind
// the io controller to v1 (the development VM's hybrid layout).
type ioThrottle struct {
	root  string // the hierarchy's mount point
	v2    bool
	dir   string // the test's cgroup
	dev   string // MAJ:MIN of the throttled device
	addIO bool   // v2: the test enabled io in root's subtree_control
}

func (th *ioThrottle) kind() string {
	if th.v2 {
		return "cgroup v2 io.max at " + th.dir
	}
	return "cgroup v1 blkio.throttle.read_{bps,iops}_device at " + th.dir
}

// findIOThrottle finds a cgroup hierarchy that can throttle reads, or
// skips the test saying what is missing.
func findIOThrottle(t *testing.T) *ioThrottle {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no /proc/self/mountinfo: %v", err)
	}
	defer f.Close()
	var v2, v1 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre, post := strings.Fields(line[:sep]), strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 1 {
			continue
		}
		mp := pre[4]
		switch post[0] {
		case "cgroup2":
			if b, err := os.ReadFile(filepath.Join(mp, "cgroup.controllers")); err == nil && v2 == "" &&
				strings.Contains(" "+strings.TrimSpace(string(b))+" ", " io ") {
				v2 = mp
			}
		case "cgroup":
			if _, err := os.Stat(filepath.Join(mp, "blkio.throttle.read_bps_device")); err == nil && v1 == "" {
				v1 = mp
			}
		}
	}
	switch {
	case v2 != "":
		return &ioThrottle{root: v2, v2: true}
	case v1 != "":
		return &ioThrottle{root: v1}
	}
	t.Skip("no I/O throttle: no cgroup v2 hierarchy offers the io controller and no v1 blkio hierarchy has blkio.throttle")
	return nil
}

func (th *ioThrottle) write(t *testing.T, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(th.dir, file), []byte(value), 0); err != nil {
		t.Fatalf("writing %q to %s: %v", value, filepath.Join(th.dir, file), err)
	}
}

// create makes the test's cgroup; a cleanup removes it (once the Manager,
// its only member, is gone).
func (th *ioThrottle) create(t *testing.T) {
	t.Helper()
	if th.v2 {
		sub := filepath.Join(th.root, "cgroup.subtree_control")
		b, _ := os.ReadFile(sub)
		if !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " io ") {
			if err := os.WriteFile(sub, []byte("+io"), 0); err != nil {
				t.Skipf("cannot enable the io controller in %s: %v", sub, err)
			}
			th.addIO = true
		}
	}
	th.dir = filepath.Join(th.root, fmt.Sprintf("orbitkv-stall-%d", os.Getpid()))
	if err := os.Mkdir(th.dir, 0o755); err != nil {
		t.Fatalf("creating cgroup %s: %v", th.dir, err)
	}
	t.Cleanup(func() {
		var err error
		for range 50 { // the last member's exit reaches the cgroup a moment later
			if err = os.Remove(th.dir); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("removing cgroup %s: %v", th.dir, err)
		}
		if th.addIO {
			os.WriteFile(filepath.Join(th.root, "cgroup.subtree_control"), []byte("-io"), 0)
		}
	})
}

func (th *ioThrottle) add(t *testing.T, pid int) {
	t.Helper()
	th.write(t, "cgroup.procs", strconv.Itoa(pid))
}

// limit throttles reads of th.dev by the cgroup's members to 4 KiB/s and
// one I/O per second.
func (th *ioThrottle) limit(t *testing.T) {
	t.Helper()
	if th.v2 {
		th.write(t, "io.max", th.dev+" rbps=4096 riops=1")
		return
	}
	th.write(t, "blkio.throttle.read_bps_device", th.dev+" 4096")
	th.write(t, "blkio.throttle.read_iops_device", th.dev+" 1")
}

// lift removes the limit; the reads it held are dispatched at once.
// Idempotent; safe from a timer goroutine (errors are ignored: it runs in
// cleanups, where the test has already failed or passed).
func (th *ioThrottle) lift() {
	if th.dir == "" || th.dev == "" {
		return
	}
	if th.v2 {
		os.WriteFile(filepath.Join(th.dir, "io.max"), []byte(th.dev+" rbps=max riops=max"), 0)
		return
	}
	os.WriteFile(filepath.Join(th.dir, "blkio.throttle.read_bps_device"), []byte(th.dev+" 0"), 0)
	os.WriteFile(filepath.Join(th.dir, "blkio.throttle.read_iops_device"), []byte(th.dev+" 0"), 0)
}
