// Package transfer is the transfer suite (orbitkv-bench transfer): the
// transfer engine's GB/s between two Managers for 64KiB-4MiB blocks on
// loopback beside a plain TCP stream and one slice in flight, and
// Mooncake's transfer_engine_bench where its wheel is installed. Method:
// bench/README.md "transfer".
package transfer
