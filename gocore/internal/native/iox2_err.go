package native

import "errors"

// ErrNoIceoryx2 is returned by what needs the iceoryx2 transport in a build
// without it: make builds the Rust library native/iox2 (and sets the
// okv_iox2 build tag) only where a Rust toolchain of iceoryx2's minimum
// version, 1.89, is on PATH or in ~/.cargo/bin.
var ErrNoIceoryx2 = errors.New("built without the iceoryx2 transport (no Rust toolchain >= 1.89 when make ran; install one with rustup and rebuild with make)")
