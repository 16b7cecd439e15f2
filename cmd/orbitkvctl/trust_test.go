package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
	"go.yaml.in/yaml/v3"
)

// A table cell's control characters, non-printable runes and bytes that
// are not UTF-8 are written as escapes: a server's strings cannot move the
// cursor, clear the screen, retitle the terminal or break the table.
func TestTableEscapesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"serving":                             "serving",
		"héllo wörld ✓":                       "héllo wörld ✓",
		"serving \x1b[2J\x1b[H\x1b]0;PWNED\a": `serving \x1b[2J\x1b[H\x1b]0;PWNED\a`,
		"a\tb\nc\rd":                          `a\tb\nc\rd`,
		"\u009b31m \u202egnp.exe \x7f":        `\u009b31m \u202egnp.exe \x7f`,
		"bad \xff\xfe utf8":                   `bad \xff\xfe utf8`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	tb := newTable(&b)
	tb.row("status", "serving \x1b[2J\x1b]0;PWNED\a")
	tb.row("pid", 42)
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "status  serving \\x1b[2J\\x1b]0;PWNED\\a\npid     42\n"; got != want {
		t.Errorf("table = %q, want %q", got, want)
	}
}

// JSON and YAML carry a server's strings without a rune a terminal acts
// on: JSON escapes each (\u009b), so it decodes to the server's value;
// YAML writes it as the table does (\u009b as text), since YAML's own
// escapes leave U+202E raw. Both stay parseable.
func TestJSONAndYAMLEscapeWhatATerminalActsOn(t *testing.T) {
	evil := "ev\u009b31mil \x1b]0;PWNED\a \u202egnp.exe \U000e0001 \ufeff ok"
	m := &operatorpb.SessionsReply{Sessions: []*operatorpb.Session{{Instance: evil, Role: "engine"}}}
	bad := func(b []byte) string {
		for _, r := range string(b) {
			if r != '\n' && !unicode.IsPrint(r) {
				return fmt.Sprintf("%U", r)
			}
		}
		return ""
	}
	var j bytes.Buffer
	if err := printJSON(&j, m); err != nil {
		t.Fatal(err)
	}
	if r := bad(j.Bytes()); r != "" {
		t.Errorf("JSON carries %s raw:\n%s", r, j.String())
	}
	var back struct {
		Sessions []struct{ Instance string } `json:"sessions"`
	}
	if err := json.Unmarshal(j.Bytes(), &back); err != nil || len(back.Sessions) != 1 || back.Sessions[0].Instance != evil {
		t.Errorf("JSON decodes to %+v (%v), want the instance %q", back, err, evil)
	}
	var y bytes.Buffer
	if err := printYAML(&y, m); err != nil {
		t.Fatalf("YAML of a session with control characters: %v", err)
	}
	if r := bad(y.Bytes()); r != "" {
		t.Errorf("YAML carries %s raw:\n%s", r, y.String())
	}
	var yb struct {
		Sessions []struct{ Instance string } `yaml:"sessions"`
	}
	if err := yaml.Unmarshal(y.Bytes(), &yb); err != nil || len(yb.Sessions) != 1 || yb.Sessions[0].Instance != printable(evil) {
		t.Errorf("YAML decodes to %+v (%v), want the instance %q", yb, err, printable(evil))
	}
}

// The owner of the runtime directory is trusted only for the default
// socket there; an explicit path gets the own uid, root and --manager-uid
// (else ORBITKV_MANAGER_UID) only.
func TestOperatorSocketTrust(t *testing.T) {
	run1 := servedRuntimeDir(t)
	runtimeDir = run1
	for _, k := range []string{"ORBITKV_OPERATOR_SOCKET", "ORBITKV_BOOTSTRAP_SOCKET", "ORBITKV_LISTEN", EnvManagerUID} {
		t.Setenv(k, "")
	}
	vouched, ok := lifecycle.RuntimeDirOwner(run1)
	if !ok {
		vouched = -1 // a parent writable by others (some CI temp directories)
	}

	g := &globals{}
	path, trust, err := g.operatorSocket()
	if err != nil || path != filepath.Join(run1, "manager.sock.operator") || trust.RuntimeDir != run1 ||
		trust.VouchedUID != int64(vouched) || trust.ManagerUID != -1 {
		t.Errorf("default: %q %+v %v; want the runtime directory's socket, its owner %d vouched", path, trust, err, vouched)
	}
	for _, g := range []*globals{{opSocket: "/x/op"}, {socket: "/x/m.sock"}, {manager: "127.0.0.1:7479"}} {
		if path, trust, err := g.operatorSocket(); err != nil || trust.RuntimeDir != "" || trust.VouchedUID != -1 {
			t.Errorf("%+v: %q %+v %v; want no runtime directory trust", g, path, trust, err)
		}
	}
	t.Setenv("ORBITKV_OPERATOR_SOCKET", "/x/op")
	if _, trust, err := (&globals{}).operatorSocket(); err != nil || trust.RuntimeDir != "" || trust.VouchedUID != -1 {
		t.Errorf("ORBITKV_OPERATOR_SOCKET: %+v %v; want no runtime directory trust", trust, err)
	}

	t.Setenv(EnvManagerUID, "1234")
	if _, trust, err := (&globals{}).operatorSocket(); err != nil || trust.ManagerUID != 1234 {
		t.Errorf("ORBITKV_MANAGER_UID=1234: %+v %v", trust, err)
	}
	if _, trust, err := (&globals{managerUID: "0"}).operatorSocket(); err != nil || trust.ManagerUID != 0 {
		t.Errorf("--manager-uid 0 over ORBITKV_MANAGER_UID: %+v %v", trust, err)
	}
	for _, bad := range []string{"-1", "4294967295", "x", "+5", "1e3"} {
		if _, _, err := (&globals{managerUID: bad}).operatorSocket(); err == nil || !strings.Contains(err.Error(), "--manager-uid") {
			t.Errorf("--manager-uid %q: %v, want a usage error naming the flag", bad, err)
		}
		t.Setenv(EnvManagerUID, bad)
		var out, errb bytes.Buffer
		if code := run([]string{"health"}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), EnvManagerUID) {
			t.Errorf("ORBITKV_MANAGER_UID=%q: exit %d, %q; want 2 naming the variable", bad, code, errb.String())
		}
	}
}
