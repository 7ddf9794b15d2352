#!/usr/bin/env bash
# RoCEv2 over 802.1Q VLAN devices, IPv4 and IPv6: the namespaces' addresses sit on a VLAN
# device over each veth end (as on an eth0.100), and the daemons serve those devices,
# recording the wire. rdma-write byte-exact to both of b's addresses, ibv_rc_pingpong and
# ibv_ud_pingpong over each GID, unmodified under rocemu-run. A capture on the veth below
# b's VLAN device must hold the RoCE frames tagged with the VLAN ID, every ICRC valid (the
# kernel adds and removes the tag; rocemud's frames must survive both), and the recorded
# frames pass rocemuctl decode, the reference ICRC and tshark.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

VLAN=$((RANDOM % 4000 + 2))
for p in ibv_rc_pingpong ibv_ud_pingpong tshark; do
	command -v "$p" >/dev/null ||
		skip "$p is missing: scripts/install-deps.sh installs ibverbs-utils and tshark"
done
# can_vlan: whether this kernel makes 802.1Q devices (built in, or a module it can load),
# tried on a veth pair in a namespace of its own
can_vlan() {
	local ns=vlanprobe$$ rc
	command -v modprobe >/dev/null && modprobe 8021q 2>/dev/null
	ip netns add $ns || return 1
	ip -n $ns link add p0 type veth peer name p1 &&
		ip -n $ns link add link p0 name p0.5 type vlan id 5 2>/dev/null
	rc=$?
	ip netns delete $ns
	return $rc
}
can_vlan || skip "this kernel cannot make VLAN devices (no 802.1Q support: CONFIG_VLAN_8021Q)"

NETNS_VLAN=$VLAN NETNS_IPV6=1 NETNS_MTU=9000 topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/vlan-$side.pcap --pcap-max 2G" daemon_start $side
done
LOWER_B=veth-$ROCEMU_NETNS_PREFIX-b
grep -q "rocemud on $IF_B" "$WORK/rocemud-b.log" &&
	passed "rocemud b serves $IF_B, VLAN $VLAN over $LOWER_B" ||
	failed "rocemud b serves $IF_B"

# The tagged frames as the veth below b's VLAN device carries them, while a 1 MiB transfer
# runs. The transfer waits until tshark captures: in a TCG guest its first start (its
# dissectors read cold from the host's 9p root) took over a minute, and a capture that began
# after the transfer had ended counted none of its frames (Linux 6.12's guest, 2026-11-29).
"${IN_B[@]}" timeout 240 tshark -i "$LOWER_B" -f "vlan $VLAN and udp dst port 4791" -c 200 \
	-w "$WORK/tagged.pcap" >"$WORK/tshark.out" 2>&1 &
tshark_pid=$!
PIDS+=($tshark_pid)
for _ in $(seq 1800); do
	grep -q '^Capturing on' "$WORK/tshark.out" && break
	kill -0 $tshark_pid 2>/dev/null || break
	sleep 0.1
done
grep -q '^Capturing on' "$WORK/tshark.out" ||
	{ sed 's/^/  | /' "$WORK/tshark.out"; fail "tshark did not start capturing on $LOWER_B within 180 s"; }
write_verified 1M "$ADDR_B"
wait $tshark_pid
out=$("$BUILD/rocemuctl" decode "$WORK/tagged.pcap" 2>&1)
tagged=$(HOME=$WORK tshark -r "$WORK/tagged.pcap" -Y "vlan.id == $VLAN && infiniband" 2>/dev/null | wc -l)
bad=$(decode_bad "$out")
[ "$tagged" -eq 200 ] && [ "$bad" -eq 0 ] &&
	passed "on $LOWER_B: 200 RoCE frames tagged VLAN $VLAN, every ICRC valid" ||
	{ sed 's/^/  | /' "$WORK/tshark.out"; failed "on $LOWER_B: $tagged of 200 tagged RoCE frames, $bad ICRC bad"; }

for size in 1 4097 1M; do
	write_verified $size "$ADDR6_B"
done
write_verified 4097 "$ADDR_B"
PINGPONG_GID=::ffff:$ADDR_B pingpong rc-pingpong-vlan-v4 "$ADDR_B" ibv_rc_pingpong -g 0 -c -n 1000
PINGPONG_GID=$ADDR6_B pingpong rc-pingpong-vlan-v6 "$ADDR_B" ibv_rc_pingpong -g 1 -c -n 1000
PINGPONG_GID=::ffff:$ADDR_B pingpong ud-pingpong-vlan-v4 "$ADDR_B" ibv_ud_pingpong -g 0 -c -n 500
PINGPONG_GID=$ADDR6_B pingpong ud-pingpong-vlan-v6 "$ADDR_B" ibv_ud_pingpong -g 1 -c -n 500

daemon_stop a
daemon_stop b
# Each daemon's capture holds both directions, so tshark reads a's; b's gets the ICRC checks.
check_wire "$WORK/vlan-a.pcap" 'infiniband' 1000
CHECK_WIRE_NO_TSHARK=1 check_wire "$WORK/vlan-b.pcap" 'infiniband' 1000

finish vlan
