package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// squatEnv names the socket a child copy of the test binary serves as
// another uid: a stand-in for a local user who created the operator
// socket's path (the /tmp fallback while /run/orbitkv is missing).
const squatEnv = "ORBITKV_IT_SQUAT"

// squat listens on path, prints "listening", and for each connection
// prints "received N bytes" once its client closed it (or after 10s).
func squat(path string) int {
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, _ := io.Copy(io.Discard, c)
			fmt.Printf("received %d bytes\n", n)
		}()
	}
}

// TestOrbitkvctlRefusesAnOperatorSocketOfAnotherUID: a process of another
// uid (65534) serves the operator socket orbitkvctl dials. orbitkvctl,
// trusting its own uid and root only, reads the peer's credentials before
// sending anything, refuses it naming the path, the uid, the pid and the
// fix, exits 1, and the server receives no byte; named by --manager-uid or
// ORBITKV_MANAGER_UID, the same server is talked to.
func TestOrbitkvctlRefusesAnOperatorSocketOfAnotherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to serve the socket as another uid")
	}
	const nobody = 65534
	// Not t.TempDir (its parent is root's, 0700): a directory of nobody's
	// own, holding a copy of the test binary.
	dir, err := os.MkdirTemp("", "okvsquat")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "squat.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "op.sock")
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), squatEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the squatter ended before %s", what)
			}
			return l
		case <-time.After(15 * time.Second):
			t.Fatalf("the squatter said nothing about %s within 15s", what)
		}
		return ""
	}
	if l := next("listening"); l != "listening" {
		t.Fatalf("squatter: %s", l)
	}

	// Refused: every command, before a byte is sent.
	for _, args := range [][]string{{"health"}, {"version"}, {"flush", "--all", "--yes"}, {"stats", "--watch", "100ms"}} {
		_, stderr, code := ctlEnv(t, nil, append(args, "--operator-socket", sock)...)
		for _, w := range []string{sock, "refusing", "uid " + strconv.Itoa(nobody), fmt.Sprintf("pid %d", cmd.Process.Pid),
			"--manager-uid " + strconv.Itoa(nobody), "ORBITKV_MANAGER_UID=" + strconv.Itoa(nobody), "nothing was sent"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("orbitkvctl %q: stderr %q lacks %q", args, stderr, w)
			}
		}
		if code != 1 {
			t.Errorf("orbitkvctl %q: exit %d, want 1", args, code)
		}
		if l := next("the refused connection"); l != "received 0 bytes" {
			t.Fatalf("orbitkvctl %q: the squatter %s; want 0 bytes", args, l)
		}
		// gRPC may have dialled again before it closed: each refused too.
	drain:
		for {
			select {
			case l := <-lines:
				if l != "received 0 bytes" {
					t.Fatalf("orbitkvctl %q: the squatter %s; want 0 bytes", args, l)
				}
			case <-time.After(200 * time.Millisecond):
				break drain
			}
		}
	}

	if unixsock.UIDIsOverflow(nobody) {
		t.Skip("uid 65534 reads as the overflow uid here (a user namespace): orbitkvctl refuses to trust it")
	}
	// Trusted: the same server is talked to (it answers no gRPC, so the
	// call ends at --timeout, but it received the HTTP/2 preface).
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"health", "--manager-uid", strconv.Itoa(nobody)}},
		{[]string{"ORBITKV_MANAGER_UID=" + strconv.Itoa(nobody)}, []string{"health"}},
	} {
		_, stderr, code := ctlEnv(t, tc.env, append(tc.args, "--operator-socket", sock, "--timeout", "500ms")...)
		if code != 1 || strings.Contains(stderr, "refusing") {
			t.Errorf("%v orbitkvctl %q: exit %d, %q; want it to talk and time out", tc.env, tc.args, code, stderr)
		}
		if l := next("the trusted connection"); l == "received 0 bytes" || !strings.HasPrefix(l, "received ") {
			t.Errorf("%v orbitkvctl %q: the squatter %s; want the bytes of a gRPC call", tc.env, tc.args, l)
		}
	}
}
