// Package launch starts, watches and stops child processes of this
// repository's binaries, the orbitkv-manager binary above all, for the
// bench (cmd/orbitkv-bench) and the tests that run real binaries
// (test/integration). It is the one place that knows how a Manager is
// started from outside: which binary, which socket and HTTP address, when it
// is ready, where its log goes and how it is stopped.
//
// A Process writes its stdout and stderr straight into one file (the child
// holds the descriptor; there is no pipe, so a slow or exiting parent can
// never make the child's writes fail with EPIPE), and it is killed with
// SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so no
// child outlives a bench or test binary that dies. A Manager is a Process
// started on a bootstrap socket and a loopback HTTP address, ready once it
// logs ReadyLine.
//
// Who may import it: commands and tests (cmd/orbitkv-bench,
// test/integration, hugepages tests); never the Manager binary or a
// gocore package.
package launch
