#!/usr/bin/env bash
# make install / make uninstall as a packager runs them: into a temporary DESTDIR, then a
# program built against the installed header and library with pkg-config (shared and
# static), each man page rendered by man -l, the systemd unit checked by systemd-analyze
# verify, a second install with another PREFIX, and make uninstall leaving no file behind.
# Needs no daemon and no root; the man and systemd checks skip, saying so, without their
# tools.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ROCEMU_BUILD:-$root/build}
build=${build%/}
build=${build#"$root"/}
work=$(mktemp -d /tmp/rocemu-install.XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}

case $build in
*asan*)
	echo "skipped: install is tested from the plain build (this is $build)"
	exit 77
	;;
esac
command -v pkg-config >/dev/null || { echo "skipped: no pkg-config"; exit 77; }
command -v "${CC:-cc}" >/dev/null || { echo "skipped: no C compiler"; exit 77; }
cc=${CC:-cc}

# make as a user types it, not as a child of the make that runs the tests.
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
		make --no-print-directory -C "$root" BUILD="$build" "$@"
}

# ---- install into DESTDIR, default PREFIX ----
dest=$work/dest
prefix=/usr/local
mk install DESTDIR="$dest" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; fail "make install DESTDIR=$dest"; }
p=$dest$prefix
expected="sbin/rocemud bin/rocemuctl bin/rdma-write bin/rocemu-run lib/librocemu.a
	lib/librocemu.so.0.1 lib/librocemu.so.0 lib/librocemu.so lib/rocemu/librocemu-verbs.so
	include/rocemu/rocemu.h lib/pkgconfig/rocemu.pc share/man/man1/rdma-write.1
	share/man/man1/rocemu-run.1 share/man/man3/rocemu.3 share/man/man8/rocemud.8
	share/man/man8/rocemuctl.8 lib/systemd/system/rocemud@.service"
for f in $expected; do
	[ -e "$p/$f" ] || fail "make install did not install $prefix/$f"
done
for f in sbin/rocemud bin/rocemuctl bin/rdma-write bin/rocemu-run; do
	[ -x "$p/$f" ] || fail "$prefix/$f is not executable"
done
unexpected=$(cd "$dest" && find . \( -type f -o -type l \) | sed "s|^\./${prefix#/}/||" |
	grep -vxF -f <(tr -s ' \t' '\n' <<<"$expected" | grep .))
[ -z "$unexpected" ] || fail "make install put unexpected files: $unexpected"
[ "$(readlink "$p/lib/librocemu.so")" = librocemu.so.0 ] &&
	[ "$(readlink "$p/lib/librocemu.so.0")" = librocemu.so.0.1 ] ||
	fail "librocemu.so -> librocemu.so.0 -> librocemu.so.0.1 symlinks are wrong"
echo "make install DESTDIR: $(wc -w <<<"$expected") files under $prefix"
# The installed rocemu-run finds the installed verbs layer.
preload=$(ROCEMU_SOCKET= ROCEMU_VERBS_LIB= "$p/bin/rocemu-run" sh -c 'echo "$LD_PRELOAD"' 2>&1)
case $preload in
*"$p/lib/rocemu/librocemu-verbs.so"*) echo "rocemu-run preloads $prefix/lib/rocemu/librocemu-verbs.so" ;;
*) fail "the installed rocemu-run preloads '$preload', not $prefix/lib/rocemu/librocemu-verbs.so" ;;
esac

# The shared library: its soname, no libibverbs, and the header's functions exported, only.
dyn=$(readelf -d "$p/lib/librocemu.so.0.1") || fail "readelf on librocemu.so.0.1"
grep -q 'SONAME.*\[librocemu\.so\.0\]' <<<"$dyn" || fail "librocemu.so has no soname librocemu.so.0"
! grep -q 'NEEDED.*ibverbs' <<<"$dyn" || fail "librocemu.so links libibverbs"
api=$(grep -oE '\brocemu_[a-z0-9_]+\(' "$p/include/rocemu/rocemu.h" | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$p/lib/librocemu.so.0.1" | awk '$2 == "T" {print $3}' | sort -u)
[ "$api" = "$exported" ] ||
	fail "librocemu.so exports other symbols than rocemu.h declares: $(diff <(echo "$api") <(echo "$exported") | grep '^[<>]' | tr '\n' ' ')"
echo "librocemu.so: soname librocemu.so.0, $(wc -l <<<"$exported") functions exported, as declared"

# ---- pkg-config, and a program built against what was installed ----
export PKG_CONFIG_PATH=$p/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
version=$(pkg-config --modversion rocemu) || fail "pkg-config does not find rocemu.pc"
cflags=$(pkg-config --cflags rocemu) || fail "pkg-config --cflags rocemu"
libs=$(pkg-config --libs rocemu) || fail "pkg-config --libs rocemu"
grep -q -- "-I$p/include\b" <<<"$cflags" || fail "Cflags lack -I$p/include: $cflags"
! grep -q ibverbs <<<"$libs" || fail "Libs pull libibverbs: $libs"
echo "pkg-config: rocemu $version, cflags '$cflags', libs '$libs'"

cat >"$work/client.c" <<'EOF'
/* Links against the installed librocemu and shows it runs: no daemon is needed for this. */
#include <rocemu/rocemu.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int expect_enoent(const char *what, struct rocemu_context *ctx)
{
	if (ctx || errno != ENOENT) {
		fprintf(stderr, "%s: expected ENOENT, got %s\n", what,
			ctx ? "a context" : strerror(errno));
		return 1;
	}
	return 0;
}

int main(void)
{
	union ibv_gid gid;
	uint32_t ip = htonl(0x0a000002);
	int bad = 0;

	rocemu_gid_from_ipv4(&gid, ip);
	if (rocemu_gid_to_ipv4(&gid) != ip) {
		fprintf(stderr, "the IPv4-mapped GID does not round-trip\n");
		bad = 1;
	}
	errno = 0;
	bad |= expect_enoent("rocemu_open(path)",
			     rocemu_open("/nonexistent/rocemu-install-test.sock"));
	setenv("ROCEMU_SOCKET", "/nonexistent/rocemu-install-test.sock", 1);
	errno = 0;
	bad |= expect_enoent("rocemu_open(NULL)", rocemu_open(NULL));
	if (rocemu_close(NULL) != 0 || strcmp(rocemu_last_error(NULL), "") != 0) {
		fprintf(stderr, "rocemu_close(NULL) or rocemu_last_error(NULL) misbehave\n");
		bad = 1;
	}
	if (!bad)
		printf("rocemu_open on a missing socket: %s, as expected\n", strerror(ENOENT));
	return bad;
}
EOF
# shellcheck disable=SC2086
"$cc" -Wall -Wextra -Werror $cflags -o "$work/client" "$work/client.c" $libs \
	>"$work/cc.log" 2>&1 || { cat "$work/cc.log"; fail "cannot build against the installed rocemu"; }
! readelf -d "$work/client" | grep -q 'NEEDED.*ibverbs' || fail "the client links libibverbs"
resolved=$(LD_LIBRARY_PATH=$p/lib ldd "$work/client" | awk '$1 == "librocemu.so.0" {print $3}')
[ "$resolved" = "$p/lib/librocemu.so.0" ] ||
	fail "the client finds librocemu.so.0 at '$resolved', not in $p/lib"
out=$(LD_LIBRARY_PATH=$p/lib "$work/client" 2>&1) || fail "the client (shared) failed: $out"
echo "client (shared, librocemu.so.0 from DESTDIR): $out"
# The static library: header flags from pkg-config, the archive from its libdir.
# shellcheck disable=SC2086
"$cc" -Wall -Wextra -Werror $cflags -o "$work/client-static" "$work/client.c" \
	"$dest$(pkg-config --variable=libdir rocemu | sed "s|^$dest||")/librocemu.a" \
	>"$work/cc.log" 2>&1 || { cat "$work/cc.log"; fail "cannot link the installed librocemu.a"; }
! readelf -d "$work/client-static" | grep -q 'NEEDED.*rocemu' || fail "the static client needs librocemu.so"
out=$("$work/client-static" 2>&1) || fail "the client (static) failed: $out"
echo "client (static, librocemu.a): $out"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# ---- man pages ----
if command -v man >/dev/null; then
	for page in man1/rdma-write.1 man1/rocemu-run.1 man3/rocemu.3 man8/rocemud.8 man8/rocemuctl.8; do
		name=$(basename "$page" | sed 's/\.[0-9]$//')
		text=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$p/share/man/$page" 2>"$work/man.err") ||
			{ cat "$work/man.err"; fail "man -l $page failed"; }
		# man's own notes on the terminal are not the page's problems; groff's are.
		grep -v -e '^man: can.t set the locale' "$work/man.err" | grep -q . &&
			{ cat "$work/man.err"; fail "$page renders with warnings"; }
		for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
			grep -q "^$section" <<<"$text" || fail "$page has no $section section"
		done
		grep -qE "^ +$name +- " <<<"$text" || fail "$page: NAME does not start with '$name - '"
		case $page in
		man3/*) grep -q '^EXAMPLES' <<<"$text" || fail "$page has no EXAMPLES" ;;
		*) grep -q '^EXIT STATUS' <<<"$text" || fail "$page has no EXIT STATUS" ;;
		esac
		echo "man -l $page: $(wc -l <<<"$text") lines, no warnings"
	done
else
	echo "man -l checks skipped: no man here (Debian package man-db)"
fi

# ---- the systemd unit ----
unit=$p/lib/systemd/system/rocemud@.service
grep -qx "ExecStart=$prefix/sbin/rocemud -d -i %i \$ROCEMUD_OPTS" "$unit" ||
	fail "the unit's ExecStart is not the installed $prefix/sbin/rocemud: $(grep ExecStart= "$unit")"
grep -qx 'CapabilityBoundingSet=CAP_NET_RAW CAP_IPC_LOCK' "$unit" ||
	fail "the unit does not bound its capabilities to CAP_NET_RAW CAP_IPC_LOCK"
if command -v systemd-analyze >/dev/null; then
	# One instance, its binary at its place inside DESTDIR; its man pages from DESTDIR too.
	mkdir -p "$work/units"
	sed "s|=$prefix/sbin/|=$p/sbin/|" "$unit" >"$work/units/rocemud@lo.service"
	MANPATH=$p/share/man SYSTEMD_LOG_LEVEL=notice \
		systemd-analyze verify "$work/units/rocemud@lo.service" >"$work/verify.log" 2>&1 ||
		{ cat "$work/verify.log"; fail "systemd-analyze verify rejects the unit"; }
	[ -s "$work/verify.log" ] && { cat "$work/verify.log"; fail "systemd-analyze verify complains"; }
	echo "systemd-analyze verify rocemud@lo.service: OK"
else
	echo "systemd-analyze checks skipped: no systemd-analyze here (Debian package systemd)"
fi

# ---- uninstall ----
mk uninstall DESTDIR="$dest" >"$work/uninstall.log" 2>&1 ||
	{ cat "$work/uninstall.log"; fail "make uninstall DESTDIR=$dest"; }
left=$(cd "$dest" && find . \( -type f -o -type l \))
[ -z "$left" ] || fail "make uninstall left: $left"
echo "make uninstall DESTDIR: nothing left"

# ---- another PREFIX: every path that names it follows ----
dest2=$work/dest2
prefix2=/opt/rocemu
mk install DESTDIR="$dest2" PREFIX="$prefix2" >"$work/install2.log" 2>&1 ||
	{ cat "$work/install2.log"; fail "make install PREFIX=$prefix2"; }
[ -x "$dest2$prefix2/sbin/rocemud" ] || fail "PREFIX=$prefix2: no $prefix2/sbin/rocemud"
grep -qx "ExecStart=$prefix2/sbin/rocemud -d -i %i \$ROCEMUD_OPTS" \
	"$dest2$prefix2/lib/systemd/system/rocemud@.service" || fail "PREFIX=$prefix2: the unit's ExecStart"
grep -qx "prefix=$prefix2" "$dest2$prefix2/lib/pkgconfig/rocemu.pc" || fail "PREFIX=$prefix2: rocemu.pc"
PKG_CONFIG_PATH=$dest2$prefix2/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest2 \
	pkg-config --libs rocemu | grep -q -- "-L$dest2$prefix2/lib" || fail "PREFIX=$prefix2: pkg-config --libs"
mk uninstall DESTDIR="$dest2" PREFIX="$prefix2" >>"$work/install2.log" 2>&1 ||
	{ cat "$work/install2.log"; fail "make uninstall PREFIX=$prefix2"; }
left=$(cd "$dest2" && find . \( -type f -o -type l \))
[ -z "$left" ] || fail "make uninstall PREFIX=$prefix2 left: $left"
echo "PREFIX=$prefix2: unit, pkg-config and binaries follow it; uninstalled cleanly"
echo "install: all checks passed"
