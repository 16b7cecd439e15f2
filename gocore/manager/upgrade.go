package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orbitkv/orbitkv/gocore/handover"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// Upgrade (docs/design.md §7.1): the operator's Upgrade starts the
// successor (handover.Spawn), and once its configuration is valid drains
// this Manager as Drain does; Run's shutdown then keeps duplicates of the
// RAM tier's memfds, frees everything else (sockets, ports, SSD files,
// the tier's mapping) and hands the memfds over. Timeouts of the steps.
const (
	// successorHello bounds the successor's start up to its Hello (its
	// configuration parsed and validated).
	successorHello = time.Minute
	// successorAdopt bounds the successor's adoption: making its Manager
	// over the tier, checksums included (about a second per 10 GiB used).
	successorAdopt = 5 * time.Minute
)

// UpgradeSpec is how a successor is started: the executable this Manager
// was started from (its path, so the binary there now) and the arguments.
// An empty Executable refuses Upgrade.
type UpgradeSpec struct {
	Executable string
	Args       []string
}

// ErrHandedOver is Run's answer once a successor adopted the RAM tier: the
// caller exits (status 0) without touching the tier.
var ErrHandedOver = errors.New("manager: the RAM tier was handed over to the successor")

// HandoverError is Run's answer when the successor did not take the tier:
// it was killed and reaped, so Handed, duplicates of the tier's memfds,
// may be adopted again (a new Manager with Cache.Tiers.RAM.Handed).
type HandoverError struct {
	Err    error
	Handed ram.Handed
}

func (e *HandoverError) Error() string {
	return "manager: the successor did not take the RAM tier over: " + e.Err.Error()
}
func (e *HandoverError) Unwrap() error { return e.Err }

// Upgrade starts the successor and, once it said hello, begins the drain
// after which Run hands the tier over.
func (o *operatorService) Upgrade(_ context.Context, r *operatorpb.UpgradeRequest) (*operatorpb.UpgradeReply, error) {
	m := o.m
	timeout := time.Duration(r.TimeoutNs)
	if r.TimeoutNs > uint64(MaxDrainTimeout) {
		return nil, status.Errorf(codes.InvalidArgument, "timeout %v: at most %v", timeout, MaxDrainTimeout)
	}
	if timeout == 0 {
		timeout = DefaultDrainTimeout
	}
	if m.Cache == nil {
		return nil, status.Error(codes.FailedPrecondition, "this Manager has no cache: there is no RAM tier to hand over")
	}
	up := m.spec.Upgrade
	if up.Executable == "" {
		return nil, status.Error(codes.FailedPrecondition, "this Manager was started without the path of its executable: it cannot start a successor")
	}
	m.op.drainMu.Lock()
	begun := m.op.drainBegun || m.op.upgradeBegun
	m.op.upgradeBegun = true
	m.op.drainMu.Unlock()
	if begun {
		return nil, status.Error(codes.FailedPrecondition, "a drain or an upgrade already began")
	}
	fail := func() {
		m.op.drainMu.Lock()
		m.op.upgrade, m.op.upgradeBegun = nil, false
		m.op.drainMu.Unlock()
	}
	if syscall.Access(up.Executable, 4 /* R_OK */) == nil && os.Getuid() != 0 {
		m.log.Warn("upgrade: this uid can read the executable, so the successor is dumpable from its exec until it makes itself non-dumpable; install it 0711 (docs/design.md §7.1)",
			slog.String("executable", up.Executable))
	}
	m.log.Info("upgrade: starting the successor", slog.String("executable", up.Executable))
	succ, err := handover.Spawn(up.Executable, up.Args, successorHello)
	if err != nil {
		m.log.Error("upgrade: the successor did not start; serving on", slog.Any("err", err))
		fail()
		return nil, status.Errorf(codes.FailedPrecondition, "the successor did not start: %v (its log is this Manager's)", err)
	}
	if succ.Layout() != ram.LedgerVersion {
		m.log.Warn("upgrade: the successor reads another RAM ledger layout: it will refuse the tier by name and start with an empty one",
			slog.Uint64("successor_layout", succ.Layout()), slog.Int("layout", ram.LedgerVersion))
	}
	m.op.drainMu.Lock()
	stopping := m.op.stopping
	if !stopping {
		m.op.upgrade = succ
		m.ready.upgrading(succ.Pid()) // under drainMu: Run's abandonment clears it after
	}
	m.op.drainMu.Unlock()
	if stopping {
		succ.Abort()
		return nil, status.Error(codes.Aborted, "the Manager began shutting down while the successor started: the upgrade is abandoned")
	}
	m.log.Info("upgrade: the successor's configuration is valid; draining, then handing the RAM tier over",
		slog.Int("successor_pid", succ.Pid()), slog.Duration("drain_timeout", timeout))
	if err := o.beginDrain(timeout, true); err != nil {
		succ.Abort()
		m.ready.upgrading(0)
		fail()
		return nil, err
	}
	return &operatorpb.UpgradeReply{SuccessorPid: int32(succ.Pid()), ManagerPid: int32(os.Getpid()), Epoch: m.spec.Epoch,
		Executable: up.Executable}, nil
}

// upgrading is the successor an Upgrade started (nil: none).
func (m *Manager) upgrading() *handover.Successor {
	m.op.drainMu.Lock()
	defer m.op.drainMu.Unlock()
	return m.op.upgrade
}

// handOver passes the tier to the successor once this Manager stopped
// writing it; see ErrHandedOver and HandoverError.
func (m *Manager) handOver(succ *handover.Successor, h ram.Handed) error {
	start := time.Now()
	// This process is the service's main one until MAINPID=: it feeds
	// systemd's watchdog while the successor adopts (its dispatcher, which
	// the watchdog follows otherwise, has stopped).
	stopPings := make(chan struct{})
	if interval, err := daemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
		go func() {
			t := time.NewTicker(interval / 4)
			defer t.Stop()
			for {
				select {
				case <-stopPings:
					return
				case <-t.C:
					notify("WATCHDOG=1")
				}
			}
		}()
	}
	msg, err := succ.Hand(h.Arena, h.Ledger, m.spec.Epoch, successorAdopt)
	close(stopPings)
	if err != nil {
		m.log.Error("upgrade: the successor failed (killed and reaped); serving the same RAM tier again", slog.Any("err", err))
		return &HandoverError{Err: err, Handed: h}
	}
	h.Close()
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		if err := unixsock.Notify(sock, "MAINPID="+strconv.Itoa(succ.Pid())); err != nil {
			m.log.Warn("upgrade: telling the service manager about the successor failed", slog.Any("err", err))
		}
	}
	if err := succ.Finish(); err != nil {
		m.log.Warn("upgrade: the successor did not hear that this Manager exits", slog.Any("err", err))
	}
	m.log.Info("upgrade: the successor adopted the RAM tier; exiting", slog.Int("successor_pid", succ.Pid()),
		slog.Uint64("blocks", msg.A), slog.Uint64("bytes", msg.B), slog.Duration("took", time.Since(start)))
	return ErrHandedOver
}
