#!/usr/bin/env bash
# ci/version.sh [semver|pep440|deb|base] — the version of this tree, in the
# form each consumer needs. VERSION (repository root, one line: MAJOR.MINOR.PATCH)
# names the release the tree builds toward; the commit decides the rest:
#
#   HEAD tagged v<VERSION>, tree clean (a release):
#     semver 0.1.0            pep440 0.1.0               deb 0.1.0
#   any other commit (N commits since VERSION last changed, abbreviated hash H):
#     semver 0.1.0-dev.N+gH   pep440 0.1.0.devN+gH       deb 0.1.0~devN+gH
#   tracked files modified: ".dirty" appended to the +g part (semver, pep440, deb)
#   no git checkout (a tarball): semver 0.1.0-dev, pep440 0.1.0.dev0, deb 0.1.0~dev0
#
# semver goes into every Go binary (--version, orbitkv_build_info) and
# liborbitkv (okv_version()); pep440 into the Python wheel; deb into the
# Debian package. The dev forms sort below the release in each scheme
# (semver pre-release, PEP 440 .devN, Debian ~), so after a release VERSION
# moves to the next one. "base" prints VERSION itself.
#
# N counts commits since the last commit that changed VERSION, so it needs
# the history: a shallow clone counts only what it holds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
form=${1:-semver}
base=$(tr -d '[:space:]' < "$root/VERSION")
if ! [[ $base =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "ci/version.sh: VERSION holds \"$base\"; want MAJOR.MINOR.PATCH (0.1.0)" >&2
	exit 2
fi
case $form in
semver | pep440 | deb | base) ;;
*)
	echo "ci/version.sh: unknown form \"$form\"; want semver, pep440, deb or base" >&2
	exit 2
	;;
esac
if [[ $form == base ]]; then
	echo "$base"
	exit 0
fi
git=(git -C "$root")
if ! "${git[@]}" rev-parse --verify -q HEAD >/dev/null 2>&1; then
	case $form in
	semver) echo "$base-dev" ;;
	pep440) echo "$base.dev0" ;;
	deb) echo "$base~dev0" ;;
	esac
	exit 0
fi
hash=$("${git[@]}" rev-parse --short=12 HEAD)
dirty=""
# Only tracked files count (untracked build outputs do not make a tree dirty).
"${git[@]}" update-index -q --refresh >/dev/null 2>&1 || true
if ! "${git[@]}" diff-index --quiet HEAD -- 2>/dev/null; then
	dirty=".dirty"
fi
if [[ -z $dirty ]] && "${git[@]}" tag --points-at HEAD 2>/dev/null | grep -qxF "v$base"; then
	echo "$base"
	exit 0
fi
since=$("${git[@]}" log -1 --format=%H -- VERSION 2>/dev/null || true)
if [[ -n $since ]]; then
	n=$("${git[@]}" rev-list --count "$since..HEAD")
else
	n=0 # VERSION not committed yet
fi
case $form in
semver) echo "$base-dev.$n+g$hash$dirty" ;;
pep440) echo "$base.dev$n+g$hash$dirty" ;;
deb) echo "$base~dev$n+g$hash$dirty" ;;
esac
