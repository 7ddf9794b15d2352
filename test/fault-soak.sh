#!/usr/bin/env bash
# The fault soak (make fault-soak; not part of make check, it takes minutes): docs/testing.md's
# fault spec without delay on both daemons across two namespaces, and for each of N seeds
# a 64 MiB transfer (64 WRITEs of 1 MiB, rdma-write's default QP timer) checked byte for
# byte; the daemons must still be running after every one.
#   ROCEMU_BUILD=build test/fault-soak.sh [SEEDS]
set -u
source "$(dirname "$0")/daemons.sh"
require_root
seeds=${1:-20}
SPEC="drop=0.05,dup=0.01,corrupt=0.01,reorder=0.25"
PORT=$((35000 + RANDOM % 5000))
topology_up netns
times=()
for ((s = 1; s <= seeds; s++)); do
	"$BUILD/rocemuctl" -s "$SOCK_A" fault "$SPEC,seed=$((2 * s + 5))" &&
		"$BUILD/rocemuctl" -s "$SOCK_B" fault "$SPEC,seed=$((2 * s + 6))" || fail "rocemuctl fault"
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 600 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s 1M --verify \
		--timeout-ms 120000 >"$WORK/server.out" 2>&1 &
	server=$! start=$SECONDS
	"${IN_A[@]}" timeout 600 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s 1M -n 64 --verify \
		--timeout-ms 120000 --json "$ADDR_B" >"$WORK/client.json" 2>"$WORK/client.err"
	rc=$?
	wait $server
	[ $rc -eq 0 ] && [ $? -eq 0 ] && grep -q '"verify":"OK"' "$WORK/client.json" ||
		{ cat "$WORK/client.json" "$WORK/client.err" "$WORK/server.out"; fail "seed $s: not byte-exact"; }
	for side in a b; do
		kill -0 "${DAEMON_PID[$side]}" 2>/dev/null || fail "seed $s: rocemud $side died"
	done
	times+=($((SECONDS - start)))
	echo "seed $s: 64 x 1M byte-exact in ${times[-1]} s, $(grep -o '"bw_avg_mbps":[0-9.]*' "$WORK/client.json")"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
echo "fault-soak: $seeds seeds of $SPEC byte-exact, median $median s per 64 MiB"
