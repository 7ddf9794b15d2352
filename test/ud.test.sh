#!/usr/bin/env bash
# UD queue pairs between two daemons in two network namespaces, both recording the wire:
# Debian's ibv_ud_pingpong (-c: the receiver checks every buffer; default, 4096 bytes x
# 2000, events) and perftest's ib_send_bw / ib_send_lat -c UD (default, -a, -e, 4 QPs),
# all unmodified under rocemu-run; then test/ud_peer, one QP sending to 16 QPs through an
# address handle each with every datagram checked (GRH area, src_qp, payload), a wrong
# Q_Key and a datagram with no receive posted dropped and counted (qkey_viol,
# drop_ud_no_recv), and answers through ibv_create_ah_from_wc. Every recorded frame must
# pass rocemuctl decode, the tests' reference ICRC (test/pcap_icrc) and tshark.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

RUN=$BUILD/rocemu-run
PEER=$BUILD/test/ud_peer
for p in ibv_ud_pingpong ib_send_bw ib_send_lat; do
	command -v "$p" >/dev/null ||
		skip "$p is missing: scripts/install-deps.sh installs ibverbs-utils and perftest"
done
[ -x "$PEER" ] && [ -x "$BUILD/test/pcap_icrc" ] || fail "$PEER or pcap_icrc is missing (make build-tests)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
FAILED=()
PASSED=0
trap teardown EXIT

passed() { echo "[${SECONDS}s] $*"; PASSED=$((PASSED + 1)); }
failed() { echo "FAILED: $1"; FAILED+=("$1"); }

NETNS_MTU=9000 topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/ud-$side.pcap --pcap-max 2G" daemon_start $side
done

# pair NAME PROGRAM ARGS...: the server in host b, the client in host a (given the
# server's address last), both under rocemu-run; OUT_S and OUT_C hold their output; 0 when
# both exit 0. SERVER_ARGS, when set, replaces ARGS on the server's command line.
pair() {
	local name=$1 server status
	shift
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	"${IN_B[@]}" timeout 120 "$RUN" -D "$SOCK_B" "${SERVER_ARGS[@]:-$@}" >"$OUT_S" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	sleep 0.3
	"${IN_A[@]}" timeout 120 "$RUN" -D "$SOCK_A" "$@" "$ADDR_B" >"$OUT_C" 2>&1 </dev/null
	status=$?
	wait "$server" || status=$?
	return $status
}

show_both() {
	sed 's/^/  client| /' "$OUT_C" | tail -n 12
	sed 's/^/  server| /' "$OUT_S" | tail -n 12
}

pingpong() {
	local name=$1 iters
	shift
	if pair "$name" "$@" &&
		iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$OUT_C") &&
		grep -qE '^[0-9]+ iters in' "$OUT_S"; then
		passed "$name: $*: $iters"
	else
		show_both
		failed "$name: $*"
	fi
}

table_rows() {
	awk '/#bytes/ { t = 1; next } t && /^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { n++ }
	     END { print n + 0 }' "$1"
}

# perf NAME ROWS PROGRAM ARGS...: a perftest pair whose client prints ROWS table rows (once
# more when perftest could not calibrate its clock on a busy machine).
perf() {
	local name=$1 rows=$2 got last
	shift 2
	pair "$name" "$@" ||
		{ grep -q 'Correlation coefficient r^2' "$OUT_C" "$OUT_S" && pair "$name" "$@"; }
	if [ $? -eq 0 ] && got=$(table_rows "$OUT_C") && [ "$got" -eq "$rows" ]; then
		last=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { l = $0 } END { print l }' "$OUT_C")
		passed "$name: $*: $got row(s), last:$(tr -s ' \t' ' ' <<<"$last")"
	else
		show_both
		failed "$name: $* (table rows ${got:-none}, wanted $rows)"
	fi
}

pingpong ud-pingpong ibv_ud_pingpong -g 0 -c
pingpong ud-pingpong-4k ibv_ud_pingpong -g 0 -c -s 4096 -n 2000
pingpong ud-pingpong-events ibv_ud_pingpong -g 0 -c -e -n 500
perf ib_send_bw-ud 1 ib_send_bw -c UD
# -a on UD: every size from 2 bytes to the MTU, 4096 (12 rows)
perf ib_send_bw-ud-all 12 ib_send_bw -c UD -a -n 100
perf ib_send_bw-ud-events 1 ib_send_bw -c UD -e -n 1000
perf ib_send_bw-ud-4qp 1 ib_send_bw -c UD -q 4 -n 1000
perf ib_send_lat-ud 1 ib_send_lat -c UD
perf ib_send_lat-ud-all 12 ib_send_lat -c UD -a -n 100

# One QP to 16, the datagrams checked one by one, two that must be dropped and counted.
viol0=$(counter b qkey_viol) norecv0=$(counter b drop_ud_no_recv)
SERVER_ARGS=("$PEER" server)
if pair ud-peer "$PEER" client; then
	passed "ud_peer: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks"
else
	show_both
	failed "ud_peer"
fi
grep -hE '^(ok|FAIL)' "$OUT_C" "$OUT_S" | sed 's/^/  /'
unset SERVER_ARGS
viol=$(( $(counter b qkey_viol) - viol0 )) norecv=$(( $(counter b drop_ud_no_recv) - norecv0 ))
[ "$viol" -eq 1 ] && [ "$norecv" -eq 1 ] &&
	passed "counters: qkey_viol +1 and drop_ud_no_recv +1 on the receiving daemon" ||
	failed "counters: qkey_viol +$viol, drop_ud_no_recv +$norecv (wanted +1 each)"

# ---- the wire of all of it ----

daemon_stop a
daemon_stop b
export HOME=$WORK
NO_GUESS=()
for h in eth_over_ib fc_infiniband sdp_infiniband iser_infiniband lnet_ib rpcrdma_infiniband \
	smb_direct_infiniband smcr_infiniband nvme_rdma mellanox_eoib; do
	tshark --disable-heuristic "$h" -r "$WORK/ud-a.pcap" -c 1 >/dev/null 2>&1 &&
		NO_GUESS+=(--disable-heuristic "$h")
done
for cap in "$WORK/ud-a.pcap" "$WORK/ud-b.pcap"; do
	name=$(basename "$cap")
	out=$("$BUILD/rocemuctl" decode "$cap" 2>&1)
	ud=$(grep -c 'UD_SEND_ONLY.* deth qkey 0x' <<<"$out")
	bad=$(grep -E '^ +[0-9]+ ' <<<"$out" | grep -vc ' icrc ok$')
	[ "$bad" -eq 0 ] && [ "$ud" -gt 1000 ] &&
		passed "rocemuctl decode: $name: $ud UD SEND_ONLY frames with their DETH, every ICRC valid" ||
		failed "rocemuctl decode: $name: $bad frames not ok, $ud UD SEND_ONLY"
	ref=$("$BUILD/test/pcap_icrc" "$cap") && passed "reference ICRC: $ref" ||
		failed "reference ICRC: $ref"
	if command -v tshark >/dev/null; then
		bad=$(tshark "${NO_GUESS[@]}" -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= warning' \
			-T fields -e frame.number 2>/dev/null | wc -l)
		total=$(tshark -r "$cap" -Y 'infiniband.deth' 2>/dev/null | wc -l)
		[ "$bad" -eq 0 ] && [ "$total" -gt 0 ] &&
			passed "tshark: $name: $total frames with a DETH, none malformed or warned about" ||
			failed "tshark: $name: $bad frames malformed or with warnings ($total with a DETH)"
	fi
done

echo "ud: $PASSED passed, ${#FAILED[@]} failed"
[ ${#FAILED[@]} -eq 0 ] || { printf 'FAILED: %s\n' "${FAILED[@]}"; exit 1; }
