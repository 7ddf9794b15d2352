#!/usr/bin/env bash
# rdma-write between two real daemons, on lo (two addresses of 127/8) and across two
# network namespaces joined by a veth: byte-exact transfers of awkward sizes, and the
# requester's completion status (with the target untouched) for each way to aim wrong.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

PORT=$((20000 + RANDOM % 5000))

# run_pair "CLIENT ARGS" SERVER ARGS...: server on host b, client on host a; leaves the
# exit codes in CLIENT_RC and SERVER_RC and the output in $WORK/{client,server}.out.
run_pair() {
	local client_args=$1
	shift
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 120 "$BUILD/rdma-write" --server -D "$SOCK_B" -p "$PORT" "$@" \
		>"$WORK/server.out" 2>&1 &
	local server=$!
	# shellcheck disable=SC2086
	"${IN_A[@]}" timeout 120 "$BUILD/rdma-write" -D "$SOCK_A" -p "$PORT" $client_args "$@" \
		"$ADDR_B" >"$WORK/client.out" 2>&1
	CLIENT_RC=$?
	wait $server
	SERVER_RC=$?
}

expect_ok() { # SIZE ITERS
	run_pair "-n $2" -s "$1" --verify
	[ $CLIENT_RC -eq 0 ] && [ $SERVER_RC -eq 0 ] &&
		grep -q "verify: OK" "$WORK/client.out" && grep -q "verify: OK" "$WORK/server.out" ||
		{ cat "$WORK/client.out" "$WORK/server.out"; fail "$TOPOLOGY: $1 x $2 not byte-exact"; }
	echo "$TOPOLOGY: $1 bytes x $2: verify OK"
}

expect_status() { # STATUS "CLIENT ARGS" SIZE
	run_pair "$2" -s "$3"
	[ $CLIENT_RC -ne 0 ] && grep -q "$1" "$WORK/client.out" ||
		{ cat "$WORK/client.out"; fail "$TOPOLOGY: '$2' should fail with $1"; }
	[ $SERVER_RC -eq 0 ] && grep -q "buffer unchanged" "$WORK/server.out" ||
		{ cat "$WORK/server.out"; fail "$TOPOLOGY: '$2' changed the target buffer"; }
	echo "$TOPOLOGY: $2: $1, target unchanged"
}

# --start-file: the client connects and writes nothing until the file exists; without it,
# it gives up after --timeout-ms with a message, the target untouched.
expect_start_file() {
	local go=$WORK/go client
	rm -f "$go"
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p "$PORT" -s 4K \
		--verify >"$WORK/server.out" 2>&1 &
	local server=$!
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p "$PORT" -s 4K -n 8 --verify \
		--start-file "$go" "$ADDR_B" >"$WORK/client.out" 2>&1 &
	client=$!
	sleep 1
	kill -0 $client 2>/dev/null || { cat "$WORK/client.out"; fail "$TOPOLOGY: --start-file: the client did not wait"; }
	touch "$go"
	wait $client && wait $server && grep -q "verify: OK" "$WORK/server.out" ||
		{ cat "$WORK/client.out" "$WORK/server.out"; fail "$TOPOLOGY: --start-file: not byte-exact once started"; }
	rm -f "$go"
	run_pair "-n 8 --timeout-ms 300 --start-file $go" -s 4K
	[ $CLIENT_RC -ne 0 ] && grep -q "did not appear within 300 ms" "$WORK/client.out" &&
		grep -q "buffer unchanged" "$WORK/server.out" ||
		{ cat "$WORK/client.out" "$WORK/server.out"; fail "$TOPOLOGY: --start-file never created: no clear failure"; }
	echo "$TOPOLOGY: --start-file: waited, then byte-exact; never created: gave up after 300 ms, target unchanged"
}

for topology in ${ROCEMU_TOPOLOGIES:-lo netns}; do
	topology_up "$topology"
	for size in 1 3 4095 4096 4097 1M; do
		expect_ok $size 20
	done
	expect_ok 64M 2
	expect_status IBV_WC_REM_ACCESS_ERR "-n 4 --rkey-xor 0x5" 64K    # key byte wrong
	expect_status IBV_WC_REM_ACCESS_ERR "-n 4 --rkey-xor 0x100" 64K  # another index
	expect_status IBV_WC_REM_ACCESS_ERR "-n 4 --remote-offset 1" 64K # one byte past the end
	expect_status IBV_WC_REM_ACCESS_ERR "-n 4 --remote-offset -4096" 64K # below the start
	expect_status IBV_WC_REM_ACCESS_ERR "-n 4 --remote-offset 0xfffffffffffff000" 64K # VA+len wraps
	expect_start_file
	daemon_stop a
	daemon_stop b
	[ "$topology" = netns ] && { "$ROCEMU_ROOT/scripts/netns.sh" down >/dev/null; TOPOLOGY=; }
done
echo "rdma-write: all sizes byte-exact and every bad target refused, on ${ROCEMU_TOPOLOGIES:-lo netns}"
