package ebpf

import "errors"

// ErrUnavailable is wrapped by every error of Load that comes from the
// host rather than from OrbitKV: no BTF, a missing tracepoint, missing
// privileges, an unsupported architecture. Its text says which and how to
// fix it; tests skip on it.
var ErrUnavailable = errors.New("eBPF probes unavailable")

// ErrClosed is the error of every method of Probes after Close.
var ErrClosed = errors.New("eBPF probes closed")
