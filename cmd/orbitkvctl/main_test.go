package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

func TestRun(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string // substring of stdout ("" = stdout must be empty)
		stderr string // substring of stderr ("" = stderr must be empty)
	}{
		{"help lists the commands", []string{"--help"}, "", 0, "sessions", ""},
		{"help of ping names its flags", []string{"ping", "--help"}, "", 0, "pings to send", ""},
		{"help of drain says what its timeout is", []string{"drain", "--help"}, "", 0, "not the deadline of a call", ""},
		{"--version prints the version, commit and ABI", []string{"--version"}, "", 0, "\ncommit: ", ""},
		{"--version names the ABI", []string{"--version"}, "", 0, "abi: ", ""},
		{"completion writes a bash script", []string{"completion", "bash"}, "", 0, "bash completion", ""},
		{"no command is a usage error", []string{}, "", 2, "", "no command"},
		{"an unknown command is a usage error", []string{"bogus"}, "", 2, "", `unknown command "bogus"`},
		{"an unknown flag is a usage error", []string{"health", "--bogus"}, "", 2, "", "unknown flag: --bogus"},
		{"a global flag after the command is read", []string{"health", "--timeout", "0"}, "", 2, "", "--timeout must be between 1ms and 1h"},
		{"an output other than table, json or yaml is refused", []string{"stats", "-o", "xml"}, "", 2, "", `--output must be table, json or yaml (got "xml")`},
		{"a watch interval below 100ms is refused", []string{"stats", "--watch", "10ms"}, "", 2, "", "stats: --watch must be between 100ms and 24h (got 10ms)"},
		{"a watch interval of 0 is refused", []string{"stats", "--watch", "0"}, "", 2, "", "stats: --watch must be between 100ms and 24h (got 0)"},
		{"a watch without a Manager fails at its first call", []string{"stats", "--watch", "1s", "--operator-socket", missing}, "", 1, "", "no Manager there"},
		{"help of stats explains the watch", []string{"stats", "--help"}, "", 0, "SIGINT or SIGTERM: exit status 0", ""},
		{"help of namespaces says what evict takes", []string{"namespaces", "--help"}, "", 0, `"orbitkvctl evict --namespace" takes`, ""},
		{"namespaces without a Manager says so", []string{"namespaces", "--operator-socket", missing}, "", 1, "", "no Manager there"},
		{"version without a Manager prints the client's build", []string{"version", "--operator-socket", missing}, "", 1, "\ngo: ", "no Manager there"},
		{"version without a Manager names the error in JSON", []string{"version", "-o", "json", "--operator-socket", missing}, "", 1, `"server_error": "operator socket`, "no Manager there"},
		{"version without a Manager names the error in YAML", []string{"version", "-o", "yaml", "--operator-socket", missing}, "", 1, "server_error: 'operator socket", "no Manager there"},
		{"ping refuses a count of 0", []string{"ping", "--count", "0"}, "", 2, "", "--count must be >= 1"},
		{"ping refuses a negative interval", []string{"ping", "--interval", "-1s"}, "", 2, "", "--interval must be >= 0"},
		{"health refuses an argument", []string{"health", "extra"}, "", 2, "", `unexpected argument "extra"`},
		{"evict wants a namespace, a key or all", []string{"evict"}, "", 2, "", "give --namespace HEX, --key HEX or --all"},
		{"flush refuses both a namespace and all", []string{"flush", "--all", "--namespace", "ab"}, "", 2, "", "give one of --namespace HEX, --key HEX and --all, not more"},
		{"evict refuses both a namespace and all", []string{"evict", "--all", "--namespace", "00"}, "", 2, "", "evict: give one of --namespace HEX, --key HEX and --all, not more"},
		{"evict refuses both a namespace and a key", []string{"evict", "--key", "00", "--namespace", "00"}, "", 2, "", "evict: give one of --namespace HEX, --key HEX and --all, not more"},
		{"evict refuses a tenant without a namespace", []string{"evict", "--all", "--tenant", "a"}, "", 2, "", "evict: --tenant goes with --namespace only"},
		{"evict refuses a namespace not of 32 hex digits", []string{"evict", "--namespace", "abc"}, "", 2, "", `--namespace "abc": want 32 hex digits`},
		{"flush refuses a key not of 32 hex digits", []string{"flush", "--key", "zz"}, "", 2, "", `--key "zz": want 32 hex digits`},
		{"drain refuses a wait above 1h", []string{"drain", "--timeout", "2h"}, "", 2, "", "--timeout must be between 1ms and 1h"},
		{"evict not confirmed is aborted", []string{"evict", "--all", "--operator-socket", missing}, "n\n", 1, "", "aborted: not confirmed"},
		{"evict of a tenant's namespace names both in its question", []string{"evict", "--namespace", strings.Repeat("ab", 16), "--tenant", "alpha", "--operator-socket", missing}, "n\n", 1, "",
			"namespace " + strings.Repeat("ab", 16) + " of tenant alpha"},
		{"flush without an answer says to pass --yes", []string{"flush", "--all", "--operator-socket", missing}, "", 1, "", "pass --yes"},
		{"health without a Manager says so", []string{"health", "--operator-socket", missing}, "", 1, "", "no Manager there"},
		{"stats derives the operator socket from --socket", []string{"stats", "--socket", missing}, "", 1, "", missing + ".operator: no Manager there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.code {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tc.args, code, tc.code, errb.String())
			}
			for _, s := range []struct{ name, got, want string }{{"stdout", out.String(), tc.stdout}, {"stderr", errb.String(), tc.stderr}} {
				if (s.want == "" && s.got != "") || !strings.Contains(s.got, s.want) {
					t.Errorf("run(%q) %s = %q, want %q", tc.args, s.name, s.got, s.want)
				}
			}
		})
	}
}

// TestSocketsFollowTheEnvironment runs commands against paths where no
// Manager listens: the error names the socket each one dialled. The
// runtime directory is one of the test's, holding a socket in the cases
// that need one.
func TestSocketsFollowTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.sock")
	run1, run0 := servedRuntimeDir(t), filepath.Join(dir, "run0")
	if err := os.Mkdir(run0, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     []string // pairs: name, value
		runtime string
		args    []string
		code    int
		stderr  string
	}{
		{"an ORBITKV_OPERATOR_SOCKET longer than a Unix socket takes is a usage error naming it", []string{"ORBITKV_OPERATOR_SOCKET", "/" + strings.Repeat("a", 110)}, run0,
			[]string{"health"}, 2, "ORBITKV_OPERATOR_SOCKET: socket path \"/" + strings.Repeat("a", 110) + "\" is 111 bytes, above the limit of 107"},
		{"a bootstrap socket whose .operator path is too long is a usage error naming both", nil, run0,
			[]string{"health", "--socket", "/" + strings.Repeat("b", 100)}, 2, ".operator\" is 110 bytes, above the limit of 107"},
		{"ORBITKV_OPERATOR_SOCKET is the operator socket", []string{"ORBITKV_OPERATOR_SOCKET", missing}, run0,
			[]string{"health"}, 1, missing + ": no Manager there"},
		{"--operator-socket comes before ORBITKV_OPERATOR_SOCKET", []string{"ORBITKV_OPERATOR_SOCKET", "/nonexistent/op"}, run0,
			[]string{"health", "--operator-socket", missing}, 1, missing + ": no Manager there"},
		{"ORBITKV_OPERATOR_SOCKET comes before the bootstrap socket's", []string{"ORBITKV_OPERATOR_SOCKET", missing, "ORBITKV_BOOTSTRAP_SOCKET", "/x.sock"}, run0,
			[]string{"stats"}, 1, missing + ": no Manager there"},
		{"ORBITKV_BOOTSTRAP_SOCKET gives the operator socket's path", []string{"ORBITKV_BOOTSTRAP_SOCKET", missing}, run1,
			[]string{"stats"}, 1, missing + ".operator: no Manager there"},
		{"--socket comes before ORBITKV_BOOTSTRAP_SOCKET", []string{"ORBITKV_BOOTSTRAP_SOCKET", "/x.sock"}, run1,
			[]string{"stats", "--socket", missing}, 1, missing + ".operator: no Manager there"},
		{"--manager comes before ORBITKV_BOOTSTRAP_SOCKET", []string{"ORBITKV_BOOTSTRAP_SOCKET", "/x.sock"}, run1,
			[]string{"stats", "--manager", "127.0.0.1:7479"}, 1, "/tmp/orbitkv-127.0.0.1-7479.sock.operator: no Manager there"},
		{"the runtime directory's socket is the default", nil, run1,
			[]string{"sessions"}, 1, filepath.Join(run1, "manager.sock.operator") + ": no Manager there"},
		{"without one the path of ORBITKV_LISTEN", []string{"ORBITKV_LISTEN", "127.0.0.1:7478"}, run0,
			[]string{"sessions"}, 1, "/tmp/orbitkv-127.0.0.1-7478.sock.operator: no Manager there"},
		{"without ORBITKV_LISTEN the path of 127.0.0.1:7470", nil, run0,
			[]string{"sessions"}, 1, "/tmp/orbitkv-127.0.0.1-7470.sock.operator: no Manager there"},
		{"a bad ORBITKV_LISTEN is a usage error naming it", []string{"ORBITKV_LISTEN", "7470"}, run0,
			[]string{"health"}, 2, "ORBITKV_LISTEN: lifecycle: listen address \"7470\": missing port"},
		{"a bad --manager is a usage error naming it", nil, run0,
			[]string{"health", "--manager", "a/b:1"}, 2, `--manager "a/b:1"`},
		{"an ORBITKV_BOOTSTRAP_SOCKET over 107 bytes is a usage error naming it", []string{"ORBITKV_BOOTSTRAP_SOCKET", "/" + strings.Repeat("s", 107)}, run0,
			[]string{"health"}, 2, "ORBITKV_BOOTSTRAP_SOCKET: socket path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"ORBITKV_OPERATOR_SOCKET", "ORBITKV_BOOTSTRAP_SOCKET", "ORBITKV_LISTEN"} {
				t.Setenv(k, "")
			}
			for i := 0; i+1 < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			runtimeDir = tc.runtime
			var out, errb bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("%v %q = %d, stderr %q; want %d and %q", tc.env, tc.args, code, errb.String(), tc.code, tc.stderr)
			}
		})
	}
}

func TestHelpNamesTheEnvironment(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("--help = %d: %s", code, errb.String())
	}
	for _, w := range []string{"$ORBITKV_BOOTSTRAP_SOCKET", "$ORBITKV_OPERATOR_SOCKET", "$ORBITKV_LISTEN", "/run/orbitkv/manager.sock"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("--help lacks %s:\n%s", w, out.String())
		}
	}
}

func TestJSONPrints64BitIntegersAsStrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  *operatorpb.HealthReply
		want []string
	}{
		{"an epoch above 2^53 prints exactly", &operatorpb.HealthReply{Epoch: 1<<60 + 1}, []string{`"epoch": "1152921504606846977"`}},
		{"zero values are printed, 32-bit ones as numbers", &operatorpb.HealthReply{Sessions: 3}, []string{`"blocks": "0"`, `"sessions": 3`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printJSON(&b, tc.msg); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("JSON %s lacks %s", b.String(), w)
				}
			}
		})
	}
}

func TestSummarizeGivesNearestRankPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name                string
		rtts                []time.Duration
		min, p50, p99, maxv time.Duration
	}{
		{"one round trip is every figure", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"five unsorted round trips", ms(5, 1, 3, 2, 4), time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond},
		{"an even count takes the lower middle", ms(4, 1, 3, 2), time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarize(tc.rtts)
			got := []time.Duration{time.Duration(s.MinNs), time.Duration(s.P50Ns), time.Duration(s.P99Ns), time.Duration(s.MaxNs)}
			want := []time.Duration{tc.min, tc.p50, tc.p99, tc.maxv}
			if s.Count != uint64(len(tc.rtts)) || !equal(got, want) {
				t.Errorf("summarize = n %d %v, want n %d %v", s.Count, got, len(tc.rtts), want)
			}
		})
	}
}

func equal(a, b []time.Duration) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestConnectError(t *testing.T) {
	derived := client.Options{ManagerAddr: "127.0.0.1:7470"}
	for _, tc := range []struct {
		name string
		opts client.Options
		err  error
		want string
	}{
		{"no socket names the derived path and a hint", derived, &client.Error{Code: -int(syscall.ENOENT), Text: "No such file or directory",
			Detail: "connect /tmp/orbitkv-127.0.0.1-7470.sock: No such file or directory; is orbitkv-manager running at this path?"},
			"connect /tmp/orbitkv-127.0.0.1-7470.sock: liborbitkv: No such file or directory (is orbitkv-manager running? start it or pass --socket)"},
		{"a permission error says who may connect", client.Options{SocketPath: "/run/m.sock"}, &client.Error{Code: -int(syscall.EACCES), Text: "Permission denied"},
			"connect /run/m.sock: liborbitkv: Permission denied (the socket is mode 0600: run as the Manager's user)"},
		{"a refusal keeps the Manager's detail", derived, &client.Error{Code: -1003, Text: "refused", Detail: "max sessions reached"},
			"connect /tmp/orbitkv-127.0.0.1-7470.sock: liborbitkv: refused: max sessions reached"},
		{"another error is wrapped", derived, errors.New("boom"), "connect /tmp/orbitkv-127.0.0.1-7470.sock: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := connectError(tc.opts, tc.err).Error(); got != tc.want {
				t.Errorf("connectError(%v) =\n  %s\nwant\n  %s", tc.err, got, tc.want)
			}
		})
	}
}

// -o yaml is the JSON's document in YAML: decoded, the two give the same
// values (64-bit integers as strings, a string that reads as a number
// still a string), in the same field order.
func TestYAMLParsesBackToTheJSONsValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  proto.Message
	}{
		{"health with a 64-bit epoch and a version that reads as a number", &operatorpb.HealthReply{Status: "serving", Version: "1.0", Epoch: 1<<60 + 1,
			Sessions: 3, Build: &operatorpb.BuildInfo{Version: "1.0", Commit: "true", AbiVersion: 4}}},
		{"stats with tenants and a ratio", &operatorpb.StatsReply{Cache: true, Ram: &operatorpb.RamTier{Blocks: 7, HitRatio: 0.25},
			Tenants: []*operatorpb.Tenant{{Name: "a", Queries: 2}, {Name: "b: c", Domain: "- x"}}}},
		{"namespaces, one of them other", &operatorpb.NamespacesReply{Namespaces: []*operatorpb.Namespace{
			{Namespace: strings.Repeat("0", 32), Key: strings.Repeat("0", 32), RamBlocks: 1}, {Other: true, Queries: 9}}}},
		{"an empty list", &operatorpb.SessionsReply{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j, y bytes.Buffer
			if err := printJSON(&j, tc.msg); err != nil {
				t.Fatal(err)
			}
			if err := printYAML(&y, tc.msg); err != nil {
				t.Fatal(err)
			}
			var fromJSON, fromYAML any
			if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
				t.Fatalf("%v in\n%s", err, y.String())
			}
			// Both through encoding/json: numbers compare as numbers.
			a, _ := json.Marshal(fromJSON)
			b, err := json.Marshal(fromYAML)
			if err != nil || !bytes.Equal(a, b) {
				t.Fatalf("YAML\n%s\ndecodes to %s (%v),\nthe JSON to %s", y.String(), b, err, a)
			}
			if strings.ContainsAny(strings.NewReplacer("[]", "", "{}", "").Replace(y.String()), "{[") { // an empty list or map has no block style
				t.Errorf("YAML in flow style:\n%s", y.String())
			}
			if order := fieldOrder(t, j.String(), `"`); !slices.Equal(order, fieldOrder(t, y.String(), "")) {
				t.Errorf("field order: JSON %v, YAML %v", order, fieldOrder(t, y.String(), ""))
			}
		})
	}
}

// fieldOrder is the top-level field names of a JSON (quote `"`) or block
// YAML (quote "") document, in order.
func fieldOrder(t *testing.T, doc, quote string) []string {
	t.Helper()
	var out []string
	indent := "  "
	if quote == "" {
		indent = ""
	}
	for _, line := range strings.Split(doc, "\n") {
		rest, ok := strings.CutPrefix(line, indent+quote)
		if !ok || strings.HasPrefix(rest, " ") || rest == "" {
			continue
		}
		if name, _, ok := strings.Cut(rest, quote+":"); ok {
			out = append(out, name)
		}
	}
	return out
}

// A terminal is told apart from a pipe: only a terminal's frames clear
// the screen.
func TestIsTerminalIsFalseForAPipeAndABuffer(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}

// servedRuntimeDir makes a runtime directory (mode 0755) holding a
// listening manager.sock, for runtimeDir to point at; the test's cleanup
// closes the listener and restores runtimeDir.
func servedRuntimeDir(t *testing.T) string {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run1")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(run, "manager.sock"))
	if err != nil {
		t.Fatal(err)
	}
	old := runtimeDir
	t.Cleanup(func() { l.Close(); runtimeDir = old })
	return run
}
