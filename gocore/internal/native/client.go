//go:build cgo

package native

/*
#include <stdlib.h>
#include "orbitkv/client.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Client is a liborbitkv client (an owning okv_client handle). Not safe for
// concurrent use; Close releases it.
type Client struct {
	c *C.okv_client
}

// Connect bootstraps a session with a Manager (okv_connect). Errors are
// *ClientError.
func Connect(o ConnectOptions) (*Client, error) {
	var co C.struct_okv_connect_options
	var toFree []unsafe.Pointer
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		p := C.CString(s)
		toFree = append(toFree, unsafe.Pointer(p))
		return p
	}
	defer func() {
		for _, p := range toFree {
			C.free(p)
		}
	}()
	co.socket_path = cstr(o.SocketPath)
	co.manager_addr = cstr(o.ManagerAddr)
	co.instance_id = cstr(o.InstanceID)
	co.role = C.uint32_t(o.Role)
	if o.Spin < 0 || o.Spin > time.Second {
		return nil, fmt.Errorf("native: client spin %v: want 0..1s", o.Spin)
	}
	if o.Timeout < 0 || o.Timeout > time.Hour {
		return nil, fmt.Errorf("native: client timeout %v: want 0..1h (0 = 5s)", o.Timeout)
	}
	co.spin_ns = C.uint32_t(o.Spin.Nanoseconds())
	co.timeout_ms = C.uint32_t(o.Timeout.Milliseconds())
	if o.ManagerUID != nil {
		if *o.ManagerUID == ^uint32(0) {
			return nil, fmt.Errorf("native: client ManagerUID %d: want a uid below 4294967295", *o.ManagerUID)
		}
		co.manager_uid_plus1 = C.uint32_t(*o.ManagerUID + 1)
	}
	var c *C.okv_client
	var reason [512]C.char
	if rc := C.okv_connect_err(&co, &c, &reason[0], C.size_t(len(reason))); rc != 0 {
		e := newClientError(nil, rc).(*ClientError)
		e.Detail = C.GoString(&reason[0])
		return nil, e
	}
	return &Client{c: c}, nil
}

// Ping round-trips v through the shared-memory channel and returns the echo.
func (c *Client) Ping(v uint64) (uint64, error) {
	var echo C.uint64_t
	if rc := C.okv_ping(c.c, C.uint64_t(v), &echo); rc != 0 {
		return 0, newClientError(c.c, rc)
	}
	return uint64(echo), nil
}

// Health asks the Manager for its Health lifecycle frame.
func (c *Client) Health() (Health, error) {
	var h C.struct_okv_health
	if rc := C.okv_health(c.c, &h); rc != 0 {
		return Health{}, newClientError(c.c, rc)
	}
	out := Health{
		Status:     C.GoString(&h.status[0]),
		Epoch:      uint64(h.epoch),
		Sessions:   uint32(h.sessions),
		ManagerPID: uint32(h.manager_pid),
		Uptime:     time.Duration(h.uptime_ns),
		Requests:   uint64(h.requests),
		PollMode:   C.GoString(&h.poll_mode[0]),
		Version:    C.GoString(&h.version[0]),

		Blocks:           uint64(h.blocks),
		RAMUsedBytes:     uint64(h.ram_used_bytes),
		RAMCapacityBytes: uint64(h.ram_capacity_bytes),
		Leases:           uint64(h.leases),
		Pins:             uint64(h.pins),
		ReservedBytes:    uint64(h.reserved_bytes),
		Operations:       uint64(h.operations),
		Evictions:        uint64(h.evictions),
		Tickets:          uint64(h.tickets),
		Lookups:          uint64(h.lookups),
		DistinctLookups:  uint64(h.distinct_lookups),
	}
	for i := range out.ServiceID {
		out.ServiceID[i] = byte(h.service_id[i])
	}
	return out, nil
}

// Epoch returns the Manager epoch of the session.
func (c *Client) Epoch() uint64 { return uint64(C.okv_epoch(c.c)) }

// Close unregisters (best effort) and frees the client. Idempotent.
func (c *Client) Close() {
	if c.c != nil {
		C.okv_close(c.c)
		c.c = nil
	}
}
