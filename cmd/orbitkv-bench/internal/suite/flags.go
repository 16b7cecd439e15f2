package suite

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
)

// Common is what every suite's config holds from the shared flags:
// --json, --output, --repeats, --strict, and, in a suite that starts a
// Manager (ManagerFlags), --manager-bin and --manager-args. The suite
// configs embed it.
type Common struct {
	Json        bool     // --json: print one JSON object instead of the table
	Output      string   // --output: write the report to this file instead of stdout; "" = stdout
	ManagerBin  string   // --manager-bin (ManagerFlags); "" = launch.Find's default
	ManagerArgs []string // --manager-args (ManagerFlags) split at white space; they come last and win
	PlotDir     string   // --plot of a suite that draws (plotFlag); "" = no plots
	Repeats     int      // --repeats: how often each measurement runs (1..maxRepeats)
	Strict      bool     // --strict: an invalid run exits exitInvalid

	// Progress is --progress of the long suites (progress.go).
	Progress progressMode

	suite string    // the suite's name, for the report's metadata
	args  []string  // the suite's arguments as given
	start time.Time // when the arguments were parsed: the report's timestamp
}

// meta is the metadata of this run's report.
func (c *Common) meta() Meta { return newMeta(c.suite, c.args, c.Repeats, c.start) }

// Flags is the flag parser every suite shares: the usage text, the
// shared flags into a suiteCommon, and parsing into usage errors that
// name the flag.
type Flags struct {
	*pflag.FlagSet
	common      *Common
	managerArgs string          // --manager-args as given
	set         map[string]bool // flags given on the command line, after parse
	sizeErr     error           // the *limit.Error of a size flag pflag refused
}

// NewFlags makes the flag set of suite name, whose shared flags land
// in common; about is the usage paragraph printed between the usage line
// and the flags.
func NewFlags(name string, common *Common, out io.Writer, about ...string) *Flags {
	f := &Flags{FlagSet: StandaloneFlags(name, out, about...), common: common}
	f.BoolVar(&common.Json, "json", false, "print one JSON object instead of the table")
	f.StringVar(&common.Output, "output", "", "write the report (JSON with --json, else the table) to this `file` instead of stdout")
	f.IntVar(&common.Repeats, "repeats", defaultRepeats, fmt.Sprintf("run the measurement `N` times (1..%d) and report each headline figure's spread; fewer than %d marks the report invalid", maxRepeats, minValidRepeats))
	f.BoolVar(&common.Strict, "strict", false, fmt.Sprintf("exit %d (after printing the report) when the run is invalid (bench/README.md \"Valid runs\")", ExitInvalid))
	return f
}

// ManagerFlags adds --manager-bin and --manager-args, into the Common, to
// the flags of a suite that starts a Manager.
func (f *Flags) ManagerFlags() {
	f.StringVar(&f.common.ManagerBin, "manager-bin", "", "Manager `binary` to start (default: orbitkv-manager next to this binary, then ./bin/orbitkv-manager)")
	f.StringVar(&f.managerArgs, "manager-args", "", "extra space-separated `arguments` for a Manager the bench starts (e.g. \"--copy-workers 2\"); they come last and win")
}

// DefaultRepeatsOf makes n the suite's --repeats default, in its value and
// in its help.
func (f *Flags) DefaultRepeatsOf(n int) {
	f.common.Repeats = n
	f.Lookup("repeats").DefValue = strconv.Itoa(n)
}

// ParseArgs parses args and fills the suiteCommon; errors are pflag.ErrHelp or
// a *UsageError.
func (f *Flags) ParseArgs(args []string) error {
	if err := ParseStandalone(f.FlagSet, args); err != nil {
		if f.sizeErr != nil {
			return Usagef("%v", f.sizeErr)
		}
		return err
	}
	f.set = map[string]bool{}
	f.Visit(func(fl *pflag.Flag) { f.set[fl.Name] = true })
	f.common.ManagerArgs = strings.Fields(f.managerArgs)
	f.common.suite, f.common.args, f.common.start = f.Name(), append([]string{}, args...), time.Now()
	return FirstError(Between("repeats", f.common.Repeats, 1, maxRepeats), checkPlotDir(f.common.PlotDir), CheckOutput(f.common.Output))
}

// IsSet reports whether --name was given on the command line (after parse).
func (f *Flags) IsSet(name string) bool { return f.set[name] }

// RefuseWithSocket returns a usage error if socket (--socket: an external
// Manager) is set together with any of names, the flags that configure a
// Manager the bench starts.
func (f *Flags) RefuseWithSocket(socket string, names ...string) error {
	if socket == "" {
		return nil
	}
	for _, name := range names {
		if f.set[name] {
			return Usagef("--%s configures a Manager the bench starts; it cannot be used with --socket", name)
		}
	}
	return nil
}

// TraceFlags adds --trace (into path) and --limit (into limit) of the
// suites that read a trace; verb ("replay", "simulate") is what they do
// with its requests.
func (f *Flags) TraceFlags(path *string, limit *int, verb string) {
	f.StringVar(path, "trace", "", "Mooncake JSONL trace `file`, plain or gzip (default: "+DefaultTrace+" beside this binary's ../, then under the working directory)")
	f.IntVar(limit, "limit", 0, verb+" only the first `N` requests of the trace (0 = all)")
}

// CheckLimit refuses a negative --limit.
func CheckLimit(limit int) error {
	if limit < 0 {
		return Usagef("--limit must be at least 0 (0 = every request), got %d", limit)
	}
	return nil
}

// AtLeast refuses --name = v below lo: "--NAME must be at least LO, got V".
func AtLeast[T cmp.Ordered](name string, v, lo T) error {
	if v < lo {
		return Usagef("--%s must be at least %v, got %v", name, lo, v)
	}
	return nil
}

// Between refuses --name = v outside [lo, hi]: "--NAME must be between LO
// and HI, got V".
func Between[T cmp.Ordered](name string, v, lo, hi T) error {
	if v < lo || v > hi {
		return Usagef("--%s must be between %v and %v, got %v", name, lo, hi, v)
	}
	return nil
}

// FirstError is the first non-nil of errs, in order: one check per flag,
// the first failing one reported.
func FirstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ListFlag names a comma-separated list flag for parseList.
type ListFlag struct {
	Name         string // the flag without dashes: "sizes"
	Noun         string // one item: "--sizes names no size"
	QuoteRepeats bool   // name a repeated item quoted: `--subjects: "uds" named twice`
}

// ParseList parses the value of a comma-separated list flag: items are
// trimmed, empty ones skipped, each parsed by item (whose error is
// returned as is), and kept in flag order. An item equal to an earlier one
// once parsed ("1MiB" after "1024KiB") is a usage error, and so is a list
// with no item.
func ParseList[T comparable](lf ListFlag, value string, item func(s string) (T, error)) ([]T, error) {
	var out []T
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		v, err := item(s)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, v) {
			if lf.QuoteRepeats {
				return nil, Usagef("--%s: %q named twice", lf.Name, s)
			}
			return nil, Usagef("--%s: %s named twice", lf.Name, s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, Usagef("--%s names no %s", lf.Name, lf.Noun)
	}
	return out, nil
}

// BlockSizes is a suite's rule for --sizes beyond parseSizes's own: every
// size a whole multiple of multiple bytes, and --blocks of the largest at
// most maxGiB GiB.
type BlockSizes struct {
	Multiple uint64 // each size a multiple of this many bytes
	Why      string // the error text after "--sizes: SIZE (N bytes) " when one is not
	Blocks   int    // --blocks
	MaxGiB   uint64 // --blocks × the largest size at most this many GiB
	Per      string // what those bytes are: "--blocks B × S = more than N GiB per PER"
}

// ParseSizes parses --sizes: comma-separated sizes (256KiB, 2MiB), each
// at most 256 MiB, none twice, at least one, and each as rule says. Errors
// are *UsageError naming --sizes or --blocks.
func ParseSizes(value string, rule BlockSizes) ([]uint64, error) {
	sizes, err := ParseList(ListFlag{Name: "sizes", Noun: "size"}, value, func(s string) (uint64, error) {
		n, err := ParseSize("sizes", s)
		switch {
		case err != nil:
			return 0, err
		case n == 0 || n > 256<<20:
			return 0, Usagef("--sizes: %s must be between 1 byte and 256MiB", s)
		case n%rule.Multiple != 0:
			return 0, Usagef("--sizes: %s (%d bytes) %s", s, n, rule.Why)
		}
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	if m := slices.Max(sizes); m*uint64(rule.Blocks) > rule.MaxGiB<<30 {
		return nil, Usagef("--blocks %d × %s = more than %dGiB per %s", rule.Blocks, humanize.IBytes(m), rule.MaxGiB, rule.Per)
	}
	return sizes, nil
}

// Output is what a suite's flag parsing writes to, given by the suite's
// Run: the text --help asks for goes to Help (stdout, as orbitkv-manager
// and orbitkvctl print it, so `orbitkv-bench replay --help | less` works);
// anything else pflag prints, a deprecated flag's notice, goes to the
// embedded Writer (stderr, away from a --json report). A plain io.Writer
// given where an Output is expected receives both.
type Output struct {
	io.Writer           // stderr: notices
	Help      io.Writer // stdout: the usage text of --help
}

// helpWriter is where out's --help text goes: out.Help of an Output, else
// out itself.
func helpWriter(out io.Writer) io.Writer {
	if o, ok := out.(Output); ok && o.Help != nil {
		return o.Help
	}
	return out
}

// StandaloneFlags makes the flag set of a suite that does not take the
// shared suite flags (its own --json, --manager-bin, --manager-args): name
// is the suite, about the usage paragraph printed between the usage line
// and the flags, and out (an Output, or one writer for both) receives the
// usage text of --help and pflag's notices.
func StandaloneFlags(name string, out io.Writer, about ...string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	help := helpWriter(out)
	fs.Usage = func() {
		fmt.Fprintf(help, "usage: orbitkv-bench %s [flags]\n\n", name)
		for _, l := range about {
			fmt.Fprintln(help, l)
		}
		fmt.Fprintln(help)
		fmt.Fprintln(help, "flags:")
		fs.SetOutput(help)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	return fs
}

// ParseStandalone parses args into fs as ParseGNU does and refuses any
// positional argument: pflag.ErrHelp for --help or -h, else a *UsageError.
func ParseStandalone(fs *pflag.FlagSet, args []string) error {
	if err := ParseGNU(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// ParseGNU parses args into fs with GNU flag syntax (--name value,
// --name=value, -h): pflag.ErrHelp for --help or -h, a *UsageError for a
// bad flag. A single-dash word (-clients, -json=true) is refused before
// pflag reads it as a cluster of shorthands, naming the two-dash spelling:
// "unknown flag -clients (long flags start with --, as in --clients)", as
// orbitkv-manager and orbitkvctl refuse it. Positional arguments are left
// in fs.Args().
func ParseGNU(fs *pflag.FlagSet, args []string) error {
	if w := singleDashWord(fs, args); w != "" {
		return Usagef("unknown flag %s (long flags start with --, as in -%s)", w, w)
	}
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return err
		}
		if strings.HasPrefix(err.Error(), "unknown shorthand flag") {
			return Usagef("%v (long flags start with --, as in --%s)", err, exampleFlag(fs))
		}
		return Usagef("%v", err)
	}
	return nil
}

// exampleFlag is the flag a hint shows: --json where fs has it, else fs's
// first flag in name order.
func exampleFlag(fs *pflag.FlagSet) string {
	if fs.Lookup("json") != nil {
		return "json"
	}
	first := ""
	fs.VisitAll(func(f *pflag.Flag) {
		if first == "" && !f.Hidden {
			first = f.Name
		}
	})
	return first
}

// singleDashWord is the first argument of args that is a dash and a word
// of two or more letters (-help), or "": pflag reads "-help" as the
// shorthand -h and prints the help, where the other OrbitKV commands
// refuse it. The value of a flag that takes one ("--socket -x") and
// everything after "--" are not looked at.
func singleDashWord(fs *pflag.FlagSet, args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, "--"):
			if name, _, hasValue := strings.Cut(a[2:], "="); !hasValue {
				if f := fs.Lookup(name); f != nil && f.NoOptDefVal == "" {
					i++ // its value
				}
			}
		case len(a) > 2 && a[0] == '-' && a[1] >= 'a' && a[1] <= 'z' && fs.ShorthandLookup(a[1:2]) == nil:
			return a
		}
	}
	return ""
}
