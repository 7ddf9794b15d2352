#!/usr/bin/env bash
# RoCEv2 over IPv6 between the two namespaces. First a dual-stack pair (each daemon serves
# its IPv4 address as GID 0 and its IPv6 address as GID 1, both recording the wire):
# rocemuctl status and ibv_devinfo list both GIDs; rdma-write byte-exact at the sizes of
# the WRITE tests to the IPv6 address; ibv_rc_pingpong -g 1 -c, perftest's ib_write_bw,
# ib_send_bw and ib_read_bw -x 1, ibv_ud_pingpong -g 1 -c, ib_send_bw -c UD -x 1 and
# test/ud_peer -x 1 (every datagram's GRH area must be the IPv6 header) over the IPv6
# GIDs, unmodified under rocemu-run, with an IPv4 pingpong at the same time; every frame
# recorded passes rocemuctl decode, the reference ICRC and tshark. Then an IPv6-only pair:
# GID 0 is the IPv6 address, and rdma-write and ibv_rc_pingpong -g 0 run over it.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

for p in ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ibv_devinfo; do
	command -v "$p" >/dev/null ||
		skip "$p is missing: scripts/install-deps.sh installs ibverbs-utils and perftest"
done
NETNS_IPV6=1 NETNS_MTU=9000 topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/v6-$side.pcap --pcap-max 2G" daemon_start $side
done

status=$("$BUILD/rocemuctl" -s "$SOCK_A" status)
grep -q "^GID\[0\]: *::ffff:$ADDR_A (RoCE v2)" <<<"$status" &&
	grep -q "^GID\[1\]: *$ADDR6_A (RoCE v2)" <<<"$status" &&
	passed "rocemuctl status: GID 0 ::ffff:$ADDR_A, GID 1 $ADDR6_A" ||
	{ sed 's/^/  | /' <<<"$status"; failed "rocemuctl status lists both GIDs"; }
out=$("${IN_A[@]}" timeout 20 "$RUN" -D "$SOCK_A" ibv_devinfo -v 2>&1)
grep -qE "GID\[  1\]:[[:space:]]+$ADDR6_A, RoCE v2" <<<"$out" &&
	passed "ibv_devinfo -v: GID[1] $ADDR6_A, RoCE v2" ||
	{ grep GID <<<"$out" | sed 's/^/  | /'; failed "ibv_devinfo -v lists the IPv6 GID"; }

for size in 1 3 4095 4096 4097 1M; do
	write_verified $size "$ADDR6_B"
done

# ibv_*_pingpong and perftest exchange over TCP on IPv4 (their servers listen there) and
# carry RoCE over the GID they are given.
# An IPv4 pingpong runs beside the IPv6 one: both GIDs of one daemon at once.
"${IN_B[@]}" timeout 60 "$RUN" -D "$SOCK_B" ibv_rc_pingpong -g 0 -c -p 18600 -n 5000 \
	>"$WORK/v4.server" 2>&1 </dev/null &
v4server=$!
PIDS+=($v4server)
sleep 0.3
"${IN_A[@]}" timeout 60 "$RUN" -D "$SOCK_A" ibv_rc_pingpong -g 0 -c -p 18600 -n 5000 "$ADDR_B" \
	>"$WORK/v4.client" 2>&1 </dev/null &
v4client=$!
PIDS+=($v4client)
PINGPONG_GID=$ADDR6_B pingpong rc-pingpong-v6 "$ADDR_B" ibv_rc_pingpong -g 1 -c -n 5000
wait $v4client && wait $v4server && grep -q "GID ::ffff:$ADDR_B" "$WORK/v4.client" &&
	passed "dual stack: ibv_rc_pingpong -g 0 over IPv4 at the same time: $(grep -oE '^[0-9]+ iters' "$WORK/v4.client")" ||
	{ tail -n 4 "$WORK/v4.client" | sed 's/^/  | /'; failed "dual stack: the IPv4 pingpong beside it"; }
PINGPONG_GID=$ADDR6_B pingpong ud-pingpong-v6 "$ADDR_B" ibv_ud_pingpong -g 1 -c
perf write-bw-v6 1 "$ADDR_B" ib_write_bw -x 1 -s 1048576 -n 50
perf send-bw-v6 1 "$ADDR_B" ib_send_bw -x 1 -n 250
perf read-bw-v6 1 "$ADDR_B" ib_read_bw -x 1 -s 65536 -n 200
perf ud-send-bw-v6 1 "$ADDR_B" ib_send_bw -c UD -x 1 -n 1000

SERVER_ARGS=("$BUILD/test/ud_peer" -x 1 server)
if pair ud-peer-v6 "$ADDR_B" "$BUILD/test/ud_peer" -x 1 client; then
	passed "ud_peer -x 1: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks, GRH areas the IPv6 headers"
else
	show_both
	failed "ud_peer -x 1"
fi
unset SERVER_ARGS

daemon_stop a
daemon_stop b
# Each daemon's capture holds both directions, so tshark reads a's; b's gets the ICRC checks.
check_wire "$WORK/v6-a.pcap" 'ipv6 && infiniband' 10000
CHECK_WIRE_NO_TSHARK=1 check_wire "$WORK/v6-b.pcap" 'ipv6 && infiniband' 10000

# IPv6 only: the daemons serve nothing but their IPv6 addresses, so that is GID 0.
V4_B=$ADDR_B
ADDR_A=$ADDR6_A ADDR_B=$ADDR6_B ADDR6_A= ADDR6_B=
daemon_start a
daemon_start b
status=$("$BUILD/rocemuctl" -s "$SOCK_B" status)
grep -q "^GID\[0\]: *$ADDR_B (RoCE v2)" <<<"$status" && ! grep -q '^GID\[1\]' <<<"$status" &&
	passed "IPv6 only: GID 0 is $ADDR_B, and the only one" ||
	{ sed 's/^/  | /' <<<"$status"; failed "IPv6 only: the GID table"; }
ADDR6_B=$ADDR_B    # what pingpong's client must print
write_verified 1M "$ADDR_B"
ADDR_B=$V4_B       # pingpong's TCP: the kernel still has the IPv4 address
PINGPONG_GID=$ADDR6_B pingpong rc-pingpong-v6only "$ADDR_B" ibv_rc_pingpong -g 0 -c -n 1000

finish ipv6
