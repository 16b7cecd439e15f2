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
