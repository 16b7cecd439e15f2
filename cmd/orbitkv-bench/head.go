package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// reportHead is what every suite's --json report carries beside its own
// keys: embedded first in each report struct, so "meta", "validity" and
// "figures" are top-level keys of the one JSON object.
type reportHead struct {
	Meta     reportMeta `json:"meta"`
	Validity validity   `json:"validity"`
	Figures  []figure   `json:"figures"` // the headline figures with their spread over the repeats
}

// finish fills the head of a report at the end of a run: the metadata,
// figs, and the validity judged on in with the monitor's readings (mon
// nil: none).
func (c *suiteCommon) finish(h *reportHead, mon *runMonitor, in validityInput, figs []figure) {
	h.Meta = c.meta()
	if figs == nil {
		figs = []figure{}
	}
	h.Figures = figs
	in.Repeats = c.repeats
	if mon != nil {
		mon.finish(&in)
	}
	h.Validity = judge(in)
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
// that table writes followed by the figures' spread and the validity, to
// stdout or, with --output FILE, to FILE (created or truncated, mode 0644)
// with a line naming it on stderr. Errors are the writer's or the file's,
// naming --output; then, with --strict, an *invalidRunError if the report
// is marked invalid.
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
		h := rep.head()
		if err == nil && len(h.Figures) > 0 {
			fmt.Fprintln(w)
			err = writeFigures(w, h.Meta.Repeats, h.Figures)
		}
		if err == nil && h.Validity.Checks != nil {
			fmt.Fprintln(w)
			err = writeValidity(w, h.Validity)
		}
	}
	if f != nil {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("--output: %w", cerr)
		}
		if err == nil {
			fmt.Fprintf(stderr, "report written to %s\n", c.output)
		}
	}
	if err == nil && c.strict && rep.head().Validity.Checks != nil && !rep.head().Validity.Valid {
		err = &invalidRunError{reasons: rep.head().Validity.Reasons}
	}
	return err
}
