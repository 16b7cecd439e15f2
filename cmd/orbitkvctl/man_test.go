package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/internal/manpage"
)

var update = flag.Bool("update", false, "rewrite docs/man/orbitkvctl*.1 from the commands (make man)")

// The committed man pages are what the commands generate: make man
// rewrites them (go test -run TestManPagesAreCurrent -update) and make
// check-generated fails on a difference.
func TestManPagesAreCurrent(t *testing.T) {
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	manpage.Check(t, root, "ORBITKVCTL", "orbitkvctl", "../../docs/man", *update)
}
