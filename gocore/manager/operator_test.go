package manager

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orbitkv/orbitkv/gocore/operator"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

func TestValidateChecksTheOperatorSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(s *Spec)
		want string // "" valid, else a substring of the error
	}{
		{"the default path is the bootstrap socket's plus .operator", func(*Spec) {}, ""},
		{"a group id is accepted", func(s *Spec) { s.OperatorGroup = "4242" }, ""},
		{"an unknown group name is refused naming the field", func(s *Spec) { s.OperatorGroup = "no-such-group-okv" }, "manager.OperatorGroup"},
		{"a path over sun_path is refused naming the field", func(s *Spec) { s.OperatorSocket = "/" + strings.Repeat("x", 120) }, "manager.OperatorSocket"},
		{"the bootstrap socket's own path is refused", func(s *Spec) { s.OperatorSocket = s.Bootstrap.Path }, "a path other than the bootstrap socket's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t, "")
			tc.set(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// New serves the operator socket beside the bootstrap socket, answering
// Unavailable until the Manager serves; Close removes it.
func TestNewServesTheOperatorSocketAndCloseRemovesIt(t *testing.T) {
	s := testSpec(t, "")
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	path := s.Bootstrap.Path + operator.Suffix
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator socket %s: %v %v, want mode 0600", path, fi, err)
	}
	c, err := operator.Dial(path, operator.NoTrust)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Stats(ctx, &operatorpb.StatsRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("Stats before Serve = %v, want Unavailable: starting", err)
	}
	go m.Serve()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		st, err := c.Stats(ctx, &operatorpb.StatsRequest{})
		if err == nil && st.Cache && st.Ram.CapacityBytes == 4<<20 {
			if st.Budgets.LeaseBudgetBytes != 4<<20 {
				t.Fatalf("Stats lease budget = %d, want the RAM capacity (4 MiB) that applies when Spec.LeaseBudget is 0", st.Budgets.LeaseBudgetBytes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats while serving = %v %v, want the 4 MiB RAM tier", st, err)
		}
	}
	m.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("operator socket after Close: %v, want it removed", err)
	}
}

// An operator client that connected and sent nothing (no HTTP/2 preface)
// does not hold shutdown up: Run returns nil well within 2s of its
// context's end.
func TestRunDoesNotWaitForAnIdleOperatorConnection(t *testing.T) {
	s := testSpec(t, "")
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	raw, err := net.Dial("unix", s.OperatorSocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	time.Sleep(50 * time.Millisecond) // the connection is accepted and in its handshake
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if d := time.Since(start); err != nil || d > 2*time.Second {
			t.Fatalf("Run = %v after %v, want nil well within 2s", err, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10s after its context ended, with an idle operator connection open")
	}
}

// Of N concurrent callers of a flight one runs the function at a time and
// the others share its result: runs never overlap, and N callers cause
// fewer than N runs.
func TestAFlightRunsOneCallAtATimeAndSharesItsResult(t *testing.T) {
	const n = 16
	var f flight[int]
	var mu sync.Mutex
	var inFlight, most, runs int
	run := func() (int, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		runs++
		r := runs
		mu.Unlock()
		time.Sleep(50 * time.Millisecond) // a walk of the index
		mu.Lock()
		inFlight--
		mu.Unlock()
		return r, nil
	}
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := f.do(context.Background(), run)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	if most != 1 || runs >= n {
		t.Fatalf("%d concurrent callers: %d runs, %d at once; want one at a time and fewer runs than callers (results %v)", n, runs, most, got)
	}
	for i, v := range got {
		if v < 1 || v > runs {
			t.Errorf("caller %d got %d, not a run's result (%d runs)", i, v, runs)
		}
	}
	// A caller whose context ends waits no longer; the run goes on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.do(ctx, run); status.Code(err) != codes.Canceled {
		t.Errorf("a cancelled caller: %v, want Canceled", err)
	}
	time.Sleep(100 * time.Millisecond)
}

// Concurrent Namespaces calls on a serving Manager share listings and
// each gets the whole reply.
func TestConcurrentNamespacesCallsEachGetTheListing(t *testing.T) {
	m, err := New(testSpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	go m.Serve()
	o := &operatorService{m: m}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := o.Namespaces(ctx, &operatorpb.NamespacesRequest{})
			if err != nil || r == nil || len(r.Namespaces) != 0 {
				t.Errorf("Namespaces = %v %v, want an empty listing", r, err)
			}
		}()
	}
	wg.Wait()
}
