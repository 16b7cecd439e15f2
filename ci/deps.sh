#!/usr/bin/env bash
# deps.sh — install what building and testing OrbitKV needs on Debian 12.
#
# Idempotent: each Debian package is checked with dpkg-query and only the
# missing ones are installed; `apt-get update` runs only when something is
# missing. With everything present it runs no apt command at all, so `make`
# can call it every time (it takes well under a second).
#
# Needs root for installing: runs apt-get directly as root, through sudo
# when not root and sudo is available, otherwise prints the exact command and
# fails.
#
# Go >= 1.26 with cgo is needed too; Debian 12 ships 1.19. When
# /usr/local/go/bin/go (the Makefile puts it first on PATH) is missing or too
# old and no suitable `go` is on PATH, the script installs Go $GO_VERSION into
# /usr/local/go from the Go module proxy: the toolchain is the Go module
# golang.org/toolchain, the same zip `GOTOOLCHAIN=auto` downloads, checked
# against the go.sum hash pinned below before anything is moved into place.
#
# Usage: ci/deps.sh [--check]   (--check: report only, install nothing)
set -euo pipefail

PACKAGES=(
	build-essential
	cmake
	pkg-config
	clang
	llvm                    # llvm-strip: bpf2go strips the BPF object (ci/gen-ebpf.sh)
	libbpf-dev              # bpf_helpers.h, bpf_tracing.h, bpf_core_read.h of ebpf/bpf/probes.c
	libclang-rt-14-dev      # libFuzzer and ASan/UBSan runtimes for clang 14
	protobuf-compiler
	protobuf-c-compiler
	libprotobuf-c-dev
	libssl-dev              # libcrypto: SHA-256 of the namespace fingerprint
	git
	ca-certificates
	curl                    # with unzip: fetching Go when it is missing
	unzip
	python3                 # the Python client, adapters and the e2e gate run on Debian's /usr/bin/python3
	python3-venv            # a fresh virtual environment for the wheel test (python/tests/test_wheel.py) and engines/deps.sh
	python3-torch           # the e2e gate's test engine (CPU); pulls python3-numpy
	python3-numpy
	libibverbs1             # with libnuma1 and libcurl4: loaded by Mooncake's transfer_engine_bench (build/venv/mooncake, docs/mooncake.md)
	libnuma1
	libcurl4
	prometheus              # promtool: make test-promtool checks deploy/prometheus's rules and runs their unit tests (its server is disabled after install)
	dpkg-dev                # make deb: dpkg-shlibdeps and dpkg-architecture (ci/deb.sh)
	systemd                 # systemd-analyze verify of the unit (make test-install, test/integration)
	man-db                  # man, which systemd-analyze verify runs to resolve the unit's Documentation=man: links
)
GO_MIN_MAJOR=1
GO_MIN_MINOR=26
GO_VERSION=1.26.8
GO_ROOT=${ORBITKV_GO_ROOT:-/usr/local/go}   # override only to test the installer
# go.sum hashes (h1, dirhash of the module zip) of golang.org/toolchain
# v0.0.1-go$GO_VERSION.linux-<arch>, from sum.golang.org.
declare -A GO_SUMS=(
	[amd64]="h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM="
	[arm64]="h1:sYL/O6MqS68ML0kjsQ36WoYIpJqkw60TxizWUYUKQMc="
)

check_only=0
case "${1:-}" in
	--check) check_only=1 ;;
	"") ;;
	*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

die() { echo "deps.sh: $*" >&2; exit 1; }

# as_root CMD...: run CMD as root (directly, or through sudo).
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "deps.sh: not root and sudo is not available; run as root:" >&2
		echo "  $*" >&2
		exit 1
	fi
}

command -v dpkg-query >/dev/null 2>&1 ||
	die "dpkg-query not found: this script supports Debian 12 (bookworm) only"

# Collect the packages whose status is not "install ok installed".
missing=()
for pkg in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	if [ "$status" != "install ok installed" ]; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -gt 0 ]; then
	echo "deps.sh: missing Debian packages: ${missing[*]}"
	if [ "$check_only" -eq 1 ]; then
		exit 1
	fi
	if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
		echo "deps.sh: not root and sudo is not available; run as root:" >&2
		echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
		exit 1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "${missing[@]}"
	# Only promtool is wanted from the prometheus package: where systemd
	# runs, its postinst enabled and started a Prometheus server on :9090.
	if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
		as_root systemctl disable --now prometheus.service || true
	fi
fi

# go_ok GO: true when GO runs and is at least GO_MIN_MAJOR.GO_MIN_MINOR.
go_ok() {
	local v
	v=$("$1" env GOVERSION 2>/dev/null) || return 1   # e.g. go1.26.8
	[[ "$v" =~ ^go([0-9]+)\.([0-9]+) ]] || return 1
	local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
	[ "$major" -gt "$GO_MIN_MAJOR" ] ||
		{ [ "$major" -eq "$GO_MIN_MAJOR" ] && [ "$minor" -ge "$GO_MIN_MINOR" ]; }
}

# dirhash1 DIR: the go.sum "h1:" hash of the files under DIR (paths relative
# to DIR, as they appear in the module zip): sha256 over the lines
# "<sha256 hex>  <path>\n" sorted by path, which is sha256sum's own format.
dirhash1() {
	local hex
	hex=$(cd "$1" && find . -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' '\0' |
		xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
	printf 'h1:%s' "$(printf '%s' "$hex" | sed 's/../\\x&/g' | xargs -0 printf '%b' | base64)"
}

install_go() {
	local arch proxy mod url tmp sum
	arch=$(dpkg --print-architecture)
	[ -n "${GO_SUMS[$arch]:-}" ] || die "no pinned Go toolchain for architecture $arch; install Go >= ${GO_MIN_MAJOR}.${GO_MIN_MINOR} from https://go.dev/dl/ into $GO_ROOT"
	proxy=$(printf '%s' "${GOPROXY:-https://proxy.golang.org}" | tr ',|' '\n\n' | grep -m1 '^https\?://' || true)
	proxy=${proxy:-https://proxy.golang.org}
	mod="golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-${arch}"
	url="${proxy%/}/golang.org/toolchain/@v/v0.0.1-go${GO_VERSION}.linux-${arch}.zip"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "deps.sh: installing Go $GO_VERSION into $GO_ROOT from $url"
	curl -fsSL --retry 3 -o "$tmp/go.zip" "$url" || die "downloading $url failed"
	unzip -q "$tmp/go.zip" -d "$tmp/x"
	sum=$(dirhash1 "$tmp/x")
	[ "$sum" = "${GO_SUMS[$arch]}" ] ||
		die "checksum mismatch for $mod: got $sum, want ${GO_SUMS[$arch]}"
	# Module zips carry no file modes; the toolchain's programs need +x.
	chmod 0755 "$tmp/x/$mod"/bin/* "$tmp/x/$mod"/pkg/tool/*/*
	as_root rm -rf "$GO_ROOT.orbitkv-new"
	as_root mkdir -p "$(dirname "$GO_ROOT")"
	as_root cp -a "$tmp/x/$mod" "$GO_ROOT.orbitkv-new"
	as_root rm -rf "$GO_ROOT"
	as_root mv "$GO_ROOT.orbitkv-new" "$GO_ROOT"
	rm -rf "$tmp"
	trap - EXIT
}

# Go: $GO_ROOT/bin first (the Makefile puts it first on PATH), then PATH.
go_bin=""
if [ -x "$GO_ROOT/bin/go" ]; then
	go_ok "$GO_ROOT/bin/go" && go_bin=$GO_ROOT/bin/go
elif command -v go >/dev/null 2>&1 && go_ok "$(command -v go)"; then
	go_bin=$(command -v go)
fi
if [ -z "$go_bin" ]; then
	found=$( { "$GO_ROOT/bin/go" env GOVERSION || go env GOVERSION; } 2>/dev/null | head -n1 || true)
	echo "deps.sh: Go >= ${GO_MIN_MAJOR}.${GO_MIN_MINOR} not found in $GO_ROOT/bin or PATH${found:+ (found $found)}"
	if [ "$check_only" -eq 1 ]; then
		exit 1
	fi
	install_go
	go_bin=$GO_ROOT/bin/go
	go_ok "$go_bin" || die "$go_bin does not run after installing it"
	echo "deps.sh: installed $("$go_bin" version)"
fi
if [ "$("$go_bin" env CGO_ENABLED)" != "1" ]; then
	die "$go_bin has CGO_ENABLED=0; OrbitKV needs cgo (unset CGO_ENABLED, install gcc)"
fi
