package pingpong_test

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

// peerEnv makes the test binary act as a baseline peer (fd 3), the way
// orbitkv-bench re-executes itself: never fork() from Go.
const peerEnv = "ORBITKV_PINGPONG_TEST_PEER"

func TestMain(m *testing.M) {
	if kind := os.Getenv(peerEnv); kind != "" {
		k, err := pingpong.ParseKind(kind)
		if err == nil {
			err = pingpong.Peer(k, 3, os.Getppid(), 10*time.Second)
		}
		if err != nil {
			os.Stderr.WriteString("peer: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startPeer(t *testing.T, k pingpong.Kind, f *os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+k.String())
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return cmd
}

func TestBaselinesEchoThroughAPeerProcessAndStopIt(t *testing.T) {
	for _, k := range []pingpong.Kind{pingpong.ShmSpin, pingpong.Futex, pingpong.UDS, pingpong.Iceoryx2} {
		t.Run(k.String(), func(t *testing.T) {
			if k == pingpong.Iceoryx2 && !pingpong.Iceoryx2Built {
				t.Skip(pingpong.ErrNoIceoryx2)
			}
			b, peer, err := pingpong.NewBaseline(k)
			if err != nil {
				t.Fatal(err)
			}
			cmd := startPeer(t, k, peer)
			out := make([]uint64, 200)
			if err := b.Measure(10, 0, out); err != nil {
				b.Close()
				cmd.Wait()
				t.Fatalf("back-to-back: %v", err)
			}
			if err := b.Measure(2, 200*time.Microsecond, out[:20]); err != nil {
				b.Close()
				cmd.Wait()
				t.Fatalf("periodic: %v", err)
			}
			for i, v := range out {
				if v == 0 {
					t.Fatalf("sample %d is 0 ns: not written", i)
				}
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("peer exited with %v, want an orderly stop", err)
				}
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				t.Fatal("peer did not stop after Close")
			}
		})
	}
}

func TestMeasureAfterCloseFails(t *testing.T) {
	b, peer, err := pingpong.NewBaseline(pingpong.UDS)
	if err != nil {
		t.Fatal(err)
	}
	peer.Close()
	b.Close()
	if err := b.Measure(0, 0, make([]uint64, 1)); err == nil {
		t.Error("Measure on a closed baseline succeeded")
	}
}

func TestUDSWithoutAPeerReportsEPIPE(t *testing.T) {
	b, peer, err := pingpong.NewBaseline(pingpong.UDS)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	peer.Close() // the peer end is gone: the first send fails
	err = b.Measure(0, 0, make([]uint64, 1))
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Measure with no peer = %v, want EPIPE", err)
	}
}

func TestIceoryx2BaselineNamesTheMissingTransport(t *testing.T) {
	if pingpong.Iceoryx2Built {
		t.Skip("this build carries the iceoryx2 transport")
	}
	_, _, err := pingpong.NewBaseline(pingpong.Iceoryx2)
	if !errors.Is(err, pingpong.ErrNoIceoryx2) {
		t.Errorf("NewBaseline(iceoryx2_raw) without the transport = %v, want ErrNoIceoryx2", err)
	}
}

func TestParseKindRoundTrips(t *testing.T) {
	for _, k := range []pingpong.Kind{pingpong.ShmSpin, pingpong.Futex, pingpong.UDS, pingpong.Iceoryx2} {
		got, err := pingpong.ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := pingpong.ParseKind("grpc"); err == nil {
		t.Error("ParseKind(grpc) succeeded; grpc is not a raw baseline")
	}
}
