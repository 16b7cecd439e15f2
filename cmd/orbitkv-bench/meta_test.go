package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCPUInfoFindsTheModelAndCountsProcessors(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		wantModel string
		wantCores int
	}{
		{"two x86 processors", "processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n", "AMD EPYC", 2},
		{"an arm64 text without a model name", "processor\t: 0\nBogoMIPS\t: 50.00\n", "", 1},
		{"an empty text", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, cores := parseCPUInfo(tt.text)
			if model != tt.wantModel || cores != tt.wantCores {
				t.Errorf("parseCPUInfo = %q, %d; want %q, %d", model, cores, tt.wantModel, tt.wantCores)
			}
		})
	}
}

func TestReportMetaCarriesTheRunsFacts(t *testing.T) {
	start := time.Date(2026, 12, 1, 17, 30, 5, 999, time.FixedZone("CET", 3600))
	args := []string{"--n", "10", "--json"}
	m := newMeta("channel", args, 3, start)
	args[0] = "changed"
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"commit", "cores", "cpu_model", "flags", "go_version", "kernel", "repeats", "schema", "suite", "timestamp", "version"}
	if keys := sortedKeys(got); !slices.Equal(keys, want) {
		t.Errorf("meta keys = %v, want %v", keys, want)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"the schema is the current one", m.Schema == reportSchema},
		{"the suite is named", m.Suite == "channel"},
		{"the flags are a copy of the arguments as given", slices.Equal(m.Flags, []string{"--n", "10", "--json"})},
		{"the timestamp is RFC 3339 UTC in whole seconds", m.Timestamp == "2026-12-01T16:30:05Z"},
		{"the kernel is uname's, starting with Linux", strings.HasPrefix(m.Kernel, "Linux ")},
		{"the cores are counted", m.Cores >= 1},
		{"the version and commit are filled", m.Version != "" && m.Commit != ""},
		{"the repeats are recorded", m.Repeats == 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("meta = %+v", m)
			}
		})
	}
}

func TestOutputWritesTheReportToTheFile(t *testing.T) {
	dir := t.TempDir()
	rep := &policyReport{reportHead: reportHead{Meta: reportMeta{Schema: reportSchema, Suite: "policy"}}, Trace: "t"}
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
			c := &suiteCommon{json: tt.json, output: path}
			if err := c.emit(&stdout, &stderr, rep, table); err != nil {
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
	rep := &policyReport{reportHead: reportHead{Meta: reportMeta{Schema: reportSchema, Suite: "policy"},
		Figures: []figure{{Name: "x", Unit: "ns", Better: lowerIsBetter, Value: math.NaN()}}}}
	c := &suiteCommon{json: true, output: path}
	if err := c.emit(io.Discard, io.Discard, rep, nil); err == nil || !strings.Contains(err.Error(), "--output") {
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
	rep := &policyReport{reportHead: reportHead{Meta: reportMeta{Schema: reportSchema, Suite: "policy"}}, Trace: "t"}
	t.Run("a report to /dev/null leaves /dev/null a device", func(t *testing.T) {
		c := &suiteCommon{json: true, output: os.DevNull}
		if err := c.emit(io.Discard, io.Discard, rep, nil); err != nil {
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
		c := &suiteCommon{json: true, output: link}
		if err := c.emit(io.Discard, io.Discard, rep, nil); err != nil {
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
			_, err := parsePolicyFlags([]string{"--output", tt.path}, io.Discard)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
