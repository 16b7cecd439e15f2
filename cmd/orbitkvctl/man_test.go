package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra/doc"
)

var update = flag.Bool("update", false, "rewrite docs/man/orbitkvctl*.1 from the commands (make man)")

// manDir holds the committed man pages.
const manDir = "../../docs/man"

// manDate is the date in the pages' header, fixed so the pages do not
// change from one day to the next.
var manDate = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// genMan writes the man pages of orbitkvctl and its commands into dir.
func genMan(t *testing.T, dir string) {
	t.Helper()
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	h := &doc.GenManHeader{Title: "ORBITKVCTL", Section: "1", Source: "OrbitKV", Manual: "OrbitKV Manual", Date: &manDate}
	if err := doc.GenManTree(root, h, dir); err != nil {
		t.Fatal(err)
	}
}

// The committed man pages are what the commands generate: make man
// rewrites them (go test -run TestManPagesAreCurrent -update) and make
// check-generated fails on a difference.
func TestManPagesAreCurrent(t *testing.T) {
	tmp := t.TempDir()
	genMan(t, tmp)
	fresh, _ := filepath.Glob(filepath.Join(tmp, "orbitkvctl*.1"))
	if len(fresh) == 0 {
		t.Fatal("no man pages generated")
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join(manDir, "orbitkvctl*.1"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	var names []string
	for _, p := range fresh {
		name := filepath.Base(p)
		names = append(names, name)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		committed := filepath.Join(manDir, name)
		if *update {
			if err := os.WriteFile(committed, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(committed); err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/man/%s is stale or missing (%v): run make man and commit", name, err)
		}
	}
	committed, _ := filepath.Glob(filepath.Join(manDir, "orbitkvctl*.1"))
	for _, p := range committed {
		if !slices.Contains(names, filepath.Base(p)) {
			t.Errorf("docs/man/%s is no longer generated: run make man and commit", filepath.Base(p))
		}
	}
}
