#!/usr/bin/env bash
# rocemud --pcap: both daemons on lo record what they send and receive while rdma-write
# moves multi-packet and single-packet messages; after a clean stop, `rocemuctl decode`
# finds every frame ICRC-valid with the opcodes of the run, and tshark (when installed)
# decodes every frame as InfiniBand with no malformed packet or expert error. Then a small
# --pcap-max rotates the file once to FILE.1.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

PORT=$((30000 + RANDOM % 5000))
CTL=$BUILD/rocemuctl

# Both daemons again, each recording into its own file.
restart_recording() { # EXTRA_ARGS
	local side
	for side in a b; do [ -n "${DAEMON_PID[$side]:-}" ] && daemon_stop $side; done
	rm -f "$WORK"/a.pcap* "$WORK"/b.pcap*
	ROCEMUD_ARGS="--pcap $WORK/a.pcap $1" daemon_start a
	ROCEMUD_ARGS="--pcap $WORK/b.pcap $1" daemon_start b
}

transfer() { # SIZE ITERS [CLIENT ARGS]
	local size=$1 iters=$2
	shift 2
	PORT=$((PORT + 1))
	timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s "$size" --verify \
		>"$WORK/server.out" 2>&1 &
	local server=$!
	timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s "$size" -n "$iters" --verify "$@" \
		"$ADDR_B" >"$WORK/client.out" 2>&1 || { cat "$WORK/client.out"; fail "$size x $iters"; }
	wait $server || { cat "$WORK/server.out"; fail "server of $size x $iters"; }
}

check_decode() { # FILE MIN_PACKETS
	local file=$1 min=$2 n bad
	"$CTL" decode --json "$file" >"$WORK/decode.json" 2>"$WORK/decode.err" ||
		fail "rocemuctl decode $file: $(cat "$WORK/decode.err")"
	n=$(wc -l <"$WORK/decode.json")
	bad=$(grep -vc '"icrc_ok":true' "$WORK/decode.json")
	[ "$n" -ge "$min" ] || fail "$file: $n packets, expected at least $min"
	[ "$bad" -eq 0 ] || { grep -v '"icrc_ok":true' "$WORK/decode.json" | head -3; fail "$file: $bad frames not ICRC-valid"; }
	for op in WRITE_FIRST WRITE_MIDDLE WRITE_LAST WRITE_ONLY ACKNOWLEDGE; do
		grep -q "\"opcode_name\":\"[^\"]*$op" "$WORK/decode.json" || fail "$file: no $op packet"
	done
	echo "decode: $file: $n frames, every ICRC valid, $(grep -o 'opcodes: .*' "$WORK/decode.err")"
}

check_tshark() { # FILE
	local file=$1 total ib bad
	total=$(tshark -n -r "$file" -T fields -e frame.number 2>/dev/null | wc -l)
	ib=$(tshark -n -r "$file" -T fields -e frame.protocols 2>/dev/null |
		grep -c infiniband)
	bad=$(tshark -n -r "$file" \
		-Y "_ws.malformed || _ws.expert.severity >= error" -T fields -e frame.number 2>/dev/null | wc -l)
	[ "$total" -gt 0 ] && [ "$ib" -eq "$total" ] || fail "tshark: $file: $ib of $total frames InfiniBand"
	[ "$bad" -eq 0 ] || fail "tshark: $file: $bad frames malformed or with expert errors"
	echo "tshark: $file: all $total frames InfiniBand, none malformed, no expert errors"
}

topology_up lo
restart_recording ""
transfer 64K 20
transfer 8K 5 --mtu 4096
transfer 4K 5
"$CTL" -s "$SOCK_A" stats >"$WORK/stats-a"
daemon_stop a
daemon_stop b
sent=$(awk '$1 == "sent_pkts" {print $2}' "$WORK/stats-a")
for side in a b; do
	check_decode "$WORK/$side.pcap" $((20 * 16 + 10))
done
[ "$sent" -gt 0 ] || fail "no sent_pkts on a"
if command -v tshark >/dev/null; then
	export HOME=$WORK # tshark wants a writable profile directory, not root's
	for side in a b; do check_tshark "$WORK/$side.pcap"; done
else
	echo "tshark not installed: skipping the Wireshark check (apt-get install tshark)"
fi

# Rotation: a 64 KiB cap, more than that recorded: FILE.1 exists and both files decode.
restart_recording "--pcap-max 64K"
transfer 64K 10
daemon_stop a
daemon_stop b
[ -s "$WORK/b.pcap.1" ] || fail "--pcap-max 64K: no b.pcap.1"
size1=$(stat -c %s "$WORK/b.pcap.1")
[ "$size1" -le 65536 ] || fail "b.pcap.1 is $size1 bytes, over the cap"
"$CTL" decode "$WORK/b.pcap.1" >/dev/null 2>&1 && "$CTL" decode "$WORK/b.pcap" >/dev/null 2>&1 ||
	fail "rotated files do not decode"
echo "rotation: b.pcap.1 $size1 bytes, b.pcap $(stat -c %s "$WORK/b.pcap") bytes"
echo "pcap: OK"
