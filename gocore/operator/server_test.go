package operator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/orbitkv/orbitkv/internal/syncbuf"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// healthService answers Health with a status: enough to see whether a
// call got past the peer check.
type healthService struct {
	operatorpb.UnimplementedOperatorServer
}

func (healthService) Health(context.Context, *operatorpb.HealthRequest) (*operatorpb.HealthReply, error) {
	return &operatorpb.HealthReply{Status: "serving"}, nil
}

// listenIn serves healthService on dir/op.sock with gid (-1: none).
func listenIn(t *testing.T, dir string, gid int, log io.Writer) *Server {
	t.Helper()
	s, err := Listen(Config{Path: filepath.Join(dir, "op.sock"), GID: gid, Service: healthService{},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestListenSetsTheSocketsModeAndGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	for _, tc := range []struct {
		name    string
		gid     int
		mode    os.FileMode
		wantGID uint32
	}{
		{"without an operator group the socket is 0600", -1, 0o600, uint32(os.Getegid())},
		{"with an operator group it is 0660 and that group's", 4242, 0o660, 4242},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			listenIn(t, dir, tc.gid, io.Discard)
			fi, err := os.Lstat(filepath.Join(dir, "op.sock"))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != tc.mode || st.Gid != tc.wantGID {
				t.Fatalf("socket %v gid %d, want a socket of mode %v and gid %d", fi.Mode(), st.Gid, tc.mode, tc.wantGID)
			}
		})
	}
}

func TestCloseRemovesTheSocket(t *testing.T) {
	dir := t.TempDir()
	s, err := Listen(Config{Path: filepath.Join(dir, "op.sock"), GID: -1, Service: healthService{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Lstat(filepath.Join(dir, "op.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after Close: %v, want it removed", err)
	}
}

func TestPolicyAllowsRootTheOperatorGroupAndTheManagerOnlyWhenAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  Policy
		peer Peer
		want string // "" allowed, else a substring of the refusal
	}{
		{"root is allowed", Policy{UID: 1000, GID: -1}, Peer{UID: 0}, ""},
		{"the Manager's uid (its engines) is refused by default", Policy{UID: 1000, GID: -1}, Peer{PID: 9, UID: 1000, GID: 5}, "pid 9 uid 1000 gid 5 is not root (see"},
		{"the Manager's uid is allowed when admitted", Policy{UID: 1000, GID: -1, AdmitUID: true}, Peer{UID: 1000, GID: 5}, ""},
		{"another uid is refused naming who may", Policy{UID: 1000, GID: -1, AdmitUID: true}, Peer{PID: 9, UID: 1001, GID: 5}, "pid 9 uid 1001 gid 5 is not root or uid 1000"},
		{"a Manager running as root names root once", Policy{UID: 0, GID: -1, AdmitUID: true}, Peer{PID: 9, UID: 1001, GID: 5}, "is not root (see"},
		{"the operator group as primary group is allowed", Policy{UID: 1000, GID: 7}, Peer{UID: 1001, GID: 7}, ""},
		{"the operator group as supplementary group is allowed", Policy{UID: 1000, GID: 7}, Peer{UID: 1001, GID: 5, Groups: []uint32{3, 7}}, ""},
		{"other groups are refused naming the operator group", Policy{UID: 1000, GID: 7}, Peer{UID: 1001, GID: 5, Groups: []uint32{3}}, "or a member of group 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.pol.Check(tc.peer)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check = %v, want allowed", err)
			case tc.want != "" && (!errors.Is(err, ErrPeerRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want ErrPeerRefused containing %q", err, tc.want)
			}
		})
	}
}

// A child copy of this test binary calls Health as another uid: the
// socket's mode keeps it out (the kernel's EACCES), and where the mode
// was widened by hand the peer check refuses it with a clear message and
// a log line; a member of the operator group gets in.
func TestPeersOfAnotherUIDAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a child as uid 65534 needs root")
	}
	const nobody, group = 65534, 4242
	child := childBinary(t)
	for _, tc := range []struct {
		name   string
		gid    int  // operator group (-1: none)
		widen  bool // chmod 0666 after Listen
		cred   *syscall.Credential
		want   string // substring of the child's output
		logged bool   // the Manager logs a refusal
	}{
		{"a 0600 socket keeps another uid out", -1, false, &syscall.Credential{Uid: nobody, Gid: nobody}, "permission denied", false},
		{"a widened socket still refuses another uid", -1, true, &syscall.Credential{Uid: nobody, Gid: nobody}, "PermissionDenied", true},
		{"a widened group socket refuses a non-member", group, true, &syscall.Credential{Uid: nobody, Gid: nobody}, "or a member of group 4242", true},
		{"a member of the operator group gets in", group, false, &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{group}}, "ok serving", false},
		{"root gets in", -1, false, nil, "ok serving", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := worldDir(t)
			var log syncbuf.Buffer
			listenIn(t, dir, tc.gid, &log)
			sock := filepath.Join(dir, "op.sock")
			if tc.widen {
				if err := os.Chmod(sock, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(child, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("child: %s", out)
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("child printed %q, want %q", out, tc.want)
			}
			if got := strings.Contains(log.String(), "operator socket refused a connection") && strings.Contains(log.String(), "uid=65534"); got != tc.logged {
				t.Fatalf("refusal logged %v, want %v; log:\n%s", got, tc.logged, log.String())
			}
		})
	}
}

// worldDir is a fresh directory every user may enter (t.TempDir's parent
// is 0700), removed at the end of the test.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "okv-operator-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// childBinary is a copy of this test binary that every user may run (the
// go tool's build directory is 0700), removed at the end of the test.
func childBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(worldDir(t), "operator.test")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
