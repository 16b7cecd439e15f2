//go:build linux && amd64

package ebpf

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	unixDesc = prometheus.NewDesc("orbitkv_ebpf_unix_socket_seconds",
		"Seconds from a send on one of the Manager's Unix stream sockets (bootstrap and lifecycle frames, the operator socket) "+
			"to the receive at the other end that consumes it (the oldest unconsumed send per receiving socket; eBPF, log2 buckets). "+
			"direction=\"to_manager\": sends the Manager receives (its own delay); direction=\"to_client\": sends a client receives "+
			"(the client decides when it reads).", []string{"direction"}, nil)
	eventfdDesc = prometheus.NewDesc("orbitkv_ebpf_eventfd_wakeup_seconds",
		"Seconds from the Manager's write(2) to a session eventfd that woke a client waiting on it (in read or poll) "+
			"to that client running again; a write that wakes nobody is no sample (eBPF, log2 buckets).", nil, nil)
	transferSendDesc = prometheus.NewDesc("orbitkv_ebpf_transfer_send_seconds",
		"Seconds from the start of a send on a registered transfer connection to the peer's ACK of its first byte "+
			"(one send in flight per connection is timed; eBPF, log2 buckets).", []string{"peer"}, nil)
	transferRecvDesc = prometheus.NewDesc("orbitkv_ebpf_transfer_receive_seconds",
		"Seconds from data arriving on a registered transfer connection to the read that returns it "+
			"(one arrival in flight per connection is timed; eBPF, log2 buckets).", []string{"peer"}, nil)
)

// Describe implements prometheus.Collector.
func (p *Probes) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{unixDesc, eventfdDesc, transferSendDesc, transferRecvDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads every histogram map
// once. A map that cannot be read yields an invalid metric naming it.
func (p *Probes) Collect(ch chan<- prometheus.Metric) {
	emit := func(desc *prometheus.Desc, h Histogram, err error, labels ...string) {
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			return
		}
		ch <- constHistogram(desc, h, labels...)
	}
	for _, d := range []Direction{ToManager, ToClient} {
		h, err := p.Unix(d)
		emit(unixDesc, h, err, d.String())
	}
	h, err := p.Eventfd()
	emit(eventfdDesc, h, err)
	for _, peer := range p.peerList() {
		send, recv, err := p.Transfer(peer)
		emit(transferSendDesc, send, err, peer)
		emit(transferRecvDesc, recv, err, peer)
	}
}

// constHistogram turns h into a Prometheus histogram whose bucket bounds
// are the log2 slots' upper bounds (2^(i+1) ns), cumulative as Prometheus
// wants them; the last slot is the implicit +Inf bucket.
func constHistogram(desc *prometheus.Desc, h Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, Slots-1)
	var cum uint64
	for i := 0; i < Slots-1; i++ {
		cum += h.Buckets[i]
		buckets[UpperBound(i)] = cum
	}
	return prometheus.MustNewConstHistogram(desc, h.Count(), h.Sum.Seconds(), buckets, labels...)
}
