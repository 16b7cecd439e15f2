//go:build !cgo

package native

import "time"

// Server is unavailable without cgo; NewServer returns ErrNoCgo.
type Server struct{}

// UseIceoryx2 returns ErrNoCgo.
func (*Server) UseIceoryx2() error { return ErrNoCgo }

// AttachIceoryx2 returns ErrNoCgo.
func (*Server) AttachIceoryx2(uint32, []byte, uint64, string) error { return ErrNoCgo }

// Iceoryx2Runtime returns "".
func (*Server) Iceoryx2Runtime() string { return "" }

// NewServer returns ErrNoCgo.
func NewServer([]byte, uint32, PollMode, time.Duration, int) (*Server, error) { return nil, ErrNoCgo }

// Replies returns nil.
func (*Server) Replies() []Reply { return nil }

// SetMode does nothing.
func (*Server) SetMode(PollMode, time.Duration) {}

// Attach returns ErrNoCgo.
func (*Server) Attach(uint32, []byte, uint64) error { return ErrNoCgo }

// Detach does nothing.
func (*Server) Detach(uint32) {}

// Step returns no events.
func (*Server) Step(int) []Event { return nil }

// Post does nothing.
func (*Server) Post(int) {}

// Parks returns 0.
func (*Server) Parks() uint64 { return 0 }

// Rescued returns 0 without cgo.
func (*Server) Rescued() uint64 { return 0 }

// Ring does nothing.
func (*Server) Ring() {}

// Stats returns zeros.
func (*Server) Stats() ServerStats { return ServerStats{} }

// Close does nothing.
func (*Server) Close() {}

// Err returns nil for a zero Status, ErrNoCgo otherwise (no job completes
// without cgo).
func (c CopyCompletion) Err() error {
	if c.Status == 0 {
		return nil
	}
	return ErrNoCgo
}

// CopyEngine is unavailable without cgo; NewCopyEngine returns ErrNoCgo.
type CopyEngine struct{}

// NewCopyEngine returns ErrNoCgo.
func NewCopyEngine([]byte, int) (*CopyEngine, error) { return nil, ErrNoCgo }

// Submit returns ErrNoCgo.
func (*CopyEngine) Submit(uint64, []CopySeg) error { return ErrNoCgo }

// Drain returns 0.
func (*CopyEngine) Drain([]CopyCompletion) int { return 0 }

// Inflight returns 0.
func (*CopyEngine) Inflight() uint64 { return 0 }

// Backend returns "".
func (*CopyEngine) Backend() string { return "" }

// Close does nothing.
func (*CopyEngine) Close() {}

// Bench returns 0.
func (*CopyEngine) Bench([]CopySeg, int) time.Duration { return 0 }

// MemcpyBench returns 0.
func MemcpyBench(uintptr, uintptr, uint64, int) time.Duration { return 0 }

// Client is unavailable without cgo; Connect returns ErrNoCgo.
type Client struct{}

// Connect returns ErrNoCgo.
func Connect(ConnectOptions) (*Client, error) { return nil, ErrNoCgo }

// Ping returns ErrNoCgo.
func (*Client) Ping(uint64) (uint64, error) { return 0, ErrNoCgo }

// Health returns ErrNoCgo.
func (*Client) Health() (Health, error) { return Health{}, ErrNoCgo }

// Epoch returns 0.
func (*Client) Epoch() uint64 { return 0 }

// Close does nothing.
func (*Client) Close() {}

// Fingerprint returns ErrNoCgo (gocore/identity computes the same bytes in
// pure Go).
func Fingerprint(NamespaceSpec) (Namespace, error) { return Namespace{}, ErrNoCgo }

// Buffer is unavailable without cgo; AllocBuffer returns ErrNoCgo.
type Buffer struct{}

// AllocBuffer returns ErrNoCgo.
func AllocBuffer(uint32, uint64, uint64) (*Buffer, error) { return nil, ErrNoCgo }

// Bytes returns nil.
func (*Buffer) Bytes() []byte { return nil }

// Page panics: no buffer can exist without cgo.
func (*Buffer) Page(uint32, uint64) []byte { panic("native: Buffer.Page without cgo") }

// Layers returns 0.
func (*Buffer) Layers() uint32 { return 0 }

// PageBytes returns 0.
func (*Buffer) PageBytes() uint64 { return 0 }

// PageCount returns 0.
func (*Buffer) PageCount() uint64 { return 0 }

// FD returns -1.
func (*Buffer) FD() int { return -1 }

// Free does nothing.
func (*Buffer) Free() {}

// RegisterBuffer returns ErrNoCgo.
func (*Client) RegisterBuffer(*Buffer) (uint32, error) { return 0, ErrNoCgo }

// Query returns ErrNoCgo.
func (*Client) Query(Namespace, []BlockHash) (Lease, error) { return Lease{}, ErrNoCgo }

// Publish returns ErrNoCgo.
func (*Client) Publish(Namespace, uint32, []BlockHash, []uint32) (PublishResult, error) {
	return PublishResult{}, ErrNoCgo
}

// Restore returns ErrNoCgo.
func (*Client) Restore(uint64, uint32, []RestoreEntry) (uint64, error) { return 0, ErrNoCgo }

// RestorePoll returns ErrNoCgo.
func (*Client) RestorePoll(uint64) (bool, error) { return false, ErrNoCgo }

// RestoreWait returns ErrNoCgo.
func (*Client) RestoreWait(uint64, time.Duration) error { return ErrNoCgo }

// Release returns ErrNoCgo.
func (*Client) Release(uint64) error { return ErrNoCgo }

// MaxQueryHashes returns 0.
func (*Client) MaxQueryHashes() int { return 0 }

// MaxRestoreEntries returns 0.
func (*Client) MaxRestoreEntries() int { return 0 }

// PublishRecords returns ErrNoCgo.
func (*Client) PublishRecords(Namespace, uint32, []BlockHash, []uint32, []BlockRecord) (PublishResult, error) {
	return PublishResult{}, ErrNoCgo
}

// MaxPublishEntries returns 0.
func (*Client) MaxPublishEntries() int { return 0 }

// NotificationFD returns -1.
func (*Client) NotificationFD() int { return -1 }

// Layout returns an empty map: there is no C layout without cgo.
func Layout() map[string]uintptr { return map[string]uintptr{} }

// EnumMismatches returns nil: there is no C to compare with without cgo.
func EnumMismatches() []string { return nil }

// MaxCopySegments mirrors the cgo build's constant (OKVI_COPY_MAX_SEGS).
const MaxCopySegments = 1 << 20

// NewCopyEngineFor returns ErrNoCgo.
func NewCopyEngineFor(*Server, int) (*CopyEngine, error) { return nil, ErrNoCgo }

// BlockHashes is unavailable without cgo; NewBlockHashes returns ErrNoCgo.
type BlockHashes struct{}

// NewBlockHashes returns ErrNoCgo.
func NewBlockHashes([]BlockHash) (*BlockHashes, error) { return nil, ErrNoCgo }

// Len returns 0.
func (*BlockHashes) Len() int { return 0 }

// Free does nothing.
func (*BlockHashes) Free() {}

// Ticket is unavailable without cgo; no ticket can exist.
type Ticket struct{}

// OpID returns 0.
func (*Ticket) OpID() uint64 { return 0 }

// Revision returns 0.
func (*Ticket) Revision() uint32 { return 0 }

// Live returns false.
func (*Ticket) Live() bool { return false }

// Submit returns ErrNoCgo.
func (*Client) Submit(QuerySpec) (*Ticket, QueryAnswer, error) { return nil, QueryAnswer{}, ErrNoCgo }

// Poll returns ErrNoCgo.
func (*Client) Poll(*Ticket) (QueryAnswer, error) { return QueryAnswer{}, ErrNoCgo }

// Revise returns ErrNoCgo.
func (*Client) Revise(*Ticket, QuerySpec) (QueryAnswer, error) { return QueryAnswer{}, ErrNoCgo }

// Claim returns ErrNoCgo.
func (*Client) Claim(*Ticket) (QueryAnswer, error) { return QueryAnswer{}, ErrNoCgo }

// Cancel returns ErrNoCgo.
func (*Client) Cancel(*Ticket) error { return ErrNoCgo }

// FreeTicket does nothing.
func (*Client) FreeTicket(*Ticket) {}

// OpSubmit returns ErrNoCgo.
func (*Client) OpSubmit(uint64, uint32, QuerySpec) (QueryAnswer, error) {
	return QueryAnswer{}, ErrNoCgo
}

// OpPoll returns ErrNoCgo.
func (*Client) OpPoll(uint64, uint32) (QueryAnswer, error) { return QueryAnswer{}, ErrNoCgo }

// OpClaim returns ErrNoCgo.
func (*Client) OpClaim(uint64, uint32) (QueryAnswer, error) { return QueryAnswer{}, ErrNoCgo }

// OpCancel returns ErrNoCgo.
func (*Client) OpCancel(uint64, uint32) error { return ErrNoCgo }

// SubmitLane returns ErrNoCgo.
func (*CopyEngine) SubmitLane(uint64, uint64, []CopySeg) error { return ErrNoCgo }

// CUDALibEnv names the CUDA driver library to load (see the cgo build).
const CUDALibEnv = "ORBITKV_LIBCUDA"

// CUDA is unavailable without cgo; OpenCUDA returns ErrNoCgo.
type CUDA struct{}

// OpenCUDA returns ErrNoCgo.
func OpenCUDA(string) (*CUDA, error) { return nil, ErrNoCgo }

// NewCopyEngineCUDA returns ErrNoCgo.
func NewCopyEngineCUDA(int, *CUDA) (*CopyEngine, error) { return nil, ErrNoCgo }

// Devices returns 0.
func (*CUDA) Devices() int { return 0 }

// ArmDeviceFault returns ErrNoCgo.
func (*CUDA) ArmDeviceFault(string) error { return ErrNoCgo }

// DeviceUUID returns ErrNoCgo.
func (*CUDA) DeviceUUID(int) ([16]byte, error) { return [16]byte{}, ErrNoCgo }

// AddRange returns ErrNoCgo.
func (*CUDA) AddRange(int, uintptr, uint64) error { return ErrNoCgo }

// RemoveRange returns ErrNoCgo.
func (*CUDA) RemoveRange(uintptr) error { return ErrNoCgo }

// PinHost returns ErrNoCgo.
func (*CUDA) PinHost([]byte) error { return ErrNoCgo }

// UnpinHost returns ErrNoCgo.
func (*CUDA) UnpinHost([]byte) error { return ErrNoCgo }

// Close does nothing.
func (*CUDA) Close() {}

// NewCopyEngineForCUDA returns ErrNoCgo.
func NewCopyEngineForCUDA(*Server, int, *CUDA) (*CopyEngine, error) { return nil, ErrNoCgo }

// DiscoverOpen returns ErrNoCgo.
func (*Client) DiscoverOpen(Namespace) error { return ErrNoCgo }

// DiscoverLocal returns ErrNoCgo.
func (*Client) DiscoverLocal(Namespace, []BlockHash) (uint32, error) { return 0, ErrNoCgo }

// CUDAMapping is unavailable without cgo.
type CUDAMapping struct{}

// Addr returns 0.
func (*CUDAMapping) Addr() uintptr { return 0 }

// Device returns 0.
func (*CUDAMapping) Device() int { return 0 }

// AllocBytes returns 0.
func (*CUDAMapping) AllocBytes() uint64 { return 0 }

// Unmap does nothing.
func (*CUDAMapping) Unmap() {}

// MapIPC returns ErrNoCgo.
func (*CUDA) MapIPC([16]byte, []byte, uint64, uint64) (*CUDAMapping, error) { return nil, ErrNoCgo }

// MapVMM returns ErrNoCgo.
func (*CUDA) MapVMM([16]byte, int, uint64, uint64, uint64) (*CUDAMapping, error) {
	return nil, ErrNoCgo
}
