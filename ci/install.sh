#!/usr/bin/env bash
# ci/install.sh install|uninstall — the body of `make install` and `make
# uninstall`. The Makefile passes every directory (absolute, under PREFIX
# except SYSCONFDIR) and DESTDIR, the staging root prepended to each (empty:
# the live system). It installs what `make all` built (bin/, build/native)
# and the committed man pages, unit, dashboard and alerts; a missing built
# file is an error naming the target that builds it.
set -euo pipefail
: "${PREFIX:?}" "${BINDIR:?}" "${LIBDIR:?}" "${INCLUDEDIR:?}" "${MANDIR:?}" "${DATADIR:?}" "${UNITDIR:?}" "${SYSCONFDIR:?}"
: "${NATIVE_DIR:?}" "${VERSION_BASE:?}" "${BINS:?}"
DESTDIR=${DESTDIR:-}
for d in PREFIX BINDIR LIBDIR INCLUDEDIR MANDIR DATADIR UNITDIR SYSCONFDIR; do
	if [[ ${!d} != /* ]]; then
		echo "ci/install.sh: $d=${!d}: want an absolute path" >&2
		exit 2
	fi
done
if [[ -n $DESTDIR && $DESTDIR != /* ]]; then
	DESTDIR=$(pwd)/$DESTDIR
fi
so=liborbitkv.so.$VERSION_BASE
soname=liborbitkv.so.${VERSION_BASE%%.*}
iox2_lib=build/iox2/release/libokv_iox2.a
mans=(docs/man/*.[1-8])

files() { # every path install writes, one a line, relative to DESTDIR (uninstall removes them)
	local b h m
	for b in $BINS; do printf '%s\n' "$BINDIR/$b"; done
	printf '%s\n' "$LIBDIR/$so" "$LIBDIR/$soname" "$LIBDIR/liborbitkv.so" "$LIBDIR/liborbitkv.a" "$LIBDIR/liborbitkv_iox2.a" \
		"$LIBDIR/pkgconfig/orbitkv.pc"
	for h in native/include/orbitkv/*.h; do printf '%s\n' "$INCLUDEDIR/orbitkv/${h##*/}"; done
	for m in "${mans[@]}"; do printf '%s\n' "$MANDIR/man${m##*.}/${m##*/}.gz"; done
	printf '%s\n' "$UNITDIR/orbitkv-manager.service" "$DATADIR/grafana/orbitkv.json" "$DATADIR/systemd/ebpf.conf"
	for m in deploy/prometheus/*.yml; do printf '%s\n' "$DATADIR/prometheus/${m##*/}"; done
	printf '%s\n' "$SYSCONFDIR/orbitkv/manager.toml.example"
}

need() {
	if [[ ! -e $1 ]]; then
		echo "ci/install.sh: $1 is missing: run \`make $2\` first" >&2
		exit 1
	fi
}

# sample_config writes the Manager's configuration with every key commented
# out at its default, from the installed binary's --print-config (so it
# names exactly the keys that binary reads).
sample_config() {
	local mgr=$1
	cat <<HDR
# /etc/orbitkv/manager.toml — the configuration of orbitkv-manager (--config FILE).
# Keys are the flag names (orbitkv-manager --help, man orbitkv-manager);
# flags and ORBITKV_* environment variables win over this file, and
# orbitkv-manager --config FILE --print-config shows the effective values.
# Every key is commented out at its default; uncomment what you change.
HDR
	# The defaults as the unit runs the Manager (RUNTIME_DIRECTORY set, so
	# the socket comment names /run/orbitkv/manager.sock). No version or
	# build-host detail but copy-workers (from the CPUs): the package's conffile changes only when a key or
	# a default does, so an upgrade asks about an edited file only then.
	env -i PATH=/usr/bin:/bin RUNTIME_DIRECTORY=/run/orbitkv "$mgr" --print-config | sed -e '/^# /d' -e 's/^\([a-z]\)/# \1/'
}

case ${1:-} in
install)
	for b in $BINS; do need "bin/$b" all; done
	need "$NATIVE_DIR/$so" native
	need "$NATIVE_DIR/liborbitkv.a" native
	need "${mans[0]}" man
	install -d "$DESTDIR$BINDIR" "$DESTDIR$LIBDIR/pkgconfig" "$DESTDIR$INCLUDEDIR/orbitkv" "$DESTDIR$UNITDIR" \
		"$DESTDIR$DATADIR/grafana" "$DESTDIR$DATADIR/prometheus" "$DESTDIR$DATADIR/systemd" "$DESTDIR$SYSCONFDIR/orbitkv"
	# The Manager is execute-only for others (0711): a process that runs a
	# binary its user cannot read starts non-dumpable (execve(2)), so no
	# process of the unit's uid can take the RAM tier's memfds it inherits
	# (LISTEN_FDS after a crash) before it makes itself non-dumpable.
	for b in $BINS; do
		mode=0755
		[[ $b == orbitkv-manager ]] && mode=0711
		install -m "$mode" "bin/$b" "$DESTDIR$BINDIR/$b"
	done
	install -m 0644 "$NATIVE_DIR/$so" "$DESTDIR$LIBDIR/$so"
	ln -sfn "$so" "$DESTDIR$LIBDIR/$soname"
	ln -sfn "$soname" "$DESTDIR$LIBDIR/liborbitkv.so"
	install -m 0644 "$NATIVE_DIR/liborbitkv.a" "$DESTDIR$LIBDIR/liborbitkv.a"
	# liborbitkv.a built with the iceoryx2 transport calls into its Rust
	# part: a static link needs that archive too (orbitkv.pc's Libs.private).
	libs_private="-lprotobuf-c -lcrypto -lpthread"
	if nm -u "$NATIVE_DIR/liborbitkv.a" 2>/dev/null | grep ' U okv_iox2_' >/dev/null; then
		need "$iox2_lib" iox2
		install -m 0644 "$iox2_lib" "$DESTDIR$LIBDIR/liborbitkv_iox2.a"
		libs_private="-lorbitkv_iox2 $libs_private -lgcc_s -lutil -lrt -lm -ldl"
	fi
	install -m 0644 native/include/orbitkv/*.h "$DESTDIR$INCLUDEDIR/orbitkv/"
	cat >"$DESTDIR$LIBDIR/pkgconfig/orbitkv.pc" <<PC
prefix=$PREFIX
exec_prefix=\${prefix}
libdir=$LIBDIR
includedir=$INCLUDEDIR

Name: orbitkv
Description: liborbitkv, the client library of the OrbitKV KV-cache Manager
Version: $VERSION_BASE
Libs: -L\${libdir} -lorbitkv
Libs.private: $libs_private
Cflags: -I\${includedir}
PC
	for m in "${mans[@]}"; do
		sec=${m##*.}
		install -d "$DESTDIR$MANDIR/man$sec"
		gzip -9n <"$m" >"$DESTDIR$MANDIR/man$sec/${m##*/}.gz"
		chmod 0644 "$DESTDIR$MANDIR/man$sec/${m##*/}.gz"
	done
	sed -e "s|^ExecStart=/usr/bin/orbitkv-manager |ExecStart=$BINDIR/orbitkv-manager |" \
		-e "s|^ExecReload=+/usr/bin/orbitkvctl |ExecReload=+$BINDIR/orbitkvctl |" deploy/orbitkv-manager.service \
		>"$DESTDIR$UNITDIR/orbitkv-manager.service"
	chmod 0644 "$DESTDIR$UNITDIR/orbitkv-manager.service"
	grep -q "^ExecStart=$BINDIR/orbitkv-manager " "$DESTDIR$UNITDIR/orbitkv-manager.service" || {
		echo "ci/install.sh: deploy/orbitkv-manager.service has no ExecStart=/usr/bin/orbitkv-manager line to point at $BINDIR" >&2
		exit 1
	}
	install -m 0644 deploy/grafana/orbitkv.json "$DESTDIR$DATADIR/grafana/"
	install -m 0644 deploy/prometheus/*.yml "$DESTDIR$DATADIR/prometheus/"
	install -m 0644 deploy/systemd/ebpf.conf "$DESTDIR$DATADIR/systemd/"
	sample_config "bin/orbitkv-manager" >"$DESTDIR$SYSCONFDIR/orbitkv/manager.toml.example"
	chmod 0644 "$DESTDIR$SYSCONFDIR/orbitkv/manager.toml.example"
	if [[ ! -e $DESTDIR$SYSCONFDIR/orbitkv/manager.toml ]]; then
		install -m 0644 "$DESTDIR$SYSCONFDIR/orbitkv/manager.toml.example" "$DESTDIR$SYSCONFDIR/orbitkv/manager.toml"
		echo "installed $DESTDIR$SYSCONFDIR/orbitkv/manager.toml (every key at its default)"
	fi
	echo "installed orbitkv $VERSION_BASE into ${DESTDIR:-/}$PREFIX (libraries: $LIBDIR, unit: $UNITDIR)"
	if [[ -z $DESTDIR && $UNITDIR != /lib/systemd/system && $UNITDIR != /usr/lib/systemd/system && $UNITDIR != /usr/local/lib/systemd/system && $UNITDIR != /etc/systemd/system ]]; then
		echo "note: systemd does not search $UNITDIR for units: link it into /etc/systemd/system" >&2
	fi
	;;
uninstall)
	files | while read -r f; do
		rm -f "$DESTDIR$f"
	done
	for d in "$INCLUDEDIR/orbitkv" "$LIBDIR/pkgconfig" "$DATADIR/grafana" "$DATADIR/prometheus" "$DATADIR/systemd" "$DATADIR"; do
		rmdir --ignore-fail-on-non-empty "$DESTDIR$d" 2>/dev/null || true
	done
	echo "removed orbitkv from ${DESTDIR:-/}$PREFIX (kept $DESTDIR$SYSCONFDIR/orbitkv/manager.toml if present)"
	;;
*)
	echo "usage: ci/install.sh install|uninstall (the Makefile's install and uninstall targets set its variables)" >&2
	exit 2
	;;
esac
