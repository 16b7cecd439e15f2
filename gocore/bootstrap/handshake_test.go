package bootstrap_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
)

func TestHelloIsRefused(t *testing.T) {
	h := newHarness(t)
	other := connect(t, h.path) // must keep working through every refusal
	tests := []struct {
		name   string
		edit   func(*abi.Hello)
		status abi.BootStatus
		field  string
	}{
		{"wrong magic is refused with BadMagic", func(x *abi.Hello) { x.Magic = abi.MsgMagic }, abi.BootBadMagic, "magic"},
		{"protocol version 1 is refused with BadVersion", func(x *abi.Hello) { x.ProtocolVersion = 1 }, abi.BootBadVersion, "protocol_version"},
		{"another ABI version is refused with BadVersion", func(x *abi.Hello) { x.ABIVersion = abi.Version + 1 }, abi.BootBadVersion, "abi_version"},
		{"an unknown role is refused with BadField", func(x *abi.Hello) { x.Role = 77 }, abi.BootBadField, "role"},
		{"nonzero reserved is refused with BadField", func(x *abi.Hello) { x.Reserved[0] = 1 }, abi.BootBadField, "reserved"},
		{"a non-printable instance id is refused with BadField", func(x *abi.Hello) { x.InstanceID[3] = 0x07 }, abi.BootBadField, "instance_id"},
		{"junk after the instance id padding is refused with BadField", func(x *abi.Hello) { x.InstanceID[63] = 'z' }, abi.BootBadField, "instance_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mark := h.logs.mark()
			hello := validHello()
			tc.edit(&hello)
			c := dial(t, h.path)
			if _, err := c.Write(hello.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			r, files, err := readReply(c)
			for _, f := range files {
				f.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Magic != abi.BootstrapMagic || r.ProtocolVersion != abi.BootstrapVersion || r.Status != tc.status {
				t.Errorf("reply magic %#x version %d status %d, want status %d", r.Magic, r.ProtocolVersion, r.Status, tc.status)
			}
			if len(files) != 0 {
				t.Errorf("refused reply carried %d fds", len(files))
			}
			if msg := replyError(r); !strings.Contains(msg, tc.field) {
				t.Errorf("reply error %q does not name %q", msg, tc.field)
			}
			if r.Epoch != 0 || r.ClientToken != 0 {
				t.Errorf("refused reply leaks session fields: epoch %d token %d", r.Epoch, r.ClientToken)
			}
			expectClosed(t, c)
			h.waitLine(t, mark, "bootstrap refused", "field="+tc.field)
			h.waitSessions(t, 1)
			other.ping(t, 42)
		})
	}
}

func TestHelloTimeoutClosesASilentClient(t *testing.T) {
	const timeout = 100 * time.Millisecond
	h := newHarness(t, func(o *harnessOptions) { o.helloTimeout = timeout })
	other := connect(t, h.path)
	tests := []struct {
		name   string
		send   []byte
		detail string
	}{
		{"a client that connects and sends nothing is closed", nil, "got 0 of 96 bytes"},
		{"a client that sends part of a hello is closed", validHello().AppendTo(nil)[:10], "got 10 of 96 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mark := h.logs.mark()
			c := dial(t, h.path)
			if len(tc.send) > 0 {
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			expectClosed(t, c)
			if took := time.Since(start); took < timeout/2 {
				t.Errorf("closed after %v, before the hello timeout %v", took, timeout)
			}
			h.waitLine(t, mark, "bootstrap refused", "field=hello", "no hello within", tc.detail)
			other.ping(t, 7)
		})
	}
	t.Run("a client that half-closes mid-hello is closed at once", func(t *testing.T) {
		mark := h.logs.mark()
		c := dial(t, h.path)
		c.Write(validHello().AppendTo(nil)[:20])
		c.CloseWrite()
		expectClosed(t, c)
		h.waitLine(t, mark, "bootstrap refused", "field=hello", "read 20 of 96")
	})
}

func TestServerFullRefusesWithFull(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxSessions = 1 })
	first := connect(t, h.path)
	mark := h.logs.mark()
	c := dial(t, h.path)
	c.Write(validHello().AppendTo(nil))
	r, files, err := readReply(c)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != abi.BootFull || len(files) != 0 {
		t.Fatalf("status %d with %d fds, want BootFull without fds", r.Status, len(files))
	}
	expectClosed(t, c)
	h.waitLine(t, mark, "bootstrap refused", "field=session")
	first.ping(t, 1)
	first.close()
	h.waitSessions(t, 0)
	connect(t, h.path).ping(t, 2) // the freed slot is usable again
}

// One process cannot take every slot: past session.DefaultMaxSessionsPerPID
// live sessions of the test's pid, its next bootstrap is refused with
// BootFull and an error naming the limit, though slots are free; one of its
// sessions closing lets it in again.
func TestOneProcessPastItsSessionLimitIsRefusedWithFull(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxSessions = session.DefaultMaxSessionsPerPID + 4 })
	held := make([]*rawClient, 0, session.DefaultMaxSessionsPerPID)
	for range session.DefaultMaxSessionsPerPID {
		held = append(held, connect(t, h.path))
	}
	mark := h.logs.mark()
	c := dial(t, h.path)
	c.Write(validHello().AppendTo(nil))
	r, files, err := readReply(c)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	msg := string(bytes.TrimRight(r.Error[:], "\x00"))
	if r.Status != abi.BootFull || len(files) != 0 || !strings.Contains(msg, "--max-sessions-per-pid 64") {
		t.Fatalf("status %d with %d fds, error %q; want BootFull without fds naming --max-sessions-per-pid 64", r.Status, len(files), msg)
	}
	expectClosed(t, c)
	h.waitLine(t, mark, "bootstrap refused", "field=session", "max-sessions-per-pid")
	if n := h.table.PIDRefusals(); n != 1 {
		t.Fatalf("refusals counted %d, want 1", n)
	}
	held[0].close()
	h.waitSessions(t, session.DefaultMaxSessionsPerPID-1)
	connect(t, h.path).ping(t, 1)
	for _, rc := range held {
		rc.close()
	}
}

// runChildClient is the test binary acting as a client under another uid:
// it sends a valid hello and prints the reply status and error text.
func runChildClient(path string) int {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		fmt.Printf("dial: %v\n", err)
		return 3
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	c.Write(validHello().AppendTo(nil)) // the Manager may close before reading it
	r, files, err := readReply(c)
	if err != nil {
		fmt.Printf("reply: %v\n", err)
		return 4
	}
	fmt.Printf("status=%d fds=%d error=%s\n", r.Status, len(files), replyError(r))
	return 0
}

func TestPeerWithAnotherUIDIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client under another uid (SysProcAttr.Credential)")
	}
	h := newHarness(t)
	other := connect(t, h.path)
	// Let uid 65534 reach the socket so the Manager's SO_PEERCRED check, not
	// the file mode, is what refuses it.
	if err := os.Chmod(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.path, 0o666); err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a 0700 build directory; copy it where the
	// other uid can execute it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(h.dir, "child.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	src.Close()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	mark := h.logs.mark()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), childSocketEnv+"="+h.path)
	cmd.Dir = h.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child as uid 65534: %v", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * waitFor):
		cmd.Process.Kill()
		<-done
		t.Fatalf("child client did not finish; output:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("child client: %v; output:\n%s", err, out.String())
	}
	want := fmt.Sprintf("status=%d fds=0 error=peer uid 65534 differs", abi.BootBadField)
	if !strings.Contains(out.String(), want) {
		t.Fatalf("child saw %q, want it to contain %q", out.String(), want)
	}
	h.waitLine(t, mark, "bootstrap refused", "field=uid", "uid=65534")
	h.waitSessions(t, 1)
	other.ping(t, 3)
}
