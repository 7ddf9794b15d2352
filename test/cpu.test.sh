#!/usr/bin/env bash
# rocemud's claim on the CPU, read from the kernel (/proc/PID/sched), not from the daemon:
# --slice and --realtime together. Asleep, each daemon is under SCHED_FIFO; after traffic it
# polls (--busy-poll, a second) under SCHED_OTHER at nice -10 with the slice it asked
# for, which leaving SCHED_FIFO must not reset to the kernel's; transfers stay byte-exact.
# A kernel before 6.12 takes no slice: the daemon says so, and only that is checked of it.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

SLICE_US=100
export ROCEMUD_ARGS="--slice $SLICE_US --realtime 5 --busy-poll 1000000"

sched_field() { # SIDE NAME: a field of the daemon's /proc/PID/sched
	awk -v n="$2" '$1 == n {print $3}' "/proc/${DAEMON_PID[$1]}/sched"
}

# Waits (up to 3 s) until daemon SIDE is under policy POLICY (0 SCHED_OTHER, 1 SCHED_FIFO).
await_policy() { # SIDE POLICY
	for _ in $(seq 60); do
		[ "$(sched_field "$1" policy)" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

topology_up netns
log_a=$WORK/rocemud-a.log
if grep -q "cannot take SCHED_FIFO" "$log_a"; then
	fifo=false
	echo "cpu: SCHED_FIFO not checked: $(grep -m1 "cannot take SCHED_FIFO" "$log_a")"
else
	fifo=true
	await_policy a 1 || fail "daemon a asleep is not under SCHED_FIFO: policy $(sched_field a policy)"
	passed "asleep under SCHED_FIFO at priority 5 (prio $(sched_field a prio))"
fi
if grep -q "time slice $SLICE_US us (--slice)" "$log_a"; then
	slice=true
elif grep -q "takes no time slice from a process.*--slice $SLICE_US is off" "$log_a"; then
	slice=false
	echo "cpu: --slice not checked: $(uname -r) takes no time slice from a process"
else
	fail "rocemud said neither that it took --slice $SLICE_US nor that the kernel refused it"
fi

write_verified 64 "$ADDR_B" 2000
# the daemon polls for a second after the last work (the most --busy-poll takes), under
# SCHED_OTHER
await_policy a 0 || fail "daemon a did not leave SCHED_FIFO to poll"
prio=$(sched_field a prio) got=$(sched_field a se.slice)
[ "$prio" = 110 ] || fail "daemon a polls at prio $prio, not 110 (nice -10)"
if $slice; then
	[ "$got" = $((SLICE_US * 1000)) ] ||
		fail "daemon a polls with a slice of $got ns, not the $((SLICE_US * 1000)) it asked for"
	passed "polling under SCHED_OTHER at nice -10 with its slice of $got ns"
else
	passed "polling under SCHED_OTHER at nice -10"
fi
if $fifo; then
	await_policy a 1 || fail "daemon a did not go back to sleep under SCHED_FIFO"
	passed "back under SCHED_FIFO once idle"
fi
write_verified 1M "$ADDR_B" 50
finish cpu
