//go:build !okv_iox2 || !cgo

package native

// Iceoryx2Built reports whether this binary carries the iceoryx2 transport
// (the okv_iox2 build tag: make found a Rust toolchain ≥ 1.89).
const Iceoryx2Built = false

// Iceoryx2Version is the version of the iceoryx2 crate the transport was
// built on ("0.10.0"), or "" without it.
func Iceoryx2Version() string { return "" }
