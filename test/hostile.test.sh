#!/usr/bin/env bash
# Hostile packets on the wire (test/hostile_e2e.c): one rocemud on lo, and the program as
# its remote peer, crafting malformed, spoofed and out-of-bounds RoCEv2 frames with an
# AF_PACKET socket. Each case must draw exactly its drop counter, NAK or ACK, and change no
# byte outside what a valid request may write. On lo only: the program injects frames on
# the daemon's own interface, as if from a peer address of 127/8 where no daemon runs.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

E2E=$BUILD/hostile_e2e
[ -x "$E2E" ] || fail "$E2E is missing (make $E2E)"
[ -x "$BUILD/rocemud" ] || fail "$BUILD/rocemud is missing (make $BUILD/rocemud)"

# Our own pair of addresses of 127/8; daemon A is stopped at once, so ADDR_A is the
# fictitious peer (the program binds UDP 4791 there) and .3 the spoofed source. The
# program reads the daemon's answers one frame at a time from a packet socket, as a peer
# across a wire gets them, so the daemon sends no GSO frames (gso.test.sh covers those).
ROCEMUD_ARGS=--no-gso
topology_up lo
daemon_stop a
SPOOF=${ADDR_A%.*}.3

start=$(date +%s%N)
out=$(timeout 120 "$E2E" "$SOCK_B" "$ADDR_A" "$SPOOF" 2>&1)
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
printf '%s\n' "$out"

kill -0 "${DAEMON_PID[b]}" 2>/dev/null || fail "rocemud died during the hostile cases"
[ $rc -ne 0 ] && "$BUILD/rocemuctl" -s "$SOCK_B" stats | sed 's/^/  stats: /'
# A clean shutdown, so that a sanitizer build reports leaks too, before the log goes.
daemon_stop b
! grep -qE 'Sanitizer|runtime error' "$WORK/rocemud-b.log" ||
	fail "rocemud's sanitizers reported errors"
case $rc in
0) echo "hostile: all cases matched on lo in ${elapsed_ms} ms" ;;
124) fail "hostile_e2e timed out after 120 s" ;;
*) fail "hostile: $(grep -c ': FAIL: ' <<<"$out") case(s) failed (exit $rc)" ;;
esac
