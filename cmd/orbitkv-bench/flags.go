package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
)

// suiteFlags is the flag handling every suite shares: the usage text, the
// Manager a suite may start (--manager-bin, --manager-args), and parsing
// into usage errors that name the flag.
type suiteFlags struct {
	*flag.FlagSet
	managerBin  string
	managerArgs string
}

// newSuiteFlags makes the flag set of suite name; about is the usage
// paragraph printed between the usage line and the flags.
func newSuiteFlags(name string, out io.Writer, about ...string) *suiteFlags {
	f := &suiteFlags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.SetOutput(out)
	f.StringVar(&f.managerBin, "manager-bin", "", "Manager binary to start (default: orbitkv-manager next to this binary, then ./bin/orbitkv-manager)")
	f.StringVar(&f.managerArgs, "manager-args", "", "extra space-separated arguments for a Manager the bench starts (e.g. \"--copy-workers 2\"); they come last and win")
	f.Usage = func() {
		fmt.Fprintf(out, "usage: orbitkv-bench %s [flags]\n\n", name)
		for _, l := range about {
			fmt.Fprintln(out, l)
		}
		fmt.Fprintln(out)
		fmt.Fprintln(out, "flags:")
		f.PrintDefaults()
	}
	return f
}

// parse parses args; errors are flag.ErrHelp or a *usageError.
func (f *suiteFlags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usagef("%v", err)
	}
	if f.NArg() > 0 {
		return usagef("unexpected argument %q", f.Arg(0))
	}
	return nil
}

// manager returns --manager-bin and the fields of --manager-args.
func (f *suiteFlags) manager() (string, []string) {
	return f.managerBin, strings.Fields(f.managerArgs)
}

// parseSizes parses --sizes: comma-separated sizes (256KiB, 2MiB), each
// at most 256 MiB, none twice, at least one. check (may be nil) adds a
// suite's own rule; its error text follows "--sizes: SIZE (N bytes) ".
func parseSizes(value string, check func(n uint64) string) ([]uint64, error) {
	var out []uint64
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := humanize.ParseBytes(s)
		if err != nil {
			return nil, usagef("--sizes: %q is not a size (examples: 256KiB, 2MiB)", s)
		}
		switch {
		case n == 0 || n > 256<<20:
			return nil, usagef("--sizes: %s must be between 1 byte and 256MiB", s)
		case slices.Contains(out, n):
			return nil, usagef("--sizes: %s named twice", s)
		}
		if check != nil {
			if why := check(n); why != "" {
				return nil, usagef("--sizes: %s (%d bytes) %s", s, n, why)
			}
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usagef("--sizes names no size")
	}
	return out, nil
}
