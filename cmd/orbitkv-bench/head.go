package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// reportHead is what every suite's --json report carries beside its own
// keys: embedded first in each report struct, so "meta" (and the keys
// added beside it) are top-level keys of the one JSON object.
type reportHead struct {
	Meta reportMeta `json:"meta"`
}

// head returns the report head itself, so that emit reaches the head of
// any report.
func (h *reportHead) head() *reportHead { return h }

// headed is a report with a reportHead.
type headed interface{ head() *reportHead }

// checkOutput refuses an --output whose directory does not exist, before
// a run that may take minutes.
func checkOutput(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return usagef("--output %s: directory %s does not exist", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("--output %s is a directory; want a file", path)
	}
	return nil
}

// emit writes a suite's report: one JSON object (with --json) or the table
// that table writes, to stdout or, with --output FILE, to FILE (created or
// truncated, mode 0644) with a line naming it on stderr. Errors are the
// writer's or the file's, naming --output.
func (c *suiteCommon) emit(stdout, stderr io.Writer, rep headed, table func(io.Writer) error) error {
	w := stdout
	var f *os.File
	if c.output != "" {
		var err error
		if f, err = os.OpenFile(c.output, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		w = f
	}
	var err error
	if c.json {
		err = json.NewEncoder(w).Encode(rep)
	} else {
		err = table(w)
	}
	if f != nil {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("--output: %w", cerr)
		}
		if err == nil {
			fmt.Fprintf(stderr, "report written to %s\n", c.output)
		}
	}
	return err
}
