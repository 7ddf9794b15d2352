#!/usr/bin/env bash
# scripts/netns.sh: two namespaces that reach each other over the veth, with the asked MTU;
# a second `up` refuses, `down` is safe twice. Cleans up even when a check fails.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
netns=$here/scripts/netns.sh
fail() { echo "FAIL: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "needs root and ip netns: skipped"
	exit 77
fi
# a pair of our own, so a concurrent run or a user's rocemu-a/rocemu-b is left alone
export ROCEMU_NETNS_PREFIX="rn$((RANDOM % 100000))"
export ROCEMU_NETNS_SUBNET="198.18.$((RANDOM % 250 + 1))"
A=$ROCEMU_NETNS_PREFIX-a B=$ROCEMU_NETNS_PREFIX-b IP_B=$ROCEMU_NETNS_SUBNET.2
trap '"$netns" down >/dev/null 2>&1' EXIT

"$netns" up --mtu 4200 >/dev/null || fail "up"
ip -n "$A" -brief addr show "veth-$A" | grep -q "$ROCEMU_NETNS_SUBNET.1/24" || fail "address a"
ip -n "$B" -brief addr show "veth-$B" | grep -q "$IP_B/24" || fail "address b"
ip -n "$A" link show "veth-$A" | grep -q 'mtu 4200' || fail "mtu"
"$netns" up >/dev/null 2>&1 && fail "a second up should refuse"

# one UDP datagram across, received in the other namespace (bounded by timeouts)
if command -v python3 >/dev/null; then
	ip netns exec "$B" timeout 5 python3 -c '
import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 40000)); s.settimeout(4); print(s.recv(100).decode())' "$IP_B" >"/tmp/rocemu-netns.$$" &
	receiver=$!
	sleep 0.5
	ip netns exec "$A" timeout 5 python3 -c '
import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"across", (sys.argv[1], 40000))' "$IP_B"
	wait $receiver
	got=$(cat "/tmp/rocemu-netns.$$"); rm -f "/tmp/rocemu-netns.$$"
	[ "$got" = across ] || fail "datagram did not cross the veth (got '$got')"
fi

"$netns" down || fail "down"
"$netns" down || fail "second down"
ip netns list | grep -qE "^$ROCEMU_NETNS_PREFIX-(a|b)" && fail "namespaces left behind"
"$netns" up --mtu 12 >/dev/null 2>&1 && fail "--mtu 12 should be refused"
echo "netns: up, reach, refuse, down twice OK"
