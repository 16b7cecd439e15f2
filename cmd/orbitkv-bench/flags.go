package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
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
