package integration

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/launch"
)

// The failpoint scenarios of the operation semantics: a Manager built
// with the tag failpoints (orbitkv-manager-fp) holds one operation at a
// named point while testclient runs one ticketed operation through all of
// them (testclient tickets: publish, ticket, restore, byte check). While it
// is held, a second client completes a fresh round trip: a pause holds only
// the operation concerned, never the dispatcher. Then
// the test SIGKILLs the client, SIGKILLs the Manager, stops the client past
// the operation expiry, or drops every eventfd wake-up; then it checks
// docs/design.md §6:
//   - rule 1: the client ends with exactly one terminal outcome (exit 0,
//     expired, or Manager died), never a hang (every wait is bounded here);
//   - rules 2–4, 9: a fresh client publishes, leases, restores and checks
//     every byte of its blocks on the same (or restarted) Manager;
//   - rule 7: after a Manager kill the client sees the death (pidfd), and
//     the restarted Manager (new epoch) serves fresh sessions;
//   - rule 8: the idle invariant once only the checking session is left.
// Rules 5 and 6 (bounds, expiry, revisions) are checked by the model test.

var failpoints = []string{"ticket-admission", "reservation", "copy-submitted", "copy-complete", "notification", "publish-ack"}

// fpManager is a failpoint Manager with its loopback control address.
type fpManager struct {
	p    *proc
	sock string
	http string
}

// freeLoopbackAddr is launch.FreeLoopbackAddr that fails the test on an
// error: an --http-addr for a Manager whose address the test needs before
// it starts.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	addr, err := launch.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func startFPManager(t *testing.T, sock string, args ...string) *fpManager {
	t.Helper()
	addr := freeLoopbackAddr(t)
	p := startManagerBin(t, "orbitkv-manager-fp", sock, addr, 10*time.Second, append([]string{"--ram-capacity", "128MiB", "--hugepages", "off"}, args...)...)
	return &fpManager{p: p, sock: sock, http: addr}
}

// control sends one request to the failpoint endpoints; it fails the test
// unless the answer is 200.
func (m *fpManager) control(t *testing.T, method, path string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+m.http+path, nil)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s\nManager output:\n%s", method, path, resp.Status, body, m.p.Output())
	}
}

// runTickets starts testclient tickets over hashes first..first+16.
func runTickets(t *testing.T, sock string, first int) *proc {
	t.Helper()
	return start(t, "testclient", "tickets", sock, fmt.Sprint(first), "16")
}

// exitCode waits (bounded) for p and returns its exit status.
func exitCode(t *testing.T, p *proc, d time.Duration) int {
	t.Helper()
	err := p.wait(t, d)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", err)
	return -1
}

// freshRoundTrip checks rules 2–4 and 9 on m: a new client's ticketed
// publish/lease/restore round trip is byte-exact.
func freshRoundTrip(t *testing.T, sock string, first int) {
	t.Helper()
	c := runTickets(t, sock, first)
	if code := exitCode(t, c, 30*time.Second); code != 0 {
		t.Fatalf("fresh client exit %d (want 0); output:\n%s", code, c.Output())
	}
}

func TestFailpointScenarios(t *testing.T) {
	actions := []string{"kill-client", "kill-manager", "stop-client-past-expiry", "drop-wakeups"}
	for i, point := range failpoints {
		for j, action := range actions {
			first := 100000 + 1000*(i*len(actions)+j)
			t.Run(point+"/"+action, func(t *testing.T) {
				sock := filepath.Join(t.TempDir(), "okv.sock")
				m := startFPManager(t, sock)
				if action == "drop-wakeups" {
					m.control(t, "POST", "/debug/failpoints/drop-wakeups?on=1")
				}
				m.control(t, "POST", "/debug/failpoints/arm?name="+point)
				c := runTickets(t, sock, first)
				m.control(t, "GET", "/debug/failpoints/wait?name="+point+"&timeout=20s")
				// The held operation is the first client's alone: everyone
				// else is served meanwhile. (The first client waits at most
				// its 5 s request timeout for a held reply, so this must not
				// dawdle; it takes well under a second.)
				freshRoundTrip(t, sock, first+300)
				switch action {
				case "kill-client":
					c.Signal(syscall.SIGKILL)
					exitCode(t, c, 10*time.Second)
					m.control(t, "POST", "/debug/failpoints/resume?name="+point)
				case "kill-manager":
					m.p.Signal(syscall.SIGKILL)
					exitCode(t, m.p, 10*time.Second)
					code := exitCode(t, c, 15*time.Second)
					if code != 4 {
						t.Fatalf("client exit %d after the Manager died, want 4 (Manager died); output:\n%s", code, c.Output())
					}
					m = startFPManager(t, sock) // a new epoch on the same socket
				case "stop-client-past-expiry":
					c.Signal(syscall.SIGSTOP)
					m.control(t, "POST", "/debug/failpoints/resume?name="+point)
					m.control(t, "POST", "/debug/clock/advance?by=61s")
					time.Sleep(1500 * time.Millisecond) // the expiry sweep runs at least once a second
					c.Signal(syscall.SIGCONT)
					if code := exitCode(t, c, 30*time.Second); code != 0 && code != 3 {
						t.Fatalf("client exit %d after expiry, want 0 or 3 (expired); output:\n%s", code, c.Output())
					}
				case "drop-wakeups":
					m.control(t, "POST", "/debug/failpoints/resume?name="+point)
					if code := exitCode(t, c, 30*time.Second); code != 0 {
						t.Fatalf("client exit %d with wake-ups dropped, want 0 (it polls); output:\n%s", code, c.Output())
					}
					m.control(t, "POST", "/debug/failpoints/drop-wakeups?on=0")
				}
				assertIdle(t, sock)
				freshRoundTrip(t, sock, first+500)
				assertIdle(t, sock)
				if strings.Contains(m.p.Output(), "panic") {
					t.Fatalf("Manager panicked:\n%s", m.p.Output())
				}
			})
		}
	}
}
