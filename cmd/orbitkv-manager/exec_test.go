package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/buildinfo"
)

// TestMain runs main instead of the tests when the test binary is started
// by runMain, so the tests see the command as an operator does: its
// output and exit status.
func TestMain(m *testing.M) {
	if os.Getenv("OKV_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs orbitkv-manager args with the variables env and returns its
// stdout, stderr and exit status. It never starts a Manager: every case
// exits before manager.New.
func runMain(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{"OKV_TEST_RUN_MAIN=1", "PATH=" + os.Getenv("PATH")}, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestTheCommandAsAnOperatorSeesIt(t *testing.T) {
	cfg := writeConfig(t, "ram-capacity = \"1GiB\"\nmax-ops = 9\n")
	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantOut    []string
		wantErr    []string
		wantNotOut string
	}{
		{"--version names the version, commit, build date and Go", nil, []string{"--version"}, 0,
			[]string{"orbitkv-manager ", "\ncommit: ", "\nbuilt: ", "\ngo: ", "abi: "}, nil, ""},
		{"--help keeps the examples and explains the units", nil, []string{"--help"}, 0,
			[]string{"Examples:", "orbitkv-manager --ram-capacity 64GiB --copy-workers 8", "1 KiB = 1024 bytes", "refused as ambiguous", "--ram-capacity size", "A duration has a unit"}, nil, ""},
		{"--print-config shows every source and exits 0 without starting", []string{"ORBITKV_MAX_OPS=12"}, []string{"--config", cfg, "--poll-mode", "park", "--print-config"}, 0,
			[]string{`ram-capacity = "1GiB"`, "# file " + cfg + ":1", "max-ops = 12", "# env ORBITKV_MAX_OPS", `poll-mode = "park"`, "# flag --poll-mode", "# default"}, nil, "serving"},
		{"RUNTIME_DIRECTORY holds the default bootstrap socket, its first entry of several", []string{"RUNTIME_DIRECTORY=/run/unit-a:/run/unit-b"}, []string{"--print-config"}, 0,
			[]string{`bootstrap-socket = ""`, "(empty: the default, /run/unit-a/manager.sock)"}, nil, ""},
		{"--bootstrap-socket comes before RUNTIME_DIRECTORY", []string{"RUNTIME_DIRECTORY=/run/unit-a"}, []string{"--bootstrap-socket", "/tmp/b.sock", "--print-config"}, 0,
			[]string{`bootstrap-socket = "/tmp/b.sock"`}, nil, "/run/unit-a/manager.sock"},
		{"a relative RUNTIME_DIRECTORY stops the Manager with status 2 naming it", []string{"RUNTIME_DIRECTORY=run/unit-a"}, []string{"--print-config"}, 2,
			nil, []string{`RUNTIME_DIRECTORY "run/unit-a": first entry "run/unit-a" is not an absolute path`}, `--bootstrap-socket ""`},
		{"ORBITKV_CONFIG names the file", []string{"ORBITKV_CONFIG=" + cfg}, []string{"--print-config"}, 0,
			[]string{"max-ops = 9", "# config file: " + cfg + " (env ORBITKV_CONFIG)"}, nil, ""},
		{"--print-config of a bad configuration prints it and exits 2 naming the setting", []string{"ORBITKV_MAX_OPS=0"}, []string{"--print-config"}, 2,
			[]string{"max-ops = 0"}, []string{"orbitkv-manager: ORBITKV_MAX_OPS=0: want 1..1048576"}, ""},
		{"an ambiguous size stops the Manager with status 2", nil, []string{"--ram-capacity", "4G"}, 2,
			nil, []string{`orbitkv-manager: --ram-capacity "4G": ambiguous unit "G": 4G could mean 4294967296 bytes`}, ""},
		{"an unknown key stops it naming the file and line", nil, []string{"--config", writeConfig(t, "max-ops = 1\nram = 2\n")}, 2,
			nil, []string{`manager.toml:2: unknown key "ram"`}, ""},
		{"an unknown flag points at --help", nil, []string{"--ram-capacityy", "1GiB"}, 2,
			nil, []string{"orbitkv-manager: unknown flag: --ram-capacityy", "Run 'orbitkv-manager --help' for the flags."}, ""},
		{"a single-dash long flag says flags take two dashes", nil, []string{"-ram-capacity", "1GiB"}, 2,
			nil, []string{"long flags start with --"}, ""},
		{"a stray argument is refused", nil, []string{"serve"}, 2, nil, []string{`unexpected argument "serve"`}, ""},
		{"an unknown copy backend is refused naming the choices", nil, []string{"--copy-backend", "gpu"}, 2,
			nil, []string{`orbitkv-manager: --copy-backend "gpu": want host, cuda or auto`}, ""},
		{"completion bash writes a bash script", nil, []string{"completion", "bash"}, 0, []string{"bash completion V2 for orbitkv-manager"}, nil, ""},
		{"completion zsh writes a zsh script", nil, []string{"completion", "zsh"}, 0, []string{"#compdef orbitkv-manager"}, nil, ""},
		{"completion fish writes a fish script", nil, []string{"completion", "fish"}, 0, []string{"complete -c orbitkv-manager"}, nil, ""},
		{"completion of an unknown shell is refused", nil, []string{"completion", "ksh"}, 2, nil, []string{`invalid argument "ksh"`}, ""},
		{"the flag values complete", nil, []string{"__complete", "--poll-mode", ""}, 0, []string{"spin\n", "adaptive\n", "park\n"}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runMain(t, tc.env, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.wantNotOut != "" && strings.Contains(out+errOut, tc.wantNotOut) {
				t.Errorf("output has %q", tc.wantNotOut)
			}
		})
	}
}

// A failpoint build says so in --version and, as a warning, on its first
// log line; an ordinary build says neither. Run with and without -tags
// failpoints.
func TestTheBuildSaysWhetherItHasFailpoints(t *testing.T) {
	out, _, code := runMain(t, nil, "--version")
	if code != 0 {
		t.Fatalf("--version: exit status %d", code)
	}
	if got := strings.Contains(out, "failpoints: on"); got != buildinfo.Failpoints {
		t.Errorf("--version says failpoints %v in a build with Failpoints %v:\n%s", got, buildinfo.Failpoints, out)
	}
	var log bytes.Buffer
	logBuild(slog.New(slog.NewTextHandler(&log, nil)))
	line := log.String()
	for _, want := range []string{"orbitkv-manager starting", "version=", "commit=", "go=go1.", fmt.Sprintf("failpoints=%v", buildinfo.Failpoints)} {
		if !strings.Contains(line, want) {
			t.Errorf("start log %q lacks %q", line, want)
		}
	}
	if warned := strings.Contains(line, "level=WARN") && strings.Contains(line, "failpoint build"); warned != buildinfo.Failpoints {
		t.Errorf("start log %q: warned %v, Failpoints %v", line, warned, buildinfo.Failpoints)
	}
}

// TestCopyBackendCUDAWithoutADriverStopsTheManager: --copy-backend cuda on a
// machine whose driver library cannot be loaded (ORBITKV_LIBCUDA names a
// missing file, so this holds on GPU hosts too) stops the Manager at start
// with status 4 (a resource), naming the flag and the dlopen error on
// stderr's "orbitkv-manager: " line. The Manager runs on a temporary
// socket with a small RAM tier and no HTTP endpoint.
func TestCopyBackendCUDAWithoutADriverStopsTheManager(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--bootstrap-socket", dir + "/m.sock", "--http-addr", "", "--ram-capacity", "16MiB",
		"--prefault=false", "--hugepages", "off", "--copy-backend", "cuda"}
	_, stderr, code := runMain(t, []string{"ORBITKV_LIBCUDA=" + dir + "/libcuda.so.1"}, args...)
	want := "\norbitkv-manager: --copy-backend \"cuda\": dlopen " + dir + "/libcuda.so.1: " + dir + "/libcuda.so.1: cannot open shared object file"
	if code != exitResource || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitResource, want)
	}
}
