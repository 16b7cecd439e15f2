//go:build linux && amd64

package ebpf

import (
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// btfPath is where the kernel publishes its BTF (CONFIG_DEBUG_INFO_BTF).
const btfPath = "/sys/kernel/btf/vmlinux"

// tracepoints is every BTF tracepoint a probe attaches to, with a word on
// which kernels have it.
var tracepoints = []struct{ name, since string }{
	{"sock_send_length", "Linux 6.3"},
	{"sock_recv_length", "Linux 6.3"},
	{"tcp_sendmsg_locked", "a late-2024 kernel"},
	{"tcp_probe", "Linux 4.16"},
	{"sched_waking", "every kernel with BTF"},
	{"sched_switch", "every kernel with BTF"},
}

// Check reports why the probes cannot load here, or nil: each error wraps
// ErrUnavailable and names the missing piece (BTF, privileges, a
// tracepoint). It needs no privileges except for reading BTF.
func Check() error {
	if _, err := os.Stat(btfPath); err != nil {
		return fmt.Errorf("%w: no BTF: %v (the kernel needs CONFIG_DEBUG_INFO_BTF=y)", ErrUnavailable, err)
	}
	if err := checkCaps(); err != nil {
		return err
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("%w: reading the kernel's BTF from %s: %v", ErrUnavailable, btfPath, err)
	}
	for _, tp := range tracepoints {
		var td *btf.Typedef
		if err := spec.TypeByName("btf_trace_"+tp.name, &td); err != nil {
			return fmt.Errorf("%w: the kernel has no tracepoint %s (it needs %s; btf_trace_%s is not in its BTF): %v",
				ErrUnavailable, tp.name, tp.since, tp.name, err)
		}
	}
	return nil
}

// Capability numbers (linux/capability.h); x/sys/unix has them too, but
// naming them here keeps the check readable beside the message.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// checkCaps: tracing programs need CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN
// (which implies both on every kernel).
func checkCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("%w: capget: %v", ErrUnavailable, err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	var missing []string
	for _, c := range []struct {
		n    uint
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}} {
		if !has(c.n) {
			missing = append(missing, c.name)
		}
	}
	return fmt.Errorf("%w: not privileged: the probes need root, or CAP_BPF and CAP_PERFMON (this process lacks %s)", ErrUnavailable, strings.Join(missing, " and "))
}
