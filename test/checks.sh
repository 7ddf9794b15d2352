# Sourced by tests that count many checks and report them at the end (after daemons.sh,
# whose BUILD and WORK it uses).
#   passed TEXT / failed TEXT   count a check; finish NAME prints the totals and exits
#   daemons_alive               a check each that daemons a and b still run
#   check_wire CAP FILTER MIN   every frame of CAP passes rocemuctl decode (ICRC), the
#                               reference ICRC (test/pcap_icrc) and tshark, and at least MIN
#                               frames match the display FILTER (CHECK_WIRE_NO_TSHARK=1
#                               leaves tshark out: in an emulated guest it takes a minute)
#   decode_bad OUT              the frames of rocemuctl decode's output OUT whose ICRC is
#                               not ok (a GSO frame's pieces read "icrc ok  gso piece K of N")
FAILED=()
PASSED=0

passed() { echo "[${SECONDS}s] $*"; PASSED=$((PASSED + 1)); }
failed() { echo "FAILED: $1"; FAILED+=("$1"); }
# whatever a program did through the layers must not have taken its daemon down
daemons_alive() {
	local side
	for side in a b; do
		kill -0 "${DAEMON_PID[$side]}" 2>/dev/null && passed "rocemud $side still running" ||
			failed "rocemud $side died"
	done
}

finish() {
	echo "$1: $PASSED passed, ${#FAILED[@]} failed"
	[ ${#FAILED[@]} -eq 0 ] || { printf 'FAILED: %s\n' "${FAILED[@]}"; exit 1; }
	exit 0
}

# decode_bad OUT: frames of rocemuctl decode's output whose ICRC is not ok
decode_bad() {
	grep -E '^ *[0-9]+  ' <<<"$1" | grep -vcE ' icrc ok(  |$)'
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
	total=$(grep -cE '^ *[0-9]+  ' <<<"$out")
	bad=$(decode_bad "$out")
	if [ "$bad" -eq 0 ] && [ "$total" -gt 0 ]; then
		passed "rocemuctl decode: $name: $total frames, every ICRC valid"
	else
		grep -E '^ *[0-9]+  ' <<<"$out" | grep -vE ' icrc ok(  |$)' | head -n 8 | sed 's/^/  | /'
		failed "rocemuctl decode: $name: $bad of $total frames not ok"
	fi
	ref=$("$BUILD/test/pcap_icrc" "$cap") && passed "reference ICRC: $ref" || failed "reference ICRC: $ref"
	command -v tshark >/dev/null && [ -z "${CHECK_WIRE_NO_TSHARK:-}" ] || return 0
	for h in eth_over_ib fc_infiniband sdp_infiniband iser_infiniband lnet_ib rpcrdma_infiniband \
		smb_direct_infiniband smcr_infiniband nvme_rdma mellanox_eoib; do
		HOME=$WORK tshark --disable-heuristic "$h" -r "$cap" -c 1 >/dev/null 2>&1 &&
			no_guess+=(--disable-heuristic "$h")
	done
	HOME=$WORK tshark "${no_guess[@]}" -r "$cap" \
		-Y '(_ws.malformed || _ws.expert.severity >= warning) && !udp.checksum.zero' \
		-T fields -e frame.number -e _ws.col.Info -e _ws.expert.message >"$WORK/tshark.bad" 2>/dev/null
	bad=$(wc -l <"$WORK/tshark.bad")
	total=$(HOME=$WORK tshark -r "$cap" -Y "$filter" 2>/dev/null | wc -l)
	if [ "$bad" -eq 0 ] && [ "$total" -ge "$min" ]; then
		passed "tshark: $name: $total frames of '$filter', none malformed or warned about"
	else
		head -n 8 "$WORK/tshark.bad" | sed 's/^/  | /'
		failed "tshark: $name: $bad frames malformed or with warnings, $total of '$filter' (wanted $min)"
	fi
}
