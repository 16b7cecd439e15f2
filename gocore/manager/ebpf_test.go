package manager

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// newEBPFManager starts a Manager with Spec.EBPF and HTTP on a free
// loopback port, or skips when this host cannot load the probes.
func newEBPFManager(t *testing.T) *Manager {
	t.Helper()
	if err := ebpf.Check(); err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	s := testSpec(t, "127.0.0.1:0")
	s.EBPF = true
	return serving(t, s)
}

func histogramCount(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) uint64 {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	for _, m := range fam.GetMetric() {
		match := true
		for k, v := range labels {
			match = match && labelOf(m, k) == v
		}
		if match {
			h := m.GetHistogram()
			if h.GetSampleCount() > 0 && (h.GetSampleSum() <= 0 || h.GetSampleSum() >= float64(h.GetSampleCount())) {
				t.Errorf("%s%v: %d samples summing to %g s, want each in (0, 1 s)", name, labels, h.GetSampleCount(), h.GetSampleSum())
			}
			return h.GetSampleCount()
		}
	}
	t.Fatalf("/metrics has no %s with labels %v", name, labels)
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestEBPFHistogramsAreOnMetricsUnderKnownTraffic(t *testing.T) {
	m := newEBPFManager(t)
	const conns, sends = 5, 20
	// Bootstrap connections that send a byte each: the Manager reads it
	// (a partial hello), so each is at least one measured message.
	for range conns {
		c, err := net.Dial("unix", m.spec.Bootstrap.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// A loopback connection registered as a transfer connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// The echo's end is closed before the test ends (TestMain counts fds).
	defer func() { c.Close(); <-echoed }()
	if err := m.Probes().RegisterTransfer(c.(*net.TCPConn), "node-b"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 512)
	for range sends {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
	}
	var fams map[string]*dto.MetricFamily
	toManager := map[string]string{"direction": "to_manager"}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fams = scrape(t, m)
		if histogramCount(t, fams, "orbitkv_ebpf_unix_socket_seconds", toManager) >= conns-1 || time.Now().After(deadline) {
			break
		}
	}
	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		min    uint64
	}{
		// conns-1: a receive that takes the data before the send's
		// tracepoint stamps it loses that sample (ebpf/doc.go).
		{"the Unix socket histogram counts the bootstrap connections' messages to the Manager", "orbitkv_ebpf_unix_socket_seconds", toManager, conns - 1},
		// The clients here are Manager threads: their receives count as to_manager too.
		{"the Unix socket histogram exports the to_client direction", "orbitkv_ebpf_unix_socket_seconds", map[string]string{"direction": "to_client"}, 0},
		{"the eventfd histogram is exported", "orbitkv_ebpf_eventfd_wakeup_seconds", nil, 0},
		{"the transfer receive histogram counts each echo of the registered peer", "orbitkv_ebpf_transfer_receive_seconds", map[string]string{"peer": "node-b"}, sends},
		{"the transfer send histogram has samples of the registered peer", "orbitkv_ebpf_transfer_send_seconds", map[string]string{"peer": "node-b"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := histogramCount(t, fams, tc.metric, tc.labels); n < tc.min {
				t.Errorf("%s%v: %d samples, want at least %d", tc.metric, tc.labels, n, tc.min)
			}
		})
	}
}

// Where the probes cannot load, asking for them fails New with the reason,
// naming the field (the command reports it as --ebpf).
func TestNewRefusesEBPFWhereItCannotLoad(t *testing.T) {
	if ebpf.Check() == nil {
		t.Skip("BPF loads here: TestEBPFHistogramsAreOnMetricsUnderKnownTraffic covers it")
	}
	s := testSpec(t, "127.0.0.1:0")
	s.EBPF = true
	m, err := New(s)
	if err == nil {
		m.Close()
		t.Fatal("New with EBPF on a host without BPF: nil error")
	}
	var refused *limit.Refused
	if !errors.As(err, &refused) || refused.Field != "manager.EBPF" || !errors.Is(err, ebpf.ErrUnavailable) {
		t.Errorf("New: %v, want a *limit.Refused of manager.EBPF wrapping ebpf.ErrUnavailable", err)
	}
}

func TestValidateRefusesEBPFWithoutMetrics(t *testing.T) {
	tests := []struct {
		name     string
		httpAddr string
		want     string // "" = valid
	}{
		{"EBPF without HTTPAddr is refused: nothing would read the histograms", "", "manager.EBPF true: want an HTTP endpoint (--http-addr)"},
		{"EBPF with HTTPAddr is valid", "127.0.0.1:0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSpec(t, tt.httpAddr)
			s.EBPF = true
			err := s.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
