// Package client is the Go binding of liborbitkv for OrbitKV's own Go tools
// (orbitkvctl, orbitkv-bench, integration tests). It re-exports the cgo
// wrapper of gocore/internal/native, which is the only package allowed to
// import "C"; there is no second implementation of the client here.
//
// Inference engines use liborbitkv directly (C) or the Python package.
package client

import "github.com/orbitkv/orbitkv/gocore/internal/native"

// Client is a connected session (an owning okv_client handle); not safe for
// concurrent use. See native.Client.
type Client = native.Client

// Options configures Connect; see native.ConnectOptions.
type Options = native.ConnectOptions

// Health is the Manager's Health lifecycle reply.
type Health = native.Health

// Error is a liborbitkv error code with its okv_strerror text and detail.
type Error = native.ClientError

// Connect bootstraps a session (okv_connect). Errors are *Error.
func Connect(o Options) (*Client, error) { return native.Connect(o) }

// CodeInvalid is Error.Code when the Manager answered Invalid; the error's
// detail names the field (and entry) it refused.
const CodeInvalid = native.CodeInvalid
