package bootstrap_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/bootstrap"
)

func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "okvl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// deadSocket leaves a socket file whose owner is gone (bound, never
// listening, closed): what a crashed Manager leaves behind.
func deadSocket(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
}

func TestListen(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) // leaves something at path
		wantErr error                           // nil: Listen succeeds
		check   func(t *testing.T, path string) // after Listen
	}{
		{
			name:    "a fresh path gets a listening socket",
			prepare: func(t *testing.T, path string) {},
		},
		{
			name: "a live socket is refused with ErrInUse",
			prepare: func(t *testing.T, path string) {
				l, err := bootstrap.Listen(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			wantErr: bootstrap.ErrInUse,
			check: func(t *testing.T, path string) {
				if c, err := net.Dial("unix", path); err != nil {
					t.Errorf("the live socket stopped answering: %v", err)
				} else {
					c.Close()
				}
			},
		},
		{
			name:    "a dead socket file is reclaimed",
			prepare: deadSocket,
		},
		{
			name: "a regular file is never deleted",
			prepare: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: bootstrap.ErrNotSocket,
			check: func(t *testing.T, path string) {
				if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
					t.Errorf("regular file changed: %q, %v", b, err)
				}
			},
		},
		{
			name: "a directory is never deleted",
			prepare: func(t *testing.T, path string) {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: bootstrap.ErrNotSocket,
			check: func(t *testing.T, path string) {
				if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
					t.Errorf("directory gone: %v", err)
				}
			},
		},
		{
			name: "a symlink to a dead socket is not followed or deleted",
			prepare: func(t *testing.T, path string) {
				target := filepath.Join(filepath.Dir(path), "target.sock")
				deadSocket(t, target)
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: bootstrap.ErrNotSocket,
			check: func(t *testing.T, path string) {
				if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("symlink changed: %v", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(socketDir(t), "m.sock")
			tc.prepare(t, path)
			l, err := bootstrap.Listen(path)
			if tc.wantErr != nil {
				if l != nil {
					l.Close()
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Listen = %v, want %v", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				t.Cleanup(func() { l.Close() })
				c, err := net.Dial("unix", path)
				if err != nil {
					t.Fatalf("dial the new socket: %v", err)
				}
				c.Close()
			}
			if tc.check != nil {
				tc.check(t, path)
			}
		})
	}
}

// The mode is set before listen(2); with umask 0 a plain bind would leave
// the socket world-writable.
func TestListenSocketModeIs0600EvenWithUmaskZero(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(socketDir(t), "m.sock")
	l, err := bootstrap.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
}

// Closing the listener leaves the path (Server.Close removes it), and the
// next Listen reclaims it: the restart-after-crash path.
func TestListenAfterAClosedListenerReclaimsThePath(t *testing.T) {
	path := filepath.Join(socketDir(t), "m.sock")
	l, err := bootstrap.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("path removed by listener close: %v", err)
	}
	l, err = bootstrap.Listen(path)
	if err != nil {
		t.Fatalf("second Listen: %v", err)
	}
	l.Close()
}

// The Manager refuses to bind where another user could rename its live socket away and bind their own in its place.
func TestListenRefusesDirectoriesAnotherUserCanRewrite(t *testing.T) {
	mk := func(t *testing.T, parent string, mode os.FileMode) string {
		t.Helper()
		d, err := os.MkdirTemp(parent, "d")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name   string
		dir    func(t *testing.T) string
		unsafe string // "" = Listen succeeds; else a word of the error
	}{
		{"a 0700 directory is safe", func(t *testing.T) string { return mk(t, socketDir(t), 0o700) }, ""},
		{"a sticky world-writable directory (like /tmp) is safe", func(t *testing.T) string { return mk(t, socketDir(t), 0o777|os.ModeSticky) }, ""},
		{"a world-writable directory without the sticky bit is refused", func(t *testing.T) string { return mk(t, socketDir(t), 0o777) }, "sticky"},
		{"a group-writable directory is refused", func(t *testing.T) string { return mk(t, socketDir(t), 0o770) }, "sticky"},
		{"a safe directory under an unsafe one is refused", func(t *testing.T) string {
			return mk(t, mk(t, socketDir(t), 0o777), 0o700)
		}, "sticky"},
		{"a symbolic link to a safe directory is followed", func(t *testing.T) string {
			base := socketDir(t)
			target := mk(t, base, 0o700)
			link := filepath.Join(base, "link")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, ""},
		{"a symbolic link another uid owns is refused, even into a safe directory", func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown a symbolic link to another uid")
			}
			base := socketDir(t)
			target := mk(t, base, 0o700)
			shared := mk(t, base, 0o777|os.ModeSticky) // like /tmp: anyone may add a link
			link := filepath.Join(shared, "okv")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, 61002, 61002); err != nil {
				t.Fatal(err)
			}
			return link
		}, "symbolic link owned by uid 61002"},
		{"a chain of the Manager's own links to a safe directory is followed", func(t *testing.T) string {
			base := socketDir(t)
			target := mk(t, base, 0o700)
			l1, l2 := filepath.Join(base, "l1"), filepath.Join(base, "l2")
			if err := os.Symlink(target, l1); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("l1", l2); err != nil { // relative
				t.Fatal(err)
			}
			return l2
		}, ""},
		{"a directory owned by another uid is refused", func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown a directory to another uid")
			}
			d := mk(t, socketDir(t), 0o755)
			if err := os.Chown(d, 61001, 61001); err != nil {
				t.Fatal(err)
			}
			return d
		}, "owned by uid 61001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			path := filepath.Join(dir, "okv.sock")
			l, err := bootstrap.Listen(path)
			if tc.unsafe == "" {
				if err != nil {
					t.Fatalf("Listen in %s: %v", dir, err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("Listen in %s succeeded, want ErrUnsafeDir", dir)
			}
			if !errors.Is(err, bootstrap.ErrUnsafeDir) || !strings.Contains(err.Error(), tc.unsafe) || !strings.Contains(err.Error(), "--bootstrap-socket") {
				t.Fatalf("Listen: %v; want ErrUnsafeDir naming %q and the fix", err, tc.unsafe)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused Listen left %s behind (%v)", path, err)
			}
		})
	}
}
