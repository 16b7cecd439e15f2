package native

// Types of the copy engine shared by the cgo build (copy.go) and the
// no-cgo build (native_nocgo.go), whose constructors return ErrNoCgo.

// CopySeg mirrors struct okvi_copy_seg (24 bytes; TestCopyLayoutMatchesC):
// copy Len bytes from address Src to address Dst. Both addresses point into
// mmap'd memory of this process — never the Go heap, which the collector
// may move or free while a worker copies — and the two ranges must not
// overlap. Len 0 copies nothing.
type CopySeg struct {
	Src, Dst uintptr
	Len      uint64
}

// CopyCompletion mirrors struct okvi_copy_completion (24 bytes): the outcome
// of one job. Status is 0 or the negated errno of the first failed piece;
// Bytes is the total length of the job's segments, also on failure.
type CopyCompletion struct {
	Token  uint64
	Status int32
	_      uint32
	Bytes  uint64
}
