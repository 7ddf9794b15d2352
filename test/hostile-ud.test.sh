#!/usr/bin/env bash
# Hostile UD and IPv6 frames (test/hostile_ud_e2e.c): daemon b serves an IPv4 and an IPv6
# address across the namespaces; daemon a is stopped and the program, in a's namespace,
# plays the peer with a packet socket on a's veth: a wrong or privileged Q_Key, a DETH cut
# short, a datagram over the MTU, UD and RC opcodes to the other kind of QP, IPv6 extension
# headers, a wrong next header, IPv6 length lies, an address not served, a bad ICRC, and
# WRITEs to an IPv6 RC QP from a spoofed source or from the peer's IPv4 address. Each must
# draw exactly its counter (or, kept out by the receive filter, nothing) and write nothing;
# the controls (datagrams over IPv4 and IPv6, one whose IPv6 header a router changed in the
# fields the ICRC masks, and a WRITE from the peer) land with their GRH area as received.
# Congestion control's: a CNP to the UD QP cuts its rate; a datagram marked CE lands and
# draws a CNP, which must come back on a's veth to a's address and the sending QP.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

E2E=$BUILD/hostile_ud_e2e
[ -x "$E2E" ] || fail "$E2E is missing (make $E2E)"
NETNS_IPV6=1 NETNS_MTU=9000 topology_up netns
daemon_stop a

out=$("${IN_A[@]}" timeout 120 "$E2E" "$SOCK_B" "$IF_A" "$ADDR_A" "$ADDR6_A" "$ADDR6_B" 2>&1)
rc=$?
printf '%s\n' "$out"
kill -0 "${DAEMON_PID[b]}" 2>/dev/null || fail "rocemud died during the hostile cases"
[ $rc -ne 0 ] && "$BUILD/rocemuctl" -s "$SOCK_B" stats | grep -v ' 0 ' | sed 's/^/  stats: /'
daemon_stop b
! grep -qE 'Sanitizer|runtime error' "$WORK/rocemud-b.log" ||
	fail "rocemud's sanitizers reported errors"
case $rc in
0) echo "hostile UD/IPv6: all $(grep -c ': OK' <<<"$out") cases matched" ;;
124) fail "hostile_ud_e2e timed out after 120 s" ;;
*) fail "hostile UD/IPv6: $(grep -c ': FAIL' <<<"$out") case(s) failed (exit $rc)" ;;
esac
