package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

var update = flag.Bool("update", false, "rewrite docs/man/orbitkv-manager*.1 from the command (make man)")

// manDir holds the committed man pages.
const manDir = "../../docs/man"

// manDate is the date in the pages' header. It is fixed so the pages do
// not change from one day to the next; the text, not the date, is what
// TestManPagesAreCurrent checks.
var manDate = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// genMan writes the man pages of orbitkv-manager and its subcommands into
// dir.
func genMan(t *testing.T, dir string) {
	t.Helper()
	root := newRoot(&options{c: &config{}})
	root.RunE = func(*cobra.Command, []string) error { return nil } // runnable: the synopsis lists the flags
	h := &doc.GenManHeader{Title: "ORBITKV-MANAGER", Section: "1", Source: "OrbitKV", Manual: "OrbitKV Manual", Date: &manDate}
	if err := doc.GenManTree(root, h, dir); err != nil {
		t.Fatal(err)
	}
}

// The committed man pages are what the command generates: make man
// rewrites them (go test -run TestManPagesAreCurrent -update) and make
// check-generated fails on a difference.
func TestManPagesAreCurrent(t *testing.T) {
	tmp := t.TempDir()
	genMan(t, tmp)
	fresh, _ := filepath.Glob(filepath.Join(tmp, "orbitkv-manager*.1"))
	if len(fresh) == 0 {
		t.Fatal("no man pages generated")
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join(manDir, "orbitkv-manager*.1"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(manDir, 0o755); err != nil {
			t.Fatal(err)
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
	committed, _ := filepath.Glob(filepath.Join(manDir, "orbitkv-manager*.1"))
	for _, p := range committed {
		if !slices.Contains(names, filepath.Base(p)) {
			t.Errorf("docs/man/%s is no longer generated: run make man and commit", filepath.Base(p))
		}
	}
}

func TestManPageDocumentsEveryFlagAndTheSizeRule(t *testing.T) {
	tmp := t.TempDir()
	genMan(t, tmp)
	page, err := os.ReadFile(filepath.Join(tmp, "orbitkv-manager.1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), `\fI`) {
		t.Error("the man page has italics: a help text's _ or * read as Markdown emphasis")
	}
	text := strings.ReplaceAll(string(page), `\-`, "-")
	o := &options{c: &config{}}
	newRoot(o)
	for _, name := range flagNames(o) {
		if !strings.Contains(text, "--"+name) {
			t.Errorf("the man page lacks --%s", name)
		}
	}
	for _, want := range []string{"1 KiB = 1024 bytes", "refused as ambiguous", "ORBITKV_RAM_CAPACITY", "orbitkv-manager --ram-capacity 64GiB"} {
		if !strings.Contains(text, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
