#!/usr/bin/env bash
# The short form of make interop, in make check: rocemud against the kernel's rxe in a qemu
# guest (test/interop.sh with INTEROP_SHORT=1), test/ibv_peer and test/ud_peer both ways
# over IPv4 and IPv6, every frame checked. It runs in the sanitizer pass, where rxe's frames
# meet a rocemud built with ASan and UBSan; the plain build's is make interop, the whole
# matrix. The first run downloads Debian's kernel package (about 70 MB) into build/interop.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${ROCEMU_BUILD:-} in
*/asan) ;;
*) echo "the short interop runs in the sanitizer pass (make interop runs the plain build's)"
   exit 77 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (qemu's tap, namespaces)"; exit 77; }
[ -c /dev/net/tun ] ||
	{ echo "skipped: no /dev/net/tun, so no tap for the guest's NIC (a container without it?)"; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "qemu-system-x86_64 is missing (scripts/install-deps.sh installs qemu-system-x86)"; exit 1; }
INTEROP_SHORT=1 exec "$here/test/interop.sh" "$ROCEMU_BUILD"
