package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// env is a fixed environment for options.layer.
type env map[string]string

func (e env) get(k string) (string, bool) { v, ok := e[k]; return v, ok }

func (e env) list() []string {
	var l []string
	for k, v := range e {
		l = append(l, k+"="+v)
	}
	return l
}

// writeConfig writes text to a config file in a test directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manager.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load parses args, layers environment e over the file and validates.
func load(t *testing.T, args []string, e env) (*options, error) {
	t.Helper()
	o, err := parse(args)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := o.layer(e.get, e.list()); err != nil {
		return o, err
	}
	_, err = validate(o, slog.New(slog.DiscardHandler))
	return o, err
}

func TestFlagsWinOverTheEnvironmentWhichWinsOverTheFile(t *testing.T) {
	file := "ram-capacity = \"1GiB\"\ncopy-workers = 3\nprefault = false\n"
	tests := []struct {
		name       string
		args       []string
		env        env
		wantRAM    string
		wantSource string
	}{
		{"the default holds without file, variable or flag", nil, nil, "4GiB", "default"},
		{"the file wins over the default", []string{"--config", "FILE"}, nil, "1GiB", "file FILE:1"},
		{"the environment wins over the file", []string{"--config", "FILE"}, env{"ORBITKV_RAM_CAPACITY": "2GiB"}, "2GiB", "env ORBITKV_RAM_CAPACITY"},
		{"a flag wins over the environment and the file", []string{"--config", "FILE", "--ram-capacity", "3GiB"},
			env{"ORBITKV_RAM_CAPACITY": "2GiB"}, "3GiB", "flag --ram-capacity"},
		{"ORBITKV_CONFIG names the file when --config does not", nil, env{"ORBITKV_CONFIG": "FILE"}, "1GiB", "file FILE:1"},
		{"--config wins over ORBITKV_CONFIG", []string{"--config", "FILE"}, env{"ORBITKV_CONFIG": "/nonexistent.toml"}, "1GiB", "file FILE:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, file)
			args := replace(tc.args, "FILE", p)
			e := env{}
			for k, v := range tc.env {
				e[k] = strings.ReplaceAll(v, "FILE", p)
			}
			o, err := load(t, args, e)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.wantSource, "FILE", p)
			if o.c.ramCapacity != tc.wantRAM || o.sourceOf("ram-capacity").describe("ram-capacity") != want {
				t.Fatalf("ram-capacity = %q from %s, want %q from %s", o.c.ramCapacity, o.sourceOf("ram-capacity").describe("ram-capacity"), tc.wantRAM, want)
			}
			if len(args) > 0 || tc.env["ORBITKV_CONFIG"] == "FILE" {
				if o.c.copyWorkers != 3 || o.c.prefault {
					t.Errorf("copy-workers = %d, prefault = %v: want the file's 3 and false", o.c.copyWorkers, o.c.prefault)
				}
			}
		})
	}
}

func replace(args []string, old, new string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, old, new)
	}
	return out
}

func TestConfigErrorsNameTheFileLineOrVariable(t *testing.T) {
	tests := []struct {
		name string
		file string // "" = no --config
		env  env
		want string // FILE stands for the file's path
	}{
		{"an unknown key names the key and its line", "copy-workers = 2\nram-capacty = \"1GiB\"\n", nil,
			`FILE:2: unknown key "ram-capacty" (did you mean "ram-capacity"?) (the keys are the flag names; orbitkv-manager --print-config lists them)`},
		{"a key far from any is unknown without a guess", "colour = \"blue\"\n", nil, `FILE:1: unknown key "colour" (the keys`},
		{"a command flag is not a key", "print-config = true\n", nil, `FILE:1: unknown key "print-config"`},
		{"a bad size names file, line and the reason", "\n\nram-capacity = \"4G\"\n", nil, `FILE:3: ram-capacity = "4G": ambiguous unit "G"`},
		{"a size out of its limit names file, line and the limit", "ram-capacity = \"4KiB\"\n", nil, "FILE:1: ram-capacity = 4KiB: want"},
		{"a count out of its limit names file, line and the limit", "# comment\ncopy-workers = 0\n", nil, "FILE:2: copy-workers = 0: want 1..64"},
		{"a value of the wrong syntax names the file and line", "copy-workers = \"many\"\n", nil, `FILE:1: copy-workers = "many": want a whole number`},
		{"a float is refused", "copy-workers = 2.5\n", nil, "FILE:1: copy-workers = 2.5: want a string, an integer or true/false (TOML float)"},
		{"an array is refused", "eviction = [\"lru\"]\n", nil, "want a string, an integer or true/false (TOML array)"},
		{"a table is refused", "[ram]\ncapacity = \"1GiB\"\n", nil, "FILE:1: table [ram]: the config file has no tables"},
		{"a key set twice names both lines", "max-ops = 10\nmax-ops = 20\n", nil, `FILE:2: key "max-ops" set twice (first on line 1)`},
		{"a TOML syntax error names its line", "max-ops = 10\nmax-ops 20\n", nil, "FILE:2: expected '=' after key"},
		{"a missing file names --config", "MISSING", nil, `--config "`},
		{"a bad variable names the variable", "", env{"ORBITKV_COPY_WORKERS": "abc"}, `ORBITKV_COPY_WORKERS="abc": want a whole number`},
		{"a variable out of its limit names the variable and the limit", "", env{"ORBITKV_MAX_OPS": "0"}, "ORBITKV_MAX_OPS=0: want 1..1048576"},
		{"an ambiguous size in a variable names the variable", "", env{"ORBITKV_RAM_CAPACITY": "4gb"}, `ORBITKV_RAM_CAPACITY="4gb": ambiguous unit "gb"`},
		{"a bad boolean variable names the variable", "", env{"ORBITKV_PREFAULT": "maybe"}, `ORBITKV_PREFAULT="maybe": want true or false`},
		{"a variable one letter from a setting's is refused", "", env{"ORBITKV_RAM_CAPACTY": "1GiB"},
			"ORBITKV_RAM_CAPACTY: not a setting of orbitkv-manager (did you mean ORBITKV_RAM_CAPACITY?)"},
		{"a bad duration in the file names file and line", "spin-window = \"50\"\n", nil, `FILE:1: spin-window = "50": want a duration with a unit`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			p := ""
			switch tc.file {
			case "":
			case "MISSING":
				p = filepath.Join(t.TempDir(), "none.toml")
				args = []string{"--config", p}
			default:
				p = writeConfig(t, tc.file)
				args = []string{"--config", p}
			}
			_, err := load(t, args, tc.env)
			want := strings.ReplaceAll(tc.want, "FILE", p)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("load = %v, want an error containing %q", err, want)
			}
		})
	}
}

func TestOtherOrbitKVVariablesAreLeftAlone(t *testing.T) {
	e := env{"ORBITKV_LIB": "/x/liborbitkv.so", "ORBITKV_MANAGER_RACE": "1", "ORBITKV_GO_ROOT": "/usr/local/go", "HOME": "/root"}
	if _, err := load(t, nil, e); err != nil {
		t.Fatalf("load with variables of other tools = %v, want nil", err)
	}
}

func TestConfigFileValues(t *testing.T) {
	tests := []struct {
		name string
		file string
		get  func(*config) any
		want any
	}{
		{"a size may be an integer of bytes", "ram-capacity = 1_073_741_824\n", func(c *config) any { return c.ramCapacity }, "1073741824"},
		{"a hexadecimal integer reads as its value", "max-ops = 0x100\n", func(c *config) any { return c.maxOps }, 256},
		{"a string's escapes are decoded", "bootstrap-socket = \"/tmp/a\\u0062.sock\"\n", func(c *config) any { return c.socket }, "/tmp/ab.sock"},
		{"a literal string is taken as written", "ssd-dir = '/var/lib/okv'\n", func(c *config) any { return c.ssdDir }, "/var/lib/okv"},
		{"an empty string clears a setting", "http-addr = \"\"\n", func(c *config) any { return c.httpAddr }, ""},
		{"a boolean reads as a boolean", "ssd-create-dir = true\n", func(c *config) any { return c.ssdCreateDir }, true},
		{"a duration is a string", "op-expiry = \"90s\"\n", func(c *config) any { return c.opExpiry.String() }, "1m30s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := load(t, []string{"--config", writeConfig(t, tc.file)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.get(o.c); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// --print-config names every key with its source, and what it prints reads
// back as a config file giving the same settings.
func TestPrintConfigListsEveryKeyAndReadsBack(t *testing.T) {
	p := writeConfig(t, "ram-capacity = \"1GiB\"\n\nhugepages = \"off\"\n")
	o, err := load(t, []string{"--config", p, "--poll-mode", "spin"}, env{"ORBITKV_MAX_OPS": "77"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o.printConfig(&out)
	text := out.String()
	for _, want := range []string{
		`ram-capacity = "1GiB"`, "# file " + p + ":1\n", `hugepages = "off"`, "# file " + p + ":3\n",
		`poll-mode = "spin"`, "# flag --poll-mode\n", "max-ops = 77", "# env ORBITKV_MAX_OPS\n",
		`listen = "127.0.0.1:7470"`, "prefault = true", "# config file: " + p + " (flag --config)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, text)
		}
	}
	for _, name := range flagNames(o) {
		if !commandFlags[name] && !strings.Contains(text, "\n"+name+" = ") {
			t.Errorf("--print-config lacks the key %s", name)
		}
	}
	back, err := load(t, []string{"--config", writeConfig(t, text)}, nil)
	if err != nil {
		t.Fatalf("the printed configuration does not read back: %v\n%s", err, text)
	}
	back.c.configFile = o.c.configFile
	if !reflect.DeepEqual(*back.c, *o.c) {
		t.Fatalf("read back %+v, want %+v", *back.c, *o.c)
	}
}

func flagNames(o *options) []string {
	var names []string
	o.fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// A config path that is not a regular file is refused at once: a FIFO
// would block the start, /dev/zero would be read forever.
func TestAConfigThatIsNotARegularFileIsRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(big, make([]byte, maxConfigBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "is a named pipe (FIFO); want a regular file"},
		{"/dev/zero", "is a character device; want a regular file"},
		{t.TempDir(), "is a directory; want a regular file"},
		{big, "want at most 1048576"},
	} {
		done := make(chan error, 1)
		go func() { _, err := readConfig(tc.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readConfig(%s) = %v, want an error containing %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("readConfig(%s) did not return within 5 s", tc.path)
		}
	}
}

// What the break-it review found unclear: each case names the setting and
// its limit.
func TestSettingsErrorsNameTheSettingAndItsLimit(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        env
		want       string // "" = valid
	}{
		{"a byte order mark before the first key is skipped", "\ufeffram-capacity = \"64MiB\"\n", nil, ""},
		{"an array value says what it is without an empty value", "hugepages = [1, 2]\n", nil, ":1: hugepages: want a string, an integer or true/false (TOML array)"},
		{"a negative count in the file names the range", "max-sessions = -5\n", nil, ":1: max-sessions = -5: want a whole number in 1..4095"},
		{"a command flag as a variable is refused", "", env{"ORBITKV_PRINT_CONFIG": "1"}, "ORBITKV_PRINT_CONFIG: --print-config is a command, not a setting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, []string{"--config", writeConfig(t, tc.file)}, tc.env)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("load: %v, want ok", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := parse([]string{"--max-sessions", "99999999999999999999"}); err == nil || err.Error() != `--max-sessions "99999999999999999999": want a whole number in 1..4095` {
		t.Errorf("parse of a count past 64 bits = %v", err)
	}
}
