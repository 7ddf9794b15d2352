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
if ip netns list | grep -qE '^rocemu-(a|b)'; then
	echo "rocemu-a/rocemu-b exist already (another run?): skipped"
	exit 77
fi
trap '"$netns" down >/dev/null 2>&1' EXIT

"$netns" up --mtu 4200 >/dev/null || fail "up"
ip -n rocemu-a -brief addr show veth-rocemu-a | grep -q '198.18.0.1/24' || fail "address a"
ip -n rocemu-b -brief addr show veth-rocemu-b | grep -q '198.18.0.2/24' || fail "address b"
ip -n rocemu-a link show veth-rocemu-a | grep -q 'mtu 4200' || fail "mtu"
"$netns" up >/dev/null 2>&1 && fail "a second up should refuse"

# one UDP datagram across, received in the other namespace (bounded by timeouts)
if command -v python3 >/dev/null; then
	ip netns exec rocemu-b timeout 5 python3 -c '
import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.0.2", 40000)); s.settimeout(4); print(s.recv(100).decode())' >"/tmp/rocemu-netns.$$" &
	receiver=$!
	sleep 0.5
	ip netns exec rocemu-a timeout 5 python3 -c '
import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"across", ("198.18.0.2", 40000))'
	wait $receiver
	got=$(cat "/tmp/rocemu-netns.$$"); rm -f "/tmp/rocemu-netns.$$"
	[ "$got" = across ] || fail "datagram did not cross the veth (got '$got')"
fi

"$netns" down || fail "down"
"$netns" down || fail "second down"
ip netns list | grep -qE '^rocemu-(a|b)' && fail "namespaces left behind"
"$netns" up --mtu 12 >/dev/null 2>&1 && fail "--mtu 12 should be refused"
echo "netns: up, reach, refuse, down twice OK"
