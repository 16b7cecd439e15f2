package integration

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/internal/launch"
)

var binDir string

// channelTransport is the --channel-transport of every Manager these tests
// start (startManagerBin): make test-go runs the package once per
// transport the build has (shm, and iceoryx2 where it was built).
var channelTransport = flag.String("channel-transport", "shm", "--channel-transport of every Manager the tests start: shm or iceoryx2")

// raceEnv is the opt-in of make test-integration-race: with
// ORBITKV_MANAGER_RACE=1 TestMain builds both Manager binaries with -race and
// points their race reports (GORACE log_path) at files in the binary
// directory, so a report of a Manager killed with SIGKILL is kept too; after
// the tests any report containing "WARNING: DATA RACE" is printed and fails
// the run. orbitkvctl and testclient stay plain builds: they are clients,
// and the test binary itself is under -race in make test-go.
const raceEnv = "ORBITKV_MANAGER_RACE"

func TestMain(m *testing.M) {
	if path := os.Getenv(squatEnv); path != "" { // a child of TestOrbitkvctlRefusesAnOperatorSocketOfAnotherUID
		os.Exit(squat(path))
	}
	dir, err := os.MkdirTemp("", "orbitkv-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	race := os.Getenv(raceEnv) == "1"
	var raceFlag []string
	if race {
		raceFlag = []string{"-race"}
		gorace := "log_path=" + filepath.Join(dir, "race")
		if prev := os.Getenv("GORACE"); prev != "" {
			gorace = prev + " " + gorace
		}
		os.Setenv("GORACE", gorace) // read by each race-built Manager at its start
	}
	build := func(what string, args ...string) {
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", what, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	build("the Manager", append(raceFlag, "-o", dir, "../../cmd/orbitkv-manager")...)
	build("orbitkvctl and testclient", "-o", dir, "../../cmd/orbitkvctl", "./testclient")
	// The failpoint build of the Manager (tag failpoints): pause points and
	// a test clock behind loopback HTTP; never shipped.
	// A command-line -tags replaces GOFLAGS' own: name okv_iox2 again where
	// this build has the iceoryx2 transport.
	fpTags := "failpoints"
	if channel.Iceoryx2Built {
		fpTags += ",okv_iox2"
	}
	build("the failpoint Manager", append(raceFlag, "-tags", fpTags, "-o", filepath.Join(dir, "orbitkv-manager-fp"), "../../cmd/orbitkv-manager")...)
	if race {
		fmt.Fprintln(os.Stderr, "integration: Manager binaries built with -race; reports go to", filepath.Join(dir, "race.<pid>"))
	}
	binDir = dir
	code := m.Run()
	if race && raceReports(dir) > 0 {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// raceReports prints every race report the race-built Managers wrote into
// dir (files race.<pid>) and returns how many contain a data race.
func raceReports(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "race.*"))
	races := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			races++
			fmt.Fprintf(os.Stderr, "FAIL: a race-built Manager (pid %s) reported a data race:\n%s\n", strings.TrimPrefix(filepath.Ext(f), "."), b)
		} else {
			fmt.Fprintf(os.Stderr, "race runtime output of Manager pid %s:\n%s\n", strings.TrimPrefix(filepath.Ext(f), "."), b)
		}
	}
	fmt.Fprintf(os.Stderr, "integration: %d race-built Manager report file(s), %d with a data race\n", len(files), races)
	return races
}

// proc is a process of a binary of binDir, started through internal/launch:
// its stdout and stderr go to a file in a temporary directory of the test,
// read back by Output.
type proc struct{ *launch.Process }

// start starts binDir/name with args; a cleanup SIGKILLs it and waits.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startSpec(t, launch.ProcessSpec{Path: filepath.Join(binDir, name), Args: args})
}

// startWithStdin is start with a pipe to the process's stdin.
func startWithStdin(t *testing.T, name string, args ...string) (*proc, io.WriteCloser) {
	t.Helper()
	p := startSpec(t, launch.ProcessSpec{Path: filepath.Join(binDir, name), Args: args, Stdin: true})
	return p, p.Stdin()
}

func startSpec(t *testing.T, spec launch.ProcessSpec) *proc {
	t.Helper()
	spec.Dir = t.TempDir()
	p, err := launch.StartProcess(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return &proc{p}
}

// startManagerBin starts the Manager build binDir/name (orbitkv-manager or
// orbitkv-manager-fp) through launch.Start on bootstrap socket sock, with
// --http-addr httpAddr ("" = a free loopback port, launch.NoHTTP = none)
// and then args, and waits up to ready for it to serve. It records the
// Manager's HTTP address for readHealth; a cleanup SIGKILLs it and waits.
func startManagerBin(t *testing.T, name, sock, httpAddr string, ready time.Duration, args ...string) *proc {
	t.Helper()
	if *channelTransport != "shm" && !channel.Iceoryx2Built {
		t.Skipf("-channel-transport %s: %v", *channelTransport, errors.New("this test binary was built without the iceoryx2 transport"))
	}
	// First, so a test's own --channel-transport wins.
	args = append([]string{"--channel-transport", *channelTransport}, args...)
	m, err := launch.Start(launch.Spec{Bin: filepath.Join(binDir, name), Dir: t.TempDir(), Socket: sock,
		HTTPAddr: httpAddr, Args: args, ReadyTimeout: ready})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Kill() })
	managerHTTP.Store(m.Socket(), m.HTTPAddr())
	return &proc{m.Process}
}

// waitOutput waits until the process printed want, or fails after d (or
// once the process has exited without printing it).
func (p *proc) waitOutput(t *testing.T, want string, d time.Duration) {
	t.Helper()
	if err := p.WaitOutput(want, d); err != nil {
		t.Fatalf("%v; output:\n%s", err, p.Output())
	}
}

// wait waits up to d for the process to exit and returns its status (nil
// or an *exec.ExitError); it fails the test if the process is still
// running after d.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	err := p.Wait(d)
	if errors.Is(err, launch.ErrRunning) {
		t.Fatalf("%v; output:\n%s", err, p.Output())
	}
	return err
}

// startManager starts a Manager with a 64 MiB RAM tier on a socket in a
// temporary directory and returns it with the socket path.
func startManager(t *testing.T) (*proc, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off")
	return m, sock
}

// sessions asks the Manager's GET /health how many sessions are live (a
// session's own Health counts only that session).
func sessions(t *testing.T, sock string) int {
	t.Helper()
	return healthOf(t, sock).Sessions
}

func waitSessions(t *testing.T, sock string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := sessions(t, sock)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("live sessions = %d, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKilledClientLosesOnlyItsSession(t *testing.T) {
	m, sock := startManager(t)
	const n = 4
	clients := make([]*proc, n)
	for i := range clients {
		clients[i] = start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "3", "--interval", "1ms", "--hold")
	}
	for _, c := range clients {
		c.waitOutput(t, "holding session", 10*time.Second)
	}
	waitSessions(t, sock, n)

	victim := clients[0]
	victim.Signal(syscall.SIGKILL)
	victim.wait(t, 5*time.Second)
	waitSessions(t, sock, n-1)
	// The session leaves the table before its log line is written.
	if err := m.WaitOutput("msg=\"session closed\" slot=", 5*time.Second); err != nil {
		t.Errorf("manager log has no session-closed line: %v\n%s", err, m.Output())
	}

	for i, c := range clients[1:] {
		c.Signal(syscall.SIGUSR1)
		c.waitOutput(t, "ping ok", 5*time.Second)
		c.Signal(syscall.SIGTERM)
		if err := c.wait(t, 5*time.Second); err != nil {
			t.Errorf("client %d exited with %v:\n%s", i+1, err, c.Output())
		}
	}
	// Idle invariant (docs/design.md §6 rule 8): no sessions remain.
	waitSessions(t, sock, 0)

	m.Signal(syscall.SIGTERM)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("manager exited with %v:\n%s", err, m.Output())
	}
	if !strings.Contains(m.Output(), "orbitkv-manager stopped") {
		t.Errorf("manager log lacks the stop line:\n%s", m.Output())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s still exists after shutdown (stat err %v)", sock, err)
	}
}

func TestShutdownClosesSessionsFirst(t *testing.T) {
	m, sock := startManager(t)
	c := start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "1", "--hold")
	c.waitOutput(t, "holding session", 10*time.Second)
	m.Signal(syscall.SIGTERM)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("manager exited with %v:\n%s", err, m.Output())
	}
	log := m.Output()
	closed := strings.Index(log, "session closed")
	stopped := strings.Index(log, "orbitkv-manager stopped")
	if closed < 0 || stopped < 0 || closed > stopped {
		t.Errorf("want the session closed before the manager stopped; log:\n%s", log)
	}
}

func TestPingAfterManagerDeathFailsFast(t *testing.T) {
	m, sock := startManager(t)
	c := start(t, "orbitkvctl", "--socket", sock, "--timeout", "30s", "ping", "--count", "1", "--hold")
	c.waitOutput(t, "holding session", 10*time.Second)
	m.Signal(syscall.SIGKILL)
	m.wait(t, 5*time.Second)
	t0 := time.Now()
	c.Signal(syscall.SIGUSR1)
	err := c.wait(t, 10*time.Second)
	if err == nil {
		t.Fatalf("client survived a dead Manager:\n%s", c.Output())
	}
	// The client learns of the death from the Manager's pidfd, not from its
	// 30 s deadline.
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("client took %v to notice the dead Manager", d)
	}
	if !strings.Contains(c.Output(), "exited") {
		t.Errorf("client error does not say the Manager exited:\n%s", c.Output())
	}
}
