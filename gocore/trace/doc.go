// Package trace reads request traces in the Mooncake FAST'25 format (one
// JSON object per line: timestamp in ms, input_length and output_length in
// tokens, hash_ids of 512-token blocks) and computes the trace's
// infinite-cache bound. The replay and policy benchmarks consume it.
//
// Format (kvcache-ai/Mooncake FAST25-release/traces): every line is
//
//	{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
//
// All four fields are required, unknown fields are refused, numbers are
// non-negative integers. A file may be gzip-compressed (detected by its magic
// bytes, RFC 1952). Limits protect the reader from hostile input: a line is
// at most MaxLineBytes, a request at most MaxBlocks hash ids. Every error
// names the line number and the field.
//
// Importers: cmd/orbitkv-bench and tests.
package trace
