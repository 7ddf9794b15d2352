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
require_root

RUN=$BUILD/rocemu-run
for p in ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ibv_devinfo; do
	command -v "$p" >/dev/null ||
		skip "$p is missing: scripts/install-deps.sh installs ibverbs-utils and perftest"
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
FAILED=()
PASSED=0
PORT=$((30000 + RANDOM % 5000))
trap teardown EXIT

passed() { echo "[${SECONDS}s] $*"; PASSED=$((PASSED + 1)); }
failed() { echo "FAILED: $1"; FAILED+=("$1"); }

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

# rdma_write SIZE: one transfer to the server's IPv6 address, verified.
rdma_write() {
	local size=$1 server
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s "$size" \
		--verify >"$WORK/rw.server" 2>&1 &
	server=$!
	PIDS+=($server)
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s "$size" -n 10 \
		--verify "$ADDR6_B" >"$WORK/rw.client" 2>&1 && wait $server
}
for size in 1 3 4095 4096 4097 1M; do
	rdma_write $size && grep -q 'verify: OK' "$WORK/rw.client" &&
		passed "rdma-write -s $size -n 10 --verify to $ADDR6_B: byte-exact" ||
		{ tail -n 5 "$WORK/rw.client" "$WORK/rw.server" | sed 's/^/  | /'
		  failed "rdma-write -s $size to $ADDR6_B"; }
done

# pair NAME TCP_ADDR PROGRAM ARGS...: the server in b, the client in a given TCP_ADDR
# last; SERVER_ARGS, when set, replaces ARGS on the server's command line.
pair() {
	local name=$1 to=$2 server status
	shift 2
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	"${IN_B[@]}" timeout 120 "$RUN" -D "$SOCK_B" "${SERVER_ARGS[@]:-$@}" >"$OUT_S" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	sleep 0.3
	"${IN_A[@]}" timeout 120 "$RUN" -D "$SOCK_A" "$@" "$to" >"$OUT_C" 2>&1 </dev/null
	status=$?
	wait "$server" || status=$?
	return $status
}

show_both() {
	sed 's/^/  client| /' "$OUT_C" | tail -n 10
	sed 's/^/  server| /' "$OUT_S" | tail -n 10
}

# ibv_*_pingpong and perftest exchange over TCP on IPv4 (their servers listen there) and
# carry RoCE over the GID they are given; ib_*_bw print the GIDs they connect with.
pingpong() {
	local name=$1 iters
	shift
	if pair "$name" "$ADDR_B" "$@" && grep -q "GID $ADDR6_B" "$OUT_C" &&
		iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$OUT_C"); then
		passed "$name: $*: over $ADDR6_A -> $ADDR6_B: $iters"
	else
		show_both
		failed "$name: $*"
	fi
}

perf() {
	local name=$1 row
	shift
	pair "$name" "$ADDR_B" "$@" ||
		{ grep -q 'Correlation coefficient r^2' "$OUT_C" "$OUT_S" && pair "$name" "$ADDR_B" "$@"; }
	if [ $? -eq 0 ] && row=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print; exit }' "$OUT_C") &&
		[ -n "$row" ]; then
		passed "$name: $*:$(tr -s ' \t' ' ' <<<"$row")"
	else
		show_both
		failed "$name: $*"
	fi
}

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
pingpong rc-pingpong-v6 ibv_rc_pingpong -g 1 -c -n 5000
wait $v4client && wait $v4server && grep -q "GID ::ffff:$ADDR_B" "$WORK/v4.client" &&
	passed "dual stack: ibv_rc_pingpong -g 0 over IPv4 at the same time: $(grep -oE '^[0-9]+ iters' "$WORK/v4.client")" ||
	{ tail -n 4 "$WORK/v4.client" | sed 's/^/  | /'; failed "dual stack: the IPv4 pingpong beside it"; }
pingpong ud-pingpong-v6 ibv_ud_pingpong -g 1 -c
perf write-bw-v6 ib_write_bw -x 1 -s 1048576 -n 200
perf send-bw-v6 ib_send_bw -x 1 -n 1000
perf read-bw-v6 ib_read_bw -x 1 -s 65536 -n 200
perf ud-send-bw-v6 ib_send_bw -c UD -x 1 -n 1000

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
export HOME=$WORK
for cap in "$WORK/v6-a.pcap" "$WORK/v6-b.pcap"; do
	name=$(basename "$cap")
	out=$("$BUILD/rocemuctl" decode --json "$cap" 2>/dev/null)
	v6=$(grep -c '"ip_version":6' <<<"$out")
	bad=$(grep -vc '"icrc_ok":true' <<<"$out")
	[ "$bad" -eq 0 ] && [ "$v6" -gt 10000 ] &&
		passed "rocemuctl decode: $name: $v6 IPv6 frames, every ICRC valid" ||
		failed "rocemuctl decode: $name: $bad frames not ok, $v6 IPv6"
	ref=$("$BUILD/test/pcap_icrc" "$cap") && passed "reference ICRC: $ref" || failed "reference ICRC: $ref"
	# Wireshark calls a zero UDP checksum over IPv6 illegal (RFC 8200); RoCEv2 senders
	# leave it 0 over IPv6 too, as over IPv4 (the ICRC covers the datagram): that one
	# expert error is not held against a frame
	if command -v tshark >/dev/null; then
		bad=$(tshark --disable-heuristic nvme_rdma --disable-heuristic iser_infiniband \
			--disable-heuristic smb_direct_infiniband --disable-heuristic rpcrdma_infiniband \
			--disable-heuristic sdp_infiniband --disable-heuristic eth_over_ib \
			-r "$cap" -Y '(_ws.malformed || _ws.expert.severity >= warning) && !udp.checksum.zero' \
			-T fields -e frame.number 2>/dev/null | wc -l)
		total=$(tshark -r "$cap" -Y 'ipv6 && infiniband' 2>/dev/null | wc -l)
		[ "$bad" -eq 0 ] && [ "$total" -gt 0 ] &&
			passed "tshark: $name: $total IPv6 RoCE frames, none malformed or warned about" ||
			failed "tshark: $name: $bad frames malformed or with warnings"
	fi
done

# IPv6 only: the daemons serve nothing but their IPv6 addresses, so that is GID 0.
V4_B=$ADDR_B
ADDR_A=$ADDR6_A ADDR_B=$ADDR6_B ADDR6_A= ADDR6_B=
daemon_start a
daemon_start b
status=$("$BUILD/rocemuctl" -s "$SOCK_B" status)
grep -q "^GID\[0\]: *$ADDR_B (RoCE v2)" <<<"$status" && ! grep -q '^GID\[1\]' <<<"$status" &&
	passed "IPv6 only: GID 0 is $ADDR_B, and the only one" ||
	{ sed 's/^/  | /' <<<"$status"; failed "IPv6 only: the GID table"; }
ADDR6_B=$ADDR_B    # where rdma_write sends and what pingpong's client must print
rdma_write 1M && grep -q 'verify: OK' "$WORK/rw.client" &&
	passed "IPv6 only: rdma-write -s 1M -n 10 --verify: byte-exact" ||
	{ tail -n 5 "$WORK/rw.client" | sed 's/^/  | /'; failed "IPv6 only: rdma-write"; }
ADDR_B=$V4_B       # pingpong's TCP: the kernel still has the IPv4 address
pingpong rc-pingpong-v6only ibv_rc_pingpong -g 0 -c -n 1000

echo "ipv6: $PASSED passed, ${#FAILED[@]} failed"
[ ${#FAILED[@]} -eq 0 ] || { printf 'FAILED: %s\n' "${FAILED[@]}"; exit 1; }
