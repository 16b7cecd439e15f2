//go:build linux && amd64

package ebpf

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	ciliumebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Probes is the loaded and attached probes: its BPF maps hold the
// histograms from Load until Close. Its methods are safe for concurrent
// use.
type Probes struct {
	// life guards objs and links: every reader of the maps holds it
	// shared, Close exclusively, so a scrape still running when the
	// Manager closes the probes gets ErrClosed instead of a closed or
	// nil map.
	life   sync.RWMutex
	closed bool
	objs   probesObjects
	links  []link.Link

	mu    sync.Mutex
	peers map[string]uint32 // peer label → index in transfer_hist/2, never reused
	order []string          // labels by index
}

// Load checks the host (Check), loads the probes for spec.ManagerPID and
// attaches them; with ManagerPID 0 this process must run in the host's
// (initial) pid namespace. Errors from the host wrap ErrUnavailable and name the
// missing piece; a *ciliumebpf.VerifierError (a bug here) does not. The
// caller must Close the result.
func Load(spec Spec) (*Probes, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := Check(); err != nil {
		return nil, err
	}
	pid := spec.ManagerPID
	if pid == 0 {
		if err := checkHostPidNS(); err != nil {
			return nil, err
		}
		pid = os.Getpid()
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones
	// (memcg accounting) make this a no-op.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raising RLIMIT_MEMLOCK for BPF maps: %v", ErrUnavailable, err)
	}
	cs, err := loadProbes()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	if err := cs.Variables[probesVarManagerTgid].Set(uint32(pid)); err != nil {
		return nil, fmt.Errorf("setting %s: %w", probesVarManagerTgid, err)
	}
	p := &Probes{peers: map[string]uint32{}}
	if err := cs.LoadAndAssign(&p.objs, nil); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: loading the BPF programs was refused (EPERM): they need root, or CAP_BPF with CAP_PERFMON, "+
				"and a kernel whose lockdown (/sys/kernel/security/lockdown) is not \"confidentiality\": %v", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("loading the BPF programs: %w", err)
	}
	for _, prog := range []struct {
		tracepoint string
		prog       *ciliumebpf.Program
	}{
		{"sock_send_length", p.objs.SockSend},
		{"sock_recv_length", p.objs.SockRecv},
		{"tcp_sendmsg_locked", p.objs.TransferSend},
		{"tcp_probe", p.objs.TransferSegment},
		{"sched_waking", p.objs.EventfdWake},
		{"sched_switch", p.objs.EventfdRun},
	} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog.prog})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attaching to the BTF tracepoint %s: %w", prog.tracepoint, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// hostPidNS is /proc/self/ns/pid's link in the initial pid namespace
// (the kernel's PROC_PID_INIT_INO, fixed since Linux 3.8).
const hostPidNS = "pid:[4026531836]"

// checkHostPidNS refuses a process outside the initial pid namespace:
// os.Getpid there is not the pid the probes compare (the kernel's tgid),
// so they would load and measure nothing. Where /proc/self/ns/pid cannot
// be read it cannot tell, and lets the load go on.
func checkHostPidNS() error {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == hostPidNS {
		return nil
	}
	return fmt.Errorf("%w: this process runs in the pid namespace %s, not the host's %s (a container without the host's pids), "+
		"so its pid %d is not the one the probes see: run it in the host's pid namespace (docker run --pid=host, Kubernetes hostPID: true), "+
		"or load the probes with Spec.ManagerPID set to its pid on the host", ErrUnavailable, ns, hostPidNS, os.Getpid())
}

// Close detaches every probe and frees the maps (the histograms are lost).
// Safe to call more than once.
func (p *Probes) Close() error {
	p.life.Lock()
	defer p.life.Unlock()
	p.closed = true
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	errs = append(errs, p.objs.Close())
	p.objs = probesObjects{}
	return errors.Join(errs...)
}

// open holds p.life shared for the caller, which must call the returned
// release; ErrClosed after Close.
func (p *Probes) open() (release func(), err error) {
	p.life.RLock()
	if p.closed {
		p.life.RUnlock()
		return nil, ErrClosed
	}
	return p.life.RUnlock, nil
}

// Unix is the bootstrap/lifecycle Unix socket histogram of direction d:
// send → receive. ErrClosed after Close; an error naming d for a
// direction other than ToManager and ToClient.
func (p *Probes) Unix(d Direction) (Histogram, error) {
	if d != ToManager && d != ToClient {
		return Histogram{}, fmt.Errorf("ebpf: Unix socket direction %d: want ToManager (0) or ToClient (1)", d)
	}
	release, err := p.open()
	if err != nil {
		return Histogram{}, err
	}
	defer release()
	return read(p.objs.UnixHist, uint32(d))
}

// Eventfd is the session eventfd histogram: the Manager's write → the
// woken client running. ErrClosed after Close.
func (p *Probes) Eventfd() (Histogram, error) {
	release, err := p.open()
	if err != nil {
		return Histogram{}, err
	}
	defer release()
	return read(p.objs.EventfdHist, 0)
}

// Transfer is peer's pair of histograms: send → ACK and arrival →
// receive. A peer never registered gives ErrUnknownPeer; ErrClosed
// after Close.
func (p *Probes) Transfer(peer string) (send, recv Histogram, err error) {
	release, err := p.open()
	if err != nil {
		return send, recv, err
	}
	defer release()
	p.mu.Lock()
	i, ok := p.peers[peer]
	p.mu.Unlock()
	if !ok {
		return send, recv, fmt.Errorf("%w: %q", ErrUnknownPeer, peer)
	}
	if send, err = read(p.objs.TransferHist, 2*i); err != nil {
		return send, recv, err
	}
	recv, err = read(p.objs.TransferHist, 2*i+1)
	return send, recv, err
}

// peerList is the registered peer labels, by index.
func (p *Probes) peerList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

// RegisterTransfer makes conn (a TCP connection) one of peer's transfer
// connections: its sends and receives are measured from now on, into
// peer's histograms. Registering again moves it to the new peer. Errors:
// a peer label outside PeerLabelRange, more than MaxPeers distinct peers
// (ErrTooManyPeers), a conn that is not TCP, ErrClosed after Close.
func (p *Probes) RegisterTransfer(conn syscall.Conn, peer string) error {
	if err := checkPeer(peer); err != nil {
		return err
	}
	release, err := p.open()
	if err != nil {
		return err
	}
	defer release()
	p.mu.Lock()
	i, ok := p.peers[peer]
	if !ok {
		if len(p.order) >= MaxPeers {
			p.mu.Unlock()
			return fmt.Errorf("%w: peer %q would be number %d, the limit is %d", ErrTooManyPeers, peer, len(p.order)+1, MaxPeers)
		}
		i = uint32(len(p.order))
		p.peers[peer] = i
		p.order = append(p.order, peer)
	}
	p.mu.Unlock()
	return onTCP(conn, func(fd int) error {
		if err := p.objs.TransferConns.Update(int32(fd), probesTransferConn{Peer: i}, ciliumebpf.UpdateAny); err != nil {
			return fmt.Errorf("registering the transfer connection of peer %q: %w", peer, err)
		}
		return nil
	})
}

// UnregisterTransfer stops measuring conn; its peer's histograms stay.
// Closing conn unregisters it too. A conn never registered is not an
// error; ErrClosed after Close.
func (p *Probes) UnregisterTransfer(conn syscall.Conn) error {
	release, err := p.open()
	if err != nil {
		return err
	}
	defer release()
	return onTCP(conn, func(fd int) error {
		if err := p.objs.TransferConns.Delete(int32(fd)); err != nil && !errors.Is(err, ciliumebpf.ErrKeyNotExist) {
			return fmt.Errorf("unregistering a transfer connection: %w", err)
		}
		return nil
	})
}

// onTCP runs f on conn's fd (valid only during f) once it is known to be a
// TCP socket. The socket-local storage f writes through the fd belongs to
// the socket, so it is freed when the socket closes.
func onTCP(conn syscall.Conn, f func(fd int) error) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("transfer connection: %w", err)
	}
	var fErr error
	if err := rc.Control(func(fd uintptr) {
		proto, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL)
		switch {
		case err != nil:
			fErr = fmt.Errorf("transfer connection: getsockopt SO_PROTOCOL: %w", err)
		case proto != unix.IPPROTO_TCP:
			fErr = fmt.Errorf("transfer connection: protocol %d, want TCP (%d)", proto, unix.IPPROTO_TCP)
		default:
			fErr = f(int(fd))
		}
	}); err != nil {
		return fmt.Errorf("transfer connection: %w", err)
	}
	return fErr
}

func read(m *ciliumebpf.Map, key uint32) (Histogram, error) {
	var v probesHist
	var h Histogram
	if err := m.Lookup(key, &v); err != nil {
		return h, fmt.Errorf("reading histogram %d of map %s: %w", key, m, err)
	}
	h.add(v.Slots, v.SumNs)
	return h, nil
}
