package ssd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// refusal checks that err is a *limit.Refused naming field and saying want.
func refusal(t *testing.T, err error, field, want string) {
	t.Helper()
	var r *limit.Refused
	if !errors.As(err, &r) || r.Field != field || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open = %v, want a limit.Refused naming %s and saying %q", err, field, want)
	}
}

func TestOpenCreatesAMissingDirectoryOnlyWhenAsked(t *testing.T) {
	parent := directDir(t)
	s := testSpec(filepath.Join(parent, "tier"), 4)
	_, err := Open(s, nil)
	refusal(t, err, "ssd.Dir", "does not exist")
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Open left %s behind (stat: %v)", s.Dir, err)
	}
	s.CreateDir = true
	st := mustOpen(t, s)
	st.Close()
	if fi, err := os.Stat(s.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("Open with CreateDir: stat %v, mode %v; want a 0700 directory", err, fi.Mode())
	}
}

// A capacity the filesystem cannot hold is refused before any file is
// made, and a directory Open made for it is removed again.
func TestOpenRefusesACapacityAboveTheFreeSpaceAndLeavesNothing(t *testing.T) {
	parent := directDir(t)
	s := Spec{Dir: filepath.Join(parent, "tier"), CreateDir: true, SlotBytes: 1 << 30, CapacityBytes: 1 << 50, VerifyOnOpen: -1}
	_, err := Open(s, nil)
	refusal(t, err, "ssd.CapacityBytes", "reserved for other files")
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Open left %s behind (stat: %v)", s.Dir, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(parent, &fs); err != nil {
		t.Fatal(err)
	}
	if got := Reserve(fs.Blocks * uint64(fs.Bsize)); got < MinReserveBytes {
		t.Fatalf("Reserve = %d, below its floor", got)
	}
}

func TestOpenRefusesAMemoryBackedFilesystem(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || int64(fs.Type) != tmpfsMagic {
		t.Skipf("/dev/shm is not a tmpfs here (statfs: %v)", err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "orbitkv-ssd-tmpfs-")
	if err != nil {
		t.Skipf("no directory in /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	_, err = Open(testSpec(dir, 4), nil)
	refusal(t, err, "ssd.Dir", "memory-backed")
	if _, err := os.Stat(filepath.Join(dir, dataName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Open made a data file (stat: %v)", err)
	}
}

// A data file Open made is removed when Open fails later; one that was
// there before (a restart's blocks) is kept.
func TestAFailedOpenRemovesOnlyTheFilesItMade(t *testing.T) {
	dir := directDir(t)
	s := testSpec(dir, 4)
	st := mustOpen(t, s)
	held := filepath.Join(dir, dataName)
	// A second Open of a locked store fails after opening the file: the
	// file it found must stay.
	if _, err := Open(s, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("a failed Open removed the data file that was there: %v", err)
	}
	st.Close()
}

// CreateDir makes missing parents too, and a failed Open removes every
// directory it made.
func TestCreateDirMakesParentsAndAFailureRemovesThem(t *testing.T) {
	parent := directDir(t)
	s := testSpec(filepath.Join(parent, "a", "b", "tier"), 4)
	s.CreateDir = true
	st := mustOpen(t, s)
	st.Close()
	if _, err := os.Stat(s.Dir); err != nil {
		t.Fatalf("Open with CreateDir did not make %s: %v", s.Dir, err)
	}
	p := place{made: []string{filepath.Join(parent, "x", "y"), filepath.Join(parent, "x")}}
	if err := os.MkdirAll(p.made[0], 0o700); err != nil {
		t.Fatal(err)
	}
	p.hadData = true
	p.undo(p.made[0])
	if _, err := os.Stat(filepath.Join(parent, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("undo left %s (stat: %v)", filepath.Join(parent, "x"), err)
	}
}

func TestADirectoryThisProcessCannotWriteIsRefused(t *testing.T) {
	ro := filepath.Join(directDir(t), "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := unix.Access(ro, unix.W_OK); err == nil {
		t.Skip("this process may write a 0500 directory (root): the refusal cannot be shown here")
	}
	_, err := Open(testSpec(ro, 4), nil)
	refusal(t, err, "ssd.Dir", "not writable")
}
