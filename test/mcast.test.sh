#!/usr/bin/env bash
# UD multicast between two daemons in two network namespaces, both recording the wire:
# test/mcast_peer under rocemu-run to an IPv4 group (239.x) and an IPv6 one (ff0e::), each
# a row: the attach rules (again: success; RC QP or unicast address: EINVAL; detach of a
# QP not attached: EINVAL; the 57th QP on a group: ENOMEM; destroyed QPs leave), two QPs
# of host b and one of host a (the sender's own host) each getting every datagram checked
# byte for byte, a wrong Q_Key dropped and counted on every attached QP (qkey_viol), a
# detached QP getting nothing more; host b's interface has the group's MAC in its
# multicast filter (ip maddr) while its QPs are attached, and not after. Then the wire: every frame to a group goes to the MAC
# the kernel maps the group to (01:00:5e + 23 bits, 33:33 + 32 bits) with destination QP
# 0xFFFFFF, and passes rocemuctl decode, the reference ICRC and tshark.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/mcast_peer
[ -x "$PEER" ] && [ -x "$BUILD/test/pcap_icrc" ] || fail "$PEER or pcap_icrc is missing (make build-tests)"
export PAIR_TIMEOUT=40

NETNS_IPV6=1 topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/mcast-$side.pcap" daemon_start $side
done

# maddr_has MAC: whether host b's interface has MAC among its multicast addresses
maddr_has() {
	local out
	out=$("${IN_B[@]}" ip maddr show dev "$IF_B")
	grep -q "link  *$1\b" <<<"$out"
}

# mcast_row NAME GROUP MAC [-x 1]: mcast_peer in both hosts; while host b's QPs are attached
# its interface has the group's MAC in its multicast filter, and not after; the counters of
# both daemons
mcast_row() {
	local name=$1 group=$2 mac=$3 va0 vb0 rb0 va vb rb server status in_filter=no
	shift 3
	va0=$(counter a qkey_viol) vb0=$(counter b qkey_viol) rb0=$(counter b mcast_rcvd)
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	"${IN_B[@]}" timeout 40 "$RUN" -D "$SOCK_B" "$PEER" "$@" server "$group" >"$OUT_S" 2>&1 &
	server=$!
	PIDS+=($server)
	# the server attaches before it listens for the client
	for _ in $(seq 100); do
		maddr_has "$mac" && in_filter=yes && break
		kill -0 "$server" 2>/dev/null || break
		sleep 0.05
	done
	"${IN_A[@]}" timeout 40 "$RUN" -D "$SOCK_A" "$PEER" "$@" client "$group" "$ADDR_B" \
		>"$OUT_C" 2>&1 </dev/null
	status=$?
	wait "$server" || status=$?
	if [ $status -eq 0 ]; then
		passed "$name: group $group: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks"
	else
		show_both
		failed "$name: group $group"
	fi
	grep -hE '^(ok|FAIL)' "$OUT_S" "$OUT_C" | sed 's/^/  /'
	[ $in_filter = yes ] && ! maddr_has "$mac" &&
		passed "$name: $mac in $IF_B's multicast filter while QPs were attached, not after" ||
		failed "$name: $mac in $IF_B's multicast filter while attached: $in_filter; after: $(maddr_has "$mac" && echo yes || echo no)"
	va=$(( $(counter a qkey_viol) - va0 )) vb=$(( $(counter b qkey_viol) - vb0 ))
	rb=$(( $(counter b mcast_rcvd) - rb0 ))
	# 8 + the wrong Q_Key's + 4 datagrams; the wrong one counted on each QP attached
	[ "$va" -eq 1 ] && [ "$vb" -eq 2 ] && [ "$rb" -eq 13 ] &&
		passed "$name: counters: qkey_viol +1 on a, +2 on b, mcast_rcvd +13 on b" ||
		failed "$name: counters: qkey_viol +$va on a, +$vb on b, mcast_rcvd +$rb on b (wanted 1, 2, 13)"
}

mcast_row mcast-v4 239.1.2.3 01:00:5e:01:02:03
mcast_row mcast-v6 ff0e::1:203 33:33:00:01:02:03 -x 1

# ---- the wire ----

daemon_stop a
daemon_stop b
check_wire "$WORK/mcast-a.pcap" 'infiniband.bth.destqp == 0xffffff' 26
# each datagram to a group: its mapped MAC, QPN 0xFFFFFF
if command -v tshark >/dev/null; then
	for want in "ip.dst == 239.1.2.3 && eth.dst == 01:00:5e:01:02:03" \
		"ipv6.dst == ff0e::1:203 && eth.dst == 33:33:00:01:02:03"; do
		n=$(HOME=$WORK tshark -r "$WORK/mcast-a.pcap" \
			-Y "$want && infiniband.bth.destqp == 0xffffff" 2>/dev/null | wc -l)
		[ "$n" -eq 13 ] && passed "tshark: 13 frames with $want, QPN 0xFFFFFF" ||
			failed "tshark: $n frames with $want, QPN 0xFFFFFF (wanted 13)"
	done
fi

finish mcast
