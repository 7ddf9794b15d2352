#!/usr/bin/env bash
# bench/pump's UDP flow and sink, which make two-vms measures the guests' ceiling with: on
# lo, a flow sent as UDP GSO runs and one sent with sendmmsg each arrive at the sink counted
# at their size (a GRO read holds a run of them), never more than were sent; a sink that
# hears nothing reports nothing and exits 0; switch-ping gives its two medians; bad usage
# exits 2.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
PUMP=$BUILD/bench/pump
[ -x "$PUMP" ] || fail "$PUMP is missing (make $PUMP)"
SIZE=1040

# json_field JSON NAME: the field's value
json_field() { sed -nE "s/.*\"$2\":([a-z0-9.]+).*/\\1/p" <<<"$1"; }

# flow ARGS...: a 0.3 s flow to a sink on lo; checks what each end reported
flow() {
	local port=$((20000 + RANDOM % 20000)) sink sent got
	"$PUMP" udp-sink -b 127.0.0.1 -p "$port" -t 5 >"$WORK/sink.out" 2>&1 &
	sink=$!
	PIDS+=($sink)
	for _ in $(seq 50); do grep -q sink-ready "$WORK/sink.out" && break; sleep 0.1; done
	sent=$("$PUMP" udp-flood -c 127.0.0.1 -p "$port" -s $SIZE -t 0.3 "$@")
	wait "$sink" || { failed "udp-sink $* exited $?"; return; }
	got=$(grep udp-sink "$WORK/sink.out")
	local n_sent=$(json_field "$sent" datagrams) n_got=$(json_field "$got" datagrams)
	local bytes=$(json_field "$got" bytes)
	if [ "${n_got:-0}" -gt 0 ] && [ "$n_got" -le "$n_sent" ] && [ "$bytes" -eq $((n_got * SIZE)) ]; then
		passed "udp-flood${*:+ $*}: $n_sent sent (gso $(json_field "$sent" gso)), $n_got counted at $SIZE bytes each"
	else
		failed "udp-flood${*:+ $*}: sent $sent, the sink reported $got"
	fi
	local expect_gso=true
	[ "${1:-}" = --no-gso ] && expect_gso=false
	[ "$(json_field "$sent" gso)" = "$expect_gso" ] && passed "udp-flood${*:+ $*}: gso $expect_gso" ||
		failed "udp-flood${*:+ $*}: gso is not $expect_gso in $sent"
}

flow
flow --no-gso

out=$("$PUMP" udp-sink -b 127.0.0.1 -p $((40000 + RANDOM % 20000)) -t 0.3)
rc=$?
[ $rc -eq 0 ] && [ "$(json_field "$(grep udp-sink <<<"$out")" datagrams)" = 0 ] &&
	passed "a sink that hears nothing reports 0 datagrams" || failed "an idle sink: exit $rc, $out"

# two medians in microseconds, the echo thread joined and the echo child reaped
out=$("$PUMP" switch-ping -n 200)
rc=$?
threads=$(json_field "$out" threads_us) processes=$(json_field "$out" processes_us)
if [ $rc -eq 0 ] && awk -v t="$threads" -v p="$processes" 'BEGIN { exit !(t > 0 && p > 0) }'; then
	passed "switch-ping: a pipe round trip $threads us between threads, $processes us between processes"
else
	failed "switch-ping: exit $rc, $out"
fi

"$PUMP" udp-flood -s $SIZE >/dev/null 2>&1
[ $? -eq 2 ] && passed "udp-flood without an address exits 2" || failed "udp-flood without an address"
"$PUMP" udp-sink -b 127.0.0.1 extra >/dev/null 2>&1
[ $? -eq 2 ] && passed "udp-sink with a stray argument exits 2" || failed "udp-sink with a stray argument"
finish "pump"
