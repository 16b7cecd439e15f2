#!/usr/bin/env bash
# ci/iox2.sh — the Rust library of the iceoryx2 transport (native/iox2).
#
#   ci/iox2.sh status   print "ok" when a Rust toolchain of the crate's
#                       rust-version (iceoryx2's minimum, 1.89) is present,
#                       else one line saying why the transport is left out
#   ci/iox2.sh build    build build/iox2/release/libokv_iox2.a with cargo
#                       (--locked: Cargo.lock is committed); without a
#                       toolchain print why and succeed, so that everything
#                       else builds
#
# The target directory is build/iox2 (CARGO_TARGET_DIR), so the crates and
# their objects are kept between runs on one machine; `make clean` removes
# it with the rest of build/. Cargo and rustc are looked up on PATH, then in
# ~/.cargo/bin (rustup's default).
set -euo pipefail
cd "$(dirname "$0")/.."

manifest=native/iox2/Cargo.toml
export CARGO_TARGET_DIR="$PWD/build/iox2"
PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin"

need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)"/\1/p' "$manifest")

status() {
	if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
		echo "no Rust toolchain (cargo, rustc) on PATH or in ~/.cargo/bin; iceoryx2 0.10 needs rustc >= $need"
		return
	fi
	local have
	have=$(rustc --version | awk '{print $2}')
	if [ "$(printf '%s\n%s\n' "$need" "${have%%-*}" | sort -V | head -1)" != "$need" ]; then
		echo "rustc $have is older than $need, iceoryx2 0.10's minimum"
		return
	fi
	echo ok
}

case "${1:-}" in
status)
	status
	;;
build)
	s=$(status)
	if [ "$s" != ok ]; then
		echo "ci/iox2.sh: the iceoryx2 transport is left out: $s" >&2
		exit 0
	fi
	cargo build --release --locked --manifest-path "$manifest"
	;;
*)
	echo "usage: ci/iox2.sh status|build" >&2
	exit 2
	;;
esac
