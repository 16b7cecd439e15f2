// Package ebpf holds OrbitKV's kernel-side latency probes: BPF programs
// (bpf/probes.c), the loader bpf2go generated from them (probes_x86_bpfel.go
// and .o, committed; ci/gen-ebpf.sh regenerates them and `make
// check-generated` fails on a diff) and the Go side that loads them with
// github.com/cilium/ebpf, reads their histograms and exports them as
// Prometheus histograms. gocore/manager loads them when Spec.EBPF is set
// (orbitkv-manager --ebpf); nothing else imports this package.
//
// # Probes
//
// Each probe keeps a log2 histogram of nanoseconds in a BPF array map
// (Slots slots: slot i counts [2^i, 2^(i+1)) ns) plus the sum; /metrics
// turns each into a histogram whose bucket bounds are 2^(i+1) ns.
//
//   - orbitkv_ebpf_unix_socket_seconds: bootstrap/lifecycle Unix socket,
//     from a send to the receive that consumes it. At the end of every
//     sock_sendmsg (tracepoint sock:sock_send_length) on a Unix stream
//     socket with the Manager at one end, the time goes into an LRU hash
//     keyed by the receiving socket's kernel address (not socket-local
//     storage: the receiver is reached through the sender's peer pointer,
//     which kernel 6.x's verifier marks untrusted and bpf_sk_storage_get
//     refuses), with the socket's inode number, unless an older send to
//     the same socket is still unconsumed there (a freed socket's entry
//     stays until LRU eviction and its address may be reused: the inode
//     number, new for every socket, tells them apart, and a time older
//     than 10 s is dropped); the end of the next sock_recvmsg on that
//     socket (sock:sock_recv_length, not MSG_PEEK) takes it out and records
//     the difference, in the histogram of direction="to_manager" when the
//     receiver is the Manager (a client's send until the Manager reads it:
//     the Manager's own delay) and direction="to_client" otherwise (the
//     Manager's send until the client reads it, which a client sets by when
//     it reads, so a slow or hostile client can only lengthen that tail).
//     The send is stamped when sendmsg ends, so a receiver on another CPU
//     can take the data first: that receive records nothing and the stamp
//     is taken by the next receive on the socket (one sample lost, the next
//     one long by up to the gap between messages). "The Manager
//     at one end": the sender is the Manager process (Spec.ManagerPID), or
//     the sending socket's peer credentials (SO_PEERCRED, taken from the
//     listener at connect) are the Manager's. This covers every Unix stream
//     socket the Manager serves, so the operator socket's (rare) gRPC
//     frames count beside the bootstrap and lifecycle frames; datagram
//     sockets (sd_notify) do not.
//   - orbitkv_ebpf_eventfd_wakeup_seconds: session eventfd, from the
//     Manager's write(2) to the waiting client running. sched:sched_waking
//     fires in the waker's context: when the waker is a Manager thread in
//     an 8-byte write(2) (its saved registers name the system call) to a
//     file named "[eventfd]", and the wakee is another process sleeping in
//     read(2) of that same file or in poll/ppoll/select/epoll_wait, the
//     wakee's thread id and the time go into a map; sched:sched_switch to
//     that thread records the difference. A write that wakes nobody (the
//     client was spinning or busy) is not a sample. The wakee's system call
//     check keeps out the tasks that an interrupt arriving during the write
//     wakes on the same CPU; a client in poll(2) woken by such an interrupt
//     in that window would still count.
//   - orbitkv_ebpf_transfer_send_seconds{peer} and
//     orbitkv_ebpf_transfer_receive_seconds{peer}: the TCP connections that
//     RegisterTransfer names (their socket-local storage holds the peer's
//     index, freed with the socket; the cluster's transfer engine registers
//     each of its connections with its peer's label).
//     Send: from tcp:tcp_sendmsg_locked (a send starting) to the first
//     incoming segment (tcp:tcp_probe) whose ACK covers the first byte it
//     sent — the network round trip plus the peer's receive path, as the
//     sender sees it. Receive: from a segment with payload arriving
//     (tcp:tcp_probe) to the end of the recvmsg that returns it
//     (sock:sock_recv_length): how long data waits in the receive queue.
//     Only one send and one arrival per connection are in flight at a time
//     (the others are not sampled), so counts are samples, not calls. The
//     two clocks never cross hosts.
//
// # Attach points
//
// Every program is a BTF-enabled tracepoint (tp_btf): the kernel passes
// typed pointers, offsets are relocated against /sys/kernel/btf/vmlinux
// (CO-RE, bpf/kernel.h declares only the members read) and attaching needs
// neither tracefs nor kprobes. Kprobes are absent from many kernels built
// for VMs (CONFIG_KPROBES unset), and fentry/fexit programs failed to load
// (EPERM) on the development kernel, a Linux 6.18 in lockdown "integrity"
// mode, while tp_btf loads. The tracepoints: sock_send_length and
// sock_recv_length (Linux 6.3), tcp_sendmsg_locked (late 2024), tcp_probe,
// sched_waking, sched_switch. Check names the one a kernel lacks.
//
// # Privileges
//
// Loading needs root, or CAP_BPF with CAP_PERFMON (CAP_SYS_ADMIN implies
// both); a kernel in lockdown "confidentiality" mode refuses the probes'
// kernel reads. Load checks BTF, the capabilities and the tracepoints
// first, and every refusal from the host wraps ErrUnavailable with the
// reason. The object is built for linux/amd64 (x86-64 system call numbers
// and pt_regs); elsewhere Load returns ErrUnavailable.
//
// # Cost
//
// Per event: sock_send_length and sock_recv_length run on every socket
// send and receive of the host and return after one load of the socket's
// family (plus its type and peer credentials for Unix sockets); a measured
// Unix message costs a socket-storage lookup (created on a socket's first
// message) at the send and one at the receive. tcp_probe and
// tcp_sendmsg_locked look up the socket's storage and return unless it is
// registered. sched_waking returns unless the waker is
// the Manager (one compare) and, for the Manager's wake-ups, unless it is
// inside write(2) (one read of its saved registers); sched_switch returns
// after one load while no eventfd wake-up is pending. None of them runs on
// the shared-memory channel's path; the Manager's parks and wake-ups (futex)
// pay the sched_waking and sched_switch checks.
//
// BenchmarkProbeCost (`go test -bench ProbeCost ./ebpf`, as root) runs each
// operation with the probes off and on. On the shared 2-vCPU development VM
// (load average 5 to 10 from other work; medians of 6 runs of 300,000):
// one measured Unix message each way on one thread (4 system calls) took
// 4.64 µs off and 5.42 µs on, about 0.4 µs per measured message, send and
// receive together (1 µs with a hash map keyed by socket before the
// socket-local storage); an unmeasured eventfd write and read and
// getppid(2) showed no difference beyond the noise (761/767 ns, 168/172
// ns). Rerun it on a quiet machine before quoting a ratio.
//
// Probes is safe for concurrent use; Close detaches everything and
// frees every fd.
package ebpf
