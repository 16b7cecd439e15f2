#!/usr/bin/env bash
# ci/deb.sh — the body of `make deb` (run after make all and make wheel):
# stages `make install DESTDIR=... PREFIX=/usr` and packs it with dpkg-deb
# into $DEB_DIR/orbitkv_<version>_<arch>.deb, the python3 wheel of the
# client beside it. The package:
#   Version       ci/version.sh deb (0.1.0, or 0.1.0~devN+gHASH between releases)
#   Architecture  dpkg --print-architecture
#   Depends       dpkg-shlibdeps of the binaries and liborbitkv, plus adduser
#   conffiles     /etc/orbitkv/manager.toml (every key commented out) and
#                 manager.toml.example
#   postinst      creates the system user and group orbitkv (adduser
#                 --system --group, home /var/lib/orbitkv), runs systemctl
#                 daemon-reload where systemd is the init system
#                 (/run/systemd/system exists), and on an upgrade restarts
#                 the unit only if it was running (try-restart); it enables
#                 and starts nothing: the operator edits the config, then
#                 systemctl enable --now orbitkv-manager
#   prerm         on remove: stops the unit (deb-systemd-invoke) and
#                 disables it (deb-systemd-helper)
#   postrm        daemon-reload; on purge: forgets the unit's enablement
#                 state and removes /var/lib/orbitkv (the SSD tier's cache
#                 data; the user is kept, as Debian does)
#   triggers      ldconfig, for liborbitkv.so.0
# Environment: MAKE, BUILD, DEB_DIR (Makefile), DEB_MAINTAINER (default: git
# config user.name <user.email>, else the committer of HEAD).
set -euo pipefail
: "${MAKE:=make}" "${BUILD:=build}" "${DEB_DIR:=$BUILD/deb}"
version=$(ci/version.sh deb)
arch=$(dpkg --print-architecture)
maint=${DEB_MAINTAINER:-}
if [[ -z $maint ]] && name=$(git config user.name) && email=$(git config user.email); then
	maint="$name <$email>"
fi
if [[ -z $maint ]]; then
	maint=$(git log -1 --format='%cn <%ce>' 2>/dev/null || true) # a CI clone without a git identity
fi
if ! [[ $maint =~ ^[^\<\>]+\ \<[^\<\>@]+@[^\<\>]+\>$ ]]; then
	echo "ci/deb.sh: Maintainer \"$maint\" is not \"Name <email>\": set DEB_MAINTAINER=\"Name <email>\"" >&2
	exit 2
fi
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || true)
unitdir=${unitdir:-/lib/systemd/system}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# The staging root sits where dpkg-shlibdeps expects a package's files:
# debian/<package> beside debian/control.
src=$DEB_DIR/src
stage=$src/debian/orbitkv
rm -rf "$src" "$DEB_DIR/root"
mkdir -p "$stage"
src=$(cd "$src" && pwd)
stage=$src/debian/orbitkv
$MAKE --no-print-directory install DESTDIR="$stage" PREFIX=/usr UNITDIR="$unitdir" SYSCONFDIR=/etc LIBDIR=/usr/lib/$multiarch >/dev/null
# Debug information stays out of the package (as dh_strip moves it to a
# -dbgsym package): the binaries and liborbitkv.so lose their symbol tables
# and debug sections, the archives their debug sections.
strip --strip-unneeded "$stage"/usr/bin/* "$stage/usr/lib/$multiarch"/liborbitkv.so.*.*.*
strip --strip-debug "$stage/usr/lib/$multiarch"/*.a
install -d "$stage/usr/share/doc/orbitkv"
gzip -9n <CHANGELOG.md >"$stage/usr/share/doc/orbitkv/CHANGELOG.md.gz"
install -m 0644 README.md "$stage/usr/share/doc/orbitkv/README.md"
# A native package's changelog.gz is read as a Debian changelog: one entry
# for this build, pointing at the project's own.
{
	printf 'orbitkv (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Built from commit %s; the changes of each version are in\n' "$(git rev-parse --short=12 HEAD)"
	printf '    /usr/share/doc/orbitkv/CHANGELOG.md.gz.\n\n'
	printf ' -- %s  %s\n' "$maint" "$(date -R -u ${SOURCE_DATE_EPOCH:+-d @$SOURCE_DATE_EPOCH})"
} | gzip -9n >"$stage/usr/share/doc/orbitkv/changelog.gz"

# Depends: dpkg-shlibdeps reads debian/control of its working directory;
# liborbitkv.so.0 resolves inside the package (-l the staged libdir).
# (it finds the package's root by its DEBIAN directory).
printf 'Source: orbitkv\n\nPackage: orbitkv\nArchitecture: any\n' >"$src/debian/control"
mkdir -p "$stage/DEBIAN"
elfs=()
for f in "$stage"/usr/bin/* "$stage/usr/lib/$multiarch"/liborbitkv.so.*.*.*; do
	elfs+=("debian/orbitkv/${f#"$stage"/}")
done
err=$(mktemp)
trap 'rm -f "$err"' EXIT
shlibs=$(cd "$src" && dpkg-shlibdeps -O -l"$stage/usr/lib/$multiarch" "${elfs[@]}" 2>"$err") || {
	cat "$err" >&2
	exit 1
}
grep -v "no dependency information found for .*liborbitkv" "$err" >&2 || true
depends=${shlibs#shlibs:Depends=}
if [[ -z $depends || $depends == "$shlibs" ]]; then
	echo "ci/deb.sh: dpkg-shlibdeps printed no Depends ($shlibs)" >&2
	exit 1
fi
depends="$depends, adduser" # deb-systemd-invoke and deb-systemd-helper: init-system-helpers, essential

cat >"$stage/DEBIAN/control" <<CONTROL
Package: orbitkv
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Description: node-local KV-cache Manager for vLLM and SGLang
 OrbitKV keeps inference engines' KV-cache blocks in a RAM tier and an
 optional SSD tier on each node, shared by the engines' processes through
 shared memory, with orbitkvctl to inspect it, liborbitkv (C client, header
 and pkg-config file), man pages, a systemd unit (orbitkv-manager.service),
 a Grafana dashboard and Prometheus alert rules.
CONTROL
printf '/etc/orbitkv/manager.toml\n/etc/orbitkv/manager.toml.example\n' >"$stage/DEBIAN/conffiles"
printf 'liborbitkv %s orbitkv (>= %s)\n' "$(ci/version.sh base | cut -d. -f1)" "$(ci/version.sh base)~" >"$stage/DEBIAN/shlibs"
printf 'activate-noawait ldconfig\n' >"$stage/DEBIAN/triggers"
# The systemd calls are the ones debhelper's scripts make (systemctl
# --system daemon-reload; deb-systemd-invoke and deb-systemd-helper of
# init-system-helpers for the unit), each only where systemd runs.
cat >"$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
	if ! getent passwd orbitkv >/dev/null; then
		adduser --system --group --home /var/lib/orbitkv --no-create-home --gecos "OrbitKV Manager" orbitkv
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then
			deb-systemd-invoke try-restart orbitkv-manager.service >/dev/null || true
		fi
	fi
fi
exit 0
SH
cat >"$stage/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	deb-systemd-invoke stop orbitkv-manager.service >/dev/null || true
fi
if [ "$1" = remove ]; then
	deb-systemd-helper disable orbitkv-manager.service >/dev/null || true
fi
exit 0
SH
cat >"$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	deb-systemd-helper purge orbitkv-manager.service >/dev/null || true
	rm -rf /var/lib/orbitkv
fi
exit 0
SH
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
(cd "$stage" && find . \( -path ./DEBIAN -o -path ./etc \) -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
deb=$DEB_DIR/orbitkv_${version}_$arch.deb
rm -f "$DEB_DIR"/orbitkv_*.deb "$DEB_DIR"/orbitkv-*.whl
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
wheels=("$BUILD"/wheel/orbitkv-"$(ci/version.sh pep440)"-*.whl)
wheel=${wheels[0]}
if [[ ! -f $wheel ]]; then
	echo "ci/deb.sh: no wheel of version $(ci/version.sh pep440) in $BUILD/wheel: run make wheel" >&2
	exit 1
fi
cp "$wheel" "$DEB_DIR/"
echo "$deb"
echo "$DEB_DIR/${wheel##*/}"
if command -v lintian >/dev/null; then
	# Reported, not enforced: the tags this package knowingly carries are
	# listed in docs/operating.md ("Installing").
	lintian --tag-display-limit 0 "$deb" || true
fi
