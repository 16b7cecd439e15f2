package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/orbitkv/orbitkv/internal/manpage"
)

var update = flag.Bool("update", false, "rewrite docs/man/orbitkv-manager*.1 from the command (make man)")

// manRoot is the command tree the pages are made from, runnable so that
// the synopsis lists the flags.
func manRoot() *cobra.Command {
	root := newRoot(&options{c: &config{}})
	root.RunE = func(*cobra.Command, []string) error { return nil }
	return root
}

// genMan writes the man pages of orbitkv-manager and its subcommands into
// dir.
func genMan(t *testing.T, dir string) {
	t.Helper()
	if err := manpage.Generate(manRoot(), "ORBITKV-MANAGER", dir); err != nil {
		t.Fatal(err)
	}
}

// The committed man pages are what the command generates: make man
// rewrites them (go test -run TestManPagesAreCurrent -update) and make
// check-generated fails on a difference.
func TestManPagesAreCurrent(t *testing.T) {
	manpage.Check(t, manRoot(), "ORBITKV-MANAGER", "orbitkv-manager", "../../docs/man", *update)
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
