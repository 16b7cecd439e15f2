package ssd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// Filesystem types (statfs f_type, linux/magic.h) that keep their files in
// memory: an SSD tier there would take RAM a second time and lose every
// block at reboot, so Open refuses them.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// Reserve is the free space Open leaves on the SSD tier's filesystem for
// everything else on it (logs, the index log's growth, other programs):
// 2% of the filesystem, at least MinReserveBytes. Space the filesystem
// keeps for root (ext4's 5%) is not counted as free to begin with.
func Reserve(fsBytes uint64) uint64 { return max(MinReserveBytes, fsBytes/50) }

// MinReserveBytes is Reserve's floor.
const MinReserveBytes = 64 << 20

// place is what prepare found: the directories it made, and whether the data
// file was there before (Open removes what it made when it fails).
type place struct {
	made       []string // directories prepare made, deepest first
	hadData    bool
	madeSecret bool // Open made mac.key
}

// CheckPlace checks s.Dir without making anything: a missing directory is
// refused unless s.CreateDir (then its nearest existing parent is checked
// in its place); a memory-backed filesystem is refused; a capacity the
// filesystem cannot hold with Reserve left free is refused (the data
// file's own allocated blocks count as free: a restart reuses them).
// Refusals are *limit.Refused naming ssd.Dir or ssd.CapacityBytes. The
// tiers call it before the RAM tier is committed; Open calls it again.
func CheckPlace(s Spec) error {
	s = s.withDefaults()
	at := s.Dir
	fi, err := os.Stat(at)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !s.CreateDir:
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: errors.New("the directory does not exist; create it, or let the Manager create it (--ssd-create-dir)")}
	case errors.Is(err, fs.ErrNotExist):
		for errors.Is(err, fs.ErrNotExist) && at != filepath.Dir(at) {
			at = filepath.Dir(at)
			fi, err = os.Stat(at)
		}
		if err != nil {
			return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: err}
		}
	case err != nil:
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: err}
	}
	if !fi.IsDir() {
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: fmt.Errorf("%s is not a directory", at)}
	}
	// The tier's files hold every demoted block's bytes and hashes: no
	// other user may replace them or the directories above them.
	if err := unixsock.CheckDirTree(at, uint32(os.Geteuid()), "ssd directory", "--ssd-dir"); err != nil {
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: err}
	}
	// The directory (or, when it is to be made, its nearest parent) must
	// take new files from this process: else the data file's creation
	// fails only after the RAM tier was committed.
	if err := unix.Faccessat(unix.AT_FDCWD, at, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: fmt.Errorf("%s is not writable by this process (uid %d): %w", at, os.Geteuid(), err)}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(at, &st); err != nil {
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: fmt.Errorf("statfs %s: %w", at, err)}
	}
	switch int64(st.Type) {
	case tmpfsMagic, ramfsMagic:
		return &limit.Refused{Field: "ssd.Dir", Value: s.Dir,
			Err: errors.New("on a memory-backed filesystem (tmpfs or ramfs): the SSD tier would take RAM and lose its blocks at reboot")}
	}
	free := st.Bavail * uint64(st.Bsize)
	var data unix.Stat_t
	if err := unix.Stat(filepath.Join(s.Dir, dataName), &data); err == nil {
		free += uint64(data.Blocks) * 512
	}
	want := uint64(s.Slots()) * s.stride()
	reserve := Reserve(st.Blocks * uint64(st.Bsize))
	if want+reserve > free {
		return &limit.Refused{Field: "ssd.CapacityBytes", Value: s.CapacityBytes,
			Err: fmt.Errorf("the filesystem of %s has %s free for the data file, %s of which stays reserved for other files; the data file needs %s; %s",
				s.Dir, humanize.IBytes(free), humanize.IBytes(reserve), humanize.IBytes(want), limit.AtMost((free-min(free, reserve))/s.stride()*s.SlotBytes))}
	}
	return nil
}

// prepare runs CheckPlace, then makes the directory when it is missing
// (CreateDir) and notes whether the data file was there before.
func prepare(s Spec) (place, error) {
	var p place
	if err := CheckPlace(s); err != nil {
		return p, err
	}
	for d := s.Dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		p.made = append(p.made, d) // deepest first
	}
	if len(p.made) > 0 {
		if err := os.MkdirAll(s.Dir, 0o700); err != nil {
			p.undo(s.Dir)
			return place{}, &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: fmt.Errorf("creating the directory: %w", err)}
		}
		// Checked again once made: another user may have made one of the
		// missing parents between CheckPlace and MkdirAll.
		if err := unixsock.CheckDirTree(s.Dir, uint32(os.Geteuid()), "ssd directory", "--ssd-dir"); err != nil {
			p.undo(s.Dir)
			return place{}, &limit.Refused{Field: "ssd.Dir", Value: s.Dir, Err: err}
		}
	}
	_, err := os.Stat(filepath.Join(s.Dir, dataName))
	p.hadData = err == nil
	return p, nil
}

// undo removes what Open made before it failed: the data file and index
// log when they were not there before, the MAC key when Open made it, and
// the directory when prepare made it.
func (p place) undo(dir string) {
	if !p.hadData {
		os.Remove(filepath.Join(dir, dataName))
		os.Remove(filepath.Join(dir, indexName))
	}
	if p.madeSecret {
		os.Remove(filepath.Join(dir, keyName))
	}
	for _, d := range p.made {
		os.Remove(d)
	}
}
