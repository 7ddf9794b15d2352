#!/usr/bin/env bash
# The short form of make two-vms, in make check: two qemu guests on a bridge, rocemud on
# each one's virtio-net NIC, rdma-write --verify and one perftest row (ib_write_bw 1 MiB)
# between them, every frame that crossed the bridge checked (test/two-vms.sh with
# TWO_VMS_SHORT=1). It runs in the plain pass; the sanitizer pass has the short interop's
# guest. That pass keeps the machine's network and fetches the guests' kernel; this one,
# in a network of its own, waits for it when it is not there yet.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${ROCEMU_BUILD:-} in
*/asan) echo "the short two-VM run is the plain pass's (the sanitizer pass boots the short interop's guest)"
   exit 77 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (qemu's taps, namespaces)"; exit 77; }
[ -c /dev/net/tun ] ||
	{ echo "skipped: no /dev/net/tun, so no taps for the guests' NICs (a container without it?)"; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "qemu-system-x86_64 is missing (scripts/install-deps.sh installs qemu-system-x86)"; exit 1; }

ROCEMU_ROOT=$here
source "$here/scripts/interop-vm.sh"
if ! vm_kernel_cached && [ -z "$(ip route show default 2>/dev/null)" ]; then
	echo "the guests' kernel is not in $INTEROP_CACHE yet and this network has no way out:" \
		"waiting for the other pass to fetch it (up to ${TWO_VMS_WAIT:-600} s)"
	deadline=$((SECONDS + ${TWO_VMS_WAIT:-600}))
	until vm_kernel_cached; do
		[ "$SECONDS" -lt "$deadline" ] ||
			{ echo "the guests' kernel never came into $INTEROP_CACHE, and this network cannot fetch it"; exit 1; }
		sleep 2
	done
fi
TWO_VMS_SHORT=1 exec "$here/test/two-vms.sh" "${ROCEMU_BUILD:-$here/build}"
