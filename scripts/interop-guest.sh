#!/bin/sh
# PID 1 of the interop guest (scripts/interop-vm.sh), on the host's root seen read-only
# under a tmpfs overlay: brings eth0 up with the addresses the host chose (IPv4, and IPv6
# when given), adds rxe0 on it,
# says "ready" in the shared folder, then runs each cmd.NAME dropped there (output in
# out.NAME, status in rc.NAME) until the host asks for poweroff.
work=/run/interop
fail() {
	echo "$*" >"$work/failed" 2>/dev/null
	echo "interop guest: $*"
	poweroff -f
}

# /tmp stays the overlay's, writable and showing the host's: the host's build may live
# there (a clone in /tmp), and a tmpfs over it would hide the programs the host runs here.
mount -t tmpfs tmpfs /run
mkdir -p "$work" /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none work "$work" || fail "cannot mount the work share"
. "$work/net"
ip link set lo up
ip link set eth0 up || fail "no eth0"
[ -z "${MTU:-}" ] || ip link set eth0 mtu "$MTU" || fail "eth0 refused MTU $MTU"
# as rocemud advises where the NIC offers it (Linux 6.2's virtio-net under a qemu that
# passes it): a rocemud here then hands the NIC runs of packets whole
ethtool -K eth0 tx-udp-segmentation on 2>/dev/null
uso=$(ethtool -k eth0 2>/dev/null | awk '$1 == "tx-udp-segmentation:" { print $2 }')
ip addr add "$ADDR/24" dev eth0 || fail "cannot add $ADDR"
# nodad: usable at once; rxe adds a RoCE v2 GID for it as for the IPv4 address
[ -z "${ADDR6:-}" ] || ip addr add "$ADDR6/64" dev eth0 nodad || fail "cannot add $ADDR6"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 failed"
ulimit -l unlimited
for _ in $(seq 100); do
	[ -e /dev/infiniband/uverbs0 ] && break
	sleep 0.1
done
echo "$(uname -r), $ADDR, $(ibv_devices 2>&1 | awk '/rxe0/ { print $1 " GUID " $2 }'), tx-udp-segmentation ${uso:-unknown}" >"$work/ready.tmp" &&
	mv "$work/ready.tmp" "$work/ready"

while [ ! -e "$work/poweroff" ]; do
	for cmd in "$work"/cmd.*; do
		[ -e "$cmd" ] || continue
		name=${cmd#"$work"/cmd.}
		mv "$cmd" "$work/running.$name"
		(sh "$work/running.$name" >"$work/out.$name" 2>&1; echo $? >"$work/rc.$name.tmp" &&
			mv "$work/rc.$name.tmp" "$work/rc.$name") &
	done
	# busybox is static: coreutils' sleep, loaded ten times a second over 9p through the
	# dynamic linker, took 14% of a guest's CPU samples under a transfer
	busybox sleep 0.1
done
sync
poweroff -f
