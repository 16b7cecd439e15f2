package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/hosttest"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// goIdentifier matches a Go qualified name as it would leak into a
// message: a package or type and an exported field ("Spec.CreateDir",
// "ram.CapacityBytes", "manager.HTTPAddr").
var goIdentifier = regexp.MustCompile(`\b[A-Za-z][a-z]+\.[A-Z][A-Za-z]+`)

// Every start failure ends the Manager the same way: one line on stderr,
// "orbitkv-manager: SETTING VALUE: WHAT...", the same text in one ERROR
// log line (when logging is up), and the exit status of its class: 2
// configuration, 4 resources, 5 an address. No other ERROR line (the
// operator socket, closed because the start failed, is not one), and no
// Go identifier in the output.
func TestStartFailuresExitByClassWithOneLine(t *testing.T) {
	ob := hosttest.New(t)
	tooMuchRAM, taken, live := ob.TooMuchRAM, ob.TakenTCP, ob.LiveSocket
	small := []string{"--ram-capacity", "16MiB", "--prefault=false", "--hugepages", "off"}
	cases := []struct {
		name, socket string
		args         []string
		status       int
		logged       bool // the failure comes after logging is up
		line         *regexp.Regexp
	}{
		{name: "a value outside its limit is a configuration error", args: []string{"--max-ops", "0"}, status: 2,
			line: regexp.MustCompile(`^orbitkv-manager: --max-ops 0: want 1\.\.1048576$`)},
		{name: "a RAM tier above the available memory is a resource error naming the largest accepted",
			args: []string{"--ram-capacity", tooMuchRAM, "--hugepages", "off"}, status: 4, logged: true,
			line: regexp.MustCompile(`^orbitkv-manager: --ram-capacity ` + tooMuchRAM + `: not enough available memory: [0-9.]+ [KMGTP]iB wanted, MemAvailable is [0-9.]+ [KMGT]iB .*; at most [0-9]+[KMGT]iB would be accepted$`)},
		{name: "a missing SSD directory is a resource error naming the flag that creates it",
			args: append([]string{"--ssd-dir", filepath.Join(t.TempDir(), "missing"), "--ssd-capacity", "64MiB", "--ssd-slot-bytes", "1MiB"}, small...), status: 4, logged: true,
			line: regexp.MustCompile(`^orbitkv-manager: --ssd-dir ".*/missing": the directory does not exist; create it, or let the Manager create it \(--ssd-create-dir\)$`)},
		{name: "an HTTP port in use is an address error", args: append([]string{"--http-addr", taken}, small...), status: 5, logged: true,
			line: regexp.MustCompile(`^orbitkv-manager: --http-addr "` + regexp.QuoteMeta(taken) + `": listen tcp ` + regexp.QuoteMeta(taken) + `: bind: address already in use$`)},
		{name: "a bootstrap socket a live process serves is an address error", socket: live, args: small, status: 5, logged: true,
			line: regexp.MustCompile(`^orbitkv-manager: --bootstrap-socket "` + regexp.QuoteMeta(live) + `": bootstrap: socket path is served by a live process: ` + regexp.QuoteMeta(live) + `$`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := tc.socket
			if sock == "" {
				sock = filepath.Join(t.TempDir(), "okv.sock")
			}
			out, err := launch.Run(launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(),
				Socket: sock, HTTPAddr: launch.NoHTTP, Args: tc.args}, time.Minute)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.status {
				t.Fatalf("exit %v, want status %d; output:\n%s", err, tc.status, out)
			}
			var plain, errLogs []string
			for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
				switch {
				case strings.HasPrefix(line, "orbitkv-manager: "):
					plain = append(plain, line)
				case strings.Contains(line, "level=ERROR"):
					errLogs = append(errLogs, line)
				}
			}
			if len(plain) != 1 || !tc.line.MatchString(plain[0]) {
				t.Fatalf("want one line matching %s; got %q; output:\n%s", tc.line, plain, out)
			}
			text := strings.TrimPrefix(plain[0], "orbitkv-manager: ")
			switch {
			case !tc.logged && len(errLogs) != 0:
				t.Errorf("ERROR log lines before logging is up: %q", errLogs)
			case tc.logged && (len(errLogs) != 1 || !strings.Contains(errLogs[0], `msg="start failed" err=`+strconv.Quote(text)) ||
				!strings.Contains(errLogs[0], fmt.Sprintf("exit_status=%d", tc.status))):
				t.Errorf("want one ERROR line, start failed, with the same text %q and exit_status=%d; got %q", text, tc.status, errLogs)
			}
			if strings.Contains(out, "operator socket stopped") {
				t.Errorf("the operator socket's stop is logged at info or above:\n%s", out)
			}
			if m := goIdentifier.FindAllString(out, -1); len(m) > 0 {
				t.Errorf("Go identifiers %q in the output:\n%s", m, out)
			}
		})
	}
}

// The start logs the config file and every setting not at its default
// with its source, before anything is made; and the JSON log writes
// durations as strings with units and the epoch as a string.
func TestTheStartLogsItsConfigurationAndJSONHasUnits(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "manager.toml")
	if err := os.WriteFile(cfg, []byte("max-ops = 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := launch.Start(launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(), HTTPAddr: launch.NoHTTP, // a Dir of its own: the log outlives Stop
		Args: []string{"--config", cfg, "--ram-capacity", "16MiB", "--prefault=false", "--hugepages", "off", "--log-format", "json"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, m.Output())
	}
	lines := map[string]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSpace(m.Output()), "\n") {
		var rec map[string]any
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", line, err)
		}
		lines[rec["msg"].(string)] = rec
	}
	file := lines["config file"]
	if file == nil || file["file"] != cfg || file["source"] != "flag --config" {
		t.Errorf("config file line %v, want file %s from flag --config", file, cfg)
	}
	set := lines["settings not at their defaults"]
	want := map[string]map[string]any{
		"max-ops":      {"value": "9", "source": "file " + cfg + ":1"},
		"ram-capacity": {"value": "16MiB", "source": "flag --ram-capacity"},
	}
	for k, w := range want {
		if got, _ := set[k].(map[string]any); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("settings line: %s = %v, want %v (line %v)", k, set[k], w, set)
		}
	}
	if _, ok := set["poll-mode"]; ok {
		t.Errorf("settings line lists poll-mode, a default: %v", set)
	}
	serving, stopped := lines[launch.ReadyLine], lines["orbitkv-manager stopped"]
	if serving == nil || stopped == nil {
		t.Fatalf("no serving or stopped line:\n%s", m.Output())
	}
	if v, ok := serving["spin_window"].(string); !ok || v != "50µs" {
		t.Errorf("spin_window %#v, want the string 50µs", serving["spin_window"])
	}
	if v, ok := serving["epoch"].(string); !ok {
		t.Errorf("epoch %#v, want a string", serving["epoch"])
	} else if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		t.Errorf("epoch %q: %v", v, err)
	}
	if v, ok := stopped["uptime"].(string); !ok {
		t.Errorf("uptime %#v, want a string", stopped["uptime"])
	} else if _, err := time.ParseDuration(v); err != nil {
		t.Errorf("uptime %q: %v", v, err)
	}
}
