package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/orbitkv/orbitkv/gocore/manager"
)

// preflight is --check: it validates the settings and runs every
// start-time check of the host (manager.Preflight: the functions the start
// runs), writing one line per check to w, "ok      NAME: what was found"
// or "failed  NAME: SETTING VALUE: why". It returns nil when all pass;
// otherwise an exitError of every failure, with exitConfig when a setting
// is wrong (the host is then not checked: the start would not get that
// far) and else the class of the first failed check (exit.go).
func preflight(o *options, w io.Writer) error {
	_, lerr := newLogger(o)
	s, verr := validate(o, slog.New(slog.DiscardHandler))
	if err := errors.Join(lerr, verr); err != nil {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(w, "failed  configuration: %s\n", line)
		}
		fmt.Fprintln(w, "the host was not checked: the settings are wrong")
		return &exitError{code: exitConfig, err: err}
	}
	fmt.Fprintln(w, "ok      configuration: every setting within its limits")
	var errs []error
	code := 0
	for _, c := range manager.Preflight(s) {
		if c.Err == nil {
			fmt.Fprintf(w, "ok      %s: %s\n", c.Name, c.Found)
			continue
		}
		k := newChecks(o)
		k.add(c.Err)
		err := k.err()
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(w, "failed  %s: %s\n", c.Name, line)
		}
		errs = append(errs, err)
		if code == 0 {
			code = classify(c.Err)
		}
	}
	if len(errs) > 0 {
		return &exitError{code: code, err: errors.Join(errs...)}
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
}
