package manager

import (
	"log/slog"

	"github.com/orbitkv/orbitkv/ebpf"
)

// loadProbes loads the eBPF probes when Spec.EBPF asks for them. A host
// that cannot load them fails New: the operator asked for them explicitly,
// and a Manager that silently served without them would leave the
// orbitkv_ebpf_* series missing with no reason given. The error wraps
// ebpf.ErrUnavailable with the reason (no BTF, not privileged, a missing
// tracepoint), in a *limit.Refused naming manager.EBPF.
func (m *Manager) loadProbes(s Spec) error {
	if !s.EBPF {
		return nil
	}
	p, err := loadEBPF()
	if err != nil {
		return err
	}
	m.probes = p
	m.log.Info("start: eBPF probes attached (unix socket, eventfd wake-up, transfer)")
	return nil
}

// stopProbes detaches the probes; their only reader is /metrics, so it
// runs once the HTTP endpoints are stopped (or were never served).
func (m *Manager) stopProbes() {
	if m.probes == nil {
		return
	}
	if err := m.probes.Close(); err != nil {
		m.log.Warn("closing the eBPF probes", slog.Any("err", err))
	}
	m.probes = nil
}

// Probes is the loaded eBPF probes, nil unless Spec.EBPF: the cluster's
// transfer engine registers its connections with Probes().RegisterTransfer.
// Valid until Close or Run's return.
func (m *Manager) Probes() *ebpf.Probes { return m.probes }
