#!/usr/bin/env bash
# The benchmark (`make bench`, as root): rocemu against this machine's own limits,
# measured in one run on one veth between two network namespaces of our own (MTU 9000).
#   1. baselines: iperf3 single-stream TCP; the raw frame pump (test/bench/pump.c: sendmmsg
#      of 4150- and 100-byte frames into a TPACKET_V3 ring); 64-byte UDP ping-pong, blocking
#      and busy-polling;
#   2. rocemu: RDMA WRITE goodput 64 B .. 8 MiB at PMTU 4096 and 1024 (rdma-write --json,
#      --tx-depth 128), the 64-byte message rate, 64-byte post-to-completion latency
#      (rdma-write --tx-depth 1 gives the mean; test/bench/regcost.c lat the median and p99,
#      with the client polling its CQ as ib_write_lat does, and sleeping on it as with -e),
#      CPU seconds per GB of each daemon, registering 1 GiB against mlock, the daemon's own
#      memory with 1,000 MRs and 1,000 QPs; and the other operations: 1 MiB READ and SEND
#      goodput next to WRITE's in the same run, the FETCH_ADD and 64-byte WRITE rates at
#      depth 8 and the 64-byte SEND round trip (test/bench/regcost.c ops); the daemons' CPU
#      seconds idle and under a 64-byte ping-pong;
#   3. a report: a table on stdout with each target's ratio, BUILD/bench/
#      results.json, and BUILD/bench/goodput.png.
# Each figure is the median of REPS runs (5 for the figures the targets use, 3 for the rest).
#   scripts/bench.sh [BUILD]      (default build; make bench builds what it needs first)
# Environment: BENCH_QUICK=1 for a short smoke run (one rep, fewer sizes).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD=${1:-build}
OUT=$BUILD/bench
QUICK=${BENCH_QUICK:-0}

say() { echo "bench: [${SECONDS}s] $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, packet sockets, mlock)"
for prog in rocemud rdma-write rocemuctl bench/pump bench/regcost rocemu-run test/many_qp; do
	[ -x "$BUILD/$prog" ] || die "$BUILD/$prog is missing: run 'make bench'"
done
command -v python3 >/dev/null || die "python3 is missing (scripts/install-deps.sh installs it)"

# iperf3 and gnuplot are the benchmark's own needs; scripts/install-deps.sh (someone else's)
# does not install them, so we do, once, when they are missing.
missing=()
command -v iperf3 >/dev/null || missing+=(iperf3)
command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
if [ ${#missing[@]} -gt 0 ]; then
	say "missing ${missing[*]}: the TCP baseline needs iperf3 and the plot gnuplot;" \
		"installing them with apt-get (root)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 gnuplot-nox >&2 ||
		die "apt-get install iperf3 gnuplot-nox failed; install them and run again"
fi

# ---- our own pair of namespaces, and everything we start, gone on exit ----

export ROCEMU_NETNS_PREFIX=rb$$ ROCEMU_NETNS_SUBNET=198.18.77
NS_A=$ROCEMU_NETNS_PREFIX-a NS_B=$ROCEMU_NETNS_PREFIX-b
IF_A=veth-$NS_A IF_B=veth-$NS_B
ADDR_A=$ROCEMU_NETNS_SUBNET.1 ADDR_B=$ROCEMU_NETNS_SUBNET.2
WORK=$(mktemp -d /tmp/rocemu-bench.XXXXXX)
RAW=$WORK/raw.jsonl
LIVE=$WORK/live   # one empty file per process we started and have not reaped yet
mkdir -p "$LIVE"
T_START=$(date +%s.%N)
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)

# track PID / untrack PID (once reaped): what cleanup must stop. Files, not an array, so
# that processes started inside $(...) are seen too.
track() { : >"$LIVE/$1"; }
untrack() { rm -f "$LIVE/$1"; }

stop_pid() {
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

cleanup() {
	local f
	for f in "$LIVE"/*; do [ -e "$f" ] && stop_pid "${f##*/}"; done
	scripts/netns.sh down >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
rm -f "$OUT/results.json" "$OUT/goodput.png"
scripts/netns.sh up >&2 || die "cannot bring up the namespaces"
IN_A=(ip netns exec "$NS_A")
IN_B=(ip netns exec "$NS_B")
MAC_B=$("${IN_B[@]}" cat "/sys/class/net/$IF_B/address")

# record KIND JSON: one raw sample (a JSON object, newlines allowed), tagged with its kind,
# as one line of raw.jsonl, which the report reads. No python per sample: python3 may be a
# pyenv shim that takes a second to start.
record() {
	local kind=$1 json
	json=$(tr -d '\n' <<<"$2")
	json=${json#"${json%%[![:space:]]*}"}
	case $json in
	'{}') printf '{"kind":"%s"}\n' "$kind" >>"$RAW" ;;
	'{'*) printf '{"kind":"%s",%s\n' "$kind" "${json#\{}" >>"$RAW" ;;
	*) say "not a JSON object for $kind: $2" ;;
	esac
}

# field JSON KEY: a number out of a flat one-line JSON object
field() {
	sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<<"$1"
}

# calc EXPR: floating-point arithmetic
calc() {
	awk "BEGIN { print $* }"
}

if [ "$QUICK" = 1 ]; then REPS=1 KEY_REPS=1; else REPS=3 KEY_REPS=5; fi

# ---- 1. baselines ----

say "iperf3: single-stream TCP $ADDR_A -> $ADDR_B"
"${IN_B[@]}" iperf3 -s -B "$ADDR_B" >/dev/null 2>&1 &
track $!
for rep in $(seq "$KEY_REPS"); do
	out=""
	for _ in $(seq 25); do   # the server may not be listening yet (a second, seen)
		out=$("${IN_A[@]}" timeout 20 iperf3 -c "$ADDR_B" -t 2 -O 1 -J 2>/dev/null) && break
		sleep 0.2
	done
	grep -q '"sum_received"' <<<"$out" && record iperf3 "$out" && continue
	say "iperf3 run $rep failed"
done

say "pump: sendmmsg of raw frames into a TPACKET_V3 ring, $IF_A -> $IF_B"
for size in 4150 100; do
	for rep in $(seq 0 "$KEY_REPS"); do   # rep 0 warms up and is not kept
		"${IN_B[@]}" "$BUILD/bench/pump" rx -i "$IF_B" -t 8 >"$WORK/rx.out" 2>&1 &
		rx=$!
		track $rx
		for _ in $(seq 50); do grep -q rx-ready "$WORK/rx.out" && break; sleep 0.05; done
		tx=$("${IN_A[@]}" "$BUILD/bench/pump" tx -i "$IF_A" -s "$size" -t 1 -d "$MAC_B")
		wait "$rx"
		untrack $rx
		got=$(grep '"mode":"rx"' "$WORK/rx.out")
		if [ -z "$got" ] || [ -z "$tx" ]; then
			say "pump $size run $rep failed: $(cat "$WORK/rx.out")"
			continue
		fi
		[ "$rep" -gt 0 ] && record pump "{\"size\": $size, \"rx\": $got, \"tx\": $tx}"
	done
done

say "UDP ping-pong, 64-byte datagrams, blocking and busy-polling"
for mode in block busy; do
	flag=
	[ $mode = busy ] && flag=--busy
	for rep in $(seq "$KEY_REPS"); do
		"${IN_B[@]}" "$BUILD/bench/pump" udp-echo -b "$ADDR_B" -t 5 $flag >"$WORK/echo.out" &
		echo_pid=$!
		track $echo_pid
		for _ in $(seq 50); do grep -q echo-ready "$WORK/echo.out" && break; sleep 0.05; done
		# at most 2 s: on a loaded machine a spinner waits for its peer's time slice
		out=$("${IN_A[@]}" timeout 30 "$BUILD/bench/pump" udp-ping -c "$ADDR_B" -n 10000 \
			-t 2 $flag)
		stop_pid "$echo_pid"
		untrack $echo_pid
		[ -n "$out" ] && record udp "$out" || say "UDP ping-pong ($mode) run $rep failed"
	done
done

# ---- 2. rocemu ----

DAEMON_A= DAEMON_B=
SOCK_A=$WORK/a.sock SOCK_B=$WORK/b.sock
# start_daemons [ROCEMUD ARGS...] / stop_daemons
start_daemons() {
	local side ns ifc sock pid
	for side in a b; do
		if [ $side = a ]; then ns=$NS_A ifc=$IF_A sock=$SOCK_A; else ns=$NS_B ifc=$IF_B sock=$SOCK_B; fi
		ip netns exec "$ns" "$BUILD/rocemud" -i "$ifc" -s "$sock" -d "$@" \
			2>>"$WORK/rocemud-$side.log" &
		pid=$!
		track $pid
		for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
		[ -S "$sock" ] || { cat "$WORK/rocemud-$side.log" >&2; die "rocemud $side did not start"; }
		if [ $side = a ]; then DAEMON_A=$pid; else DAEMON_B=$pid; fi
	done
	say "rocemud $DAEMON_A on $IF_A, $DAEMON_B on $IF_B${1:+ ($*)}"
}
stop_daemons() {
	stop_pid "$DAEMON_A" && untrack "$DAEMON_A"
	stop_pid "$DAEMON_B" && untrack "$DAEMON_B"
}
start_daemons

# rdma_write SIZE ITERS ARGS...: one rdma-write run (server in B, client in A); prints the
# client's JSON, or nothing when it failed
rdma_write() {
	local size=$1 iters=$2 server out rc
	shift 2
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -s "$size" \
		>/dev/null 2>"$WORK/server.err" &
	server=$!
	track $server
	out=$("${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -s "$size" -n "$iters" \
		--json "$@" "$ADDR_B" 2>"$WORK/client.err")
	rc=$?
	wait "$server" 2>/dev/null
	untrack $server
	if [ $rc -ne 0 ] || ! grep -q msg_rate_mpps <<<"$out"; then
		say "rdma-write -s $size -n $iters $* failed ($rc): $(tail -n 2 "$WORK/client.err" | tr '\n' ' ')"
		return 1
	fi
	echo "$out"
}

# iters_for RATE SECONDS: how many messages take SECONDS at RATE messages/s (16 .. 4M)
iters_for() {
	awk -v r="$1" -v s="$2" 'BEGIN { n = r * s; if (n < 16) n = 16; if (n > 4e6) n = 4e6;
		printf "%d\n", n }'
}

TARGET_S=0.5
if [ "$QUICK" = 1 ]; then
	SIZES="64 4096 65536 1048576 8388608"
else
	SIZES=$(for i in $(seq 6 23); do echo -n "$((1 << i)) "; done)
fi
say "goodput: rdma-write --tx-depth 128 at PMTU 4096 and 1024, sizes $(set -- $SIZES; echo "$1 .. ${!#}")"
declare -A RATE=()
for mtu in 4096 1024; do
	rate=""
	# calibration: the 64-byte message rate gives the first run of each size its length
	out=$(rdma_write 64 20000 --tx-depth 128 --mtu $mtu) && rate=$(field "$out" msg_rate_mpps)
	rate=$(calc "${rate:-0.05} * 1e6")
	prev=64
	for size in $SIZES; do
		reps=$REPS
		{ [ "$size" = 64 ] || [ "$size" = 1048576 ]; } && [ $mtu = 4096 ] && reps=$KEY_REPS
		# the first run of a size guesses its message rate from the last size's: between
		# the same (bound by messages) and size/prev times lower (bound by bytes), so
		# sqrt(size/prev) lower; the next runs aim at TARGET_S from their own size's rate
		rate=$(calc "$rate / sqrt($size / $prev)")
		prev=$size
		for rep in $(seq "$reps"); do
			n=$(iters_for "$rate" "$TARGET_S")
			out=$(rdma_write "$size" "$n" --tx-depth 128 --mtu $mtu) || continue
			record write "$out"
			rate=$(calc "$(field "$out" msg_rate_mpps) * 1e6")
			RATE[$mtu-$size]=$rate
		done
	done
done

# regcost_lat KIND [PREFIX...]: one post-to-completion run with the client blocking, one
# busy-polling (the client run under PREFIX, say taskset -c 1)
regcost_lat() {
	local kind=$1 mode flag out
	shift
	for mode in block busy; do
		flag=
		[ $mode = busy ] && flag=--busy
		out=$("${IN_A[@]}" "$@" timeout 60 "$BUILD/bench/regcost" lat "$SOCK_A" "$SOCK_B" \
			-n 5000 -t 2 $flag) &&
			record "$kind" "$out" || say "regcost lat ($mode, $kind) failed"
	done
}

say "latency: 64-byte WRITEs one at a time (rdma-write --tx-depth 1; regcost lat)"
for rep in $(seq "$KEY_REPS"); do
	out=$(rdma_write 64 4000 --tx-depth 1) && record lat_rdma_write "$out"
	regcost_lat lat
done
# The same with the daemons on two CPUs and the client beside B, as two hosts place them:
# unpinned, the scheduler may put both daemons on one CPU, where a hop wakes no other CPU
# (a halted virtual CPU's wakeup costs tens of microseconds on a VM)
if [ "$(nproc)" -ge 2 ]; then
	say "latency with daemon a on CPU 0, b and the client on CPU 1 (regcost lat)"
	taskset -pc 0 "$DAEMON_A" >/dev/null && taskset -pc 1 "$DAEMON_B" >/dev/null
	for rep in $(seq "$KEY_REPS"); do
		regcost_lat lat_pinned taskset -c 1
	done
	taskset -pc "0-$(($(nproc) - 1))" "$DAEMON_A" >/dev/null
	taskset -pc "0-$(($(nproc) - 1))" "$DAEMON_B" >/dev/null
fi

say "READ, SEND and atomics next to WRITE: 1 MiB goodput, FETCH_ADD rate, SEND round trip (regcost ops)"
for rep in $(seq "$KEY_REPS"); do
	out=$("${IN_A[@]}" timeout 120 "$BUILD/bench/regcost" ops "$SOCK_A" "$SOCK_B") &&
		record ops "$out" || say "regcost ops failed"
done

# perftest TOOL ARGS...: one run of Debian's perftest under rocemu-run (server in B, client
# in A); prints its table's first row as JSON, or nothing when it failed
perftest() {
	local tool=$1 server out row
	shift
	"${IN_B[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SOCK_B" "$tool" "$@" \
		>/dev/null 2>"$WORK/perftest-server.err" &
	server=$!
	track $server
	sleep 0.3   # the server listens once its device is open
	out=$("${IN_A[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SOCK_A" "$tool" "$@" "$ADDR_B" \
		2>"$WORK/perftest-client.err")
	wait "$server" 2>/dev/null
	untrack $server
	row=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print; exit }' <<<"$out")
	if [ -z "$row" ]; then
		say "$tool $* failed: $(tail -n 2 "$WORK/perftest-client.err" | tr '\n' ' ')"
		return 1
	fi
	set -- $row
	case $tool in
	*_bw) echo "{\"bytes\":$1,\"iterations\":$2,\"bw_peak_mbps\":$3,\"bw_avg_mbps\":$4}" ;;
	*) echo "{\"bytes\":$1,\"iterations\":$2,\"t_min_us\":$3,\"t_typical_us\":$5,\"t_avg_us\":$6,\"p99_us\":$8}" ;;
	esac
}

# ucx_put_bw ITERS: UCX's ucp_put_bw of 1 MiB over rc_verbs (ud_verbs beside it for UCX's
# wire-up) under rocemu-run, server in B; prints {"bw_avg_mbps": ...} (UCX's MB are 2^20)
ucx_put_bw() {
	local port=$((20000 + RANDOM % 20000)) server out bw
	"${IN_B[@]}" env UCX_TLS=rc_verbs,ud_verbs,self timeout 120 "$BUILD/rocemu-run" \
		-D "$SOCK_B" ucx_perftest -p "$port" >/dev/null 2>"$WORK/ucx-server.err" </dev/null &
	server=$!
	track $server
	for _ in $(seq 50); do
		"${IN_B[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		sleep 0.1
	done
	out=$("${IN_A[@]}" env UCX_TLS=rc_verbs,ud_verbs,self timeout 120 "$BUILD/rocemu-run" \
		-D "$SOCK_A" ucx_perftest "$ADDR_B" -p "$port" -t ucp_put_bw -s 1048576 -n "$1" \
		-w 10 2>"$WORK/ucx-client.err" </dev/null)
	wait "$server" 2>/dev/null
	untrack $server
	bw=$(awk '/^Final:/ { print $6; exit }' <<<"$out")
	if [ -z "$bw" ]; then
		say "ucx_perftest ucp_put_bw failed: $(tail -n 2 "$WORK/ucx-client.err" | tr '\n' ' ')"
		return 1
	fi
	echo "{\"bw_avg_mbps\":$bw}"
}

if command -v ib_write_bw >/dev/null; then
	n=$(iters_for "${RATE[4096-1048576]:-500}" 1.0)
	say "unmodified perftest under rocemu-run next to rdma-write: -s 1M x $n, ib_write_lat -s 2"
	for rep in $(seq "$KEY_REPS"); do
		out=$(rdma_write 1048576 "$n" --tx-depth 128) && record verbs_rdma_write "$out"
		out=$(perftest ib_write_bw -s 1048576 -n "$n") && record verbs_write_bw "$out"
		out=$(perftest ib_write_lat -s 2 -n 5000) && record verbs_write_lat "$out"
		if command -v ucx_perftest >/dev/null; then
			out=$(ucx_put_bw "$n") && record verbs_ucx_put "$out"
		fi
	done
else
	say "perftest is missing (scripts/install-deps.sh installs it): no ib_write_bw figures"
fi

# The daemons' --busy-poll mode: neither sleeps for BUSY_POLL_US after traffic.
BUSY_POLL_US=1000
stop_daemons
start_daemons --busy-poll $BUSY_POLL_US
say "latency with rocemud --busy-poll $BUSY_POLL_US (regcost lat, client blocking and busy)"
for rep in $(seq "$KEY_REPS"); do
	regcost_lat lat_daemon_busy
done
stop_daemons
start_daemons

# cpu_ticks PID: utime + stime of PID, in clock ticks (fields 14 and 15 of /proc/PID/stat;
# the command name in field 2 may hold spaces, so count from its closing parenthesis)
cpu_ticks() {
	local stat
	stat=$(cat "/proc/$1/stat")
	stat=${stat##*) }
	set -- $stat
	echo $((${12} + ${13}))
}

say "CPU per GB: utime + stime of each rocemud across a 1 MiB run"
HZ=$(getconf CLK_TCK)
n=$(iters_for "${RATE[4096-1048576]:-500}" 1.0)
for rep in $(seq "$REPS"); do
	a0=$(cpu_ticks "$DAEMON_A") b0=$(cpu_ticks "$DAEMON_B")
	out=$(rdma_write 1048576 "$n" --tx-depth 128) || continue
	a1=$(cpu_ticks "$DAEMON_A") b1=$(cpu_ticks "$DAEMON_B")
	record cpu "{\"run\": $out, \"hz\": $HZ, \"ticks_a\": $((a1 - a0)), \"ticks_b\": $((b1 - b0))}"
done

# The daemons' CPU (default daemons, adaptive polling): idle they must sleep, and under a
# 64-byte ping-pong (the client polling its CQ) what their polling costs.
IDLE_S=10
[ "$QUICK" = 1 ] && IDLE_S=3
say "daemons' CPU seconds: ${IDLE_S} s idle, then a 3 s ping-pong of 64-byte WRITEs (client polls)"
for rep in $(seq "$REPS"); do
	sleep 0.5
	a0=$(cpu_ticks "$DAEMON_A") b0=$(cpu_ticks "$DAEMON_B")
	sleep "$IDLE_S"
	a1=$(cpu_ticks "$DAEMON_A") b1=$(cpu_ticks "$DAEMON_B")
	record cpu_idle "{\"seconds\": $IDLE_S, \"hz\": $HZ, \"ticks_a\": $((a1 - a0)), \"ticks_b\": $((b1 - b0))}"
	a0=$(cpu_ticks "$DAEMON_A") b0=$(cpu_ticks "$DAEMON_B") t0=$(date +%s.%N)
	out=$("${IN_A[@]}" timeout 60 "$BUILD/bench/regcost" lat "$SOCK_A" "$SOCK_B" -n 1000000 -t 3 \
		--busy) || { say "regcost lat (CPU under a ping-pong) failed"; continue; }
	t1=$(date +%s.%N)
	a1=$(cpu_ticks "$DAEMON_A") b1=$(cpu_ticks "$DAEMON_B")
	record cpu_pingpong "{\"run\": $out, \"seconds\": $(calc "$t1 - $t0"), \"hz\": $HZ,
		\"ticks_a\": $((a1 - a0)), \"ticks_b\": $((b1 - b0))}"
done

for side in a b; do
	sock=$SOCK_A
	[ $side = b ] && sock=$SOCK_B
	out=$("$BUILD/rocemuctl" -s "$sock" stats --json 2>/dev/null) &&
		record "counters_$side" "$out"
done

# The many-QP measures: N rdma-write pairs at once (N processes, a QP each, one daemon a
# side) against one pair moving as many bytes alone; what each pair got; the expiries, ring
# drops and duplicates of the run; and the 64 B latency on one QP while 31 others stream
# 1 MiB writes, against its latency alone.
MANY_PORT=21000
# rts_qps_a: how many QPs of side a's daemon are in RTS
rts_qps_a() {
	"$BUILD/rocemuctl" -s "$SOCK_A" qp | grep -c ' state RTS '
}
# many_pairs N SIZE ITERS: N pairs at once, each writing ITERS messages of SIZE; prints one
# JSON object: the wall time from the first client's start to the last one's end, and the
# time the clients were let go together (rdma-write --start-file), once all were connected
# (10 s at most)
many_pairs() {
	local n=$1 size=$2 iters=$3 i t0 t1 ok=0 mbps="" v to0 rd0 dup0 servers=() clients=()
	local ends="" spans="" go=$WORK/many.go t_go k base
	for i in $(seq "$n"); do
		"${IN_B[@]}" timeout 120 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $((MANY_PORT + i)) \
			-s "$size" >/dev/null 2>&1 &
		servers+=($!)
		track $!
	done
	sleep 0.3
	to0=$(rocemu_counter a timeouts) rd0=$(rocemu_counter b drop_ring_full)
	dup0=$(rocemu_counter b duplicate_request)
	rm -f "$go"
	base=$(rts_qps_a)
	t0=$(date +%s.%N)
	for i in $(seq "$n"); do
		{ "${IN_A[@]}" timeout 120 "$BUILD/rdma-write" -D "$SOCK_A" -p $((MANY_PORT + i)) \
			-s "$size" -n "$iters" --json --start-file "$go" "$ADDR_B" >"$WORK/many.$i" 2>&1
		  st=$?; date +%s.%N >"$WORK/many.$i.end"; exit $st; } &
		clients+=($!)
		track $!
	done
	for k in $(seq 1000); do
		[ "$(rts_qps_a)" -ge $((base + n)) ] && break
		sleep 0.01
	done
	t_go=$(date +%s.%N)
	touch "$go"
	for i in "${!clients[@]}"; do
		wait "${clients[$i]}" && ok=$((ok + 1))
		untrack "${clients[$i]}"
		v=$(field "$(cat "$WORK/many.$((i + 1))")" bw_avg_mbps)
		mbps="$mbps${mbps:+,}${v:-null}"
		v=$(field "$(cat "$WORK/many.$((i + 1))")" seconds)
		ends="$ends${ends:+,}$(cat "$WORK/many.$((i + 1)).end")"
		spans="$spans${spans:+,}${v:-null}"
	done
	t1=$(date +%s.%N)
	for i in "${servers[@]}"; do wait "$i" 2>/dev/null; untrack "$i"; done
	echo "{\"qps\":$n,\"bytes\":$size,\"iterations\":$iters,\"ok\":$ok," \
		"\"seconds\":$(calc "$t1 - $t0"),\"go\":$t_go,\"mbps\":[$mbps],\"ends\":[$ends]," \
		"\"transfer_seconds\":[$spans]," \
		"\"timeouts\":$(($(rocemu_counter a timeouts) - to0))," \
		"\"ring_drops\":$(($(rocemu_counter b drop_ring_full) - rd0))," \
		"\"duplicates\":$(($(rocemu_counter b duplicate_request) - dup0))}"
}
rocemu_counter() { # SIDE NAME
	local sock=$SOCK_A
	[ "$1" = b ] && sock=$SOCK_B
	"$BUILD/rocemuctl" -s "$sock" stats | awk -v n="$2" '$1 == n { print $2 }'
}
MANY=32 MANY_ITERS=100 LOAD_ITERS=200
[ "$QUICK" = 1 ] && MANY_ITERS=20 LOAD_ITERS=40
# side_by_side KIND REP FN "BASE ARGS" "TEST ARGS": a target's baseline run and its test
# run next to each other, tagged with REP; the baseline goes first in odd reps and second
# in even ones. This VM's speed drifts by 10-30% within a run, more than the gaps these
# targets measure: two neighbouring runs see nearly the same machine, the alternation
# cancels a steady drift, and the report takes the median of the reps' own ratios.
side_by_side() {
	local kind=$1 rep=$2 fn=$3 first=$4 second=$5 out
	[ $((rep % 2)) = 0 ] && first=$5 second=$4
	out=$($fn $first) && record "$kind" "{\"rep\":$rep,${out#\{}"
	out=$($fn $second) && record "$kind" "{\"rep\":$rep,${out#\{}"
}
# Two baselines, the same bytes each: one pair writing 1 MiB again and again (its two
# buffers stay in the cache), and one pair writing 32 MiB messages, which touches as much
# memory as the 32 pairs' buffers together (the target's baseline: the transport, not the
# CPU's cache, is what is measured).
say "many QPs: $MANY rdma-write pairs at once, $MANY_ITERS x 1 MiB each, against one pair alone"
for rep in $(seq "$KEY_REPS"); do
	[ "$rep" -le "$REPS" ] && record many "$(many_pairs 1 1048576 $((MANY * MANY_ITERS)))"
	side_by_side many "$rep" many_pairs "1 $((MANY * 1048576)) $MANY_ITERS" \
		"$MANY 1048576 $MANY_ITERS"
done
# many_qp_run QPS BYTES ROUNDS [FLAGS]: one process a side with QPS QPs (test/many_qp under
# rocemu-run), every QP's WRITE (READ with -r) outstanding at once each round; one JSON
# object
many_qp_run() {
	local qps=$1 bytes=$2 rounds=$3 last=${4:-} server out to0 rd0 mbps
	"${IN_B[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SOCK_B" "$BUILD/test/many_qp" -q "$qps" \
		-s "$bytes" -n "$rounds" server >/dev/null 2>&1 &
	server=$!
	track $server
	sleep 0.3
	to0=$(rocemu_counter a timeouts) rd0=$(rocemu_counter b drop_ring_full)
	out=$("${IN_A[@]}" timeout 120 "$BUILD/rocemu-run" -D "$SOCK_A" "$BUILD/test/many_qp" \
		-q "$qps" -s "$bytes" -n "$rounds" $last client "$ADDR_B" 2>&1)
	wait "$server" 2>/dev/null
	untrack $server
	mbps=$(sed -n 's/^ok .*goodput \([0-9.]*\) MB\/s$/\1/p' <<<"$out")
	[ -n "$mbps" ] || { say "many_qp -q $qps failed: $out"; return 1; }
	echo "{\"qps\":$qps,\"bytes\":$bytes,\"rounds\":$rounds,\"mbps_1e6\":$mbps," \
		"\"timeouts\":$(($(rocemu_counter a timeouts) - to0))," \
		"\"ring_drops\":$(($(rocemu_counter b drop_ring_full) - rd0))}"
}
# the same program with one QP moving each round's 32 MiB alone is its baseline; 24 rounds
# take about a second here (8, a quarter of one, left a run at the mercy of a hiccup)
MANY_QPS=128 MANY_QP_ROUNDS=24
[ "$QUICK" = 1 ] && MANY_QP_ROUNDS=8
say "many QPs: one process with $MANY_QPS QPs a side (test/many_qp), 256 KiB on each per round, against one QP with 32 MiB, $MANY_QP_ROUNDS rounds"
for rep in $(seq "$KEY_REPS"); do
	side_by_side many_qp "$rep" many_qp_run "1 $((MANY_QPS * 262144)) $MANY_QP_ROUNDS" \
		"$MANY_QPS 262144 $MANY_QP_ROUNDS"
done

# lat_beside KIND LOAD...: the 64-byte latency, one WRITE at a time, while LOAD runs. A
# run the load did not outlast mixes loaded and idle round trips: it is kept apart
# (KIND_partial) and left out of the figure.
lat_beside() {
	local kind=$1 load out
	shift
	"$@" >"$WORK/load.json" &
	load=$!
	sleep 1
	if out=$(rdma_write 64 1000 --tx-depth 1); then
		if kill -0 $load 2>/dev/null; then
			record "$kind" "$out"
		else
			say "the load ended before the 64 B run did: that run is left out"
			record "${kind}_partial" "$out"
		fi
	fi
	wait $load
}
say "many QPs: 64-byte WRITEs one at a time, alone and while $((MANY - 1)) QPs stream 1 MiB writes"
for rep in $(seq "$REPS"); do
	out=$(rdma_write 64 1000 --tx-depth 1) && record lat_alone "$out"
	lat_beside lat_loaded many_pairs $((MANY - 1)) 1048576 "$LOAD_ITERS"
done
# The same 31 streams from one process (test/many_qp, rounds back to back): the latency
# without 62 processes beside it
say "many QPs: 64-byte WRITEs one at a time while 31 QPs of one process stream 1 MiB writes"
for rep in $(seq "$REPS"); do
	lat_beside lat_loaded_1p many_qp_run $((MANY - 1)) 1048576 150 -l
done
# A READ's responses take turns like requests: one QP READing 64 MiB messages back to back
# (the responder is the daemon that the 64-byte WRITEs go to)
say "many QPs: 64-byte WRITEs one at a time while one QP READs 64 MiB messages"
for rep in $(seq "$REPS"); do
	lat_beside lat_beside_read many_qp_run 1 67108864 150 "-l -r"
done

say "memory: the daemon's VmRSS - VmLck with 1,000 MRs and 1,000 QPs"
out=$("${IN_A[@]}" timeout 120 "$BUILD/bench/regcost" objs "$SOCK_A" "$DAEMON_A") &&
	record objs "$out" || say "regcost objs failed"

say "registration: 1 GiB MR against mlock of 1 GiB, $KEY_REPS times each (takes a while)"
out=$("${IN_A[@]}" timeout 300 "$BUILD/bench/regcost" reg "$SOCK_A" -r "$KEY_REPS") &&
	record reg "$out" || say "regcost reg failed"

# ---- 3. the report ----

T_END=$(date +%s.%N)
python3 - "$RAW" "$OUT" "$T_START" "$T_END" "$(nproc)" "$LOAD_START" "$(cut -d' ' -f1 /proc/loadavg)" \
	<<'EOF' || die "report failed"
import json, statistics, sys

raw, out, t0, t1, ncpu, load0, load1 = sys.argv[1:8]
rows = [json.loads(l) for l in open(raw)]
def kind(k): return [r for r in rows if r["kind"] == k]
def med(v): return statistics.median(v) if v else None
MIB = 1048576.0

res = {"machine": {"cpus": int(ncpu), "loadavg_1min_start": float(load0),
                   "loadavg_1min_end": float(load1)},
       "run_seconds": round(float(t1) - float(t0), 1), "baselines": {}, "rocemu": {}}
b, r = res["baselines"], res["rocemu"]

b["iperf3_gbps"] = med([x["end"]["sum_received"]["bits_per_second"] / 1e9
                        for x in kind("iperf3")])
b["iperf3_samples"] = len(kind("iperf3"))
for size in (4150, 100):
    p = [x for x in kind("pump") if x["size"] == size]
    b[f"pump_{size}"] = {
        "fps": med([x["rx"]["fps"] for x in p]), "gbps": med([x["rx"]["gbps"] for x in p]),
        "tx_fps": med([x["tx"]["fps"] for x in p]),
        "ring_drops": [x["rx"]["ring_drops"] for x in p], "samples": len(p)}
for mode, busy in (("block", False), ("busy", True)):
    u = [x for x in kind("udp") if x["busy"] == busy]
    b[f"udp_pingpong_{mode}"] = {"median_us": med([x["median_us"] for x in u]),
                                 "p99_us": med([x["p99_us"] for x in u]), "samples": len(u)}

def gbps(mibps): return mibps * MIB * 8 / 1e9
goodput = {}
for mtu in (4096, 1024):
    g = {}
    for x in kind("write"):
        if x["mtu"] == mtu:
            g.setdefault(x["bytes"], []).append(x)
    goodput[mtu] = {size: {"mbps": med([x["bw_avg_mbps"] for x in v]),
                           "gbps": gbps(med([x["bw_avg_mbps"] for x in v])),
                           "mpps": med([x["msg_rate_mpps"] for x in v]),
                           "samples_mbps": [x["bw_avg_mbps"] for x in v],
                           "iterations": [x["iterations"] for x in v],
                           "seconds": [x["seconds"] for x in v]}
                    for size, v in sorted(g.items())}
r["goodput"] = {str(m): {str(s): v for s, v in g.items()} for m, g in goodput.items()}
g1m = goodput[4096].get(1048576, {}).get("gbps")
rate64 = goodput[4096].get(64, {}).get("mpps")
r["goodput_1MiB_4096_gbps"] = g1m
r["goodput_1MiB_1024_gbps"] = goodput[1024].get(1048576, {}).get("gbps")
r["msg_rate_64B_mpps"] = rate64

lw = kind("lat_rdma_write")
r["lat_rdma_write_mean_us"] = med([1 / x["msg_rate_mpps"] for x in lw if x["msg_rate_mpps"]])
# the medians of regcost lat's runs of one kind, the client blocking or busy
def lat_summary(k, busy):
    l = [x for x in kind(k) if x["busy"] == busy]
    return {"median_us": med([x["median_us"] for x in l]),
            "p99_us": med([x["p99_us"] for x in l]),
            "mean_us": med([x["mean_us"] for x in l]), "samples": len(l)}
for mode, busy in (("block", False), ("client_busy", True)):
    for k in ("lat", "lat_pinned", "lat_daemon_busy"):
        r[f"{k}_{mode}"] = lat_summary(k, busy)
cpu = kind("cpu")
def per_gb(x, side):
    gb = x["run"]["iterations"] * x["run"]["bytes"] / 1e9
    return x[f"ticks_{side}"] / x["hz"] / gb
r["cpu_s_per_gb"] = {"requester_a": med([per_gb(x, "a") for x in cpu]),
                     "responder_b": med([per_gb(x, "b") for x in cpu]), "samples": len(cpu)}
def strip(x): return {k: v for k, v in x.items() if k != "kind"} if x else None
reg = strip((kind("reg") or [None])[0])
r["reg_1GiB"] = reg
objs = strip((kind("objs") or [None])[0])
r["daemon_memory"] = objs
for side in "ab":
    c = kind(f"counters_{side}")
    if c:
        r[f"counters_{side}"] = {k: v for k, v in c[0].items() if k != "kind" and v}

def ratio(a, base):
    return a / base if a is not None and base else None
pump4150, pump100 = b["pump_4150"], b["pump_100"]
ub, us = b["udp_pingpong_block"], b["udp_pingpong_busy"]
lb, lc = r["lat_block"], r["lat_client_busy"]
ldb, ldc = r["lat_daemon_busy_block"], r["lat_daemon_busy_client_busy"]
own_mib = objs["own_kb"] / 1024 if objs else None
ops = kind("ops")
def ops_med(k): return med([o[k] for o in ops])
targets14 = [
    ("1 MiB READ goodput / 1 MiB WRITE goodput (same run)", ops_med("read_vs_write"), ">=", 0.9),
    ("1 MiB SEND goodput / 1 MiB WRITE goodput (same run)", ops_med("send_vs_write"), ">=", 0.9),
]
vw, vb, vl = kind("verbs_rdma_write"), kind("verbs_write_bw"), kind("verbs_write_lat")
vu = kind("verbs_ucx_put")
verbs = res["rocemu"]["verbs"] = {
    "rdma_write_1MiB_mbps": med([x["bw_avg_mbps"] for x in vw]),
    "ib_write_bw_1MiB_mbps": med([x["bw_avg_mbps"] for x in vb]),
    "ib_write_lat_2B_typical_us": med([x["t_typical_us"] for x in vl]),
    "ib_write_lat_2B_p99_us": med([x["p99_us"] for x in vl]),
    "ucx_put_bw_1MiB_mbps": med([x["bw_avg_mbps"] for x in vu]),
    "samples": len(vb)}
targets15 = [
    ("ib_write_bw -s 1M under rocemu-run / rdma-write -s 1M (same run)",
     ratio(verbs["ib_write_bw_1MiB_mbps"], verbs["rdma_write_1MiB_mbps"]), ">=", 0.95),
    ("ib_write_lat -s 2 median / 64 B post-to-completion median",
     ratio(verbs["ib_write_lat_2B_typical_us"], lc["median_us"]), "<=", 1.1),
]
targets = [
    ("1 MiB goodput (PMTU 4096) / iperf3 TCP", ratio(g1m, b["iperf3_gbps"]), ">=", 1.0),
    ("1 MiB goodput (PMTU 4096) / pump 4150 B Gbit/s", ratio(g1m, pump4150["gbps"]), ">=", 0.6),
    ("64 B message rate / pump 100 B frames/s",
     ratio(rate64 * 1e6 if rate64 else None, pump100["fps"]), ">=", 0.5),
    ("64 B write latency median, rocemud default / UDP blocking median",
     ratio(lc["median_us"], ub["median_us"]), "<=", 1.25),
    ("64 B write latency median, daemon busy-poll / UDP busy-poll median",
     ratio(ldc["median_us"], us["median_us"]), "<=", 1.25),
    ("1 GiB reg_mr / mlock 1 GiB (median of each rep's ratio)",
     reg["reg_over_mlock"] if reg else None,
     "<=", 1.2),
    ("daemon VmRSS - VmLck, 1000 MRs + 1000 QPs (MiB)", own_mib, "<", 64.0),
]
tres = []
for name, val, op, lim in targets:
    met = None if val is None else (val >= lim if op == ">=" else
                                    val <= lim if op == "<=" else val < lim)
    tres.append({"target": name, "value": val, "need": f"{op} {lim}",
                 "status": "n/a" if met is None else "met" if met else "missed"})
tres[3]["note"] = ("the client polls its CQ, as ib_write_lat does by default; waiting on the "
                   "completion channel instead (ib_write_lat -e) the ratio is %s" %
                   (None if not lb["median_us"] or not ub["median_us"] else
                    round(lb["median_us"] / ub["median_us"], 2)))
tres[4]["note"] = ("rocemud --busy-poll 1000 and the client both busy-polling; with the "
                   "client blocking the ratio is %s" %
                   (None if not ldb["median_us"] or not us["median_us"] else
                    round(ldb["median_us"] / us["median_us"], 2)))
for name, val, op, lim in targets14 + targets15:
    met = None if val is None else (val >= lim if op == ">=" else val <= lim)
    tres.append({"target": name, "value": val, "need": f"{op} {lim}",
                 "status": "n/a" if met is None else "met" if met else "missed"})
tres[-1]["note"] = ("ib_write_lat's t_typical is half a ping-pong of WRITEs (each side polls "
                    "for the other's data); the baseline is regcost's median from a post to "
                    "its completion (the WRITE and its ACK), the client polling its CQ")
def jain(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else None
def agg_mbps(x): return x["qps"] * x["bytes"] * x["iterations"] / MIB / x["seconds"]
# the same bytes over the span in which transfers ran: from the first client's first post
# (its end less its own transfer time) to the last one's end, process start-up left out
def transfer_mbps(x):
    if None in x["transfer_seconds"] or not x["ends"]:
        return None
    first = min(e - s for e, s in zip(x["ends"], x["transfer_seconds"]))
    return x["qps"] * x["bytes"] * x["iterations"] / MIB / (max(x["ends"]) - first)
# the same bytes from the moment every client was connected and let go (--start-file) to
# the last one's end: what the transport moved while all of them ran
def together_mbps(x):
    if not x.get("go") or not x["ends"]:
        return None
    return x["qps"] * x["bytes"] * x["iterations"] / MIB / (max(x["ends"]) - x["go"])
one = [x for x in kind("many") if x["qps"] == 1 and x["ok"] == 1 and x["bytes"] == MIB]
many = [x for x in kind("many") if x["qps"] > 1]
# one pair touching as much memory as the many: its message as large as all their buffers
one_wide = [x for x in kind("many") if x["qps"] == 1 and x["ok"] == 1 and many and
            x["bytes"] == many[0]["qps"] * many[0]["bytes"]]
la, ll, ll1 = kind("lat_alone"), kind("lat_loaded"), kind("lat_loaded_1p")
llr = kind("lat_beside_read")
def lat_us(l): return med([1 / x["msg_rate_mpps"] for x in l if x["msg_rate_mpps"]])
mq = res["rocemu"]["many_qps"] = {
    "qps": many[0]["qps"] if many else None,
    "one_qp_mbps": med([agg_mbps(x) for x in one]),
    "aggregate_mbps": med([agg_mbps(x) for x in many if x["ok"] == x["qps"]]),
    "aggregate_transfer_mbps": med([v for v in (transfer_mbps(x) for x in many
                                                if x["ok"] == x["qps"]) if v is not None]),
    "one_qp_transfer_mbps": med([v for v in map(transfer_mbps, one) if v is not None]),
    "one_qp_same_memory_transfer_mbps": med([v for v in map(transfer_mbps, one_wide)
                                             if v is not None]),
    "aggregate_together_mbps": med([v for v in (together_mbps(x) for x in many
                                                if x["ok"] == x["qps"]) if v is not None]),
    "one_qp_together_mbps": med([v for v in map(together_mbps, one) if v is not None]),
    "one_qp_same_memory_together_mbps": med([v for v in map(together_mbps, one_wide)
                                             if v is not None]),
    "jain": med([jain(x["mbps"]) for x in many]),
    "timeouts": [x["timeouts"] for x in many], "ring_drops": [x["ring_drops"] for x in many],
    "duplicates": [x["duplicates"] for x in many],
    "one_qp_timeouts": [x["timeouts"] for x in one],
    "lat_64B_alone_us": lat_us(la), "lat_64B_loaded_us": lat_us(ll),
    "lat_64B_loaded_one_process_us": lat_us(ll1), "samples": len(many),
    "lat_64B_beside_read_us": lat_us(llr),
    "lat_64B_loaded_runs": [len(ll), len(ll1)],
    "lat_64B_runs_left_out": [len(kind("lat_loaded_partial")),
                              len(kind("lat_loaded_1p_partial")),
                              len(kind("lat_beside_read_partial"))]}
# a target's ratio: each rep's test run against the baseline run beside it (side_by_side),
# then the median of those ratios
def rep_ratios(samples, value):
    reps = {}
    for x in samples:
        if "rep" in x:
            reps.setdefault(x["rep"], {})["base" if x["qps"] == 1 else "test"] = value(x)
    return [p["test"] / p["base"] for _, p in sorted(reps.items())
            if p.get("base") and p.get("test")]
mq["rep_ratios"] = rep_ratios(kind("many"), lambda x: together_mbps(x)
                              if x["ok"] == x["qps"] else None)
mqp = [x for x in kind("many_qp") if x["qps"] > 1]
mqp1 = [x for x in kind("many_qp") if x["qps"] == 1]
mq["one_process_rep_ratios"] = rep_ratios(kind("many_qp"), lambda x: x["mbps_1e6"])
mq.update({"one_process_qps": mqp[0]["qps"] if mqp else None,
           "one_process_mbps": med([x["mbps_1e6"] * 1e6 / MIB for x in mqp]),
           "one_process_one_qp_mbps": med([x["mbps_1e6"] * 1e6 / MIB for x in mqp1]),
           "one_process_timeouts": [x["timeouts"] for x in mqp],
           "one_process_ring_drops": [x["ring_drops"] for x in mqp]})
targets19 = [
    ("aggregate goodput, %s QPs at once / one QP over as much memory (rep by rep)" %
     mq["qps"], med(mq["rep_ratios"]), ">=", 0.9),
    ("aggregate goodput, %s QPs of one process / its one QP alone (rep by rep)" %
     mq["one_process_qps"], med(mq["one_process_rep_ratios"]), ">=", 0.9),
    ("Jain's fairness index over the %s QPs' goodputs" % mq["qps"], mq["jain"], ">=", 0.95),
]
for name, val, op, lim in targets19:
    met = None if val is None else val >= lim
    tres.append({"target": name, "value": val, "need": f"{op} {lim}",
                 "status": "n/a" if met is None else "met" if met else "missed"})
res["rocemu"]["ops"] = {k: ops_med(k) for k in ("write_mbps", "read_mbps", "send_mbps",
                                                "fetch_add_per_s", "write64_per_s",
                                                "send_rtt_median_us")}
# issue 31, latency and the CPU: each ratio in this run
ci, cpp = kind("cpu_idle"), kind("cpu_pingpong")
def cpu_s(rows, side, per_second=False):
    return med([x[f"ticks_{side}"] / x["hz"] / (x["seconds"] if per_second else 1)
                for x in rows])
cpu = res["rocemu"]["cpu"] = {
    "idle_seconds": ci[0]["seconds"] if ci else None,
    "idle_a_s": cpu_s(ci, "a"), "idle_b_s": cpu_s(ci, "b"),
    "pingpong_a_per_s": cpu_s(cpp, "a", True), "pingpong_b_per_s": cpu_s(cpp, "b", True),
    "pingpong_median_us": med([x["run"]["median_us"] for x in cpp])}
idle_total = (None if cpu["idle_a_s"] is None or cpu["idle_b_s"] is None
              else cpu["idle_a_s"] + cpu["idle_b_s"])
targets31 = [
    ("64 B post-to-completion, client polls, default daemons / UDP blocking RTT",
     ratio(lc["median_us"], ub["median_us"]), "<=", 2.0),
    ("the same, client asleep on its CQ / the client polling",
     ratio(lb["median_us"], lc["median_us"]), "<=", 1.25),
    ("the same, rocemud --busy-poll, client polls / UDP busy-polling RTT",
     ratio(ldc["median_us"], us["median_us"]), "<=", 1.5),
    ("FETCH_ADD rate / 64 B WRITE rate, 8 in flight each (same run)",
     ops_med("fetch_add_vs_write64") if ops and all("fetch_add_vs_write64" in o for o in ops)
     else None, ">=", 0.5),
    ("both daemons' CPU seconds over %s s idle" % cpu["idle_seconds"], idle_total, "<=", 0.1),
]
for name, val, op, lim in targets31:
    met = None if val is None else (val >= lim if op == ">=" else val <= lim)
    tres.append({"target": name, "value": val, "need": f"{op} {lim}",
                 "status": "n/a" if met is None else "met" if met else "missed"})
res["targets"] = tres
json.dump(res, open(f"{out}/results.json", "w"), indent=1)

# gnuplot data: size, Gbit/s at 4096, at 1024
with open(f"{out}/goodput.dat", "w") as f:
    for size in sorted(set(goodput[4096]) | set(goodput[1024])):
        f.write("%d %s %s\n" % (size, *[("%.4f" % goodput[m][size]["gbps"]) if size in goodput[m]
                                        else "NaN" for m in (4096, 1024)]))
with open(f"{out}/baselines.env", "w") as f:
    f.write("IPERF=%s\nPUMP=%s\n" % (b["iperf3_gbps"] or 0, pump4150["gbps"] or 0))

def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v
P = print
P()
P("rocemu benchmark: %s CPUs, one veth between two namespaces, MTU 9000; medians; %.0f s"
  % (ncpu, res["run_seconds"]))
P("load average (1 min) %s at the start, %s at the end: anything else running skews "
  "every figure" % (load0, load1))
P("=" * 78)
P("baselines")
P("  %-52s %s Gbit/s" % ("iperf3 single-stream TCP", fmt(b["iperf3_gbps"])))
for size, p in ((4150, pump4150), (100, pump100)):
    P("  %-52s %s frames/s, %s Gbit/s" % (f"raw pump, {size}-byte frames (sendmmsg -> V3 ring)",
                                           fmt(p["fps"], "%.0f"), fmt(p["gbps"])))
P("  %-52s median %s us, p99 %s us" % ("UDP ping-pong 64 B, blocking (RTT)",
                                        fmt(ub["median_us"]), fmt(ub["p99_us"])))
P("  %-52s median %s us, p99 %s us" % ("UDP ping-pong 64 B, busy-polling (RTT)",
                                        fmt(us["median_us"]), fmt(us["p99_us"])))
P("rocemu: RDMA WRITE goodput (rdma-write --tx-depth 128; MB = 2^20 bytes)")
P("  %10s  %12s %10s %12s  %12s %10s %12s" % ("bytes", "4096 MB/s", "Gbit/s", "Mmsg/s",
                                              "1024 MB/s", "Gbit/s", "Mmsg/s"))
for size in sorted(set(goodput[4096]) | set(goodput[1024])):
    cells = []
    for m in (4096, 1024):
        v = goodput[m].get(size)
        cells += [fmt(v and v["mbps"]), fmt(v and v["gbps"], "%.3f"), fmt(v and v["mpps"], "%.4f")]
    P("  %10d  %12s %10s %12s  %12s %10s %12s" % (size, *cells))
P("  %-52s %s Mmsg/s" % ("64 B message rate (PMTU 4096)", fmt(rate64, "%.4f")))
P("  %-52s %s us (mean = 1 / MsgRate)" % ("64 B latency, rdma-write --tx-depth 1",
                                          fmt(r["lat_rdma_write_mean_us"])))
P("  %-52s median %s us, p99 %s us" % ("64 B post-to-completion, client polls its CQ",
                                        fmt(lc["median_us"]), fmt(lc["p99_us"])))
P("  %-52s median %s us, p99 %s us" % ("  the same, client sleeps on the CQ's channel",
                                        fmt(lb["median_us"]), fmt(lb["p99_us"])))
for mode, what in (("client_busy", "polls"), ("block", "sleeps")):
    lp = r[f"lat_pinned_{mode}"]
    P("  %-52s median %s us, p99 %s us" % (f"  daemons on CPUs 0 and 1, client {what}",
                                            fmt(lp["median_us"]), fmt(lp["p99_us"])))
P("  %-52s median %s us, p99 %s us" % ("  the same, rocemud --busy-poll, client blocking",
                                        fmt(ldb["median_us"]), fmt(ldb["p99_us"])))
P("  %-52s median %s us, p99 %s us" % ("  the same, rocemud --busy-poll, client busy-polls",
                                        fmt(ldc["median_us"]), fmt(ldc["p99_us"])))
P("  %-52s requester %s, responder %s" % ("CPU seconds per GB (1 MiB writes)",
                                          fmt(r["cpu_s_per_gb"]["requester_a"], "%.3f"),
                                          fmt(r["cpu_s_per_gb"]["responder_b"], "%.3f")))
if reg:
    P("  %-52s reg %.3f s (dereg %.3f), mlock %.3f s (munlock %.3f)" % (
        "register 1 GiB (fresh mapping), median of %d" % reg["reps"], reg["reg_s"],
        reg["dereg_s"], reg["mlock_s"], reg["munlock_s"]))
    P("  %-52s reg %.3f s" % ("register 1 GiB already written", reg["reg_touched_s"]))
    P("  %-52s anonymous %s, shmem %s" % ("transparent huge pages", reg["thp"],
                                          reg["shmem_thp"]))
if objs:
    P("  %-52s %.1f MiB idle, %.1f MiB with them (VmLck %.1f MiB)" % (
        "daemon VmRSS - VmLck, %d MRs + %d QPs" % (objs["mrs"], objs["qps"]),
        objs["own_kb_before"] / 1024, objs["own_kb"] / 1024, objs["lck_kb"] / 1024))
for side, role in (("a", "requester"), ("b", "responder")):
    c = r.get(f"counters_{side}")
    if c:
        P("  %-52s %s" % (f"rocemud counters, {role} (whole run, nonzero)",
                          ", ".join(f"{k} {v}" for k, v in c.items() if k != "fault")))
o = res["rocemu"]["ops"]
P("rocemu: READ, SEND and atomics (regcost ops: 1 MiB, 8 in flight, client sleeps on its CQs)")
P("  %-52s WRITE %s, READ %s, SEND %s MB/s" % ("1 MiB goodput", fmt(o["write_mbps"]),
                                               fmt(o["read_mbps"]), fmt(o["send_mbps"])))
P("  %-52s %s /s" % ("8-byte FETCH_ADD rate, 8 in flight", fmt(o["fetch_add_per_s"], "%.0f")))
P("  %-52s %s /s" % ("64-byte WRITE rate, 8 in flight", fmt(o["write64_per_s"], "%.0f")))
P("  %-52s median %s us" % ("64 B SEND answered by a 64 B SEND (RTT)",
                             fmt(o["send_rtt_median_us"])))
P("rocemu: the daemons' CPU (default daemons: adaptive polling)")
P("  %-52s a %s s, b %s s" % ("CPU seconds over %s s idle" % cpu["idle_seconds"],
                               fmt(cpu["idle_a_s"]), fmt(cpu["idle_b_s"])))
P("  %-52s a %s, b %s (median RTT %s us)" % ("CPU seconds per second, 64 B ping-pong",
    fmt(cpu["pingpong_a_per_s"]), fmt(cpu["pingpong_b_per_s"]),
    fmt(cpu["pingpong_median_us"])))
P("unmodified perftest under rocemu-run, same daemons, same run")
P("  %-52s ib_write_bw %s, rdma-write %s MB/s" % ("1 MiB WRITE goodput, tx-depth 128",
    fmt(verbs["ib_write_bw_1MiB_mbps"]), fmt(verbs["rdma_write_1MiB_mbps"])))
P("  %-52s t_typical %s us, p99 %s us" % ("ib_write_lat -s 2",
    fmt(verbs["ib_write_lat_2B_typical_us"]), fmt(verbs["ib_write_lat_2B_p99_us"])))
P("  %-52s %s MB/s, rdma-write %s MB/s (x%s)" % ("UCX ucp_put_bw 1 MiB over rc_verbs",
    fmt(verbs["ucx_put_bw_1MiB_mbps"]), fmt(verbs["rdma_write_1MiB_mbps"]),
    fmt(ratio(verbs["ucx_put_bw_1MiB_mbps"], verbs["rdma_write_1MiB_mbps"]))))
P("many QPs at once: %s rdma-write pairs, 1 MiB writes, one daemon a side" % mq["qps"])
P("  %-52s %s MB/s, one QP alone %s MB/s (x%s)" % ("aggregate goodput (wall time)",
    fmt(mq["aggregate_mbps"]), fmt(mq["one_qp_mbps"]),
    fmt(ratio(mq["aggregate_mbps"], mq["one_qp_mbps"]))))
P("  %-52s %s MB/s, one QP alone %s MB/s (x%s)" % (
    "  over the transfers' span (no process start-up)", fmt(mq["aggregate_transfer_mbps"]),
    fmt(mq["one_qp_transfer_mbps"]),
    fmt(ratio(mq["aggregate_transfer_mbps"], mq["one_qp_transfer_mbps"]))))
P("  %-52s %s MB/s (x%s)" % ("  one QP over %s MiB (as much memory as all of them)" %
    ((mq["qps"] or 1)), fmt(mq["one_qp_same_memory_transfer_mbps"]),
    fmt(ratio(mq["aggregate_transfer_mbps"], mq["one_qp_same_memory_transfer_mbps"]))))
P("  %-52s %s MB/s, one QP alone %s MB/s (x%s)" % (
    "  from all connected (--start-file) to the last end", fmt(mq["aggregate_together_mbps"]),
    fmt(mq["one_qp_together_mbps"]),
    fmt(ratio(mq["aggregate_together_mbps"], mq["one_qp_together_mbps"]))))
P("  %-52s %s MB/s (x%s)" % ("  one QP over %s MiB, the same way" % ((mq["qps"] or 1)),
    fmt(mq["one_qp_same_memory_together_mbps"]),
    fmt(ratio(mq["aggregate_together_mbps"], mq["one_qp_same_memory_together_mbps"]))))
P("  %-52s x%s (each rep: %s)" % ("  the same, rep by rep (the target's measure)",
    fmt(med(mq["rep_ratios"])), " ".join(fmt(v) for v in mq["rep_ratios"])))
P("  %-52s %s" % ("Jain's fairness index of their goodputs", fmt(mq["jain"], "%.3f")))
P("  %-52s timer expiries %s, ring drops %s, duplicates %s" % (
    "per run (the responder's ring, the requester's timer)", mq["timeouts"], mq["ring_drops"],
    mq["duplicates"]))
P("  %-52s %s MB/s (one QP, same bytes a round: %s, x%s; rdma-write's one QP: x%s)" % (
    "%s QPs in one process (test/many_qp), all at once" % mq["one_process_qps"],
    fmt(mq["one_process_mbps"]), fmt(mq["one_process_one_qp_mbps"]),
    fmt(ratio(mq["one_process_mbps"], mq["one_process_one_qp_mbps"])),
    fmt(ratio(mq["one_process_mbps"], mq["one_qp_mbps"]))))
P("  %-52s x%s (each rep: %s)" % ("  against its one QP, rep by rep (the target's)",
    fmt(med(mq["one_process_rep_ratios"])),
    " ".join(fmt(v) for v in mq["one_process_rep_ratios"])))
P("  %-52s timer expiries %s, ring drops %s" % ("  per run", mq["one_process_timeouts"],
                                                mq["one_process_ring_drops"]))
P("  %-52s %s us alone, %s us loaded (x%s)" % (
    "64 B write latency (mean, tx-depth 1), %s QPs streaming" % ((mq["qps"] or 1) - 1),
    fmt(mq["lat_64B_alone_us"]), fmt(mq["lat_64B_loaded_us"]),
    fmt(ratio(mq["lat_64B_loaded_us"], mq["lat_64B_alone_us"]), "%.1f")))
P("  %-52s %s us loaded (x%s)" % (
    "  the same 31 streams from one process (test/many_qp)",
    fmt(mq["lat_64B_loaded_one_process_us"]),
    fmt(ratio(mq["lat_64B_loaded_one_process_us"], mq["lat_64B_alone_us"]), "%.1f")))
P("  %-52s %s us loaded (x%s)" % (
    "  beside one QP READing 64 MiB messages", fmt(mq["lat_64B_beside_read_us"]),
    fmt(ratio(mq["lat_64B_beside_read_us"], mq["lat_64B_alone_us"]), "%.1f")))
P("  %-52s %s, %s and %s; left out, the load ended first: %s, %s and %s" % (
    "  loaded runs kept (processes, one process, READ)", *mq["lat_64B_loaded_runs"],
    len(llr), *mq["lat_64B_runs_left_out"]))
P("targets")
for t in tres:
    P("  %-66s %8s %-7s %s" % (t["target"], fmt(t["value"]), t["need"], t["status"]))
    if "note" in t:
        P("      " + t["note"])
P("=" * 78)
EOF

if command -v gnuplot >/dev/null; then
	. "$OUT/baselines.env"
	gnuplot <<EOF || say "gnuplot failed"
set terminal pngcairo size 1000,640 font "sans,11"
set output "$OUT/goodput.png"
set title "rocemu RDMA WRITE goodput vs message size (veth, MTU 9000, tx-depth 128, medians)"
set logscale x 2
set xtics ("64 B" 64, "256 B" 256, "1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, \
           "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304)
set xrange [48:11184810]
set xlabel "RDMA WRITE message size"
set ylabel "goodput, Gbit/s"
set yrange [0:(($PUMP > $IPERF ? $PUMP : $IPERF) * 1.45)]
set grid
set key top right box opaque
plot "$OUT/goodput.dat" using 1:2 with linespoints lw 2 pt 7 title "rocemu, PMTU 4096", \
     "" using 1:3 with linespoints lw 2 pt 5 title "rocemu, PMTU 1024", \
     $IPERF with lines dt 2 lw 2 title sprintf("iperf3 TCP single stream (%.1f Gbit/s)", $IPERF), \
     $PUMP with lines dt 3 lw 2 title sprintf("raw frame pump, 4150 B (%.1f Gbit/s)", $PUMP), \
     0.6 * $PUMP with lines dt 4 lw 1 lc "gray" title "target: 0.6 x pump"
EOF
fi
say "results in $OUT/results.json, plot in $OUT/goodput.png"
