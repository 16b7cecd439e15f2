package abi

// Invalid is the DescError for field f of entry idx (0 for header fields)
// with a detail that names the value and the limit it broke: what every
// decoder and cache operation answers for a malformed request.
func Invalid(f Field, idx int, format string, args ...any) *DescError {
	return descInvalid(f, uint64(idx), format, args...)
}
