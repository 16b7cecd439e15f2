package ssd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The tier's files (the data file, the index log and its temporary) hold
// every demoted block's bytes and hashes. Each is opened without following
// a symbolic link and must then be a regular file of this process's uid
// with no permission bits for group or others; anything else is refused
// naming the path, its owner and its mode, and never read or written; so
// is one with another hard link (writing it would write the other name's
// file too).

// checkOwnFile applies that rule to an open file.
func checkOwnFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ssd tier: stat %s: %w", f.Name(), err)
	}
	uid, links := ^uint32(0), uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, links = st.Uid, st.Nlink
	}
	switch euid := uint32(os.Geteuid()); {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("ssd tier: %s is %v, not a regular file; remove it", f.Name(), fi.Mode().Type())
	case uid != euid:
		return fmt.Errorf("ssd tier: %s is owned by uid %d, not the Manager's uid %d: another user made it; remove it", f.Name(), uid, euid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("ssd tier: %s has mode %#o, open to group or others; want 0600 (chmod 600 it, or remove it)", f.Name(), uint32(fi.Mode().Perm()))
	case links != 1:
		return fmt.Errorf("ssd tier: %s has %d hard links, want 1: writing it would write another name's file; remove the other links", f.Name(), links)
	}
	return nil
}

// openOwnFile opens path (flags as os.OpenFile's, never creating) without
// following a symbolic link, and checks it.
func openOwnFile(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, flags|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, symlinkError(path, err)
	}
	if err := checkOwnFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readOwnFile reads the whole of path, checked as openOwnFile does.
func readOwnFile(path string) ([]byte, error) {
	f, err := openOwnFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// symlinkError names what O_NOFOLLOW's ELOOP means: path is a symbolic
// link where the tier keeps a regular file. Other errors pass unchanged.
func symlinkError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("ssd tier: %s is a symbolic link; the tier's files must be regular files of the Manager's uid: remove it", path)
	}
	return err
}
