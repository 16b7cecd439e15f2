package manager

import (
	"fmt"
	"net"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// Check is one start-time check of the host that Preflight ran.
type Check struct {
	// Name is what was checked: "http port", "ebpf", "bootstrap socket",
	// "operator socket", "ram tier", "ssd tier", "peer port",
	// "transfer port".
	Name string
	// Found is what the check looked at when it passed ("127.0.0.1:7471
	// free", "4.0 GiB, hugepages prefer").
	Found string
	// Err is the refusal (nil: passed): a *limit.Refused naming the Spec
	// field, as New returns it.
	Err error
}

// Preflight runs, without starting anything, every check New makes of the
// host before it commits memory or disk, in New's order, each with the
// function New uses: the TCP ports of HTTPAddr and of the cluster's
// listeners (bound and closed at once), the eBPF probes (loaded and
// detached), the bootstrap and operator sockets (unixsock.CheckPath: the
// directory rule, no live process on the path, the directory writable),
// the RAM tier's memory or hugepages (ram.Check) and the SSD tier's
// directory, filesystem and free space (ssd.CheckPlace). The etcd catalog
// and a cuda copy backend are not checked: reaching them is the start
// itself. s must have passed Validate. A check that passes here can still
// fail at start when the host changes in between.
func Preflight(s Spec) []Check {
	s = s.withDefaults()
	var out []Check
	if s.HTTPAddr != "" {
		out = append(out, Check{Name: "http port", Found: s.HTTPAddr + " free", Err: checkPort("manager.HTTPAddr", s.HTTPAddr)})
	}
	if s.EBPF {
		c := Check{Name: "ebpf", Found: "the probes load and attach"}
		p, err := loadEBPF()
		if err == nil {
			p.Close()
		}
		c.Err = err
		out = append(out, c)
	}
	out = append(out,
		Check{Name: "bootstrap socket", Found: s.Bootstrap.Path + ": directory safe and writable, no live process on the path",
			Err: refusedAs("bootstrap.Path", s.Bootstrap.Path, unixsock.CheckPath(s.Bootstrap.Path))},
		Check{Name: "operator socket", Found: s.OperatorSocketPath() + ": directory safe and writable, no live process on the path",
			Err: refusedAs("manager.OperatorSocket", s.OperatorSocketPath(), unixsock.CheckPath(s.OperatorSocketPath()))})
	if s.Cache != nil {
		r := s.Cache.Tiers.RAM
		out = append(out, Check{Name: "ram tier", Found: fmt.Sprintf("%s fits (hugepages %s)", humanize.IBytes(r.CapacityBytes), r.Hugepages),
			Err: ram.Check(r)})
		if sp := s.Cache.Tiers.SSD; sp != nil {
			out = append(out, Check{Name: "ssd tier", Found: fmt.Sprintf("%s: %s fits, not a memory-backed filesystem", sp.Dir, humanize.IBytes(sp.CapacityBytes)),
				Err: ssd.CheckPlace(*sp)})
		}
	}
	if c := s.Cluster; c != nil {
		out = append(out,
			Check{Name: "peer port", Found: c.PeerListen + " free", Err: checkPort("manager.Cluster.PeerListen", c.PeerListen)},
			Check{Name: "transfer port", Found: c.TransferListen + " free", Err: checkPort("manager.Cluster.TransferListen", c.TransferListen)})
	}
	return out
}

// listenTCP binds addr for the Spec field field: New serves on the
// listener, Preflight closes it at once. A refusal (in use, not
// permitted, no such address) is a *limit.Refused naming field.
func listenTCP(field, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &limit.Refused{Field: field, Value: addr, Err: err}
	}
	return ln, nil
}

// checkPort is listenTCP's bind, released at once.
func checkPort(field, addr string) error {
	ln, err := listenTCP(field, addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// refusedAs is err as a *limit.Refused of field (nil stays nil).
func refusedAs(field string, value any, err error) error {
	if err == nil {
		return nil
	}
	return &limit.Refused{Field: field, Value: value, Err: err}
}

// loadEBPF loads and attaches the eBPF probes; a host that cannot is a
// *limit.Refused naming manager.EBPF wrapping ebpf.ErrUnavailable's reason.
func loadEBPF() (*ebpf.Probes, error) {
	p, err := ebpf.Load(ebpf.Spec{})
	if err != nil {
		return nil, &limit.Refused{Field: "manager.EBPF", Value: true, Err: fmt.Errorf("loading the eBPF probes: %w", err)}
	}
	return p, nil
}
