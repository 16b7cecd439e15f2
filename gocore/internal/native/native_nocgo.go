//go:build !cgo

package native

import "time"

// Server is unavailable without cgo; NewServer returns ErrNoCgo.
type Server struct{}

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

// Ring does nothing.
func (*Server) Ring() {}

// Stats returns zeros.
func (*Server) Stats() ServerStats { return ServerStats{} }

// Close does nothing.
func (*Server) Close() {}

// CopySeg mirrors struct okvi_copy_seg; see copy.go (the cgo build), whose
// declaration this repeats so callers compile without cgo.
type CopySeg struct {
	Src, Dst uintptr
	Len      uint64
}

// CopyCompletion mirrors struct okvi_copy_completion; see copy.go.
type CopyCompletion struct {
	Token  uint64
	Status int32
	_      uint32
	Bytes  uint64
}

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

// Layout returns an empty map: there is no C layout without cgo.
func Layout() map[string]uintptr { return map[string]uintptr{} }

// EnumMismatches returns nil: there is no C to compare with without cgo.
func EnumMismatches() []string { return nil }
