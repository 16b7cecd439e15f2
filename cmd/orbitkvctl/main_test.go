package main

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string // substring; "" = no error
		check   func(c config) bool
	}{
		{args: []string{"health"}, check: func(c config) bool {
			return c.sub == "health" && c.timeout == 5*time.Second && c.manager == "127.0.0.1:7470"
		}},
		{args: []string{"ping"}, check: func(c config) bool {
			return c.sub == "ping" && c.count == 5 && c.interval == 100*time.Millisecond && !c.hold
		}},
		{args: []string{"--socket", "/s", "ping", "--count", "1", "--interval", "0", "--hold"}, check: func(c config) bool {
			return c.socket == "/s" && c.count == 1 && c.interval == 0 && c.hold
		}},
		{args: []string{"--help"}, check: func(c config) bool { return c.help && c.sub == "" }},
		{args: []string{"ping", "--help"}, check: func(c config) bool { return c.help && c.sub == "ping" }},
		{args: []string{"health", "-h"}, check: func(c config) bool { return c.help && c.sub == "health" }},
		{args: []string{"--version"}, check: func(c config) bool { return c.version }},
		{args: []string{}, wantErr: "no subcommand"},
		{args: []string{"bogus"}, wantErr: `unknown subcommand "bogus"`},
		{args: []string{"--bogus", "health"}, wantErr: "-bogus"},
		{args: []string{"ping", "--count", "-3"}, wantErr: "--count must be >= 1"},
		{args: []string{"ping", "--count", "0"}, wantErr: "--count must be >= 1"},
		{args: []string{"ping", "--count", "x"}, wantErr: "-count"},
		{args: []string{"ping", "--interval", "-1s"}, wantErr: "--interval must be >= 0"},
		{args: []string{"ping", "--count", "1", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"health", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"--timeout", "0", "health"}, wantErr: "--timeout must be"},
		{args: []string{"--timeout", "-1s", "ping"}, wantErr: "--timeout must be"},
		{args: []string{"--timeout", "1us", "ping"}, wantErr: "--timeout must be"},
	} {
		c, err := parseArgs(tc.args)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseArgs(%q) error = %v, want one containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("parseArgs(%q): %v", tc.args, err)
		case !tc.check(c):
			t.Errorf("parseArgs(%q) = %+v", tc.args, c)
		}
	}
}

func TestRunHelpVersionAndUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // substring of stdout ("" = stdout must be empty)
		stderr string // substring of stderr ("" = stderr must be empty)
	}{
		{[]string{"--help"}, 0, "--count N", ""},
		{[]string{"--help"}, 0, "SIGUSR1", ""},
		{[]string{"ping", "--help"}, 0, "pings to send", ""},
		{[]string{"--version"}, 0, "orbitkvctl dev (abi ", ""},
		{[]string{"ping", "--count", "0"}, 2, "", "--count must be >= 1"},
		{[]string{}, 2, "", "no subcommand"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code {
			t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tc.args, code, tc.code, errb.String())
		}
		for _, s := range []struct{ name, got, want string }{{"stdout", out.String(), tc.stdout}, {"stderr", errb.String(), tc.stderr}} {
			if (s.want == "" && s.got != "") || !strings.Contains(s.got, s.want) {
				t.Errorf("run(%q) %s = %q, want %q", tc.args, s.name, s.got, s.want)
			}
		}
	}
}

func TestConnectError(t *testing.T) {
	derived := client.Options{ManagerAddr: "127.0.0.1:7470"}
	for _, tc := range []struct {
		opts client.Options
		err  error
		want string
	}{
		{derived, &client.Error{Code: -int(syscall.ENOENT), Text: "No such file or directory",
			Detail: "connect /tmp/orbitkv-127.0.0.1-7470.sock: No such file or directory; is orbitkv-manager running at this path?"},
			"connect /tmp/orbitkv-127.0.0.1-7470.sock: liborbitkv: No such file or directory (is orbitkv-manager running? start it or pass --socket)"},
		{client.Options{SocketPath: "/run/m.sock"}, &client.Error{Code: -int(syscall.EACCES), Text: "Permission denied"},
			"connect /run/m.sock: liborbitkv: Permission denied (the socket is mode 0600: run as the Manager's user)"},
		{derived, &client.Error{Code: -1003, Text: "refused", Detail: "max sessions reached"},
			"connect /tmp/orbitkv-127.0.0.1-7470.sock: liborbitkv: refused: max sessions reached"},
		{derived, errors.New("boom"), "connect /tmp/orbitkv-127.0.0.1-7470.sock: boom"},
	} {
		if got := connectError(tc.opts, tc.err).Error(); got != tc.want {
			t.Errorf("connectError(%v) =\n  %s\nwant\n  %s", tc.err, got, tc.want)
		}
	}
}
