// Package suite is the frame every orbitkv-bench suite shares: the
// GNU-style flag set (Flags, Common: --json, --output, --repeats, --strict,
// --manager-bin, --manager-args, --plot, --progress), usage errors (exit 2),
// the report head (Head: meta, validity, figures) and its writing to stdout
// or --output, the run's validity checks (/proc/stat CPU, steal, repeats;
// ExitInvalid with --strict), headline figures with their spread over the
// repeats, the targets footer, progress lines, and the unit helpers (GBps:
// 10^9 bytes/s, Us: µs). Only packages of cmd/orbitkv-bench import it.
package suite
