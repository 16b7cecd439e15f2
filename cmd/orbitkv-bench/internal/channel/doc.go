// Package channel is the channel suite (orbitkv-bench channel): the round
// trip of Ping through liborbitkv beside a raw shared-memory spin, a
// futex, a Unix socket, gRPC and (where built) iceoryx2, back to back and
// one per millisecond; and the hidden __peer subcommand (RunPeer), the
// echoing end of each baseline that the bench starts by re-executing
// itself. Method: bench/README.md "channel".
package channel
