// Package manpage generates the committed man pages of a cobra command
// tree and checks them against the tree (cobra/doc), for the man_test.go
// of each binary: `make man` rewrites them (go test -run
// TestManPagesAreCurrent -update) and `make check-generated` fails on a
// difference. Test-only: no binary imports it.
package manpage

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Date is the date in every page's header, fixed so the pages do not
// change from one day to the next; the text is what Check compares.
var Date = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// Generate writes the pages of root and its commands into dir, titled
// title (e.g. "ORBITKVCTL").
func Generate(root *cobra.Command, title, dir string) error {
	h := &doc.GenManHeader{Title: title, Section: "1", Source: "OrbitKV", Manual: "OrbitKV Manual", Date: &Date}
	return doc.GenManTree(root, h, dir)
}

// Check generates root's pages and compares them with the files
// dir/name*.1: a stale, missing or no longer generated page fails t. With
// update it rewrites dir's pages instead (and removes stale ones).
func Check(t *testing.T, root *cobra.Command, title, name, dir string, update bool) {
	t.Helper()
	tmp := t.TempDir()
	if err := Generate(root, title, tmp); err != nil {
		t.Fatal(err)
	}
	fresh, _ := filepath.Glob(filepath.Join(tmp, name+"*.1"))
	if len(fresh) == 0 {
		t.Fatal("no man pages generated")
	}
	if update {
		old, _ := filepath.Glob(filepath.Join(dir, name+"*.1"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, p := range fresh {
		base := filepath.Base(p)
		names = append(names, base)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		committed := filepath.Join(dir, base)
		if update {
			if err := os.WriteFile(committed, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(committed); err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/man/%s is stale or missing (%v): run make man and commit", base, err)
		}
	}
	committed, _ := filepath.Glob(filepath.Join(dir, name+"*.1"))
	for _, p := range committed {
		if !slices.Contains(names, filepath.Base(p)) {
			t.Errorf("docs/man/%s is no longer generated: run make man and commit", filepath.Base(p))
		}
	}
}
