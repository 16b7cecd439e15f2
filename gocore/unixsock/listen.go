package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means a live Manager already serves the socket path.
var ErrInUse = errors.New("socket path is served by a live process")

// ErrNotSocket means the path exists and is not a socket; it is never deleted.
var ErrNotSocket = errors.New("path exists and is not a socket; refusing to delete it")

// ErrUnsafeDir means a directory the Manager keeps files in (the socket's,
// the SSD tier's), or one above it, lets another user replace them: it is
// owned by a uid other than root and the Manager's, or group- or
// world-writable without the sticky bit. In such a directory another user
// can rename the live socket away and bind their own in its place (and
// receive the engines' KV buffers), or put their own files in the SSD
// tier's place.
var ErrUnsafeDir = errors.New("another user could replace files in this directory")

// ErrNotOurs means the path, after bind(2), is not a socket of the
// Manager's uid with the mode Listen set: something swapped it meanwhile.
var ErrNotOurs = errors.New("socket path is not the Manager's own socket of the mode it set, after bind")

// Listen creates a Unix stream socket at path with mode mode (0600 or
// 0660) and, when gid >= 0, group gid, both set before listen(2) so that
// nobody connects through the umask's mode. The directory must be safe
// (ErrUnsafeDir: see checkDir), an existing live socket gives ErrInUse, a
// dead one is removed, a non-socket gives ErrNotSocket, and after bind the
// path must be this process's own socket of mode mode (ErrNotOurs).
// Closing l leaves the path; remove deletes it, only while it is still
// the socket made here (never what another process put there since).
// Other errors name the path and the system call.
func Listen(path string, mode os.FileMode, gid int) (l *net.UnixListener, remove func(), err error) {
	l, own, err := listenMode(path, mode, gid)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { removeIfSame(path, own) }, nil
}

// listen is Listen of mode 0600 and no group that returns what the socket
// file was right after bind (for removeIfSame).
func listen(path string) (*net.UnixListener, os.FileInfo, error) {
	return listenMode(path, 0o600, -1)
}

// listenMode is listen with the socket's mode and, when gid >= 0, its
// group set before listen(2).
func listenMode(path string, mode os.FileMode, gid int) (*net.UnixListener, os.FileInfo, error) {
	if err := checkDir(path, uint32(os.Geteuid())); err != nil {
		return nil, nil, err
	}
	if err := reclaim(path); err != nil {
		return nil, nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket: %w", err)
	}
	closeFD := true
	defer func() {
		if closeFD {
			unix.Close(fd)
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, nil, fmt.Errorf("bind %s: %w", path, err)
	}
	// Before listen: a connect to a bound socket that is not listening is
	// refused (ECONNREFUSED), so nobody can get in through the umask mode.
	if gid >= 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			os.Remove(path)
			return nil, nil, fmt.Errorf("chown :%d %s: %w", gid, path, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("chmod %#o %s: %w", uint32(mode), path, err)
	}
	own, err := checkOwn(path, uint32(os.Geteuid()), mode)
	if err != nil {
		return nil, nil, err // not removed: the path may not be ours
	}
	if err := unix.Listen(fd, 128); err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("listen %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	closeFD = false
	defer f.Close() // FileListener dups the fd
	l, err := net.FileListener(f)
	if err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("listener %s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // remove deletes the path, only while it is the socket made here
	return ul, own, nil
}

// removeIfSame removes path only if it is still the file own describes
// (same device and inode): never whatever another user may have put there.
func removeIfSame(path string, own os.FileInfo) {
	if own == nil {
		return
	}
	if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, own) {
		os.Remove(path)
	}
}

// reclaim applies the existing-path rules of docs/design.md §5.1: probe,
// then a dead socket is removed.
func reclaim(path string) error {
	dead, err := probe(path)
	if err != nil || !dead {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing dead socket %s: %w", path, err)
	}
	return nil
}

// probe reads what is at path without changing it: nothing (false, nil), a
// dead socket that bind may replace (true, nil), a live one (ErrInUse), a
// non-socket (ErrNotSocket), or a socket that cannot be probed.
func probe(path string) (dead bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, fmt.Errorf("%w: %s (mode %v)", ErrNotSocket, path, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false, fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		if o := owner(fi); o != uint32(os.Geteuid()) {
			return false, fmt.Errorf("%s is a socket of uid %d, not the Manager's uid %d (another user's process may have taken the path; remove it or use --bootstrap-socket in a 0700 directory): %w", path, o, os.Geteuid(), err)
		}
		return false, fmt.Errorf("probing existing socket %s: %w", path, err)
	}
	return true, nil
}

// CheckPath runs Listen's checks of path before bind(2) without changing
// anything: the directory rule (ErrUnsafeDir, or the directory's absence),
// the existing path (ErrInUse for a live socket, ErrNotSocket), and that
// this process may create the socket in the directory (write and search
// permission). It is the preflight of Listen; a dead socket at path
// passes (Listen removes it).
func CheckPath(path string) error {
	if err := checkDir(path, uint32(os.Geteuid())); err != nil {
		return err
	}
	if _, err := probe(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("socket directory %s: not writable by this process (uid %d): %w", dir, os.Geteuid(), err)
	}
	return nil
}

// checkDir applies CheckDirTree to the socket's directory.
func checkDir(path string, uid uint32) error {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("socket directory of %s: %w", path, err)
	}
	return CheckDirTree(dir, uid, "socket directory", "--bootstrap-socket")
}

// CheckDirTree applies the directory rule of ErrUnsafeDir to dir and every
// directory above it (the rule ssh's StrictModes applies to key files):
// each must be owned by root or uid, and if group or others may write it,
// it must be sticky (as /tmp is), so nobody but its owner can rename or
// remove what uid created in it. The path is walked one component at a
// time, following symbolic links by hand: every link met must be owned by
// root or uid too, since the owner of a link in a sticky directory can
// still point it elsewhere. what names the directory in errors ("socket
// directory"), flag the setting that chooses it ("--bootstrap-socket").
// A 0700 directory of uid is the safe choice.
func CheckDirTree(dir string, uid uint32, what, flag string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if err := checkOneDir("/", uid, what, flag); err != nil {
		return err
	}
	const maxLinks = 40 // as the kernel's path walk (MAXSYMLINKS)
	cur, links := "/", 0
	pending := strings.Split(dir, "/")
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, next, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if o := owner(fi); o != 0 && o != uid {
				return fmt.Errorf("%w: %s is a symbolic link owned by uid %d, not by root or the Manager's uid %d, who can point it elsewhere; use a 0700 directory of uid %d (%s)", ErrUnsafeDir, next, o, uid, uid, flag)
			}
			if links++; links > maxLinks {
				return fmt.Errorf("%s %s: more than %d symbolic links", what, dir, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("%s %s: %w", what, next, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			pending = append(strings.Split(target, "/"), pending...)
			continue
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s %s is not a directory", what, next)
		}
		if err := checkOneDir(next, uid, what, flag); err != nil {
			return err
		}
		cur = next
	}
	return nil
}

// checkOneDir applies the ownership and sticky rule to directory d (not a
// symbolic link).
func checkOneDir(d string, uid uint32, what, flag string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, d, err)
	}
	switch o := owner(fi); {
	case o != 0 && o != uid:
		return fmt.Errorf("%w: %s is owned by uid %d, not by root or the Manager's uid %d; use a 0700 directory of uid %d (%s)", ErrUnsafeDir, d, o, uid, uid, flag)
	case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
		return fmt.Errorf("%w: %s has mode %v, writable by group or others without the sticky bit; use a 0700 directory (%s) or chmod +t it", ErrUnsafeDir, d, fi.Mode().Perm(), flag)
	}
	return nil
}

// owner is fi's uid; a FileInfo without one (not from lstat) counts as
// nobody's, which no rule accepts.
func owner(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

// checkOwn reports ErrNotOurs unless path is a socket owned by uid with
// mode mode; on success it returns what the file is (for removeIfSame).
func checkOwn(path string, uid uint32, mode os.FileMode) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("checking %s after bind: %w", path, err)
	}
	switch {
	case fi.Mode()&os.ModeSocket == 0:
		return nil, fmt.Errorf("%w: %s is %v, not a socket", ErrNotOurs, path, fi.Mode())
	case owner(fi) != uid:
		return nil, fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrNotOurs, path, owner(fi), uid)
	case fi.Mode().Perm() != mode:
		return nil, fmt.Errorf("%w: %s has mode %v, want %#o", ErrNotOurs, path, fi.Mode().Perm(), uint32(mode))
	}
	return fi, nil
}
