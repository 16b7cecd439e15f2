// SPDX-License-Identifier: GPL-2.0
/* probes.c — OrbitKV's latency probes (see ../doc.go for what each measures).
 *
 * Every program is a BTF-enabled tracepoint (tp_btf): no kprobes (kernels
 * built without CONFIG_KPROBES have none), no fentry/fexit (their loads
 * failed with EPERM on the development kernel, in lockdown "integrity"
 * mode), no tracefs. Each keeps a log2 histogram of nanoseconds in an array map that
 * the Go side reads on a scrape: slot i counts samples in [2^i, 2^(i+1)) ns
 * (slot 0 also holds 0 ns; the last slot holds everything above).
 *
 * Counters are updated with atomic adds from any CPU; a reader may see a
 * sample's slot before its sum, never a torn value.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#define HIST_SLOTS 40
#define MAX_PEERS 256
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define MSG_PEEK 2
#define EVENTFD_VALUE_SIZE 8

/* Set by the loader before loading: the Manager's process id (initial pid
 * namespace). */
volatile const __u32 manager_tgid = 0;

/* x86-64 system call numbers (the object is built for amd64 only). */
#define NR_READ 0
#define NR_WRITE 1
#define NR_POLL 7
#define NR_SELECT 23
#define NR_EPOLL_WAIT 232
#define NR_PSELECT6 270
#define NR_PPOLL 271
#define NR_EPOLL_PWAIT 281
#define NR_EPOLL_PWAIT2 441

struct hist {
	__u64 slots[HIST_SLOTS];
	__u64 sum_ns;
};

/* unix_hist: key UNIX_TO_MANAGER, the sends the Manager receives (a
 * client's send to the Manager's read: the Manager's own delay), and key
 * UNIX_TO_CLIENT, the sends a client receives (the Manager's send to the
 * client's read: the client decides when it reads). eventfd_hist: one
 * histogram (key 0). */
#define UNIX_TO_MANAGER 0
#define UNIX_TO_CLIENT 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct hist);
} unix_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} eventfd_hist SEC(".maps");

/* transfer_hist: key peer*2 is the peer's send histogram, peer*2+1 its
 * receive histogram. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PEERS * 2);
	__type(key, __u32);
	__type(value, struct hist);
} transfer_hist SEC(".maps");

/* unix_pending: receiving socket (its kernel address) → the time of the
 * oldest send to it that no receive has consumed yet, and the socket's
 * inode number. Keyed by address in an LRU hash, not socket-local storage:
 * the receiver is the sender's u->peer, a pointer the verifier (kernel
 * 6.x) marks untrusted, which bpf_sk_storage_get and bpf_skc_to_unix_sock
 * refuse (its fields are still read, through bpf_probe_read). A freed
 * socket's entry stays until LRU eviction; the inode number (sockfs
 * numbers each socket anew) tells a new socket at the same address from
 * it, so neither a send nor a receive on the new one uses the old time
 * (inode 0: a connection not accepted yet, which has no file; then only
 * the age bound applies), and a sample older than UNIX_STALE_NS is dropped
 * as well. */
#define UNIX_PENDING_MAX 16384
#define UNIX_STALE_NS (10ull * 1000000000ull)
struct unix_send {
	__u64 ts;
	__u64 ino;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, UNIX_PENDING_MAX);
	__type(key, __u64);
	__type(value, struct unix_send);
} unix_pending SEC(".maps");

/* transfer_conn: one registered TCP connection, written by the Go side
 * (peer; zeros elsewhere) and updated here. send_ts/recv_ts 0: no sample
 * in flight. */
struct transfer_conn {
	__u32 peer;
	__u32 send_seq;
	__u64 send_ts;
	__u64 recv_ts;
};

/* transfer_conns: socket-local storage of the registered connections;
 * the Go side creates it through the socket's fd, and it is freed with
 * the socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct transfer_conn);
} transfer_conns SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline void hist_add(void *map, __u32 key, __u64 ns)
{
	struct hist *h = bpf_map_lookup_elem(map, &key);
	if (!h)
		return;
	__u32 slot = log2_u64(ns);
	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum_ns, ns);
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

/* ---- bootstrap/lifecycle Unix socket: send → receive ---------------- */

/* manager_end: sk (a Unix stream socket sending) has the Manager at one
 * end: the Manager sends, or sk's peer credentials (the listener's, taken at
 * connect(2)) are the Manager's. */
static __always_inline bool manager_end(struct sock *sk)
{
	if (current_tgid() == manager_tgid)
		return 1;
	return BPF_CORE_READ(sk, sk_peer_pid, numbers[0].nr) == (int)manager_tgid;
}

static __always_inline void unix_sent(struct sock *sk)
{
	if (sk->sk_type != SOCK_STREAM || !manager_end(sk))
		return;
	struct unix_sock *u = bpf_skc_to_unix_sock(sk);
	if (!u || !u->peer)
		return;
	__u64 key = (__u64)(unsigned long)u->peer, now = bpf_ktime_get_ns();
	__u64 ino = BPF_CORE_READ(u, peer, sk_socket, file, f_inode, i_ino);
	struct unix_send *sent = bpf_map_lookup_elem(&unix_pending, &key);
	if (sent && (sent->ino == ino || sent->ino == 0) && now - sent->ts < UNIX_STALE_NS)
		return; /* an older send to this socket is still unconsumed: it starts the sample */
	struct unix_send v = {now, ino};
	bpf_map_update_elem(&unix_pending, &key, &v, BPF_ANY);
}

static __always_inline void unix_received(struct sock *sk)
{
	__u64 key = (__u64)(unsigned long)sk;
	struct unix_send *sent = bpf_map_lookup_elem(&unix_pending, &key);
	if (!sent)
		return;
	__u64 took = bpf_ktime_get_ns() - sent->ts;
	__u64 ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
	/* 0: the receiver had no file yet when the send stamped it (a
	 * connection still in the listener's queue, before accept(2)). */
	int same = sent->ino == ino || sent->ino == 0;
	bpf_map_delete_elem(&unix_pending, &key);
	if (!same || took >= UNIX_STALE_NS)
		return; /* another socket's time at this address, or none worth a sample */
	hist_add(&unix_hist, current_tgid() == manager_tgid ? UNIX_TO_MANAGER : UNIX_TO_CLIENT, took);
}

/* ---- transfer: registered TCP connections --------------------------- */

static __always_inline struct transfer_conn *transfer_lookup(const struct sock *sk)
{
	return bpf_sk_storage_get(&transfer_conns, (void *)sk, 0, 0);
}

/* A send starts: unless a sample is in flight, note the time and the
 * sequence number of its first byte; the ACK covering that byte ends it. */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(transfer_send, const struct sock *sk, const void *msg, const struct sk_buff *skb, int size_goal)
{
	struct transfer_conn *c = transfer_lookup(sk);
	if (!c || c->send_ts)
		return 0;
	c->send_seq = BPF_CORE_READ((struct tcp_sock *)sk, write_seq);
	c->send_ts = bpf_ktime_get_ns();
	return 0;
}

/* A segment arrives on an established connection (tcp_rcv_established;
 * skb->data is its TCP header). An ACK past send_seq ends the send sample;
 * a payload starts a receive sample unless one is in flight. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(transfer_segment, struct sock *sk, const struct sk_buff *skb)
{
	struct transfer_conn *c = transfer_lookup(sk);
	if (!c)
		return 0;
	__u8 th[16];
	if (bpf_probe_read_kernel(th, sizeof(th), BPF_CORE_READ(skb, data)))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 peer = c->peer;
	if (peer >= MAX_PEERS)
		return 0;
	__u32 ack = bpf_ntohl(*(__be32 *)&th[8]);
	if (c->send_ts && (th[13] & 0x10) && (__s32)(ack - c->send_seq) > 0) {
		hist_add(&transfer_hist, peer * 2, now - c->send_ts);
		c->send_ts = 0;
	}
	__u32 header = (th[12] >> 4) * 4;
	if (BPF_CORE_READ(skb, len) > header && !c->recv_ts)
		c->recv_ts = now;
	return 0;
}

static __always_inline void transfer_received(struct sock *sk)
{
	struct transfer_conn *c = transfer_lookup(sk);
	if (!c || !c->recv_ts)
		return;
	__u32 peer = c->peer;
	if (peer >= MAX_PEERS)
		return;
	hist_add(&transfer_hist, peer * 2 + 1, bpf_ktime_get_ns() - c->recv_ts);
	c->recv_ts = 0;
}

/* ---- socket send/receive, shared by the Unix and transfer probes ---- */

/* End of sock_sendmsg (every send(2)/write(2) on a socket). */
SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	if (ret > 0 && sk->__sk_common.skc_family == AF_UNIX)
		unix_sent(sk);
	return 0;
}

/* End of sock_recvmsg (every recv(2)/read(2) on a socket). */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	unsigned short family = sk->__sk_common.skc_family;
	if (family == AF_UNIX)
		unix_received(sk);
	else if (family == AF_INET || family == AF_INET6)
		transfer_received(sk);
	return 0;
}

/* ---- session eventfd: the Manager's write → the waiting client runs -- */

/* eventfd_pending: thread id of a task the Manager's eventfd write woke →
 * the time of that wake-up (sched_waking). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} eventfd_pending SEC(".maps");

/* eventfd_waiting: how many entries eventfd_pending may hold; 0 lets
 * sched_switch, which runs on every context switch of the host, return
 * without a map lookup. An upper bound (LRU eviction does not lower it),
 * so a nonzero value only costs the lookup. */
__u64 eventfd_waiting = 0;

/* fd_file: task's open file fd, or 0. */
static __always_inline struct file *fd_file(struct task_struct *task, unsigned long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

static __always_inline bool is_eventfd(struct file *f)
{
	char name[16] = {};
	bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(f, f_path.dentry, d_name.name));
	static const char want[] = "[eventfd]";
#pragma unroll
	for (int i = 0; i < (int)sizeof(want); i++)
		if (name[i] != want[i])
			return 0;
	return 1;
}

/* waiting: the system call the wakee p sleeps in waits for f: a read(2)
 * of f itself, or one of the poll family (whose fd set is in p's memory,
 * out of reach here). This keeps out the wake-ups that an interrupt
 * arriving during the Manager's write(2) makes on its CPU: timers, I/O. */
static __always_inline bool waiting(struct task_struct *p, struct file *f)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
	long nr = BPF_CORE_READ(regs, orig_ax);
	switch (nr) {
	case NR_READ:
		return fd_file(p, BPF_CORE_READ(regs, di)) == f;
	case NR_POLL:
	case NR_PPOLL:
	case NR_SELECT:
	case NR_PSELECT6:
	case NR_EPOLL_WAIT:
	case NR_EPOLL_PWAIT:
	case NR_EPOLL_PWAIT2:
		return 1;
	}
	return 0;
}

/* A task is being woken. When the waker is the Manager inside an 8-byte
 * write(2) to an eventfd (its registers say which system call it is in)
 * and the wakee another process waiting for it (waiting), the wakee is a
 * client waiting on a session eventfd: note the time. */
SEC("tp_btf/sched_waking")
int BPF_PROG(eventfd_wake, struct task_struct *p)
{
	if (current_tgid() != manager_tgid)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (BPF_CORE_READ(regs, orig_ax) != NR_WRITE || BPF_CORE_READ(regs, dx) != EVENTFD_VALUE_SIZE)
		return 0;
	/* The Go runtime's own eventfd (netpollBreak) wakes a Manager thread. */
	if (BPF_CORE_READ(p, tgid) == (int)manager_tgid)
		return 0;
	struct file *f = fd_file(task, BPF_CORE_READ(regs, di));
	if (!f || !is_eventfd(f) || !waiting(p, f))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&eventfd_pending, &tid, &now, BPF_NOEXIST) == 0)
		__sync_fetch_and_add(&eventfd_waiting, 1);
	return 0;
}

/* A CPU switches to next: if the Manager's eventfd write woke it, the
 * client now runs. */
SEC("tp_btf/sched_switch")
int BPF_PROG(eventfd_run, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (!eventfd_waiting)
		return 0;
	/* A wakee that was still on its CPU when woken (it had not finished
	 * going to sleep) never waited: drop its entry when it leaves. */
	__u32 tid = BPF_CORE_READ(prev, pid);
	if (bpf_map_delete_elem(&eventfd_pending, &tid) == 0)
		__sync_fetch_and_add(&eventfd_waiting, -1);
	tid = BPF_CORE_READ(next, pid);
	__u64 *woken = bpf_map_lookup_elem(&eventfd_pending, &tid);
	if (!woken)
		return 0;
	__u64 took = bpf_ktime_get_ns() - *woken;
	if (bpf_map_delete_elem(&eventfd_pending, &tid) == 0)
		__sync_fetch_and_add(&eventfd_waiting, -1);
	hist_add(&eventfd_hist, 0, took);
	return 0;
}
