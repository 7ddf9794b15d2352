#!/usr/bin/env bash
# Debian's perftest between two ends on one machine, a line "CASE VALUE" per case: MB/s for
# ib_write_bw (its average), us for ib_write_lat (its t_typical). make guest-bench runs it
# inside its guest, on the kernel's rxe and on rocemu, for the ratios between the two.
#   test/guest-perftest.sh --rxe DEV GID ADDR   plain perftest, both ends on the kernel's
#                                               DEV (GID index GID), the client connecting
#                                               to ADDR: one device to itself
#   test/guest-perftest.sh [BUILD]              under rocemu-run: both ends on one daemon,
#                                               the client connecting to its own address
#                                               (cases self-...), then between two daemons
#                                               in two namespaces joined by a veth pair
#                                               (cases two-...)
# The cases: write-1m (ib_write_bw -s 1M -n GUEST_BENCH_1M, default 50), write-64 (-s 64
# -n 5000), write-lat (ib_write_lat -s 64 -n 500). perftest gives up now and then on
# fitting its clock in an emulated guest, or prints "inf" (twice in a row for one case in
# a Linux 6.12 guest): such a case runs again, three times in all. A case that still
# gives no row prints "CASE -" and its outputs' tails, and the exit status is 1.
set -u
RXE_DEV=
if [ "${1:-}" = --rxe ]; then
	RXE_DEV=$2 RXE_GID=$3 RXE_ADDR=$4
	shift 4
fi
[ -n "${1:-}" ] && ROCEMU_BUILD=$(cd "$1" && pwd)
source "$(dirname "$0")/daemons.sh"
require_root
command -v ib_write_bw >/dev/null || skip "perftest is missing (scripts/install-deps.sh installs it)"
STATUS=0

# one_run SERVER_PREFIX CLIENT_PREFIX ADDR TOOL ARGS...: one perftest pair (the prefixes are
# words run before TOOL: a namespace and rocemu-run, or nothing); the client's output in
# WORK/client.out, the server's in WORK/server.out
one_run() {
	local -a server_in client_in server_ns=()
	local addr=$3 tool=$4 port=$((20000 + RANDOM % 20000)) server rc
	read -ra server_in <<<"$1"
	read -ra client_in <<<"$2"
	shift 4
	# (a namespace's prefix is its first four words: ip netns exec NAME)
	[ "${server_in[0]:-}" = ip ] && server_ns=("${server_in[@]:0:4}")
	"${server_in[@]}" timeout 120 "$tool" "$@" -p "$port" >"$WORK/server.out" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	for _ in $(seq 200); do
		"${server_ns[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		kill -0 "$server" 2>/dev/null || break
		sleep 0.05
	done
	"${client_in[@]}" timeout 120 "$tool" "$@" -p "$port" "$addr" >"$WORK/client.out" 2>&1 </dev/null
	rc=$?
	wait "$server" || rc=1
	return $rc
}

# case_row NAME SERVER_PREFIX CLIENT_PREFIX ADDR TOOL ARGS...: one case, three times at most
case_row() {
	local name=$1 value=
	shift
	for _ in 1 2 3; do
		one_run "$@" && value=$(perftest_figure "$WORK/client.out" "$4") && [ -n "$value" ] && break
		value=
	done
	if [ -z "$value" ]; then
		tail -n 4 "$WORK/client.out" "$WORK/server.out" | sed "s/^/  $name | /" >&2
		STATUS=1
	fi
	echo "$name ${value:--}"
}

# cases PREFIX SERVER_PREFIX CLIENT_PREFIX ADDR GID_ARGS...: the three cases
cases() {
	local p=$1 s=$2 c=$3 a=$4
	shift 4
	case_row "${p}write-1m" "$s" "$c" "$a" ib_write_bw "$@" -s 1048576 -n "${GUEST_BENCH_1M:-50}"
	case_row "${p}write-64" "$s" "$c" "$a" ib_write_bw "$@" -s 64 -n 5000
	case_row "${p}write-lat" "$s" "$c" "$a" ib_write_lat "$@" -s 64 -n 500
}

if [ -n "$RXE_DEV" ]; then
	cases "" "" "" "$RXE_ADDR" -d "$RXE_DEV" -x "$RXE_GID"
	exit $STATUS
fi
[ -x "$BUILD/rocemu-run" ] || fail "$BUILD/rocemu-run is missing"
topology_up netns
RUN_A="${IN_A[*]} $BUILD/rocemu-run -D $SOCK_A"
RUN_B="${IN_B[*]} $BUILD/rocemu-run -D $SOCK_B"
cases self- "$RUN_A" "$RUN_A" "$ADDR_A" -x 0
cases two- "$RUN_B" "$RUN_A" "$ADDR_B" -x 0
exit $STATUS
