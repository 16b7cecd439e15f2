#!/usr/bin/env bash
# ci/test-install.sh — `make test-install` (a stage of `make test`): the
# Debian package of `make deb`, unpacked into a scratch root with dpkg -x
# (no root needed, nothing touches the machine), checked as an operator
# would use it:
#   * control: Package orbitkv, Version = ci/version.sh deb, Architecture =
#     dpkg --print-architecture, Depends naming libc6 and adduser, the
#     maintainer scripts, conffiles and md5sums (dpkg's own check);
#   * every installed file at its place: binaries, liborbitkv and its SONAME
#     link, header, orbitkv.pc, man pages, the unit, dashboard, alerts,
#     the --ebpf drop-in, the commented default config;
#   * the installed binaries run: orbitkv-manager --version and orbitkvctl
#     --version print ci/version.sh semver; orbitkv-manager --config with the
#     installed manager.toml --print-config accepts it (it names no build,
#     and /run/orbitkv/manager.sock as the socket); the installed
#     Manager, started for a moment, exports orbitkv_build_info with that
#     version;
#   * pkg-config --cflags --libs orbitkv against the scratch root compiles
#     and links a C program that prints okv_version() and okv_strerror(),
#     run against the installed liborbitkv.so.0;
#   * systemd-analyze verify of the installed unit, man: links included
#     (MANPATH: the installed man pages), in the scratch root (--root; the
#     host's /lib/systemd/system units it needs are copied in), with no
#     output at all (it prints warnings but exits 0 for a bad value).
# The python3 wheel beside the package carries ci/version.sh pep440.
# Each failed check is named; the script exits 1 after all of them.
set -euo pipefail
DEB_DIR=${DEB_DIR:-build/deb}
semver=$(ci/version.sh semver)
debver=$(ci/version.sh deb)
pep440=$(ci/version.sh pep440)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb=$DEB_DIR/orbitkv_${debver}_$arch.deb
if [[ ! -f $deb ]]; then
	echo "test-install: $deb does not exist: run make deb (ci/version.sh deb says $debver)" >&2
	exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
failed=0
fail() {
	echo "FAIL: $*" >&2
	failed=1
}
pass() { echo "ok: $*"; }

field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == orbitkv ]] && pass "Package orbitkv" || fail "Package is '$(field Package)', want orbitkv"
[[ $(field Version) == "$debver" ]] && pass "Version $debver" || fail "Version is '$(field Version)', want $debver"
[[ $(field Architecture) == "$arch" ]] && pass "Architecture $arch" || fail "Architecture is '$(field Architecture)', want $arch"
deps=$(field Depends)
[[ $deps == *libc6* && $deps == *adduser* ]] && pass "Depends: $deps" || fail "Depends '$deps' lacks libc6 or adduser"
ctrl=$root/control
dpkg-deb -e "$deb" "$ctrl"
for f in postinst prerm postrm; do
	[[ -x $ctrl/$f ]] && sh -n "$ctrl/$f" && pass "maintainer script $f" || fail "no valid executable $f"
done
grep -q adduser "$ctrl/postinst" && grep -q '/run/systemd/system' "$ctrl/postinst" &&
	pass "postinst creates the user and reloads systemd only where it runs" || fail "postinst lacks adduser or the systemd check"
[[ $(cat "$ctrl/conffiles") == *"/etc/orbitkv/manager.toml"* ]] && pass "conffile /etc/orbitkv/manager.toml" || fail "conffiles: $(cat "$ctrl/conffiles")"

fs=$root/fs
dpkg-deb -x "$deb" "$fs"
(cd "$fs" && md5sum --quiet -c "$ctrl/md5sums") && pass "md5sums match" || fail "md5sums do not match the files"
lib=usr/lib/$multiarch
for f in usr/bin/orbitkv-manager usr/bin/orbitkvctl usr/bin/orbitkv-bench \
	"$lib/liborbitkv.so.$(ci/version.sh base)" "$lib/liborbitkv.so.0" "$lib/liborbitkv.so" "$lib/liborbitkv.a" \
	"$lib/pkgconfig/orbitkv.pc" usr/include/orbitkv/client.h usr/include/orbitkv/abi.h \
	usr/share/man/man1/orbitkv-manager.1.gz usr/share/man/man1/orbitkvctl.1.gz \
	lib/systemd/system/orbitkv-manager.service usr/share/orbitkv/grafana/orbitkv.json \
	usr/share/orbitkv/prometheus/orbitkv-alerts.yml usr/share/orbitkv/systemd/ebpf.conf \
	etc/orbitkv/manager.toml etc/orbitkv/manager.toml.example usr/share/doc/orbitkv/changelog.gz usr/share/doc/orbitkv/CHANGELOG.md.gz; do
	[[ -e $fs/$f ]] && pass "/$f" || fail "/$f is not in the package"
done
[[ $(stat -c %a "$fs/usr/bin/orbitkv-manager") == 711 ]] && pass "/usr/bin/orbitkv-manager is 0711 (non-dumpable from exec for its unit's uid)" ||
	fail "/usr/bin/orbitkv-manager is $(stat -c %a "$fs/usr/bin/orbitkv-manager"), want 711"
[[ $(readlink "$fs/$lib/liborbitkv.so.0") == "liborbitkv.so.$(ci/version.sh base)" ]] && pass "SONAME link" || fail "liborbitkv.so.0 -> $(readlink "$fs/$lib/liborbitkv.so.0")"
soname=$(readelf -d "$fs/$lib/liborbitkv.so.0" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ $soname == liborbitkv.so.0 ]] && pass "SONAME liborbitkv.so.0" || fail "SONAME is '$soname'"

# Whole outputs are read, then cut: head -1 in a pipe would end the
# writer with SIGPIPE, which pipefail counts as a failure.
v=$("$fs/usr/bin/orbitkv-manager" --version)
v=${v%%$'\n'*}
[[ $v == "orbitkv-manager $semver" ]] && pass "$v" || fail "orbitkv-manager --version says '$v', want 'orbitkv-manager $semver'"
v=$("$fs/usr/bin/orbitkvctl" --version)
v=${v%%$'\n'*}
[[ $v == "orbitkvctl $semver" ]] && pass "$v" || fail "orbitkvctl --version says '$v', want 'orbitkvctl $semver'"
# The conffile changes only with a key or a default: no version in it; its
# socket comment is the unit's path.
cfg=$fs/etc/orbitkv/manager.toml
if grep -qF -e "$semver" -e "$(git rev-parse --short=12 HEAD 2>/dev/null || echo no-commit)" "$cfg"; then
	fail "manager.toml names this build ($semver): every build would change the conffile"
else
	pass "manager.toml names no build"
fi
grep -q '^# bootstrap-socket = "".*/run/orbitkv/manager.sock' "$cfg" && pass "manager.toml's socket comment names /run/orbitkv/manager.sock" ||
	fail "manager.toml's bootstrap-socket line: $(grep bootstrap-socket "$cfg")"
if out=$(env -i PATH=/usr/bin:/bin "$fs/usr/bin/orbitkv-manager" --config "$fs/etc/orbitkv/manager.toml" --print-config 2>&1); then
	pass "the installed manager.toml is accepted (--print-config)"
else
	fail "orbitkv-manager --config /etc/orbitkv/manager.toml --print-config: $out"
fi

# The installed Manager serves: orbitkv_build_info on /metrics carries
# the same version (a 16 MiB RAM tier, sockets in the scratch root, a free
# loopback port for HTTP).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env -i PATH=/usr/bin:/bin "$fs/usr/bin/orbitkv-manager" --ram-capacity 16MiB --hugepages off \
	--bootstrap-socket "$root/okv.sock" --http-addr "127.0.0.1:$port" 2>"$root/manager.log" &
mgr=$!
metrics=""
for _ in $(seq 100); do
	if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
		metrics=$(curl -fsS "http://127.0.0.1:$port/metrics" || true)
		break
	fi
	sleep 0.1
done
kill -TERM "$mgr" 2>/dev/null || true
wait "$mgr" || true
info=$(grep '^orbitkv_build_info{' <<<"$metrics" || true)
[[ $info == *"version=\"$semver\""* ]] && pass "the installed Manager's $info" ||
	fail "orbitkv_build_info '$info' does not carry version=\"$semver\"; log: $(cat "$root/manager.log")"

export PKG_CONFIG_SYSROOT_DIR=$fs PKG_CONFIG_LIBDIR=$fs/$lib/pkgconfig
if flags=$(pkg-config --cflags --libs orbitkv); then
	pass "pkg-config --cflags --libs orbitkv: $flags"
	[[ $(pkg-config --modversion orbitkv) == "$(ci/version.sh base)" ]] && pass "orbitkv.pc Version" || fail "orbitkv.pc Version $(pkg-config --modversion orbitkv)"
	cat >"$root/okv.c" <<'C'
#include <stdio.h>
#include <orbitkv/client.h>
int main(void) {
	printf("%s\n%s\n", okv_version(), okv_strerror(OKV_EREFUSED));
	return 0;
}
C
	# shellcheck disable=SC2086
	if cc -o "$root/okv" "$root/okv.c" $flags 2>"$root/cc.err"; then
		out=$(LD_LIBRARY_PATH=$fs/$lib "$root/okv")
		[[ $(head -1 <<<"$out") == "$semver" ]] && pass "a C program linked with the installed liborbitkv prints okv_version() $semver" ||
			fail "okv_version() printed '$(head -1 <<<"$out")', want $semver"
		lddout=$(LD_LIBRARY_PATH=$fs/$lib ldd "$root/okv")
		[[ $lddout == *"liborbitkv.so.0 => $fs/$lib/liborbitkv.so.0"* ]] && pass "it loads the installed liborbitkv.so.0" ||
			fail "the program does not load the installed library: $lddout"
	else
		fail "compiling against the installed header and library: $(cat "$root/cc.err")"
	fi
else
	fail "pkg-config --cflags --libs orbitkv failed"
fi
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

unit=/lib/systemd/system/orbitkv-manager.service
grep -q '^ExecStart=/usr/bin/orbitkv-manager --config /etc/orbitkv/manager.toml$' "$fs$unit" && pass "ExecStart names /usr/bin" ||
	fail "ExecStart: $(grep ^ExecStart "$fs$unit")"
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$fs/lib/systemd/system"
	for u in /lib/systemd/system/*; do
		[[ -e $fs$u ]] || cp -a "$u" "$fs$u"
	done
	if out=$(MANPATH=$fs/usr/share/man systemd-analyze verify --root="$fs" "$unit" 2>&1) && [[ -z $out ]]; then
		pass "systemd-analyze verify $unit (man pages resolved)"
	else
		fail "systemd-analyze verify $unit: $out"
	fi
else
	fail "no systemd-analyze (Debian package systemd; ci/deps.sh installs it)"
fi

wheel=$DEB_DIR/orbitkv-$pep440-py3-none-linux_$(uname -m).whl
if [[ -f $wheel ]] && [[ $'\n'$(unzip -p "$wheel" "orbitkv-$pep440.dist-info/METADATA")$'\n' == *$'\n'"Version: $pep440"$'\n'* ]]; then
	pass "the wheel ${wheel##*/} carries Version $pep440"
else
	fail "no wheel $wheel with Version $pep440 beside the package"
fi
if ((failed)); then
	echo "test-install: FAILED" >&2
	exit 1
fi
echo "test-install: every check passed"
