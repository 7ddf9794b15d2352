#!/usr/bin/env bash
# rocemud --busy-poll: both daemons poll for 200 us after traffic instead of sleeping.
# Transfers stay byte-exact, small and large, and once traffic stops each daemon goes back
# to sleep: over two idle seconds it uses almost no CPU (a daemon that kept spinning would
# use two seconds).
set -u
source "$(dirname "$0")/daemons.sh"
require_root

PORT=$((41000 + RANDOM % 5000))
HZ=$(getconf CLK_TCK)
export ROCEMUD_ARGS="--busy-poll 200"

cpu_ticks() { # PID: utime + stime, counted after the command name (which may hold spaces)
	local stat
	stat=$(cat "/proc/$1/stat")
	stat=${stat##*) }
	set -- $stat
	echo $((${12} + ${13}))
}

transfer() { # SIZE COUNT
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s "$1" --verify \
		>"$WORK/server.out" 2>&1 &
	local server=$!
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s "$1" -n "$2" --verify \
		--json "$ADDR_B" >"$WORK/client.json" 2>"$WORK/client.err"
	local rc=$?
	wait $server
	[ $rc -eq 0 ] && [ $? -eq 0 ] && grep -q '"verify":"OK"' "$WORK/client.json" ||
		{ cat "$WORK/client.json" "$WORK/client.err" "$WORK/server.out"; fail "$2 x $1 under --busy-poll"; }
	echo "busy-poll: $2 x $1 byte-exact, $(grep -o '"bw_avg_mbps":[0-9.]*' "$WORK/client.json")"
}

topology_up netns
grep -q "busy-polling for 200 us after traffic" "$WORK/rocemud-a.log" ||
	fail "rocemud did not say it busy-polls: $(cat "$WORK/rocemud-a.log")"
transfer 64 20000
transfer 1M 200
sleep 0.5
a0=$(cpu_ticks "${DAEMON_PID[a]}") b0=$(cpu_ticks "${DAEMON_PID[b]}")
sleep 2
used_a=$(( $(cpu_ticks "${DAEMON_PID[a]}") - a0 )) used_b=$(( $(cpu_ticks "${DAEMON_PID[b]}") - b0 ))
# a quarter of a CPU-second in two idle seconds would mean it never went back to sleep
limit=$((HZ / 4))
[ $used_a -lt $limit ] && [ $used_b -lt $limit ] ||
	fail "idle daemons still spinning: a used $used_a and b $used_b ticks of $HZ/s in 2 s"
echo "busy-poll: idle for 2 s afterwards, the daemons used $used_a and $used_b ticks (HZ $HZ)"
