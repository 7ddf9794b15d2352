#!/usr/bin/env bash
# The wakeup handshakes between clients and the daemon (test/doorbell_e2e.c): while a daemon
# polls after work its clients skip their doorbells, and it writes a CQ's pipe only for a
# client asleep on it. Thousands of small WRITEs and SENDs in bursts, with pauses around
# the poll budget and every way of waiting for a completion, must all complete in order
# with their bytes in place: a lost doorbell or wakeup would leave one waiting (the program
# gives up after 5 s). First under --busy-poll 100, which polls even on a loaded machine
# (the default --poll-budget does not, when the CPUs are taken), so both paths must have
# been taken (rocemuctl stats: doorbells and polled_posts), and the daemons must go back
# to sleep after it (no CPU when idle); then the default daemons; then --poll-budget 0,
# where no post skips its doorbell (and receives ring none at all). The first connection is a batch held mid-way by a
# neighbour to resolve (A's neighbour table flushed), which must go on from there.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

E2E=$BUILD/doorbell_e2e
[ -x "$E2E" ] || fail "$E2E is missing (make $E2E)"

cpu_ms() { # PID: the milliseconds it has run on a CPU (schedstat counts nanoseconds)
	local ns rest
	read -r ns rest <"/proc/$1/schedstat"
	echo $((ns / 1000000))
}

stress() { # ROUNDS LABEL
	local out
	out=$("${IN_A[@]}" timeout 120 "$E2E" "$SOCK_A" "$SOCK_B" "$1" 2>&1)
	local rc=$?
	printf '%s\n' "$out" | sed "s/^/  $2: /"
	[ $rc -eq 0 ] || fail "doorbell_e2e ($2) exited $rc"
}

ROCEMUD_ARGS="--busy-poll 100"
topology_up netns
# A's daemon must not know B yet: A connects its QP with one batch (INIT, RTR, RTS), the
# RTR waits for B's address to resolve, and the batch must go on from it
"${IN_A[@]}" ip neigh flush dev "$IF_A"
stress 3000 "--busy-poll 100"
waits=$(counter a ctl_neigh_waits)
[ "$waits" -ge 1 ] || fail "A's batch never waited for B's address (ctl_neigh_waits $waits)"
echo "doorbell: A's batch of INIT, RTR and RTS waited for the neighbour ($waits hold) and went on"
rang=$(counter a doorbells) polled=$(counter a polled_posts) woke=$(counter a cq_wakeups)
echo "doorbell: --busy-poll 100: $rang doorbells, $polled posts found polling, $woke CQ wakeups"
[ "$rang" -gt 0 ] && [ "$polled" -gt 0 ] ||
	fail "one path was not taken: $rang doorbells, $polled posts found by polling"
[ "$woke" -gt 0 ] || fail "no CQ wakeup was written, though the client slept on its CQ"

sleep 0.5
a0=$(cpu_ms "${DAEMON_PID[a]}") b0=$(cpu_ms "${DAEMON_PID[b]}")
sleep 2
used_a=$(( $(cpu_ms "${DAEMON_PID[a]}") - a0 )) used_b=$(( $(cpu_ms "${DAEMON_PID[b]}") - b0 ))
# a tenth of a CPU-second in two idle seconds would mean the poll never ended
[ $used_a -lt 100 ] && [ $used_b -lt 100 ] ||
	fail "idle daemons still polling: a used $used_a and b $used_b ms of CPU in 2 s"
echo "doorbell: idle for 2 s afterwards, the daemons used $used_a and $used_b ms of CPU"

restart() { # ROCEMUD ARGS
	daemon_stop a
	daemon_stop b
	ROCEMUD_ARGS=$1
	daemon_start a
	daemon_start b
}
restart ""
stress 1000 default
echo "doorbell: default daemons: $(counter a doorbells) doorbells, $(counter a polled_posts)" \
	"posts found polling"
restart "--poll-budget 0"
stress 1000 "--poll-budget 0"
polled=$(counter a polled_posts)
[ "$polled" -eq 0 ] || fail "--poll-budget 0: $polled posts skipped their doorbell"
echo "doorbell: --poll-budget 0: every post rang ($(counter a doorbells) doorbells)"
# B's QP only takes receives, and a receive rings only for a QP in ERROR (proto.h,
# PROTO_RING_LAZY): its daemon is woken by the SENDs alone
rang_b=$(counter b doorbells)
[ "$rang_b" -eq 0 ] || fail "B posted only receives, yet its daemon was rung $rang_b times"
echo "doorbell: B's receives rang no doorbell"
! grep -qE 'Sanitizer|runtime error' "$WORK"/rocemud-*.log ||
	fail "rocemud's sanitizers reported errors"
echo "doorbell: PASS"
