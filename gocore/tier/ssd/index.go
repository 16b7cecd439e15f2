package ssd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// Index log compaction: when the log holds at least compactMinRecords
// records and more than compactFactor per resident block, it is rewritten
// with one record per resident block. Variables so tests can lower them.
var (
	compactMinRecords = 4096
	compactFactor     = 4
)

// File names under Spec.Dir.
const (
	dataName  = "blocks.dat"
	indexName = "index.log"
	tmpSuffix = ".tmp"
)

// indexLog is the append-only index file. After Open only the committer
// goroutine touches it, and mac, which tags its records.
type indexLog struct {
	path      string
	mac       *layout.MAC
	f         *os.File
	off       int64 // end of the last complete record: the next append goes here
	records   int   // records after the header
	slotBytes uint64
}

// append writes whole records at the end of the log and makes them
// durable. On failure the log is cut back to its last complete record, so
// a later append cannot leave stale records behind its own.
func (l *indexLog) append(b []byte) error {
	if _, err := l.f.WriteAt(b, l.off); err != nil {
		l.f.Truncate(l.off)
		return fmt.Errorf("writing %s: %w", l.path, err)
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		l.f.Truncate(l.off)
		return fmt.Errorf("fdatasync %s: %w", l.path, err)
	}
	l.off += int64(len(b))
	l.records += len(b) / RecordBytes
	return nil
}

// rewrite replaces the log with a header and recs: a temporary file is
// written and fsynced, renamed over the log, and the directory fsynced,
// so a crash leaves either the old log or the new one.
func (l *indexLog) rewrite(recs []layout.Record) error {
	b := l.mac.AppendIndexHeader(make([]byte, 0, RecordBytes*(1+len(recs))), l.slotBytes)
	for _, r := range recs {
		b = l.mac.AppendRecord(b, r)
	}
	f, err := writeFileSync(l.path, b)
	if err != nil {
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.off, l.records = f, int64(len(b)), len(recs)
	return nil
}

// writeFileSync writes b to path through path.tmp (write, fsync, rename,
// fsync of the directory) and returns path opened for appending.
func writeFileSync(path string, b []byte) (*os.File, error) {
	tmp := path + tmpSuffix
	// A new file, never an existing one: whatever sits at tmp (a link,
	// another user's file) goes, and is neither followed nor truncated.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing %s: %w", tmp, err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", tmp, err)
	}
	if err := checkOwnFile(f); err != nil {
		f.Close()
		return nil, err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("replacing %s: %w", path, err)
	}
	return f, nil
}

// syncDir fsyncs a directory, making a rename or a create in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
