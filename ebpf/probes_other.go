//go:build !(linux && amd64)

package ebpf

import (
	"fmt"
	"runtime"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// Probes is never loaded on this platform: the BPF object is built for
// linux/amd64 only (ci/gen-ebpf.sh).
type Probes struct{}

// Load fails: see Probes.
func Load(Spec) (*Probes, error) { return nil, Check() }

// Check fails on this platform with ErrUnavailable.
func Check() error {
	return fmt.Errorf("%w: the probes are built for linux/amd64 only, not %s/%s", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}

// Close does nothing.
func (p *Probes) Close() error { return nil }

// Unix fails: see Probes.
func (p *Probes) Unix(Direction) (Histogram, error) { return Histogram{}, Check() }

// Eventfd fails: see Probes.
func (p *Probes) Eventfd() (Histogram, error) { return Histogram{}, Check() }

// Transfer fails: see Probes.
func (p *Probes) Transfer(string) (send, recv Histogram, err error) { return send, recv, Check() }

// RegisterTransfer fails: see Probes.
func (p *Probes) RegisterTransfer(syscall.Conn, string) error { return Check() }

// UnregisterTransfer fails: see Probes.
func (p *Probes) UnregisterTransfer(syscall.Conn) error { return Check() }

// Describe implements prometheus.Collector (nothing).
func (p *Probes) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector (nothing).
func (p *Probes) Collect(chan<- prometheus.Metric) {}
