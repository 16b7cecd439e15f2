package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// stopGrace is how long stop waits after SIGTERM before it SIGKILLs a
// Manager the bench started.
const stopGrace = 5 * time.Second

// manager is the Manager the bench talks to: started by the bench through
// internal/launch (proc set) or named by --socket (proc nil).
type manager struct {
	socket string
	http   string          // its --http-addr (GET /health); "" for an external Manager
	pid    int             // 0 until known (external: from the Health reply)
	proc   *launch.Manager // nil for an external Manager
}

// external is the Manager already serving socket.
func external(socket string) *manager { return &manager{socket: socket} }

// started reports whether the bench started m (and so stops it).
func (m *manager) started() bool { return m.proc != nil }

// channelRAMCapacity is the RAM tier of the channel suite's Manager: Ping
// never touches the tier, and a small one starts in well under a second
// where pre-faulting the 4 GiB default takes seconds (more than the start
// timeout on a loaded VM). --manager-args --ram-capacity overrides it.
const channelRAMCapacity = 64 << 20

// startManager starts bin/orbitkv-manager for the channel suite: on a
// temporary bootstrap socket with a channelRAMCapacity RAM tier,
// --poll-mode and then --manager-args (which win).
func startManager(cfg *channelConfig) (*manager, error) {
	return launchManager(ramManager(cfg.managerBin, channelRAMCapacity,
		append([]string{"--poll-mode", cfg.pollMode}, cfg.managerArgs...)))
}

// launchManager starts a Manager as spec says (spec.Bin "" = launch.Find's
// default; a temporary bootstrap socket and a free loopback HTTP port
// unless spec.Args name others) and waits until it serves.
func launchManager(spec launch.Spec) (*manager, error) {
	bin, err := launch.Find(spec.Bin)
	if err != nil {
		return nil, err
	}
	spec.Bin = bin
	p, err := launch.Start(spec)
	if err != nil {
		return nil, err
	}
	return &manager{socket: p.Socket(), http: p.HTTPAddr(), pid: p.Pid(), proc: p}, nil
}

// ramManager is a Manager with a RAM tier of capacity bytes; --manager-args
// (extra) come last and win. The Manager pre-faults its RAM tier before it
// serves (seconds per GiB on a small VM), so the wait for it grows with the
// capacity.
func ramManager(bin string, capacity uint64, extra []string) launch.Spec {
	return launch.Spec{Bin: bin,
		Args:         append([]string{"--ram-capacity", fmt.Sprint(capacity)}, extra...),
		ReadyTimeout: 30*time.Second + time.Duration(capacity>>30)*15*time.Second}
}

// alive reports an error, ending with the tail of its log, if a Manager
// the bench started has exited.
func (m *manager) alive() error {
	if m.proc == nil || !m.proc.Exited() {
		return nil
	}
	return fmt.Errorf("the Manager exited: %v\nManager log (tail):\n%s", m.proc.Err(), m.proc.Tail(2000))
}

// exitNote is "" while m runs (or is external), else a new line and why it
// is gone: the suffix of a suite's error.
func (m *manager) exitNote() string {
	if err := m.alive(); err != nil {
		return "\n" + err.Error()
	}
	return ""
}

// stop ends a Manager the bench started (SIGTERM, SIGKILL after
// stopGrace) and removes its temporary directory. An external Manager is
// left alone. Safe to call more than once and from several goroutines.
func (m *manager) stop() {
	if m.proc != nil {
		m.proc.Stop(stopGrace)
	}
}

// stopOnSignal makes SIGINT or SIGTERM run before (if non-nil), stop m (a
// Manager the bench started, with its temporary directory) and exit 130,
// naming suite on stderr. The returned function ends the watch; defer it.
func stopOnSignal(suite string, m *manager, stderr io.Writer, before func()) (cancel func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if sig, ok := <-sigs; ok {
			if before != nil {
				before()
			}
			m.stop()
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", suite, sig)
			os.Exit(130)
		}
	}()
	return func() { signal.Stop(sigs) }
}

// connectBench opens the bench's own session (role bench) to m.
func connectBench(m *manager, suite string) (*client.Client, error) {
	c, err := client.Connect(client.Options{SocketPath: m.socket, InstanceID: fmt.Sprintf("%s-%d", suite, os.Getpid()), Role: uint32(abi.RoleBench)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Manager at %s: %w", m.socket, err)
	}
	return c, nil
}

// cpuTicks returns utime+stime of process pid from /proc/PID/stat, in
// clock ticks (sysconf(_SC_CLK_TCK) per second).
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of the Manager: %w", err)
	}
	return parseStatTicks(string(b))
}

// parseStatTicks extracts utime (field 14) + stime (field 15) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces or ')', so fields are counted after the last ')'.
func parseStatTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/PID/stat: %d fields after the name, want ≥ 13", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc/PID/stat utime/stime: %w", err)
	}
	return u + s, nil
}
