package ssd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is a uid that is neither root nor this process's: the owner an
// attacking user's files have.
const nobody = 65534

// The SSD tier's directory gets the socket directory's checks, and its
// files must be this uid's own regular 0600 files: another user's
// directory, a directory anyone may write, another user's data file, a
// symbolic link in a file's place or a file open to others are refused
// naming what is wrong, and nothing is read or written through them.
func TestOpenRefusesFilesAndDirectoriesAnotherUserControls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making another user's files takes root (chown)")
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    string
	}{
		{"a directory of another uid", func(t *testing.T, dir string) {
			must(t, os.Chown(dir, nobody, nobody))
		}, "owned by uid 65534"},
		{"a directory anyone may write", func(t *testing.T, dir string) {
			must(t, os.Chmod(dir, 0o777))
		}, "writable by group or others"},
		{"another uid's data file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, dataName)
			must(t, os.WriteFile(p, nil, 0o666))
			must(t, os.Chmod(p, 0o666))
			must(t, os.Chown(p, nobody, nobody))
		}, "owned by uid 65534"},
		{"a data file open to others", func(t *testing.T, dir string) {
			p := filepath.Join(dir, dataName)
			must(t, os.WriteFile(p, nil, 0o600))
			must(t, os.Chmod(p, 0o644))
		}, "open to group or others"},
		{"a symbolic link as the data file", func(t *testing.T, dir string) {
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte("not KV"), 0o600))
			must(t, os.Symlink(victim, filepath.Join(dir, dataName)))
		}, "symbolic link"},
		{"a symbolic link as the index", func(t *testing.T, dir string) {
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte("not an index"), 0o600))
			must(t, os.Symlink(victim, filepath.Join(dir, indexName)))
		}, "symbolic link"},
		{"a data file with another hard link", func(t *testing.T, dir string) {
			other := filepath.Join(dir, "other")
			must(t, os.WriteFile(other, []byte("another file"), 0o600))
			must(t, os.Link(other, filepath.Join(dir, dataName)))
		}, "2 hard links"},
		{"another uid's index", func(t *testing.T, dir string) {
			p := filepath.Join(dir, indexName)
			must(t, os.WriteFile(p, nil, 0o600))
			must(t, os.Chown(p, nobody, nobody))
		}, "owned by uid 65534"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(directDir(t), "tier")
			must(t, os.Mkdir(dir, 0o700))
			c.prepare(t, dir)
			st, err := Open(testSpec(dir, 4), nil)
			if err == nil {
				st.Close()
				t.Fatalf("Open succeeded; want a refusal saying %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open = %v; want a refusal saying %q", err, c.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
