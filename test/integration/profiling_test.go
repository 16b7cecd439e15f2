package integration

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/internal/pyroscopetest"
)

// The Manager binary started with the --pyroscope-* flags pushes profiles
// with the tenant and basic auth they name (the password from its file),
// tagged with the host, the session's epoch and the --version, in which
// the dispatcher serves a client's pings; the password is never in its
// output, and SIGTERM stops it cleanly.
func TestTheManagerBinaryPushesProfilesToPyroscope(t *testing.T) {
	rcv := pyroscopetest.New(t)
	secret := filepath.Join(t.TempDir(), "pyroscope.token")
	if err := os.WriteFile(secret, []byte("glc_integration_s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off",
		"--pyroscope-url", rcv.URL(), "--pyroscope-upload-interval", "1s", "--pyroscope-tenant-id", "team-a",
		"--pyroscope-basic-auth-user", "123456", "--pyroscope-password-file", secret)
	c, err := client.Connect(client.Options{SocketPath: sock, InstanceID: "profiled"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var cpu *pyroscopetest.Push
	for end := time.Now().Add(30 * time.Second); cpu == nil; {
		for range 10_000 {
			if _, err := c.Ping(1); err != nil {
				t.Fatalf("ping: %v", err)
			}
		}
		for _, p := range rcv.Pushes() {
			if slices.Contains(p.Types(), "cpu") && hasDispatcherFrame(p) {
				cpu = &p
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no CPU profile with the dispatcher's frames within 30 s (%d pushes)\n%s", len(rcv.Pushes()), m.Output())
		}
	}
	host, _ := os.Hostname()
	out, err := exec.Command(filepath.Join(binDir, "orbitkv-manager"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.Fields(string(out))[1] // "orbitkv-manager VERSION"
	for k, v := range map[string]string{"node_id": host, "epoch": strconv.FormatUint(c.Epoch(), 10), "version": version} {
		if cpu.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, cpu.Labels[k], v, cpu.Labels)
		}
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("123456:glc_integration_s3cret"))
	if cpu.Header.Get("Authorization") != wantAuth || cpu.Header.Get("X-Scope-OrgID") != "team-a" {
		t.Errorf("Authorization %q, X-Scope-OrgID %q; want the basic auth of the flags and team-a",
			cpu.Header.Get("Authorization"), cpu.Header.Get("X-Scope-OrgID"))
	}
	c.Close()
	m.Signal(syscall.SIGTERM)
	if err := m.wait(t, 15*time.Second); err != nil {
		t.Errorf("the Manager exited with %v after SIGTERM:\n%s", err, m.Output())
	}
	if strings.Contains(m.Output(), "s3cret") {
		t.Errorf("the Manager's output holds the password:\n%s", m.Output())
	}
	if !strings.Contains(m.Output(), "profiling: pushing to pyroscope") {
		t.Errorf("no start line of the push in the output:\n%s", m.Output())
	}
}

// hasDispatcherFrame reports whether a sample of p runs through a
// function of the channel dispatcher.
func hasDispatcherFrame(p pyroscopetest.Push) bool {
	for _, s := range p.Profile.Sample {
		for _, l := range s.Location {
			for _, ln := range l.Line {
				if ln.Function != nil && strings.HasPrefix(ln.Function.Name, "github.com/orbitkv/orbitkv/gocore/channel.(*Dispatcher).") {
					return true
				}
			}
		}
	}
	return false
}
