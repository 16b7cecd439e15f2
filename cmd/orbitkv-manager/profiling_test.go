package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeSecret writes a password file in a test directory.
func writeSecret(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pyroscope.token")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPyroscopeSettingsNameTheSettingAndTheLimit(t *testing.T) {
	token := writeSecret(t, "glc_s3cret\n")
	tests := []struct {
		name string
		args []string
		env  env
		want string // substring of the error; "" = valid
	}{
		{"no URL leaves the push off", nil, nil, ""},
		{"a URL, a tenant and basic auth from a file are valid",
			[]string{"--pyroscope-url", "https://profiles-prod-001.grafana.net", "--pyroscope-tenant-id", "team-a", "--pyroscope-basic-auth-user", "123456", "--pyroscope-password-file", token}, nil, ""},
		{"a URL without a scheme is refused naming the flag", []string{"--pyroscope-url", "pyroscope:4040"}, nil,
			`--pyroscope-url "pyroscope:4040": want an http or https URL with a host, such as http://pyroscope:4040; its scheme is "pyroscope"`},
		{"a URL without a host is refused", []string{"--pyroscope-url", "http://"}, nil, "it has no host"},
		{"a URL from the environment is refused naming the variable", nil, env{"ORBITKV_PYROSCOPE_URL": "ftp://x"}, `ORBITKV_PYROSCOPE_URL="ftp://x": want an http or https URL`},
		{"a user without a password file is refused", []string{"--pyroscope-url", "http://p:4040", "--pyroscope-basic-auth-user", "123456"}, nil,
			`--pyroscope-password-file "": want a password with the basic auth user "123456"`},
		{"a missing password file is refused", []string{"--pyroscope-password-file", "/nonexistent/token"}, nil, `--pyroscope-password-file "/nonexistent/token": open /nonexistent/token: no such file`},
		{"an empty password file is refused", []string{"--pyroscope-password-file", writeSecret(t, "\n")}, nil, "empty: want the password or token on its first line"},
		{"a password file of two lines is refused", []string{"--pyroscope-password-file", writeSecret(t, "a\nb\n")}, nil, "more than one line"},
		{"a directory as the password file is refused", []string{"--pyroscope-password-file", t.TempDir()}, nil, "not a regular file"},
		{"an upload interval under a second is refused", []string{"--pyroscope-upload-interval", "100ms"}, nil, "--pyroscope-upload-interval 100ms: want 1s..5m"},
		{"a zero upload interval is refused (the default is spelled out)", []string{"--pyroscope-upload-interval", "0s"}, nil, "--pyroscope-upload-interval 0s: want 1s..5m"},
		{"an empty app name is refused", []string{"--pyroscope-app-name", ""}, nil, `--pyroscope-app-name "": want a name`},
		{"an app name with a brace is refused", []string{"--pyroscope-app-name", "okv{x}"}, nil, `--pyroscope-app-name "okv{x}": want at most 128 letters`},
		{"a tenant id with a space is refused", []string{"--pyroscope-tenant-id", "team a"}, nil, `--pyroscope-tenant-id "team a": want at most 150 printable ASCII`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validate: %v, want ok", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The push's Spec carries the settings, the password read from its file,
// the host name as the node id and the build's version.
func TestPyroscopeSettingsBecomeTheProfilingSpec(t *testing.T) {
	o, err := load(t, []string{"--pyroscope-url", "http://p:4040", "--pyroscope-basic-auth-user", "u1",
		"--pyroscope-password-file", writeSecret(t, "tok\r\n"), "--pyroscope-upload-interval", "2s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := newChecks(o)
	p := profilingSpec(o, k, nil)
	host, _ := os.Hostname()
	if p.URL != "http://p:4040" || p.BasicAuthUser != "u1" || p.BasicAuthPassword != "tok" || p.UploadInterval != 2*time.Second ||
		p.NodeID != host || p.Version == "" || p.AppName != "orbitkv-manager" {
		t.Fatalf("profilingSpec = %+v", p)
	}
}

// Neither --print-config nor an error repeats a password: the password
// file's content is never read into the printed configuration, and a
// password in the URL (refused) is written as xxxxx.
func TestNoPasswordIsPrinted(t *testing.T) {
	o, err := load(t, []string{"--pyroscope-url", "https://user:hunter2@p:4040", "--pyroscope-basic-auth-user", "u",
		"--pyroscope-password-file", writeSecret(t, "glc_s3cret")}, nil)
	if err == nil || !strings.Contains(err.Error(), "--pyroscope-url") {
		t.Fatalf("validate = %v, want the URL with a password refused", err)
	}
	var out bytes.Buffer
	o.printConfig(&out)
	text := out.String() + err.Error()
	for _, secret := range []string{"hunter2", "glc_s3cret"} {
		if strings.Contains(text, secret) {
			t.Errorf("the password %q is printed:\n%s", secret, text)
		}
	}
	if !strings.Contains(out.String(), `pyroscope-url = "https://user:xxxxx@p:4040"`) {
		t.Errorf("--print-config does not show the URL redacted:\n%s", out.String())
	}
}

func TestAPasswordFileOthersCanReadIsWarnedAbout(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		warn bool
	}{
		{"a file of mode 0600 gives no warning", 0o600, false},
		{"a file of mode 0400 gives no warning", 0o400, false},
		{"a file of mode 0644 is warned about with its mode", 0o644, true},
		{"a file of mode 0660 is warned about with its mode", 0o660, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSecret(t, "glc_s3cret\n")
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			o, err := load(t, []string{"--pyroscope-url", "http://p:4040", "--pyroscope-basic-auth-user", "u", "--pyroscope-password-file", path}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			p := profilingSpec(o, newChecks(o), slog.New(slog.NewTextHandler(&logged, nil)))
			if p.BasicAuthPassword != "glc_s3cret" {
				t.Fatalf("password = %q, want the file's", p.BasicAuthPassword)
			}
			warned := strings.Contains(logged.String(), "chmod 600") && strings.Contains(logged.String(), fmt.Sprintf("mode=%04o", tc.mode)) &&
				strings.Contains(logged.String(), path)
			if warned != tc.warn || strings.Contains(logged.String(), "glc_s3cret") {
				t.Errorf("log = %q, want a warning naming the path and mode: %v (and never the password)", logged.String(), tc.warn)
			}
		})
	}
}
