#!/usr/bin/env bash
# make interop: rocemud against the Linux kernel's Soft-RoCE (rdma_rxe) in a virtual machine
# (scripts/interop-vm.sh), live, both ways: Debian's perftest on both sides, unmodified,
# plain on rxe in the guest and under rocemu-run on this host, with rocemu as the requester
# (its perftest is the client) and as the responder (rxe's is). Then every frame of the
# run, from both sides, as rocemud recorded it (--pcap), through rocemuctl decode (every
# ICRC recomputed) and tshark (no malformed frame). One line per case; the failures are
# listed at the end. Bounded: each program has a timeout, the guest is powered off (or
# killed by pid) and the namespace removed whatever happens.
#   test/interop.sh [BUILD]
set -u
ROCEMU_BUILD=$(cd "${1:-${ROCEMU_BUILD:-build}}" && pwd) || exit 1
source "$(dirname "$0")/daemons.sh"
source "$ROCEMU_ROOT/scripts/interop-vm.sh"
require_root

NS=rxe$((RANDOM % 100000))
HOST_ADDR=10.77.$((RANDOM % 250 + 1))
ADDR_R=$HOST_ADDR.1      # rocemud, on the tap
ADDR_X=$HOST_ADDR.2      # rxe0, in the guest
SOCK=$WORK/rocemu.sock
PCAP=$WORK/interop.pcap
RUN=$BUILD/rocemu-run
PEER=$BUILD/test/ibv_peer
UD_PEER=$BUILD/test/ud_peer
FAILED=()
PASSED=0
DAEMON=

cleanup() {
	vm_stop
	[ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	teardown
}
trap cleanup EXIT

for p in qemu-system-x86_64 ib_write_bw tshark; do
	command -v "$p" >/dev/null || fail "$p is missing (scripts/install-deps.sh installs it)"
done
[ -x "$PEER" ] && [ -x "$UD_PEER" ] || fail "$PEER or $UD_PEER is missing (make interop builds them)"
[ -x /bin/busybox ] || fail "/bin/busybox is missing (scripts/install-deps.sh installs busybox-static)"
vm_prepare || fail "cannot prepare the guest's kernel and initramfs"

passed() { echo "[${SECONDS}s] $*"; PASSED=$((PASSED + 1)); }
failed() { echo "FAILED: $1"; FAILED+=("$1"); }

ip netns add "$NS" || fail "ip netns add $NS"
ip netns exec "$NS" ip link set lo up
vm_start "$NS" "$WORK" "$ADDR_R" "$ADDR_X" || fail "the rxe guest did not come up"
# start_rocemud PCAP: rocemud on the tap, recording to PCAP (all of it: no rotation)
start_rocemud() {
	rm -f "$SOCK"
	ip netns exec "$NS" "$BUILD/rocemud" -i "$VM_TAP" -a "$ADDR_R" -s "$SOCK" -d --pcap "$1" \
		--pcap-max 4G \
		>>"$WORK/rocemud.log" 2>&1 &
	DAEMON=$!
	for _ in $(seq 100); do
		[ -S "$SOCK" ] && "$BUILD/rocemuctl" -s "$SOCK" status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "rocemud did not start: $(cat "$WORK/rocemud.log")"
}

stop_rocemud() {
	kill "$DAEMON" && wait "$DAEMON" 2>/dev/null
	DAEMON=
}

start_rocemud "$PCAP"

# rxe's GID table also holds the IPv6 link-local GID (rocemu has no IPv6 yet): the guest's
# perftest is told the index of its IPv4 one.
RXE_GID=$(vm_run 30 "cd /sys/class/infiniband/rxe0/ports/1/gids && for g in *; do
	grep -qi ':ffff:$(printf '%02x%02x:%02x%02x' ${ADDR_X//./ })\$' \$g && echo \$g && break; done")
[ -n "$RXE_GID" ] || fail "rxe0 has no GID for $ADDR_X"
echo "rxe0's GID $RXE_GID is ::ffff:$ADDR_X"

# run_pair NAME ROCEMU_SIDE SERVER CLIENT: the command lines SERVER and CLIENT (words, with
# @GID@ for the side's GID index and @PEER@ for the other side's address), rocemu's side
# "client" or "server", rxe's the other. Sets RC_HOST, RC_GUEST and CLIENT_OUT (the file
# with the client's output); the server's and client's outputs are NAME.host/NAME.guest.
run_pair() {
	local name=$1 side=$2 server=$3 client=$4 pid host guest
	if [ "$side" = client ]; then
		guest=${server//@GID@/$RXE_GID}
		host=${client//@GID@/0}
		vm_spawn "$name" "timeout 100 $guest"
		sleep 2   # the guest is slow to listen under TCG
		ip netns exec "$NS" timeout 100 "$RUN" -D "$SOCK" ${host//@PEER@/$ADDR_X} \
			>"$WORK/$name.host" 2>&1
		RC_HOST=$?
		vm_wait "$name" 110 >"$WORK/$name.guest"
		RC_GUEST=$?
		CLIENT_OUT=$WORK/$name.host
	else
		host=${server//@GID@/0}
		guest=${client//@GID@/$RXE_GID}
		ip netns exec "$NS" timeout 100 "$RUN" -D "$SOCK" $host >"$WORK/$name.host" 2>&1 &
		pid=$!
		PIDS+=($pid)
		sleep 0.5
		vm_run 110 "timeout 100 ${guest//@PEER@/$ADDR_R}" >"$WORK/$name.guest"
		RC_GUEST=$?
		wait "$pid"
		RC_HOST=$?
		CLIENT_OUT=$WORK/$name.guest
	fi
}

# perf_once NAME ROCEMU_SIDE TOOL ARGS...: perftest's TOOL between the two; 0 when both exit
# 0 and the client printed a row of numbers (in ROW).
perf_once() {
	local name=$1 side=$2
	shift 2
	run_pair "$name" "$side" "$* -x @GID@" "$* -x @GID@ @PEER@"
	ROW=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print; exit }' "$CLIENT_OUT")
	STATUS="rocemu exit $RC_HOST, rxe exit $RC_GUEST"
	[ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ -n "$ROW" ]
}

# perf NAME ROCEMU_SIDE TOOL ARGS...: one case. perftest fits its clock rate against
# gettimeofday for each report and gives up when the fit is poor ("Correlation coefficient
# r^2 ... < 0.9"), which an emulated guest's clock often makes it: such a run goes again.
perf() {
	local name=$1 side=$2 ok=false
	shift 2
	if perf_once "$name" "$side" "$@"; then
		ok=true
	elif grep -q 'Correlation coefficient r^2' "$WORK/$name.host" "$WORK/$name.guest"; then
		echo "  $name: perftest could not fit its clock (r^2 < 0.9); once more"
		perf_once "$name" "$side" "$@" && ok=true
	fi
	if $ok; then
		passed "$name: rocemu $side, rxe $([ "$side" = client ] && echo server || echo client): $*:$(tr -s ' \t' ' ' <<<"$ROW")"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | grep -v -e '^ *GID:' | tail -n 12
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | grep -v -e '^ *GID:' | tail -n 20
		failed "$name: rocemu $side: $* ($STATUS)"
	fi
}

# peer NAME ROCEMU_SIDE [PROGRAM]: test/ibv_peer between the two (the client WRITEs 1,
# 4095, 4096, 4097 bytes and 1 MiB from a PSN below the 24-bit wrap, the server checks each
# byte and the canaries after it; then a wrong rkey and one byte past the MR, refused with
# the target unchanged), or test/ud_peer (one QP sends to 16 UD QPs, every datagram and
# GRH area checked, answers through ibv_create_ah_from_wc): each of the lines either end
# prints is a case here.
peer() {
	local name=$1 side=$2 prog=${3:-$PEER} line
	run_pair "$name" "$side" "$prog -x @GID@ server" "$prog -x @GID@ client @PEER@"
	while IFS= read -r line; do
		case $line in
		"ok "*) passed "$name: rocemu $side: ${line#ok }" ;;
		"FAIL "*) failed "$name: rocemu $side: ${line#FAIL }" ;;
		esac
	done < <(cat "$WORK/$name.host" "$WORK/$name.guest")
	if [ "$RC_HOST" -ne 0 ] || [ "$RC_GUEST" -ne 0 ] || ! grep -q '^ok' "$CLIENT_OUT"; then
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 6
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 6
		failed "$name: rocemu $side: $(basename "$prog") (rocemu exit $RC_HOST, rxe exit $RC_GUEST)"
	fi
}

# ud_pingpong NAME ROCEMU_SIDE ARGS...: Debian's ibv_ud_pingpong between the two (-c: the
# receiver checks every buffer).
ud_pingpong() {
	local name=$1 side=$2 iters
	shift 2
	run_pair "$name" "$side" "ibv_ud_pingpong -g @GID@ -c $*" "ibv_ud_pingpong -g @GID@ -c $* @PEER@"
	iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$CLIENT_OUT")
	if [ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ -n "$iters" ]; then
		passed "$name: rocemu $side: ibv_ud_pingpong -c $*: $iters"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 6
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 6
		failed "$name: rocemu $side: ibv_ud_pingpong $* (rocemu exit $RC_HOST, rxe exit $RC_GUEST)"
	fi
}

for side in client server; do
	peer "peer-$side" $side
	perf "write-4k-$side" $side ib_write_bw -s 4096 -n 200
	perf "write-1m-$side" $side ib_write_bw -s 1048576 -n 10
	perf "write-lat-$side" $side ib_write_lat -s 2 -n 200
	perf "send-4k-$side" $side ib_send_bw -s 4096 -n 200
	perf "send-lat-$side" $side ib_send_lat -s 2 -n 200
	perf "read-64k-$side" $side ib_read_bw -s 65536 -n 50
	perf "read-lat-$side" $side ib_read_lat -s 2 -n 200
	perf "atomic-$side" $side ib_atomic_bw -n 200
	perf "atomic-cas-$side" $side ib_atomic_bw -A CMP_AND_SWAP -n 200
	ud_pingpong "ud-pingpong-$side" $side -s 1024 -n 200
	perf "ud-send-$side" $side ib_send_bw -c UD -n 200
	perf "ud-lat-$side" $side ib_send_lat -c UD -n 200
	peer "ud-peer-$side" $side "$UD_PEER"
done

# Loss, duplication and reordering, injected by rocemud on both directions while it talks
# to rxe: each side's retransmissions (rxe's on a timeout or a sequence NAK from us; ours on
# rxe's NAKs) must still deliver every byte.
LOSS=drop=0.02,dup=0.01,reorder=0.05,seed=5
"$BUILD/rocemuctl" -s "$SOCK" fault "$LOSS" >/dev/null || failed "rocemuctl fault $LOSS"
before=$("$BUILD/rocemuctl" -s "$SOCK" stats)
for side in client server; do
	peer "loss-peer-$side" $side
	perf "loss-write-$side" $side ib_write_bw -s 65536 -n 50
	perf "loss-read-$side" $side ib_read_bw -s 65536 -n 20
	perf "loss-send-$side" $side ib_send_bw -s 4096 -n 100
done
"$BUILD/rocemuctl" -s "$SOCK" fault off >/dev/null
after=$("$BUILD/rocemuctl" -s "$SOCK" stats)
echo "under $LOSS, rocemud's counters moved by: $(for c in fault_dropped fault_duplicated \
	fault_reordered completer_retry_err timeouts rcvd_seq_err nak_seq_sent duplicate_request \
	out_of_seq_request; do
	b=$(awk -v n=$c '$1 == n { print $2 }' <<<"$before"); a=$(awk -v n=$c '$1 == n { print $2 }' <<<"$after")
	printf '%s +%s, ' "$c" $((a - b)); done | sed 's/, $//')"

# Both links at MTU 9000: path MTU 4096 on both sides, multi-packet messages again.
stop_rocemud
ip netns exec "$NS" ip link set "$VM_TAP" mtu 9000
vm_run 30 "ip link set eth0 mtu 9000" >/dev/null || failed "the guest's eth0 refused MTU 9000"
start_rocemud "$WORK/interop-4096.pcap"
rxe_mtu=$(vm_run 30 "ibv_devinfo -d rxe0 | awk '/active_mtu/ { print \$2 }'")
echo "MTU 9000 on both links: rxe0 active_mtu $rxe_mtu, rocemud: $("$BUILD/rocemuctl" -s "$SOCK" status | grep -i mtu | tr -s ' ' | head -n 2 | paste -sd';')"
for side in client server; do
	peer "mtu4096-peer-$side" $side
	perf "mtu4096-write-1m-$side" $side ib_write_bw -s 1048576 -n 10
	perf "mtu4096-send-64k-$side" $side ib_send_bw -s 65536 -n 50
	perf "mtu4096-read-1m-$side" $side ib_read_bw -s 1048576 -n 10
done

# Different MTUs: rxe's link back at 1500 (active MTU 1024), rocemu's still at 9000 (4096).
# ibv_peer connects at the smaller of the two, as programs that exchange it do; perftest
# is told with -m, as it must be on any such pair.
vm_run 30 "ip link set eth0 mtu 1500" >/dev/null || failed "the guest's eth0 refused MTU 1500"
for side in client server; do
	peer "mixed-mtu-peer-$side" $side
	perf "mixed-mtu-write-1m-$side" $side ib_write_bw -s 1048576 -n 10 -m 1024
done
stop_rocemud

# Every frame both ways, as rocemud saw them: ours as sent, rxe's as received.
out=$("$BUILD/rocemuctl" decode "$PCAP" 2>&1 && "$BUILD/rocemuctl" decode "$WORK/interop-4096.pcap" 2>&1)
status=$?
frames=$(grep -c ' icrc ok$' <<<"$out")
bad=$(grep -E '^ +[0-9]+ ' <<<"$out" | grep -vc ' icrc ok$')
if [ $status -eq 0 ] && [ "$frames" -gt 0 ] && [ "$bad" -eq 0 ]; then
	passed "rocemuctl decode: $frames frames of both sides, every ICRC valid"
else
	printf '%s\n' "$out" | grep -E '^ +[0-9]+ ' | grep -v ' icrc ok$' | head -n 10 | sed 's/^/  | /'
	failed "rocemuctl decode $PCAP: exit $status, $bad frame(s) not ok"
fi
# perftest's SEND payloads are arbitrary bytes, which Wireshark's heuristics would guess
# are iSER, NVMe, SMB Direct or Ethernet frames and then find malformed: those guesses are
# off, so what is judged is the RoCE headers.
export HOME=$WORK
NO_GUESS=()
for h in eth_over_ib fc_infiniband sdp_infiniband iser_infiniband lnet_ib rpcrdma_infiniband \
	smb_direct_infiniband smcr_infiniband nvme_rdma mellanox_eoib; do
	tshark --disable-heuristic "$h" -r "$PCAP" -c 1 >/dev/null 2>&1 && NO_GUESS+=(--disable-heuristic "$h")
done
for cap in "$PCAP" "$WORK/interop-4096.pcap"; do
	bad=$(tshark "${NO_GUESS[@]}" -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= warning' \
		-T fields -e frame.number 2>/dev/null | wc -l)
	total=$(tshark -r "$cap" -Y infiniband 2>/dev/null | wc -l)
	if [ "$bad" -eq 0 ] && [ "$total" -gt 0 ]; then
		passed "tshark: $(basename "$cap"): $total frames decoded as InfiniBand, none malformed or warned about"
	else
		tshark "${NO_GUESS[@]}" -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= warning' \
			-T fields -e frame.number -e _ws.col.Info -e _ws.expert.message 2>/dev/null |
			head -n 8 | sed 's/^/  | /'
		failed "tshark: $(basename "$cap"): $bad of $total frames malformed or with warnings"
	fi
done

# The captures stay for a look in Wireshark: what rxe sends is the best test our parser has.
mkdir -p "$INTEROP_CACHE" && cp "$PCAP" "$WORK/interop-4096.pcap" "$INTEROP_CACHE/" &&
	echo "captures of this run: $INTEROP_CACHE/interop.pcap, $INTEROP_CACHE/interop-4096.pcap"
echo "interop: $PASSED passed, ${#FAILED[@]} failed"
[ ${#FAILED[@]} -eq 0 ] || { printf 'FAILED: %s\n' "${FAILED[@]}"; exit 1; }
