package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Head is what every suite's --json report carries beside its own
// keys: embedded first in each report struct, so "meta", "validity" and
// "figures" are top-level keys of the one JSON object.
type Head struct {
	Meta     Meta     `json:"meta"`
	Validity Validity `json:"validity"`
	Figures  []Figure `json:"figures"` // the headline figures with their spread over the repeats
}

// Finish fills the head of a report at the end of a run: the metadata,
// figs, and the validity judged on in with the monitor's readings (mon
// nil: none).
func (c *Common) Finish(h *Head, mon *runMonitor, in ValidityInput, figs []Figure) {
	h.Meta = c.meta()
	if figs == nil {
		figs = []Figure{}
	}
	h.Figures = figs
	in.Repeats = c.Repeats
	if mon != nil {
		mon.finish(&in)
	}
	h.Validity = Judge(in)
}

// head returns the report head itself, so that emit reaches the head of
// any report.
func (h *Head) head() *Head { return h }

// headed is a report with a reportHead.
type headed interface{ head() *Head }

// CheckOutput refuses an --output whose directory does not exist or
// cannot be written in (it creates and removes a file there), or that is a
// directory, before a run that may take minutes.
func CheckOutput(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return Usagef("--output %s: directory %s does not exist", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return Usagef("--output %s is a directory; want a file", path)
	}
	target, direct := outputTarget(path)
	if direct {
		return nil // a device or pipe (/dev/null, /dev/stdout): written as it is
	}
	f, err := os.CreateTemp(filepath.Dir(target), tempPattern(target))
	if err != nil {
		return Usagef("--output %s: cannot write in %s: %v", path, filepath.Dir(target), err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// outputTarget is the file a report for --output path lands in: path, or
// where path's symbolic links lead (the link stays a link). direct: it
// exists and is not a regular file (a device such as /dev/null, a pipe),
// so it is opened and written, never replaced.
func outputTarget(path string) (target string, direct bool) {
	// Links are followed one at a time (a link to a report not yet
	// written included), at most 40 deep, Linux's own limit.
	for range 40 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			break
		}
		t, err := os.Readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		path = t
	}
	st, err := os.Stat(path)
	return path, err == nil && !st.Mode().IsRegular()
}

// tempPattern is the os.CreateTemp pattern of the file a report is
// written to before it is renamed to path: hidden, beside it.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".*.tmp" }

// WriteReportFile writes what write writes to path (its outputTarget)
// through a temporary file beside it, renamed over it (mode 0644) only
// once complete: a failed write leaves an earlier report intact and no
// temporary file behind. A device or pipe is written directly. Errors
// name --output.
func WriteReportFile(path string, write func(io.Writer) error) (err error) {
	path, direct := outputTarget(path)
	if direct {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--output %s: %w", path, err)
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("--output %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("--output %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--output %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}

// Emit writes a suite's report: one JSON object (with --json) or the table
// that table writes followed by the figures' spread and the validity, to
// stdout or, with --output FILE, to FILE (replaced whole once written,
// mode 0644: writeReportFile) with a line naming it on stderr. Errors are
// the writer's or the file's, naming --output; then, with --strict, an
// *invalidRunError if the report is marked invalid.
func (c *Common) Emit(stdout, stderr io.Writer, rep headed, table func(io.Writer) error) error {
	write := func(w io.Writer) error {
		if c.Json {
			return json.NewEncoder(w).Encode(rep)
		}
		err := table(w)
		h := rep.head()
		if err == nil && len(h.Figures) > 0 {
			fmt.Fprintln(w)
			err = writeFigures(w, h.Meta.Repeats, h.Figures)
		}
		if err == nil && h.Validity.Checks != nil {
			fmt.Fprintln(w)
			err = writeValidity(w, h.Validity)
		}
		return err
	}
	var err error
	if c.Output == "" {
		err = write(stdout)
	} else if err = WriteReportFile(c.Output, write); err == nil {
		fmt.Fprintf(stderr, "report written to %s\n", c.Output)
	}
	if err == nil && c.Strict && rep.head().Validity.Checks != nil && !rep.head().Validity.Valid {
		err = &InvalidRunError{Reasons: rep.head().Validity.Reasons}
	}
	return err
}
