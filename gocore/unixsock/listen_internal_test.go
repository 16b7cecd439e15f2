package unixsock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// checkOwn is what Listen runs between bind(2) and listen(2): the path must
// still be this uid's own 0600 socket.
func TestCheckOwnRefusesWhatIsNotTheManagersSocket(t *testing.T) {
	dir := t.TempDir()
	uid := uint32(os.Geteuid())
	sock := filepath.Join(dir, "s.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o600)
	if _, err := checkOwn(sock, uid, 0o600); err != nil {
		t.Fatalf("own 0600 socket: %v", err)
	}
	os.Chmod(sock, 0o666)
	if _, err := checkOwn(sock, uid, 0o600); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), "want 0600") {
		t.Fatalf("0666 socket: %v, want ErrNotOurs naming the mode", err)
	}
	os.Chmod(sock, 0o600)
	if _, err := checkOwn(sock, uid+1, 0o600); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), "owned by uid") {
		t.Fatalf("socket of another uid: %v, want ErrNotOurs naming the owner", err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	if _, err := checkOwn(file, uid, 0o600); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v, want ErrNotOurs", err)
	}
}

// Shutdown removes the socket path only while it is still the file Listen
// bound: a file another process put there meanwhile stays.
func TestRemoveIfSameLeavesAReplacedPathAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "okv.sock")
	l, own, err := listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	moved := filepath.Join(dir, "moved.sock")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	removeIfSame(path, own)
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Fatalf("a file that replaced the socket was removed or changed: %q %v", b, err)
	}
	removeIfSame(moved, own)
	if _, err := os.Lstat(moved); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bound socket itself was not removed: %v", err)
	}
}

// CheckPath is Listen's checks without a bind: a free path and a dead
// socket pass and nothing is changed; a live socket, a non-socket and a
// missing directory are refused.
func TestCheckPathChecksWithoutChangingAnything(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckPath(filepath.Join(dir, "free.sock")); err != nil {
		t.Errorf("a free path: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "free.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckPath made the socket: %v", err)
	}
	live := filepath.Join(dir, "live.sock")
	l, _, err := listen(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPath(live); !errors.Is(err, ErrInUse) {
		t.Errorf("a live socket: %v, want ErrInUse", err)
	}
	l.Close() // SetUnlinkOnClose(false): the path stays, dead
	if err := CheckPath(live); err != nil {
		t.Errorf("a dead socket: %v, want nil (Listen removes it)", err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("CheckPath removed the dead socket: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckPath(file); !errors.Is(err, ErrNotSocket) {
		t.Errorf("a regular file: %v, want ErrNotSocket", err)
	}
	if err := CheckPath(filepath.Join(dir, "missing", "m.sock")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing directory: %v, want an error naming it", err)
	}
}
