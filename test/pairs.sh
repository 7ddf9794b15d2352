# Sourced after daemons.sh by tests that run verbs programs in pairs under rocemu-run: the
# server in host b, the client in host a. Brings checks.sh along.
#   pair NAME TO PROGRAM ARGS...
#                               the server runs PROGRAM ARGS (or SERVER_ARGS, when set), the
#                               client PROGRAM ARGS TO; OUT_S and OUT_C hold their output;
#                               0 when both exit 0. PAIR_SERVER=a puts the server in host a
#                               too (both ends on one daemon); PAIR_TIMEOUT (120 s) bounds each
#   pingpong NAME TO ARGS...    an ibv_*_pingpong pair: both must report their iterations,
#                               and the client the peer's GID PINGPONG_GID when that is set
#   perf NAME ROWS TO ARGS...   a perftest pair with ROWS rows in the client's table, run once
#                               more when perftest could not fit its clock
#   write_verified SIZE TO [COUNT]
#                               rdma-write -s SIZE -n COUNT (10) --verify from host a to TO,
#                               host b's address: byte-exact on both ends
#   peer_pair NAME PEER         a test peer (test/*_peer: "server" in host b, "client" in
#                               host a): passes when both exit 0; prints their check lines
#   cm_pair NAME SERVER... -- CLIENT...
#                               an rdma_cm pair: the server waited for until its daemon
#                               listens once more (CM_SERVER=a: on host a's daemon)
#   perftest_cm_pair NAME ARGS...
#                               perftest ARGS over rdma_cm as a cm_pair (the client adds host
#                               b's address; at nice 10, so that its server wins their race),
#                               run up to four times while perftest lost its own race or
#                               could not fit its clock
#   mark_refusals HOST NAME...  remembers those refused_NAME counters of HOST; then
#   refusals_moved HOST NAME=N...  passes when each moved by exactly N since
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
RUN=$BUILD/rocemu-run
RW_PORT=$((30000 + RANDOM % 5000))
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

# listens PID PREFIX...: whether the program timeout PID runs has a listening TCP socket in
# the namespace PREFIX runs commands in (its own: another pair's listener closing meanwhile
# must not hide it)
listens() {
	local program
	program=$(pgrep -P "$1" | head -n 1)
	shift
	[ -n "$program" ] && "$@" ss -Hltnp 2>/dev/null | grep -q "pid=$program,"
}

pair() {
	local name=$1 to=$2 server status side=${PAIR_SERVER:-b}
	local -n sprefix=IN_${side^^}
	local ssock=SOCK_${side^^}
	shift 2
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	"${sprefix[@]}" timeout "${PAIR_TIMEOUT:-120}" "$RUN" -D "${!ssock}" "${SERVER_ARGS[@]:-$@}" >"$OUT_S" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	# The server listens once its device is open, which on a busy machine can take longer
	# than the 0.3 s allowed before; perftest's client tries its connect only once. So wait
	# for the listening socket (5 s at most; then, whatever happened, the client will say).
	sleep 0.1
	for _ in $(seq 50); do
		listens "$server" "${sprefix[@]}" || ! kill -0 "$server" 2>/dev/null && break
		sleep 0.1
	done
	"${IN_A[@]}" timeout "${PAIR_TIMEOUT:-120}" "$RUN" -D "$SOCK_A" "$@" "$to" >"$OUT_C" 2>&1 </dev/null
	status=$?
	wait "$server" || status=$?
	return $status
}

show_both() {
	sed 's/^/  client| /' "$OUT_C" | tail -n 12
	sed 's/^/  server| /' "$OUT_S" | tail -n 12
}

pingpong() {
	local name=$1 to=$2 iters
	shift 2
	if pair "$name" "$to" "$@" &&
		iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$OUT_C") &&
		grep -qE '^[0-9]+ iters in' "$OUT_S" &&
		{ [ -z "${PINGPONG_GID:-}" ] || grep -q "GID $PINGPONG_GID" "$OUT_C"; }; then
		passed "$name: $*${PINGPONG_GID:+ (to GID $PINGPONG_GID)}: $iters"
	else
		show_both
		failed "$name: $*"
	fi
}

write_verified() {
	local size=$1 to=$2 count=${3:-10} server status
	RW_PORT=$((RW_PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $RW_PORT -s "$size" \
		--verify >"$WORK/rw.server" 2>&1 &
	server=$!
	PIDS+=($server)
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $RW_PORT -s "$size" -n "$count" \
		--verify "$to" >"$WORK/rw.client" 2>&1
	status=$?
	wait $server || status=$?
	if [ $status -eq 0 ] && grep -q 'verify: OK' "$WORK/rw.client" &&
		grep -q 'verify: OK' "$WORK/rw.server"; then
		passed "rdma-write -s $size -n $count --verify to $to: byte-exact"
	else
		tail -n 5 "$WORK/rw.client" "$WORK/rw.server" | sed 's/^/  | /'
		failed "rdma-write -s $size to $to"
	fi
}

table_rows() {
	awk '/#bytes/ { t = 1; next } t && /^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { n++ }
	     END { print n + 0 }' "$1"
}

perf() {
	local name=$1 rows=$2 to=$3 got last
	shift 3
	# perftest fits the CPU's clock rate against gettimeofday for each report and gives up
	# ("Correlation coefficient r^2 ... < 0.9") on a machine too noisy for its fit: its own
	# measurement, not the transfer, so such a run goes again
	pair "$name" "$to" "$@" ||
		{ grep -q 'Correlation coefficient r^2' "$OUT_C" "$OUT_S" &&
		  echo "  $name: perftest could not fit its clock (r^2 < 0.9); once more" &&
		  pair "$name" "$to" "$@"; }
	if [ $? -eq 0 ] && got=$(table_rows "$OUT_C") && [ "$got" -eq "$rows" ]; then
		last=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { l = $0 } END { print l }' "$OUT_C")
		passed "$name: $*: $got row(s), last:$(tr -s ' \t' ' ' <<<"$last")"
	else
		show_both
		failed "$name: $* (table rows ${got:-none}, wanted $rows)"
	fi
}

peer_pair() {
	local name=$1 peer=$2
	SERVER_ARGS=("$peer" server)
	if pair "$name" "$ADDR_B" "$peer" client; then
		passed "$name: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks"
	else
		show_both
		failed "$name"
	fi
	grep -hE '^(ok|FAIL)' "$OUT_C" "$OUT_S" | sed 's/^/  /'
	unset SERVER_ARGS
}

declare -A REFUSALS_MARK=()
mark_refusals() {
	local host=$1 name
	shift
	for name; do
		REFUSALS_MARK[$host.$name]=$(counter "$host" "refused_$name")
	done
}

refusals_moved() {
	local host=$1 kv name want got moved= ok=true
	shift
	for kv; do
		name=${kv%=*} want=${kv#*=}
		got=$(($(counter "$host" "refused_$name") - ${REFUSALS_MARK[$host.$name]:-0}))
		moved+="${moved:+, }$name +$got"
		[ "$got" -eq "$want" ] || ok=false
	done
	if $ok; then
		passed "daemon $host named each refusal: $moved"
	else
		failed "refusals on $host: $moved"
	fi
}

# listeners SIDE: how many rdma_cm listeners the side's daemon has
listeners() {
	local sock=$SOCK_A
	[ "$1" = b ] && sock=$SOCK_B
	"$BUILD/rocemuctl" -s "$sock" cm 2>/dev/null | grep -c 'state LISTEN'
}

# serve OUT ERR CMD...: CMD under rocemu-run in host CM_SERVER (b unless set) in the
# background ($server), for at most $T seconds (40 unless set), its output to OUT and its
# errors to ERR (- for OUT too; $PRELOAD, when set, is preloaded beside rocemu-run's
# library), waited for until its daemon has one listener more or it has exited (for at
# most 15 s: with another test run on the same two cores, a perftest server was seen to
# take more than 5, and its client then crashed in perftest's own retry after the REJ)
serve() {
	local out=$1 err=$2 before side=${CM_SERVER:-b}
	local -n prefix=IN_${side^^}
	local sock=SOCK_${side^^}
	local -a run=("${prefix[@]}" timeout "${T:-40}" env ${PRELOAD:+LD_PRELOAD="$PRELOAD"} "$RUN" -D "${!sock}")
	shift 2
	before=$(listeners "$side")
	if [ "$err" = - ]; then
		"${run[@]}" "$@" >"$out" 2>&1 </dev/null &
	else
		"${run[@]}" "$@" >"$out" 2>"$err" </dev/null &
	fi
	server=$!
	PIDS+=($server)
	for _ in $(seq 300); do
		[ "$(listeners "$side")" -gt "$before" ] || ! kill -0 "$server" 2>/dev/null && break
		sleep 0.05
	done
}

# cm_pair NAME SERVER... -- CLIENT...: the server in host CM_SERVER (b unless set; waited
# for until its daemon has one more listener), the client in host a; OUT_S and OUT_C hold
# their output, 0 when both exit 0.
cm_pair() {
	local name=$1 server status
	local -a s=()
	shift
	while [ "$1" != -- ]; do s+=("$1"); shift; done
	shift
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	serve "$OUT_S" - "${s[@]}"
	"${IN_A[@]}" timeout "${T:-40}" "$RUN" -D "$SOCK_A" "$@" >"$OUT_C" 2>&1 </dev/null
	RC_C=$?
	[ "$RC_C" -ne 0 ] && perftest_refused_too_soon "$OUT_C" && kill "$server" 2>/dev/null
	wait "$server"
	RC_S=$?
	status=$((RC_C | RC_S))
	return $status
}

# perftest_cm_pair NAME ARGS...: perftest's -R or --rdma_cm client can be refused before its
# server listened (perftest_refused_too_soon; the busier the machine, the likelier: seen
# twice in a row beside two CPU hogs, and three times in a row once in CI with the two
# builds' passes side by side), and perftest gives up when it cannot fit its clock on a
# noisy machine; either way the pair runs again, four runs at most, each retry said.
# The client runs at nice 10, so that on a busy machine its server wins their race: beside
# two CPU hogs, 6 of 40 sanitized ib_read_lat -R clients (the one with least to set up
# before its REQ) were refused at nice 0, none of 40 at nice 10.
perftest_cm_pair() {
	local name=$1 attempt
	shift
	for attempt in 1 2 3 4; do
		cm_pair "$name" "$@" -- nice -n 10 "$@" "$ADDR_B" && return 0
		if perftest_refused_too_soon "$OUT_C"; then
			echo "  $name: REJ 8, perftest's own race (run $attempt)"
		elif grep -q 'Correlation coefficient r^2' "$OUT_C" "$OUT_S"; then
			echo "  $name: perftest could not fit its clock (run $attempt)"
		else
			return 1
		fi
	done
	return 1
}
