package lifecycle

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// runDir makes a /run-like parent (mode 0755, owned by this process) with
// a runtime directory "orbitkv" (mode 0755) in it, both short enough for a
// socket path, and returns the runtime directory.
func runDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "okvrun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	dir := filepath.Join(parent, "orbitkv")
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listen binds a Unix socket at path for the test's duration.
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// needRoot skips a case that chowns files to another uid.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("chown to another uid needs root; euid is %d", os.Geteuid())
	}
}

func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func TestManagerSocketPath(t *testing.T) {
	euid := os.Geteuid()
	long := "/" + strings.Repeat("d", MaxSocketPath-len("//manager.sock"))
	t.Run("RUNTIME_DIRECTORY is the socket's directory", func(t *testing.T) {
		dir := runDir(t)
		got, err := ManagerSocketPath("127.0.0.1:7470", "/run/unit-dir", dir, euid)
		if err != nil || got != "/run/unit-dir/manager.sock" {
			t.Fatalf("got %q, %v; want /run/unit-dir/manager.sock", got, err)
		}
	})
	t.Run("of several RUNTIME_DIRECTORY entries the first is taken", func(t *testing.T) {
		got, err := ManagerSocketPath("127.0.0.1:7470", "/run/a:/run/b", "/nonexistent", euid)
		if err != nil || got != "/run/a/manager.sock" {
			t.Fatalf("got %q, %v; want /run/a/manager.sock", got, err)
		}
	})
	t.Run("a relative RUNTIME_DIRECTORY is refused naming it", func(t *testing.T) {
		_, err := ManagerSocketPath("127.0.0.1:7470", "run/a", "/nonexistent", euid)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "RUNTIME_DIRECTORY") {
			t.Fatalf("err = %v; want EINVAL naming RUNTIME_DIRECTORY", err)
		}
	})
	t.Run("a RUNTIME_DIRECTORY path of 107 bytes is accepted, 108 refused", func(t *testing.T) {
		if got, err := ManagerSocketPath("127.0.0.1:7470", long, "/nonexistent", euid); err != nil || len(got) != MaxSocketPath {
			t.Fatalf("got %q (%d bytes), %v; want a 107-byte path", got, len(got), err)
		}
		_, err := ManagerSocketPath("127.0.0.1:7470", long+"d", "/nonexistent", euid)
		if !errors.Is(err, syscall.ENAMETOOLONG) || !strings.Contains(err.Error(), "limit 107") {
			t.Fatalf("err = %v; want ENAMETOOLONG naming the limit 107", err)
		}
	})
	t.Run("a runtime directory of the Manager's uid holds the socket", func(t *testing.T) {
		dir := runDir(t)
		got, err := ManagerSocketPath("127.0.0.1:7470", "", dir, euid)
		if err != nil || got != filepath.Join(dir, "manager.sock") {
			t.Fatalf("got %q, %v; want %s/manager.sock", got, err, dir)
		}
	})
	t.Run("a runtime directory of another uid is not the Manager's", func(t *testing.T) {
		needRoot(t)
		dir := runDir(t)
		if err := os.Chown(dir, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		got, err := ManagerSocketPath("127.0.0.1:7470", "", dir, euid)
		if err != nil || got != "/tmp/orbitkv-127.0.0.1-7470.sock" {
			t.Fatalf("got %q, %v; want the derived path", got, err)
		}
	})
	t.Run("a missing runtime directory leaves the derived path of --listen", func(t *testing.T) {
		got, err := ManagerSocketPath("[::1]:7471", "", "/nonexistent/orbitkv", euid)
		if err != nil || got != "/tmp/orbitkv-::1-7471.sock" {
			t.Fatalf("got %q, %v; want /tmp/orbitkv-::1-7471.sock", got, err)
		}
	})
	t.Run("a file or a symbolic link in the runtime directory's place is not it", func(t *testing.T) {
		dir := runDir(t)
		file, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{file, link} {
			if got, err := ManagerSocketPath("127.0.0.1:7470", "", p, euid); err != nil || got != "/tmp/orbitkv-127.0.0.1-7470.sock" {
				t.Errorf("runtime dir %s: got %q, %v; want the derived path", p, got, err)
			}
		}
	})
	t.Run("a bad listen address is refused naming it", func(t *testing.T) {
		_, err := ManagerSocketPath("127.0.0.1", "", "/nonexistent", euid)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), `"127.0.0.1"`) {
			t.Fatalf("err = %v; want EINVAL naming the address", err)
		}
	})
}

func TestClientSocketPath(t *testing.T) {
	dir := runDir(t)
	sock := filepath.Join(dir, "manager.sock")
	listen(t, sock)
	empty := runDir(t)
	derived := "/tmp/orbitkv-127.0.0.1-7470.sock"
	for _, tc := range []struct {
		name       string
		path, addr string
		env        func(string) string
		runtime    string
		want       string
		source     Source
		errno      syscall.Errno
		errText    string
	}{
		{"an explicit path comes first", "/x/y.sock", "", env(EnvBootstrapSocket, "/e.sock"), dir, "/x/y.sock", SourceOption, 0, ""},
		{"an explicit address comes before the environment", "", "10.0.0.1:7471", env(EnvBootstrapSocket, "/e.sock"), dir, "/tmp/orbitkv-10.0.0.1-7471.sock", SourceOption, 0, ""},
		{"ORBITKV_BOOTSTRAP_SOCKET comes before the runtime directory", "", "", env(EnvBootstrapSocket, "/e.sock"), dir, "/e.sock", SourceEnv, 0, ""},
		{"the runtime directory's socket comes before the derived path", "", "", env(EnvListen, "h:1"), dir, sock, SourceRuntimeDir, 0, ""},
		{"no socket in the runtime directory leaves the derived path", "", "", env(), empty, derived, SourceDerived, 0, ""},
		{"a file named manager.sock is not a socket", "", "", env(), filepath.Dir(dir), derived, SourceDerived, 0, ""},
		{"ORBITKV_LISTEN is the address derived from", "", "", env(EnvListen, "[::1]:7471"), empty, "/tmp/orbitkv-::1-7471.sock", SourceDerived, 0, ""},
		{"a bad ORBITKV_LISTEN is refused naming it", "", "", env(EnvListen, "nope"), empty, "", 0, syscall.EINVAL, "ORBITKV_LISTEN"},
		{"a bad explicit address is refused naming it", "", "a/b:1", env(), empty, "", 0, syscall.EINVAL, `"a/b:1"`},
		{"an ORBITKV_BOOTSTRAP_SOCKET of 108 bytes is refused naming it", "", "", env(EnvBootstrapSocket, "/"+strings.Repeat("s", 107)), empty, "", 0, syscall.ENAMETOOLONG, "ORBITKV_BOOTSTRAP_SOCKET"},
		{"an explicit path of 108 bytes is refused", "/" + strings.Repeat("s", 107), "", env(), empty, "", 0, syscall.ENAMETOOLONG, "limit 107"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a file named manager.sock is not a socket" {
				if err := os.WriteFile(filepath.Join(tc.runtime, "manager.sock"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ClientSocketPath(tc.path, tc.addr, tc.env, tc.runtime)
			if tc.errno != 0 {
				if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("got %+v, %v; want an error wrapping %v naming %s", got, err, tc.errno, tc.errText)
				}
				return
			}
			if err != nil || got.Path != tc.want || got.Source != tc.source {
				t.Fatalf("got %+v, %v; want %s from %v", got, err, tc.want, tc.source)
			}
			if tc.source != SourceRuntimeDir && got.VouchedUID != -1 {
				t.Errorf("VouchedUID = %d for source %v; want -1", got.VouchedUID, got.Source)
			}
		})
	}
	t.Run("the runtime directory's owner is vouched for", func(t *testing.T) {
		needRoot(t)
		got, err := ClientSocketPath("", "", env(), dir)
		if err != nil || got.VouchedUID != 0 {
			t.Fatalf("got %+v, %v; want VouchedUID 0 (the owner)", got, err)
		}
	})
}

func TestRuntimeDirOwner(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name       string
		parentUID  int
		parentMode os.FileMode
		dirMode    os.FileMode
		wantOK     bool
	}{
		{"a root-owned 0755 parent vouches for a 0750 directory's owner", 0, 0o755, 0o750, true},
		{"a 1755 parent (sticky, not writable) vouches too", 0, 0o1755, 0o700, true},
		{"a parent owned by another uid is refused", 12345, 0o755, 0o750, false},
		{"a group-writable parent is refused", 0, 0o775, 0o750, false},
		{"an other-writable sticky parent (like /tmp) is refused", 0, 0o1777, 0o750, false},
		{"a group-writable runtime directory is refused", 0, 0o755, 0o770, false},
		{"an other-writable runtime directory is refused", 0, 0o755, 0o757, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := runDir(t)
			parent := filepath.Dir(dir)
			if err := os.Chown(dir, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(parent, tc.parentUID, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, tc.parentMode); err != nil {
				t.Fatal(err)
			}
			uid, ok := RuntimeDirOwner(dir)
			if ok != tc.wantOK || (ok && uid != 12345) {
				t.Fatalf("RuntimeDirOwner = %d, %v; want 12345, %v", uid, ok, tc.wantOK)
			}
		})
	}
	t.Run("a symbolic link in the runtime directory's place is refused", func(t *testing.T) {
		dir := runDir(t)
		link := filepath.Join(filepath.Dir(dir), "link")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{link, link + "/"} {
			if uid, ok := RuntimeDirOwner(p); ok {
				t.Errorf("RuntimeDirOwner(%q) = %d, true; want false", p, uid)
			}
		}
	})
	t.Run("a missing runtime directory is refused", func(t *testing.T) {
		if uid, ok := RuntimeDirOwner(filepath.Join(runDir(t), "none")); ok {
			t.Fatalf("RuntimeDirOwner = %d, true; want false", uid)
		}
	})
}
