#!/usr/bin/env bash
# The RDMA CM's connection rate between two rocemu daemons on one machine, in make check's
# topology (two network namespaces joined by a veth pair): test/cm_peer connects, sends one
# message and disconnects CM_CYCLES times (default 200), one connection after another,
# after one connection unmeasured (the first waits for the neighbours to resolve).
# make interop runs it inside its guest, beside the rate of the kernel's rxe there, for the
# ratio the RDMA CM issue asks. Prints what cm_peer printed at both ends and how many
# times a connection daemon a went to sleep (or was preempted); exit 0 when every cycle
# completed.
#   test/cm-rate.sh [BUILD]
#   CM_TO_ITSELF=1 test/cm-rate.sh [BUILD]   both ends on daemon a, the client connecting
#                                           to a's own address: one device to itself, as
#                                           make interop measures rxe0 to itself
set -u
[ -n "${1:-}" ] && ROCEMU_BUILD=$(cd "$1" && pwd)
source "$(dirname "$0")/daemons.sh"
require_root

PEER=$BUILD/test/cm_peer
CYCLES=${CM_CYCLES:-200}
[ -x "$PEER" ] && [ -x "$BUILD/rocemu-run" ] || fail "$PEER or $BUILD/rocemu-run is missing"
topology_up netns
SERVER_IN=("${IN_B[@]}") SERVER_SOCK=$SOCK_B SERVER_ADDR=$ADDR_B
[ -n "${CM_TO_ITSELF:-}" ] && SERVER_IN=("${IN_A[@]}") SERVER_SOCK=$SOCK_A SERVER_ADDR=$ADDR_A

# cycles N: N connections from a to b, cm_peer's output in WORK/client.out and server.out
cycles() {
	local port=$((9000 + RANDOM % 1000)) server rc
	"${SERVER_IN[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SERVER_SOCK" "$PEER" cycle-server "$port" \
		"$1" >"$WORK/server.out" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	for _ in $(seq 100); do
		"$BUILD/rocemuctl" -s "$SERVER_SOCK" cm 2>/dev/null | grep -q 'state LISTEN' && break
		kill -0 "$server" 2>/dev/null || break
		sleep 0.1
	done
	"${IN_A[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SOCK_A" "$PEER" cycle-client "$SERVER_ADDR" \
		"$port" "$1" >"$WORK/client.out" 2>&1 </dev/null
	rc=$?
	wait "$server" || rc=1
	return $rc
}

# one connection first, unmeasured: the first one waits for the neighbours to resolve
# (rxe's, to its own address, has none to wait for)
cycles 1 || { cat "$WORK/client.out" "$WORK/server.out"; fail "the first connection failed"; }
# daemon a's context switches, each the end of one of its runs: what a connection costs
# it in wakeups (the sum of the voluntary and the involuntary)
switches_of_a() {
	awk '/ctxt_switches/ { n += $2 } END { print n + 0 }' "/proc/${DAEMON_PID[a]}/status"
}
before=$(switches_of_a)
cycles "$CYCLES"
status=$?
after=$(switches_of_a)
cat "$WORK/client.out"
sed 's/^/server: /' "$WORK/server.out"
echo "daemon a: $(( (after - before) / CYCLES )) context switches a connection"
exit $status
