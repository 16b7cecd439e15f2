// Package ssd is the ssd suite (orbitkv-bench ssd): the SSD tier's
// Store.Read GB/s for 256KiB-2MiB blocks beside a plain O_DIRECT
// sequential read of the same file. Method: bench/README.md "ssd".
package ssd
