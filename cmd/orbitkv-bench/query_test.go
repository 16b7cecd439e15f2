package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestQueryFlagsNameTheBadFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--hashes", "0"}, "--hashes"},
		{[]string{"--hashes", "2000"}, "--hashes"},
		{[]string{"--iters", "0"}, "--iters"},
		{[]string{"--cold-gap", "2s"}, "--cold-gap"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		_, err := parseQueryFlags(c.args, &bytes.Buffer{})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: got %v, want a usage error naming %s", c.args, err, c.flag)
		}
	}
}

func TestQueryRunsAgainstARealManager(t *testing.T) {
	dir := binaries(t)
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), "query", "--iters", "200", "--cold-iters", "5", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orbitkv-bench query: %v\n%s", err, stderr.String())
	}
	var rep queryReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %q: %v", stdout.String(), err)
	}
	for _, m := range []map[string]Stats{rep.Hot, rep.Cold} {
		for _, op := range []string{"query", "ping"} {
			if s := m[op]; s.N == 0 || s.P50 == 0 || s.P50 > s.P99 || s.P99 > s.P999 {
				t.Errorf("%s stats %+v: want samples with ordered percentiles", op, s)
			}
		}
	}
	if rep.Hashes != 32 {
		t.Errorf("hashes %d, want the default 32", rep.Hashes)
	}
}
