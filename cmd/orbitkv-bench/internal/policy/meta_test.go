package policy

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestOutputWritesTheReportToTheFile(t *testing.T) {
	dir := t.TempDir()
	rep := &PolicyReport{Head: suite.Head{Meta: suite.Meta{Schema: suite.Schema, Suite: "policy"}}, Trace: "t"}
	table := func(w io.Writer) error { _, err := io.WriteString(w, "the table\n"); return err }
	tests := []struct {
		name string
		json bool
		want string
	}{
		{"with --json the file holds the JSON object", true, `"suite":"policy"`},
		{"without --json the file holds the table", false, "the table\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "report")
			var stdout, stderr bytes.Buffer
			c := &suite.Common{Json: tt.json, Output: path}
			if err := c.Emit(&stdout, &stderr, rep, table); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(b), tt.want) {
				t.Errorf("file = %q, %v; want it to contain %q", b, err, tt.want)
			}
			if stdout.Len() != 0 || !strings.Contains(stderr.String(), path) {
				t.Errorf("stdout %q (want empty), stderr %q (want the path)", stdout.String(), stderr.String())
			}
		})
	}
}

func TestOutputKeepsTheOldReportWhenWritingFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte("the old report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A NaN cannot be encoded as JSON: the write fails after the file was
	// chosen.
	rep := &PolicyReport{Head: suite.Head{Meta: suite.Meta{Schema: suite.Schema, Suite: "policy"},
		Figures: []suite.Figure{{Name: "x", Unit: "ns", Better: suite.LowerIsBetter, Value: math.NaN()}}}}
	c := &suite.Common{Json: true, Output: path}
	if err := c.Emit(io.Discard, io.Discard, rep, nil); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Fatalf("emit = %v, want an error naming --output", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "the old report\n" {
		t.Errorf("file after the failed write = %q, %v; want the old report intact", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*")); len(left) != 1 {
		t.Errorf("files in the directory = %q, want only the report (no temporary file left)", left)
	}
}

func TestOutputReplacesNeitherDevicesNorLinks(t *testing.T) {
	rep := &PolicyReport{Head: suite.Head{Meta: suite.Meta{Schema: suite.Schema, Suite: "policy"}}, Trace: "t"}
	t.Run("a report to /dev/null leaves /dev/null a device", func(t *testing.T) {
		c := &suite.Common{Json: true, Output: os.DevNull}
		if err := c.Emit(io.Discard, io.Discard, rep, nil); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("%s after the report: %v, %v; want a character device still", os.DevNull, st.Mode(), err)
		}
	})
	t.Run("a report to a symbolic link lands where it points and the link stays", func(t *testing.T) {
		dir := t.TempDir()
		real, link := filepath.Join(dir, "real.json"), filepath.Join(dir, "link.json")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		c := &suite.Common{Json: true, Output: link}
		if err := c.Emit(io.Discard, io.Discard, rep, nil); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		st, lerr := os.Lstat(link)
		if err != nil || !strings.Contains(string(b), `"suite":"policy"`) || lerr != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("target %q, %v; link mode %v, %v; want the report in the target and the link kept", b, err, st.Mode(), lerr)
		}
	})
}

func TestOutputIsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		want string
	}{
		{"a file in a missing directory is refused", filepath.Join(dir, "nope", "r.json"), "does not exist"},
		{"a directory is refused", dir, "is a directory"},
		{"a new file in an existing directory is accepted", filepath.Join(dir, "r.json"), ""},
		// /proc/self is a directory no one, root included, can create a file in.
		{"a directory the report cannot be written in is refused", "/proc/self/r.json", "cannot write in /proc/self"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicyFlags([]string{"--output", tt.path}, io.Discard)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
