package handover

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range []Message{{Kind: Adopted, PID: 9, A: 64, B: 64 << 20}, {Kind: Done}} {
		got, err := Decode(m.Encode(), 0)
		if err != nil || got != m {
			t.Fatalf("%+v: decoded %+v, %v", m, got, err)
		}
	}
	if _, err := Decode(Message{Kind: State}.Encode(), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(Message{Kind: Hello, PID: 7, A: 1}.Encode(), 1); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeNamesWhatIsWrong(t *testing.T) {
	good := Message{Kind: Hello, PID: 1}.Encode()
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	for _, tc := range []struct {
		b     []byte
		fds   int
		words string
	}{
		{good[:31], 0, "message of 31 bytes, want 32"},
		{edit(func(b []byte) { b[0] = 'X' }), 0, "magic"},
		{edit(func(b []byte) { b[8] = 2 }), 0, "protocol version 2, want 1"},
		{edit(func(b []byte) { b[10] = 9 }), 0, "kind 9, want 1..4"},
		{good, 2, "hello message with 2 fds, want 1"},
		{Message{Kind: Done}.Encode(), 1, "done message with 1 fds, want 0"},
		{Message{Kind: State}.Encode(), 1, "state message with 1 fds, want 2"},
	} {
		if _, err := Decode(tc.b, tc.fds); err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("want an error naming %q, got %v", tc.words, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Message{Kind: State, PID: 3, A: 4}.Encode(), 2)
	f.Add([]byte("OKVHANDO"), 0)
	f.Fuzz(func(t *testing.T, b []byte, fds int) {
		m, err := Decode(b, fds)
		if err != nil {
			return
		}
		if !bytes.Equal(m.Encode(), b) {
			t.Fatalf("accepted %x but it encodes back as %x", b, m.Encode())
		}
	})
}

// The successor of these tests is this test binary, run again with
// HANDOVER_TEST_ROLE naming what it does (TestMain).
func TestMain(m *testing.M) {
	switch os.Getenv("HANDOVER_TEST_ROLE") {
	case "adopt": // hello, take the state, report, wait for done
		p, err := Join(1)
		if err != nil || p == nil {
			os.Exit(10)
		}
		a, l, epoch, err := p.Receive(10 * time.Second)
		if err != nil || epoch != 42 {
			os.Exit(11)
		}
		st, _ := a.Stat()
		if err := p.Adopted(uint64(st.Size()), uint64(l.Fd()), 10*time.Second); err != nil {
			os.Exit(12)
		}
		os.Exit(0)
	case "impostor": // another process (its child) sends the hello on its socket
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "HANDOVER_TEST_ROLE=adopt")
		c.ExtraFiles = []*os.File{os.NewFile(3, "handover")}
		c.Run()
		time.Sleep(10 * time.Second)
		os.Exit(0)
	case "exit": // dies before its hello
		os.Exit(3)
	case "no-state": // the predecessor closes before the state: exit 5 when told so
		p, _ := Join(1)
		if _, _, _, err := p.Receive(10 * time.Second); errors.Is(err, ErrClosed) {
			os.Exit(5)
		}
		os.Exit(13)
	case "die-after-state":
		p, _ := Join(1)
		p.Receive(10 * time.Second)
		os.Exit(4)
	}
	os.Exit(fdcheck.Run(m, "handover", 0, nil))
}

func spawnRole(t *testing.T, role string) (*Successor, error) {
	t.Setenv("HANDOVER_TEST_ROLE", role)
	return Spawn(os.Args[0], []string{"-test.run=^$"}, 10*time.Second)
}

func twoFiles(t *testing.T) (*os.File, *os.File) {
	a, err := os.CreateTemp(t.TempDir(), "arena")
	if err != nil {
		t.Fatal(err)
	}
	a.Write(make([]byte, 12345))
	l, err := os.CreateTemp(t.TempDir(), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); l.Close() })
	return a, l
}

func TestHandoverPassesTheFilesAndHearsTheAdoption(t *testing.T) {
	s, err := spawnRole(t, "adopt")
	if err != nil {
		t.Fatal(err)
	}
	a, l := twoFiles(t)
	m, err := s.Hand(a, l, 42, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.A != 12345 || m.PID != uint32(s.Pid()) {
		t.Fatalf("adopted %+v: the successor did not get the arena file (size 12345)", m)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	if s.err != nil {
		t.Fatalf("successor exited with %v", s.err)
	}
}

func TestASuccessorThatDiesIsReported(t *testing.T) {
	if _, err := spawnRole(t, "exit"); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("a successor that exits before its hello: %v", err)
	}
	s, err := spawnRole(t, "die-after-state")
	if err != nil {
		t.Fatal(err)
	}
	a, l := twoFiles(t)
	if _, err := s.Hand(a, l, 42, 10*time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("a successor that dies before adopting: %v", err)
	}
	select {
	case <-s.exited: // reaped before Hand returned
	default:
		t.Fatal("Hand returned before the successor was reaped")
	}
}

// A predecessor that goes away after the hello (it died) leaves the
// successor with ErrClosed from Receive: it starts with an empty tier.
func TestASuccessorHearsAPredecessorThatWentAway(t *testing.T) {
	s, err := spawnRole(t, "no-state")
	if err != nil {
		t.Fatal(err)
	}
	s.c.close()
	<-s.exited
	if ee, ok := s.err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
		t.Fatalf("the successor exited with %v, want status 5 (Receive saw ErrClosed)", s.err)
	}
}

// A hello from any process but the one started (here the successor's
// child, holding its socket) is refused, and the successor is killed with
// its process group.
func TestAHelloFromAnotherProcessIsRefused(t *testing.T) {
	start := time.Now()
	_, err := spawnRole(t, "impostor")
	if err == nil || !strings.Contains(err.Error(), "another process holds its socket") {
		t.Fatalf("a hello from the successor's child: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Spawn waited for the successor to exit by itself: it was not killed")
	}
}
