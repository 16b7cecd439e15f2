#!/usr/bin/env bash
# gen-proto.sh — regenerate the committed protobuf code of proto/lifecycle.proto,
# proto/operator.proto and proto/peer.proto.
#
# Outputs (all committed; `make check-generated` reruns this script and fails
# on `git diff --exit-code`):
#   proto/lifecyclepb/lifecycle.pb.go          protoc + protoc-gen-go
#   native/src/proto/lifecycle.pb-c.{c,h}      protoc + protoc-c (protobuf-c)
#   proto/operatorpb/operator{,_grpc}.pb.go    protoc + protoc-gen-go, protoc-gen-go-grpc
#   proto/peerpb/peer{,_grpc}.pb.go            protoc + protoc-gen-go, protoc-gen-go-grpc
#
# protoc-gen-go and protoc-gen-go-grpc are built from the `tool` directives in
# go.mod, so their versions are the ones pinned there; they are built into
# bin/tools/ (ignored) and never taken from $PATH. protoc and protoc-c come from
# the system (Debian 12: protobuf-compiler 3.21.12, protobuf-c-compiler 1.4.1);
# their versions are printed into the generated headers, so a different
# protoc yields a diff — the script warns when the versions differ from the
# ones the committed code was generated with.
#
# Deterministic: the same inputs and tool versions give byte-identical output
# (protoc is invoked with a relative include path, so no absolute path leaks
# into the generated code).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

want_protoc="libprotoc 3.21.12"
want_protoc_c="protobuf-c 1.4.1"

for tool in protoc protoc-c; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "gen-proto: $tool not found (apt-get install protobuf-compiler protobuf-c-compiler)" >&2
		exit 1
	fi
done

have_protoc="$(protoc --version)"
have_protoc_c="$(protoc-c --version | sed -n 1p)"  # sed reads all: no SIGPIPE under pipefail
if [ "$have_protoc" != "$want_protoc" ]; then
	echo "gen-proto: warning: $have_protoc differs from $want_protoc used for the committed code" >&2
fi
if [ "$have_protoc_c" != "$want_protoc_c" ]; then
	echo "gen-proto: warning: $have_protoc_c differs from $want_protoc_c used for the committed code" >&2
fi

tools="$root/bin/tools"
mkdir -p "$tools"
# go build of a tool directive package uses the version pinned in go.mod.
go build -o "$tools/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$tools/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc

mkdir -p proto/lifecyclepb proto/operatorpb proto/peerpb native/src/proto

# Go: module= strips the module path from go_package, so the file lands in
# proto/lifecyclepb/ relative to the repository root.
protoc \
	--plugin=protoc-gen-go="$tools/protoc-gen-go" \
	-I proto \
	--go_out=. \
	--go_opt=module=github.com/orbitkv/orbitkv \
	lifecycle.proto

# The operator API (Go only: orbitkvctl and the Manager are its only ends).
protoc \
	--plugin=protoc-gen-go="$tools/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
	-I proto \
	--go_out=. \
	--go_opt=module=github.com/orbitkv/orbitkv \
	--go-grpc_out=. \
	--go-grpc_opt=module=github.com/orbitkv/orbitkv \
	operator.proto

# Peer control between Managers (Go only: gocore/peer is both ends).
protoc \
	--plugin=protoc-gen-go="$tools/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
	-I proto \
	--go_out=. \
	--go_opt=module=github.com/orbitkv/orbitkv \
	--go-grpc_out=. \
	--go-grpc_opt=module=github.com/orbitkv/orbitkv \
	peer.proto

# C: protoc-c writes lifecycle.pb-c.{c,h}; the .c includes "lifecycle.pb-c.h"
# by its bare name, so both files stay side by side in native/src/proto/.
protoc \
	-I proto \
	--c_out=native/src/proto \
	lifecycle.proto

echo "gen-proto: regenerated proto/lifecyclepb/lifecycle.pb.go proto/operatorpb/operator{,_grpc}.pb.go proto/peerpb/peer{,_grpc}.pb.go native/src/proto/lifecycle.pb-c.{c,h}"
