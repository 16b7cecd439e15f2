package ebpf

// The committed probes_x86_bpfel.{go,o} come from bpf/probes.c through
// bpf2go (pinned by go.mod's tool directive); ci/gen-ebpf.sh runs this and
// `make check-generated` fails when the result differs from the commit.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -target amd64 -type hist -type transfer_conn probes bpf/probes.c
