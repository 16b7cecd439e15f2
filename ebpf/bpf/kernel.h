/* kernel.h — the few kernel types the probes read, declared by hand.
 *
 * Each struct lists only the members the probes touch and carries
 * preserve_access_index, so clang emits CO-RE relocations and the loader
 * (cilium/ebpf) rewrites every offset against the running kernel's BTF
 * (/sys/kernel/btf/vmlinux). Member order and the missing members do not
 * matter; names and types must match the kernel's. This replaces a
 * multi-megabyte generated vmlinux.h.
 */
#ifndef ORBITKV_EBPF_KERNEL_H
#define ORBITKV_EBPF_KERNEL_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_SK_STORAGE = 24,
};

enum {
	BPF_F_NO_PREALLOC = 1,
};

enum {
	BPF_SK_STORAGE_GET_F_CREATE = 1,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
	unsigned long di;
	unsigned long dx;
	unsigned long orig_ax;
};

struct upid {
	int nr;
};

struct pid {
	struct upid numbers[1];
};

struct sock_common {
	unsigned short skc_family;
};

struct file;

struct socket {
	struct file *file;
};

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	struct pid *sk_peer_pid;
	struct socket *sk_socket;
};

struct unix_sock {
	struct sock *peer;
};

struct tcp_sock {
	__u32 write_seq;
};

struct sk_buff {
	unsigned int len;
	unsigned char *data;
};

struct qstr {
	const unsigned char *name;
};

struct dentry {
	struct qstr d_name;
};

struct path {
	struct dentry *dentry;
};

struct inode {
	unsigned long i_ino;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
	void *private_data;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct task_struct {
	int pid;
	int tgid;
	struct files_struct *files;
};

#pragma clang attribute pop

#endif
