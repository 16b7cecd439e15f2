package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/spf13/pflag"
)

// Where a setting's value came from; the precedence is the reverse order:
// a flag wins over the environment, which wins over the file, which wins
// over the default.
type sourceKind int

const (
	fromDefault sourceKind = iota
	fromFile
	fromEnv
	fromFlag
)

// source is where one setting's value came from.
type source struct {
	kind sourceKind
	file string // fromFile: the config file's path
	line int    // fromFile: 1-based line of the key
}

// describe is the --print-config comment for setting name.
func (s source) describe(name string) string {
	switch s.kind {
	case fromFile:
		return fmt.Sprintf("file %s:%d", s.file, s.line)
	case fromEnv:
		return "env " + envName(name)
	case fromFlag:
		return "flag --" + name
	}
	return "default"
}

// label names setting name, holding value (as an error shows it), the way
// the user set it: "--ram-capacity 4KiB", "ORBITKV_RAM_CAPACITY=4KiB",
// "/etc/orbitkv.toml:3: ram-capacity = 4KiB".
func (s source) label(name, value string) string {
	switch s.kind {
	case fromFile:
		return fmt.Sprintf("%s:%d: %s = %s", s.file, s.line, name, value)
	case fromEnv:
		return envName(name) + "=" + value
	}
	return "--" + name + " " + value
}

// options are the parsed settings, the flag set that holds them and where
// each came from.
type options struct {
	c   *config
	fs  *pflag.FlagSet
	src map[string]source // by flag name; absent: the default
	cfg source            // where the config file's path came from
}

// sourceOf is where setting name came from.
func (o *options) sourceOf(name string) source { return o.src[name] }

// layer fills every setting the command line left unset from the
// environment (getenv, os.LookupEnv in main) and then the config file
// (--config, else ORBITKV_CONFIG), and records each value's source. It
// reports every bad variable and key at once, each naming the variable or
// the file and line, and an ORBITKV_ variable of environ (os.Environ in
// main) that is not a setting but is one or two letters from one (a typo
// that would otherwise be ignored).
func (o *options) layer(getenv func(string) (string, bool), environ []string) error {
	o.src = map[string]source{}
	var errs []error
	o.fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			o.src[f.Name] = source{kind: fromFlag}
		}
	})
	path := o.c.configFile
	if o.fs.Changed("config") {
		o.cfg = source{kind: fromFlag}
	} else if v, ok := getenv("ORBITKV_CONFIG"); ok && v != "" {
		path, o.cfg = v, source{kind: fromEnv}
		o.c.configFile = v
	}
	var file []entry
	if path != "" {
		data, err := readConfig(path)
		if err != nil {
			return fmt.Errorf("%s: %w", o.cfg.label("config", strconv.Quote(path)), err)
		}
		if file, err = parseConfig(path, data, o.fs); err != nil {
			return err
		}
	}
	errs = append(errs, o.misspelled(environ)...)
	o.fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || commandFlags[f.Name] {
			return
		}
		if v, ok := getenv(envName(f.Name)); ok {
			s := source{kind: fromEnv}
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s", s.label(f.Name, strconv.Quote(v)), want(f)))
				return
			}
			o.src[f.Name] = s
		}
	})
	for _, e := range file {
		f := o.fs.Lookup(e.key)
		if _, set := o.src[e.key]; set {
			continue // a flag or a variable wins
		}
		s := source{kind: fromFile, file: path, line: e.line}
		if err := f.Value.Set(e.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", s.label(e.key, e.raw), want(f)))
			continue
		}
		o.src[e.key] = s
	}
	return errors.Join(errs...)
}

// misspelled returns an error for each ORBITKV_ variable of environ that
// is not a setting's but close to one. Other ORBITKV_ variables (ORBITKV_LIB
// of the Python client, ...) are not the Manager's and are left alone.
func (o *options) misspelled(environ []string) []error {
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ORBITKV_") || name == "ORBITKV_CONFIG" {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "ORBITKV_"), "_", "-"))
		if f := o.fs.Lookup(key); f != nil && !commandFlags[key] {
			continue
		}
		if commandFlags[key] {
			errs = append(errs, fmt.Errorf("%s: --%s is a command, not a setting: pass it on the command line", name, key))
			continue
		}
		if near := closest(key, o.fs); near != "" {
			errs = append(errs, fmt.Errorf("%s: not a setting of orbitkv-manager (did you mean %s?)", name, envName(near)))
		}
	}
	return errs
}

// rangeInUsage finds the "lo..hi" range a count flag's help states.
var rangeInUsage = regexp.MustCompile(`\d+\.\.\d+`)

// want is the limit of a flag's syntax, for a value that does not parse.
func want(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "want true or false"
	case "int", "uint":
		// The flag's help names its range ("(`count`, 1..4095)").
		if r := rangeInUsage.FindString(f.Usage); r != "" {
			return "want a whole number in " + r
		}
		return "want a whole number"
	case "duration":
		return "want a duration with a unit (50us, 5s, 1m)"
	}
	return "not a valid value"
}

// entry is one key of the config file.
type entry struct {
	key   string
	value string // as a flag value: a TOML string unquoted, an integer in decimal
	raw   string // as written in the file
	line  int
}

// parseConfig reads a config file: top-level keys only, each a flag name
// of fs that is not a command flag, each once, with a string, integer or
// boolean value. An error names the file, the line and the key.
//
// It uses go-toml's parser (the unstable package: the stable decoder
// gives no line for a key it decoded), which is pinned in go.mod and
// covered by the tests of this package.
func parseConfig(path string, data []byte, fs *pflag.FlagSet) ([]entry, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark, as some editors write
	var p unstable.Parser
	p.Reset(data)
	var out []entry
	first := map[string]int{}
	var errs []error
	for p.NextExpression() {
		expr := p.Expression()
		line := p.Shape(expr.Raw).Start.Line
		switch expr.Kind {
		case unstable.KeyValue:
		case unstable.Table, unstable.ArrayTable:
			errs = append(errs, fmt.Errorf("%s:%d: table [%s]: the config file has no tables; every key is top-level (ram-capacity = \"64GiB\")", path, line, keyOf(expr)))
			continue
		default:
			continue
		}
		key := keyOf(expr)
		f := fs.Lookup(key)
		switch {
		case f == nil || commandFlags[key]:
			hint := ""
			if near := closest(key, fs); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q%s (the keys are the flag names; orbitkv-manager --print-config lists them)", path, line, key, hint))
			continue
		case first[key] != 0:
			errs = append(errs, fmt.Errorf("%s:%d: key %q set twice (first on line %d)", path, line, key, first[key]))
			continue
		}
		first[key] = line
		v := expr.Value()
		raw := string(p.Raw(v.Raw))
		e := entry{key: key, raw: raw, line: line}
		switch v.Kind {
		case unstable.String:
			e.value = string(v.Data)
		case unstable.Bool:
			e.value = string(v.Data)
		case unstable.Integer:
			n, err := strconv.ParseInt(string(v.Data), 0, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %s = %s: not a 64-bit integer", path, line, key, raw))
				continue
			}
			e.value = strconv.FormatInt(n, 10)
		default:
			shown := " = " + raw
			if raw == "" { // a TOML array or inline table: go-toml keeps no raw text for it
				shown = ""
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s%s: want a string, an integer or true/false (TOML %s)", path, line, key, shown, strings.ToLower(v.Kind.String())))
			continue
		}
		out = append(out, e)
	}
	if err := p.Error(); err != nil {
		var perr *unstable.ParserError
		if errors.As(err, &perr) {
			return nil, fmt.Errorf("%s:%d: %s", path, p.Shape(p.Range(perr.Highlight)).Start.Line, perr.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, errors.Join(errs...)
}

// keyOf joins the parts of a (possibly dotted) key.
func keyOf(expr *unstable.Node) string {
	var parts []string
	for it := expr.Key(); it.Next(); {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

// closest is the setting nearest to key, at most two edits away, or "".
func closest(key string, fs *pflag.FlagSet) string {
	best, bestD := "", 3 // at most 2 edits away
	fs.VisitAll(func(f *pflag.Flag) {
		if d := editDistance(key, f.Name); !commandFlags[f.Name] && d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// printConfig writes the effective configuration as a TOML file (it reads
// back as a config file) with each value's source as a comment.
func (o *options) printConfig(w io.Writer) {
	fmt.Fprintln(w, "# orbitkv-manager: the effective configuration. Precedence: flags > ORBITKV_* environment > config file > defaults.")
	if o.c.configFile == "" {
		fmt.Fprintln(w, "# config file: none (--config FILE or ORBITKV_CONFIG)")
	} else {
		fmt.Fprintf(w, "# config file: %s (%s)\n", o.c.configFile, o.cfg.describe("config"))
	}
	o.fs.VisitAll(func(f *pflag.Flag) {
		if commandFlags[f.Name] {
			return
		}
		v := shown(f.Name, f.Value.String())
		switch f.Value.Type() {
		case "bool", "int", "uint":
		default:
			v = tomlQuote(v)
		}
		note := o.sourceOf(f.Name).describe(f.Name)
		switch {
		case f.Name == "bootstrap-socket" && o.c.socket == "":
			if p, err := defaultSocket(o.c.listen); err == nil {
				note += " (empty: the default, " + p + ")"
			}
		case f.Name == "lease-budget" && o.c.leaseBudget == "":
			note += " (empty: ram-capacity)"
		case f.Name == "ssd-dir" && o.c.ssdDir == "":
			note += " (empty: no SSD tier)"
		case f.Name == "http-addr" && o.c.httpAddr == "":
			note += " (empty: no HTTP endpoint)"
		case f.Name == "pyroscope-url" && o.c.pyroURL == "":
			note += " (empty: no profiling push)"
		}
		fmt.Fprintf(w, "%-40s # %s\n", f.Name+" = "+v, note)
	})
}

// tomlQuote writes s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// maxConfigBytes bounds a config file: every key of the Manager fits in a
// few KiB, so anything larger is not a config file.
const maxConfigBytes = 1 << 20

// readConfig reads a config file that is a regular file (after symbolic
// links) of at most maxConfigBytes: a FIFO would block the start, a
// device such as /dev/zero would be read forever.
func readConfig(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO without a writer returns at once rather
	// than waiting for one; it does not change reads of a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if t := fi.Mode().Type(); t != 0 {
		kind := map[os.FileMode]string{os.ModeDir: "a directory", os.ModeNamedPipe: "a named pipe (FIFO)",
			os.ModeSocket: "a socket", os.ModeDevice: "a device", os.ModeDevice | os.ModeCharDevice: "a character device"}[t]
		if kind == "" {
			kind = "not a regular file"
		}
		return nil, fmt.Errorf("is %s; want a regular file", kind)
	}
	if fi.Size() > maxConfigBytes {
		return nil, fmt.Errorf("%d bytes, want at most %d", fi.Size(), maxConfigBytes)
	}
	return io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
}
