#!/usr/bin/env bash
# Unmodified programs from Debian's packages under rocemu-run, between two daemons in two
# network namespaces: ibv_devices and ibv_devinfo -v show the device as rxe would (rocemu0,
# node GUID from the MAC, PORT_ACTIVE, Ethernet, MTU, the RoCE v2 GID); ibv_rc_pingpong and
# ibv_srq_pingpong with -g 0 and -c (the receiver checks every buffer), default and 64 KiB x
# 10,000, with events and with the ibv_wr_* API; test/ibv_peer -O (SENDs answered at once
# complete before their answers); every perftest of the suite (write, read, send, atomic;
# bw and lat) with defaults, -a for the bandwidth tests (multi-packet sizes for the
# latency tests), --use_old_post_send, -e, --use-srq, -q 8 and --report_gbits, each
# exiting 0 on both sides with a table that parses; then both ends on one daemon
# (loopback), and test/ibv_abuse (bad lkeys, unsupported calls, queue overflow, destroyed
# objects, a killed peer) with the daemons still serving afterwards.
# In the sanitizer build, rocemu-run loads the sanitized layer (and its runtime) into them.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

ABUSE=$BUILD/test/ibv_abuse
needs_programs "ibverbs-utils and perftest" ibv_devices ibv_devinfo ibv_rc_pingpong \
	ibv_srq_pingpong ib_write_bw ib_atomic_lat
[ -x "$ABUSE" ] || fail "$ABUSE is missing (make $ABUSE)"
# (pairs.sh leaves the programs' own allocations unjudged: perftest frees little at exit)
unset ROCEMU_DEBUG

NETNS_MTU=9000 topology_up netns
MAC_A=$("${IN_A[@]}" cat "/sys/class/net/$IF_A/address")

# ---- the device ----

# As rxe: the EUI-64 of the MAC, first byte's U/L bit flipped, ff:fe in the middle.
expected_guid() {
	local m
	IFS=: read -r -a m <<<"$1"
	printf '%02x%s%sfffe%s%s%s' $((0x${m[0]} ^ 2)) "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
}

out=$("${IN_A[@]}" timeout 20 "$RUN" -D "$SOCK_A" ibv_devices 2>&1)
guid=$(expected_guid "$MAC_A")
if grep -qE "^[[:space:]]+rocemu0[[:space:]]+$guid\$" <<<"$out"; then
	passed "ibv_devices: rocemu0, node GUID $guid (EUI-64 of $MAC_A)"
else
	printf '%s\n' "$out" | sed 's/^/  | /'
	failed "ibv_devices: no rocemu0 with GUID $guid"
fi

out=$("${IN_A[@]}" timeout 20 "$RUN" -D "$SOCK_A" ibv_devinfo -v 2>&1)
ok=true
for want in "hca_id:[[:space:]]+rocemu0" "transport:[[:space:]]+InfiniBand" \
	"state:[[:space:]]+PORT_ACTIVE" "link_layer:[[:space:]]+Ethernet" \
	"active_mtu:[[:space:]]+4096" "GID\[  0\]:[[:space:]]+::ffff:$ADDR_A, RoCE v2" \
	"atomic_cap:[[:space:]]+ATOMIC_GLOB" "phys_state:[[:space:]]+LINK_UP"; do
	grep -qE "$want" <<<"$out" || { ok=false; echo "  ibv_devinfo -v lacks /$want/"; }
done
if $ok; then
	passed "ibv_devinfo -v: PORT_ACTIVE, Ethernet, active_mtu 4096, GID[0] ::ffff:$ADDR_A RoCE v2"
else
	printf '%s\n' "$out" | sed 's/^/  | /' | tail -n 30
	failed "ibv_devinfo -v"
fi

# ---- pairs of programs ----

pingpong rc-pingpong "$ADDR_B" ibv_rc_pingpong -g 0 -c
pingpong rc-pingpong-64k "$ADDR_B" ibv_rc_pingpong -g 0 -c -s 65536 -n 10000
pingpong rc-pingpong-events "$ADDR_B" ibv_rc_pingpong -g 0 -c -e
pingpong rc-pingpong-wr-api "$ADDR_B" ibv_rc_pingpong -g 0 -c -N
pingpong srq-pingpong "$ADDR_B" ibv_srq_pingpong -g 0 -c
pingpong srq-pingpong-64k "$ADDR_B" ibv_srq_pingpong -g 0 -c -s 65536 -n 10000
# The peer make interop runs against rxe (test/ibv_peer), here between two rocemu daemons,
# with 5000 SENDs answered at once, each of which must complete first (-O: nothing is lost
# here, and rocemu completes in arrival order; an answer overtook the ACK about once in
# 1000 rounds).
SERVER_ARGS=("$BUILD/test/ibv_peer" server)
pair ibv-peer "$ADDR_B" "$BUILD/test/ibv_peer" -O -r 5000 client &&
	passed "ibv_peer -O -r 5000: $(grep -c '^ok' "$OUT_C") checks;" \
		"$(grep -h '^# [0-9]* round' "$OUT_C" | cut -c3-)" ||
	{ show_both; failed "ibv_peer -O -r 5000"; }
grep -h '^FAIL' "$OUT_C" | sed 's/^/  /'
unset SERVER_ARGS

# -a: every size from 2 bytes to 8 MiB (23 rows; atomics have one size), 20 of each. They
# take the single-size rows' paths through the verbs layer, 23 connections' worth of time
# each: the sanitizer pass runs the single-size rows only.
ALL=23
for t in ib_write_bw ib_read_bw ib_send_bw; do
	perf "$t" 1 "$ADDR_B" "$t"
	case $BUILD in
	*/asan) ;;
	*) perf "$t-all" $ALL "$ADDR_B" "$t" -a -n 20 ;;
	esac
	perf "$t-old-post" 1 "$ADDR_B" "$t" --use_old_post_send -n 1000
done
# The latency tests pay perftest's clock calibration (about 0.3 s) at every size, so instead
# of -a (whose sizes the bandwidth rows cover) each gets multi-packet sizes of its own: the
# WRITE's receiver sees each message by polling its last byte, which must land last, so
# it gets a message ending one byte into a packet as well.
for t in ib_write_lat ib_read_lat ib_send_lat; do
	perf "$t" 1 "$ADDR_B" "$t"
done
perf ib_write_lat-4097 1 "$ADDR_B" ib_write_lat -s 4097 -n 200
perf ib_write_lat-1m 1 "$ADDR_B" ib_write_lat -s 1048576 -n 50
perf ib_read_lat-1m 1 "$ADDR_B" ib_read_lat -s 1048576 -n 50
perf ib_send_lat-1m 1 "$ADDR_B" ib_send_lat -s 1048576 -n 50
perf ib_atomic_bw 1 "$ADDR_B" ib_atomic_bw
perf ib_atomic_bw-cas 1 "$ADDR_B" ib_atomic_bw -A CMP_AND_SWAP -n 2000
perf ib_atomic_lat 1 "$ADDR_B" ib_atomic_lat
perf ib_send_bw-events 1 "$ADDR_B" ib_send_bw -e -n 2000
perf ib_send_lat-events 1 "$ADDR_B" ib_send_lat -e -n 2000
perf ib_read_lat-events 1 "$ADDR_B" ib_read_lat -e -n 2000
perf ib_send_bw-srq 1 "$ADDR_B" ib_send_bw --use-srq -n 2000
perf ib_write_bw-8qp 1 "$ADDR_B" ib_write_bw -q 8 -n 1000
perf ib_write_bw-gbits 1 "$ADDR_B" ib_write_bw --report_gbits -n 1000

# ---- both ends on one daemon (host a), over its own address ----

PAIR_SERVER=a pair loop-pingpong "$ADDR_A" ibv_rc_pingpong -g 0 -c -n 2000 &&
	grep -qE '^2000 iters in' "$OUT_C" && loop=$(counter a loopback_pkts) && [ "$loop" -ge 8000 ] &&
	passed "loopback: ibv_rc_pingpong -c -n 2000 between two QPs of daemon a ($loop packets)" ||
	{ show_both; failed "loopback: ibv_rc_pingpong on one daemon"; }
PAIR_SERVER=a pair loop-write-bw "$ADDR_A" ib_write_bw -s 1048576 -n 200 &&
	[ "$(table_rows "$OUT_C")" -eq 1 ] &&
	passed "loopback: ib_write_bw -s 1M on one daemon:$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print $4 " MB/s"; exit }' "$OUT_C")" ||
	{ show_both; failed "loopback: ib_write_bw on one daemon"; }

# ---- a program that abuses the API ----

# .99 of the namespaces' subnet: an address nobody answers ARP for
out=$("${IN_A[@]}" timeout 120 "$RUN" -D "$SOCK_A" "$ABUSE" "$ADDR_A" "$ROCEMU_NETNS_SUBNET.99" \
	2>"$WORK/abuse.err")
status=$?
out+=$'\n'$(cat "$WORK/abuse.err")
printf '%s\n' "$out" | grep -E '^(ok|FAIL)' | sed 's/^/  /'
if [ $status -eq 0 ] && ! grep -q '^FAIL' <<<"$out"; then
	passed "ibv_abuse: $(grep -c '^ok' <<<"$out") cases, each refused as it should be"
else
	printf '%s\n' "$out" | grep -vE '^(ok|FAIL)' | sed 's/^/  | /' | tail -n 20
	failed "ibv_abuse (exit $status)"
fi

# Quiet as a kernel device: 66 refused calls, and not a line of ours on the program's
# stderr; with ROCEMU_DEBUG=1 the daemon's reason for a refusal is there.
grep -q '^rocemu:' "$WORK/abuse.err" &&
	{ grep '^rocemu:' "$WORK/abuse.err" | head -n 3 | sed 's/^/  | /'
	  failed "ibv_abuse: the verbs layer wrote on stderr without ROCEMU_DEBUG"; } ||
	passed "ibv_abuse: every refusal an errno only, nothing on stderr"
why=$("${IN_A[@]}" env ROCEMU_DEBUG=1 timeout 20 "$RUN" -D "$SOCK_A" ibv_rc_pingpong -g 0 \
	-r 2000000 2>&1 >/dev/null | grep '^rocemu:')
[[ $why == *"ibv_create_"*" failed: Invalid argument: "* ]] &&
	passed "ROCEMU_DEBUG=1: $why" ||
	failed "ROCEMU_DEBUG=1 ibv_rc_pingpong -r 2000000 did not say why its QP was refused: '$why'"

# Asynchronous events: the link of host a goes down and up, then its daemon stops.
# Two watchers: one blocks in ibv_get_async_event; one polls async_fd as an event loop does
# (tgtd, UCX), which hears of the link only if the daemon tells the fd at once.
declare -A watcher
for mode in events events-polled; do
	"${IN_A[@]}" timeout 60 "$RUN" -D "$SOCK_A" "$ABUSE" "--$mode" "$ADDR_A" \
		>"$WORK/$mode.out" 2>&1 &
	watcher[$mode]=$!
	PIDS+=($!)
done
# wait_line PATTERN: up to 10 s for both watchers to print it
wait_line() {
	for _ in $(seq 100); do
		grep -qx "$1" "$WORK/events.out" && grep -qx "$1" "$WORK/events-polled.out" &&
			return 0
		sleep 0.1
	done
	return 1
}
if wait_line ready && "${IN_A[@]}" ip link set "$IF_A" down && wait_line 'event port error' &&
	"${IN_A[@]}" ip link set "$IF_A" up && wait_line 'event port active' &&
	daemon_stop a && wait_line 'event local catastrophic error' &&
	wait "${watcher[events]}" && wait "${watcher[events-polled]}"; then
	passed "async events, waited for and polled: $(grep '^event' "$WORK/events-polled.out" |
		sed 's/^event //' | paste -sd, | sed 's/,/, /g')"
else
	for mode in events events-polled; do sed "s/^/  | $mode: /" "$WORK/$mode.out"; done
	failed "async events: link down, link up, daemon gone"
fi
"${IN_A[@]}" ip link set "$IF_A" up
[ -n "${DAEMON_PID[a]:-}" ] && daemon_stop a
daemon_start a

# The daemons lived through all of it and still serve.
pingpong after-all "$ADDR_B" ibv_rc_pingpong -g 0 -c -n 100
daemons_alive

finish "verbs programs"
