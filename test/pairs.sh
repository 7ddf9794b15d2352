# Sourced after daemons.sh by tests that run verbs programs in pairs under rocemu-run (the
# server in host b, the client in host a) and check the wire the daemons recorded.
#   passed TEXT / failed TEXT   count a check; finish NAME prints the totals and exits
#   pair NAME TO PROGRAM ARGS...
#                               the server runs PROGRAM ARGS (or SERVER_ARGS, when set), the
#                               client PROGRAM ARGS TO; OUT_S and OUT_C hold their output;
#                               0 when both exit 0
#   pingpong NAME TO ARGS...    an ibv_*_pingpong pair: both must report their iterations,
#                               and the client the peer's GID PINGPONG_GID when that is set
#   perf NAME ROWS TO ARGS...   a perftest pair with ROWS rows in the client's table, run once
#                               more when perftest could not fit its clock
#   write_verified SIZE TO      rdma-write -s SIZE -n 10 --verify from host a to TO, host b's
#                               address: byte-exact on both ends
#   check_wire CAP FILTER MIN   every frame of CAP passes rocemuctl decode (ICRC), the
#                               reference ICRC and tshark, and at least MIN match FILTER
RUN=$BUILD/rocemu-run
FAILED=()
PASSED=0
RW_PORT=$((30000 + RANDOM % 5000))
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

passed() { echo "[${SECONDS}s] $*"; PASSED=$((PASSED + 1)); }
failed() { echo "FAILED: $1"; FAILED+=("$1"); }

finish() {
	echo "$1: $PASSED passed, ${#FAILED[@]} failed"
	[ ${#FAILED[@]} -eq 0 ] || { printf 'FAILED: %s\n' "${FAILED[@]}"; exit 1; }
	exit 0
}

pair() {
	local name=$1 to=$2 server status
	shift 2
	OUT_S=$WORK/$name.server OUT_C=$WORK/$name.client
	"${IN_B[@]}" timeout 120 "$RUN" -D "$SOCK_B" "${SERVER_ARGS[@]:-$@}" >"$OUT_S" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	# The server listens once its device is open; the client retries its connect anyway.
	sleep 0.3
	"${IN_A[@]}" timeout 120 "$RUN" -D "$SOCK_A" "$@" "$to" >"$OUT_C" 2>&1 </dev/null
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
	local size=$1 to=$2 server status
	RW_PORT=$((RW_PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $RW_PORT -s "$size" \
		--verify >"$WORK/rw.server" 2>&1 &
	server=$!
	PIDS+=($server)
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $RW_PORT -s "$size" -n 10 \
		--verify "$to" >"$WORK/rw.client" 2>&1
	status=$?
	wait $server || status=$?
	if [ $status -eq 0 ] && grep -q 'verify: OK' "$WORK/rw.client" &&
		grep -q 'verify: OK' "$WORK/rw.server"; then
		passed "rdma-write -s $size -n 10 --verify to $to: byte-exact"
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
	pair "$name" "$to" "$@" ||
		{ grep -q 'Correlation coefficient r^2' "$OUT_C" "$OUT_S" && pair "$name" "$to" "$@"; }
	if [ $? -eq 0 ] && got=$(table_rows "$OUT_C") && [ "$got" -eq "$rows" ]; then
		last=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { l = $0 } END { print l }' "$OUT_C")
		passed "$name: $*: $got row(s), last:$(tr -s ' \t' ' ' <<<"$last")"
	else
		show_both
		failed "$name: $* (table rows ${got:-none}, wanted $rows)"
	fi
}

# Wireshark's guesses at what a SEND carries (iSER, NVMe, SMB Direct, ...) read arbitrary
# payload bytes as malformed protocols of their own: the ones this tshark has are turned off.
# A zero UDP checksum over IPv6 is an expert error by RFC 8200's rule, but RoCEv2 senders
# leave it 0 over IPv6 as over IPv4 (the ICRC covers the datagram): not held against a frame.
check_wire() {
	local cap=$1 filter=$2 min=$3 name out bad total ref h
	local -a no_guess=()
	name=$(basename "$cap")
	out=$("$BUILD/rocemuctl" decode "$cap" 2>&1)
	total=$(grep -cE '^ +[0-9]+ ' <<<"$out")
	bad=$(grep -E '^ +[0-9]+ ' <<<"$out" | grep -vc ' icrc ok$')
	[ "$bad" -eq 0 ] && [ "$total" -gt 0 ] &&
		passed "rocemuctl decode: $name: $total frames, every ICRC valid" ||
		failed "rocemuctl decode: $name: $bad of $total frames not ok"
	ref=$("$BUILD/test/pcap_icrc" "$cap") && passed "reference ICRC: $ref" || failed "reference ICRC: $ref"
	command -v tshark >/dev/null || return 0
	for h in eth_over_ib fc_infiniband sdp_infiniband iser_infiniband lnet_ib rpcrdma_infiniband \
		smb_direct_infiniband smcr_infiniband nvme_rdma mellanox_eoib; do
		HOME=$WORK tshark --disable-heuristic "$h" -r "$cap" -c 1 >/dev/null 2>&1 &&
			no_guess+=(--disable-heuristic "$h")
	done
	bad=$(HOME=$WORK tshark "${no_guess[@]}" -r "$cap" \
		-Y '(_ws.malformed || _ws.expert.severity >= warning) && !udp.checksum.zero' \
		-T fields -e frame.number 2>/dev/null | wc -l)
	total=$(HOME=$WORK tshark -r "$cap" -Y "$filter" 2>/dev/null | wc -l)
	[ "$bad" -eq 0 ] && [ "$total" -ge "$min" ] &&
		passed "tshark: $name: $total frames of '$filter', none malformed or warned about" ||
		failed "tshark: $name: $bad frames malformed or with warnings, $total of '$filter' (wanted $min)"
}
