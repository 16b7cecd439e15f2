// Package copy is the copy suite (orbitkv-bench copy): Publish and
// Restore GB/s of 256KiB-2MiB blocks beside a plain parallel memcpy of the
// same bytes in the same run, every restored byte verified. Method:
// bench/README.md "copy".
package copy
