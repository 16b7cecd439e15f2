package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheManagersProcEntriesAreClosedToItsOwnUid starts a Manager as an
// unprivileged uid (nobody) and checks that its /proc entries belong to
// root, not to that uid: a process of the Manager's uid (any session's
// engine, or a hostile one) cannot open /proc/<pid>/fd/* (the RAM tier's
// and the discovery tables' memfds, read-write) nor /proc/<pid>/mem.
func TestTheManagersProcEntriesAreClosedToItsOwnUid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the Manager as another uid")
	}
	const nobody = 65534
	// Not t.TempDir (its parent is root's, 0700): a directory of nobody's
	// own, holding a copy of the binary.
	dir, err := os.MkdirTemp("", "orbitkv-dumpable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, nobody, nobody); err != nil { // 0700, the Manager's own
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(binDir, "orbitkv-manager"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "orbitkv-manager"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "m.sock")
	cmd := exec.Command(filepath.Join(dir, "orbitkv-manager"), "--bootstrap-socket", sock, "--http-addr", "",
		"--ram-capacity", "64MiB", "--hugepages", "off")
	cmd.Dir = dir
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the Manager (uid %d) exited before serving: %v; output:\n%s", nobody, waitErr, out.String())
		default:
		}
		if time.Now().After(end) {
			cmd.Process.Kill()
			<-exited // out is complete (and no longer written)
			t.Fatalf("the Manager (uid %d) serves no socket after 30s; output:\n%s", nobody, out.String())
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t", nobody)) {
		t.Fatalf("the Manager does not run as uid %d:\n%s", nobody, status)
	}
	for _, entry := range []string{"fd", "mem", "environ"} {
		fi, err := os.Stat(fmt.Sprintf("/proc/%d/%s", cmd.Process.Pid, entry))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
			t.Errorf("/proc/<manager>/%s belongs to uid %d: a process of the Manager's uid can open it", entry, uid)
		}
	}
}
