#!/usr/bin/env bash
# Hostile local clients (test/ctl_hostile_e2e.c): malformed and foreign control messages,
# descriptors that are not what was promised, ring indices and work requests abused,
# clients that flood, never read, exhaust descriptors or vanish by the hundred, and an
# unprivileged client over its pinning limit, all against daemon B on lo. Each must draw an
# error reply or a disconnection, and leave B and its well-behaved client unaffected; at
# the end daemon A writes into that client's buffer with a real RDMA WRITE.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

E2E=$BUILD/ctl_hostile_e2e
[ -x "$E2E" ] || fail "$E2E is missing (make $E2E)"
[ -x "$BUILD/rocemud" ] || fail "$BUILD/rocemud is missing (make $BUILD/rocemud)"
getent passwd nobody >/dev/null || skip "no user nobody to play an unprivileged client"

# The active MTU capped at 1024, so "a path MTU above the port's" is a valid enum ibv_mtu.
ROCEMUD_ARGS="-m 1024"
topology_up lo
# The unprivileged client must reach B's socket: through our private directory (0700) and
# the socket itself (0660, root's).
chmod 711 "$WORK"
chmod 666 "$SOCK_B"

start=$(date +%s%N)
out=$(timeout 300 "$E2E" "$SOCK_B" "${DAEMON_PID[b]}" "$SOCK_A" 2>&1)
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
printf '%s\n' "$out"

for side in a b; do
	kill -0 "${DAEMON_PID[$side]}" 2>/dev/null || fail "rocemud $side died during the cases"
done
# Clean shutdowns, so that a sanitizer build reports leaks too, before the logs go.
daemon_stop b
daemon_stop a
! grep -qE 'Sanitizer|runtime error' "$WORK"/rocemud-*.log ||
	fail "rocemud's sanitizers reported errors"
case $rc in
0) echo "ctl_hostile: all $(grep -c ': OK: ' <<<"$out") cases matched in ${elapsed_ms} ms" ;;
124) fail "ctl_hostile_e2e timed out after 300 s" ;;
*) fail "ctl_hostile: $(grep -c ': FAIL: ' <<<"$out") case(s) failed (exit $rc)" ;;
esac
