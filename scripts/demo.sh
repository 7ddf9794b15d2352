#!/usr/bin/env bash
# The README's first command: install, build, two hosts (network namespaces joined by a
# veth), a rocemud on each, 200 RDMA WRITEs of 1 MiB from one into the other, verified byte
# for byte, then everything torn down. Run as root.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (namespaces, raw sockets)" >&2; exit 1; }

scripts/install-deps.sh -q
make -s all

work=$(mktemp -d /tmp/rocemu-demo.XXXXXX)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	scripts/netns.sh down
	rm -rf "$work"
}
trap cleanup EXIT

scripts/netns.sh up
for side in a b; do
	ip netns exec rocemu-$side build/rocemud -i veth-rocemu-$side -s "$work/$side.sock" -d \
		2>"$work/rocemud-$side.log" &
	pids+=($!)
done
for side in a b; do
	for _ in $(seq 100); do [ -S "$work/$side.sock" ] && break; sleep 0.05; done
	[ -S "$work/$side.sock" ] || { cat "$work/rocemud-$side.log"; exit 1; }
done
echo "demo: rocemud on veth-rocemu-a (198.18.0.1) and veth-rocemu-b (198.18.0.2)"

ip netns exec rocemu-b build/rdma-write --server --verify -s 1M -D "$work/b.sock" \
	>"$work/server.out" 2>&1 &
server=$!
echo "== rdma-write --verify -s 1M -n 200 198.18.0.2 (in rocemu-a)"
status=0
ip netns exec rocemu-a timeout 120 build/rdma-write --verify -s 1M -n 200 -D "$work/a.sock" \
	198.18.0.2 || status=$?
wait $server || status=$?
echo "== the server's side (in rocemu-b)"
cat "$work/server.out"
[ $status -eq 0 ] && echo "demo: OK" || echo "demo: FAILED ($status)"
exit $status
