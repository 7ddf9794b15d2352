#!/usr/bin/env bash
# UCX (Debian's ucx-utils, 1.13) on rocemu, unmodified, under rocemu-run: ucx_info -d lists
# the device rocemu0 as an IB memory domain with the rc_verbs and ud_verbs transports (and
# does not without rocemu-run); then ucx_perftest between two daemons in two network
# namespaces (UCX's own out-of-band exchange over TCP, -p), over rc_verbs (ud_verbs beside
# it for UCX's wire-up only) and over ud_verbs alone: tag matching latency (8 B) and
# bandwidth, put, get and active messages (64 KiB), each row's iterations, latency and
# bandwidth checked, and the transport seen in the daemons' counters (RC's ACKs, none on
# UD).
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root

needs_programs ucx-utils ucx_info ucx_perftest
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
ITERS=${UCX_ITERS:-2000}

topology_up netns

# ---- ucx_info ----

# the memory domain's block of ucx_info -d: from its header to the next one
md_block() {
	awk '/^# Memory domain: rocemu0$/ { on = 1; print; next }
	     /^# Memory domain:/ { on = 0 } on' "$1"
}
"${IN_A[@]}" timeout 60 "$RUN" -D "$SOCK_A" ucx_info -d >"$WORK/info.out" 2>&1
status=$?
block=$(md_block "$WORK/info.out")
if [ $status -eq 0 ] && grep -q 'Transport: rc_verbs' <<<"$block" &&
	grep -q 'Transport: ud_verbs' <<<"$block" && [ "$(grep -c 'Device: rocemu0:1' <<<"$block")" -eq 2 ] &&
	! grep -qE 'UCX +(ERROR|WARN)' "$WORK/info.out"; then
	passed "ucx_info -d: memory domain rocemu0, rc_verbs and ud_verbs on rocemu0:1 ($(grep -E 'put_zcopy|am_bcopy' <<<"$block" | head -n 2 | sed 's/^# *//; s/  */ /g' | paste -sd';' | sed 's/;/; /'))"
else
	grep -E 'Memory domain|Transport|Device|UCX' "$WORK/info.out" | sed 's/^/  | /'
	failed "ucx_info -d under rocemu-run (exit $status)"
fi
"${IN_A[@]}" timeout 60 ucx_info -d >"$WORK/info-plain.out" 2>&1
grep -q 'rocemu0' "$WORK/info-plain.out" && failed "ucx_info -d sees rocemu0 without rocemu-run" ||
	passed "ucx_info -d without rocemu-run: no rocemu0"

# ---- ucx_perftest ----

# perftest TLS TEST SIZE: one client row in host a against a server in host b; prints the
# row's fields after "Final:" (iterations, latency 50%, average, overall in us, bandwidth
# average, overall in MB/s, message rates), or fails with both sides' output.
perftest() {
	local tls=$1 test=$2 size=$3 port=$((20000 + RANDOM % 20000)) server status
	"${IN_B[@]}" env UCX_TLS="$tls,self" timeout 120 "$RUN" -D "$SOCK_B" ucx_perftest \
		-p "$port" >"$WORK/server.out" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	await_listener b "$port" "$server"
	"${IN_A[@]}" env UCX_TLS="$tls,self" timeout 120 "$RUN" -D "$SOCK_A" ucx_perftest \
		"$ADDR_B" -p "$port" -t "$test" -s "$size" -n "$ITERS" -w 100 \
		>"$WORK/client.out" 2>&1 </dev/null
	status=$?
	wait "$server"
	status=$((status | $?))
	if [ $status -ne 0 ] || grep -qE 'UCX +(ERROR|WARN)|Fatal' "$WORK/client.out" "$WORK/server.out" ||
		! grep -q '^Final:' "$WORK/client.out"; then
		tail -n 8 "$WORK/client.out" | sed 's/^/  | client: /'
		tail -n 8 "$WORK/server.out" | sed 's/^/  | server: /'
		return 1
	fi
	awk '/^Final:/ { $1 = ""; print; exit }' "$WORK/client.out"
}

# row NAME TLS TEST SIZE KIND: KIND lat checks the average latency, bw the bandwidth
row() {
	local name=$1 tls=$2 test=$3 size=$4 kind=$5 r iters lat bw
	if ! r=$(perftest "$tls" "$test" "$size"); then
		printf '%s\n' "$r"
		failed "ucx_perftest $name: $test -s $size"
		return
	fi
	read -r iters _ lat _ bw _ <<<"$r"
	if [ "$iters" = "$ITERS" ] && awk -v k="$kind" -v l="$lat" -v b="$bw" \
		'BEGIN { exit !(k == "lat" ? l > 0 && l < 100000 : b > 0) }'; then
		passed "ucx_perftest $name $test -s $size: $iters iterations, $lat us average, $bw MB/s"
	else
		failed "ucx_perftest $name $test -s $size: row '$r'"
	fi
}

acks0=$(counter a acks_sent)
sends0=$(counter a rdma_sends)
row "rc_verbs" rc_verbs,ud_verbs tag_lat 8 lat
row "rc_verbs" rc_verbs,ud_verbs tag_bw 65536 bw
row "rc_verbs" rc_verbs,ud_verbs ucp_put_bw 65536 bw
row "rc_verbs" rc_verbs,ud_verbs ucp_get 65536 bw
row "rc_verbs" rc_verbs,ud_verbs ucp_am_bw 65536 bw
acks=$(($(counter a acks_sent) - acks0))
[ "$acks" -gt "$ITERS" ] && passed "rc_verbs: host a's daemon sent $acks ACKs (RC)" ||
	failed "rc_verbs: only $acks ACKs from host a: not RC"

acks0=$(counter a acks_sent) acksb0=$(counter b acks_sent)
sends0=$(counter a rdma_sends)
row "ud_verbs" ud_verbs tag_lat 8 lat
row "ud_verbs" ud_verbs tag_bw 65536 bw
row "ud_verbs" ud_verbs ucp_put_bw 65536 bw
row "ud_verbs" ud_verbs ucp_am_bw 65536 bw
acks=$(($(counter a acks_sent) - acks0 + $(counter b acks_sent) - acksb0))
sends=$(($(counter a rdma_sends) - sends0))
[ "$acks" -eq 0 ] && [ "$sends" -gt "$ITERS" ] &&
	passed "ud_verbs: $sends datagrams sent by host a, no ACK on either side (UD)" ||
	failed "ud_verbs: $sends sends, $acks ACKs"

daemons_alive
finish "ucx"
