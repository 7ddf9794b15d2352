#!/usr/bin/env bash
# UC queue pairs between two daemons in two network namespaces, both recording the wire:
# Debian's ibv_uc_pingpong (-c: the receiver checks every buffer) unmodified under
# rocemu-run, with messages inside one packet and across several (path MTU 1024); then
# test/uc_peer, 200 SEND and WRITE WITH IMMEDIATE messages of 1 byte to 8 packets, each
# checked byte by byte, first without loss (every one arrives), then with 5% of the
# client's packets dropped (dir=tx): every send still completes, some messages are lost
# and counted (uc_message_dropped, out_of_seq_request), those taken are exact, and nothing
# hangs (ibv_uc_pingpong would wait forever for a lost message). Every recorded frame must
# pass rocemuctl decode, the tests' reference ICRC (test/pcap_icrc) and tshark, and no UC
# packet may ask for an ACK nor any ACK be sent.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/uc_peer
command -v ibv_uc_pingpong >/dev/null ||
	skip "ibv_uc_pingpong is missing: scripts/install-deps.sh installs ibverbs-utils"
[ -x "$PEER" ] && [ -x "$BUILD/test/pcap_icrc" ] || fail "$PEER or pcap_icrc is missing (make build-tests)"

# The daemons sleep as soon as they have nothing to do, as on a machine with no CPU to
# spare (the default polls a while first when it has some): the wakeups must do it all.
ROCEMUD_ARGS="--poll-budget 0 ${ROCEMUD_ARGS:-}"
topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/uc-$side.pcap --pcap-max 2G" daemon_start $side
done

pingpong uc-pingpong-small "$ADDR_B" ibv_uc_pingpong -g 0 -c -s 512 -n 500
pingpong uc-pingpong-4k "$ADDR_B" ibv_uc_pingpong -g 0 -c -s 4096 -n 500
pingpong uc-pingpong-64k "$ADDR_B" ibv_uc_pingpong -g 0 -c -s 65536 -n 200
pingpong uc-pingpong-events "$ADDR_B" ibv_uc_pingpong -g 0 -c -e -s 3000 -n 200
# A UC message of many packets completes on the sender when the daemon sends its last
# packet, from the loop's scheduler rather than from the doorbell: that completion must
# wake the sender asleep on its channel (it once waited for the next packet to arrive).
PAIR_TIMEOUT=30 pingpong uc-pingpong-events-1m "$ADDR_B" ibv_uc_pingpong -g 0 -c -e -s 1048576 -n 5

# uc_peer NAME [ARGS...]: one run of test/uc_peer (server in host b), its checks listed
uc_peer() {
	local name=$1
	shift
	SERVER_ARGS=("$PEER" "$@" server)
	if PAIR_TIMEOUT=60 pair "$name" "$ADDR_B" "$PEER" "$@" client; then
		passed "$name: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server" \
			"checks; $(grep -h '^server:' "$OUT_S")"
	else
		show_both
		failed "$name"
	fi
	grep -hE '^(ok|FAIL)' "$OUT_C" "$OUT_S" | sed 's/^/  /'
	unset SERVER_ARGS
}

drops0=$(counter b refused_uc_message_dropped)
uc_peer uc-peer
drops=$(( $(counter b refused_uc_message_dropped) - drops0 ))
[ "$drops" -eq 0 ] && passed "no loss: refused_uc_message_dropped +0 on the receiving daemon" ||
	failed "no loss: refused_uc_message_dropped +$drops"

"$BUILD/rocemuctl" -s "$SOCK_A" fault drop=0.05,seed=7,dir=tx >/dev/null || failed "fault on a"
ooo0=$(counter b out_of_seq_request) drops0=$(counter b refused_uc_message_dropped)
sent0=$(counter a fault_dropped)
started=$SECONDS
uc_peer uc-peer-lossy -l
elapsed=$((SECONDS - started))
"$BUILD/rocemuctl" -s "$SOCK_A" fault off >/dev/null || failed "fault off on a"
lost=$(( $(counter a fault_dropped) - sent0 ))
ooo=$(( $(counter b out_of_seq_request) - ooo0 ))
drops=$(( $(counter b refused_uc_message_dropped) - drops0 ))
moved="fault_dropped +$lost on a; on b out_of_seq_request +$ooo, refused_uc_message_dropped +$drops"
if [ "$lost" -gt 0 ] && [ "$ooo" -gt 0 ] && [ "$drops" -gt 0 ] && [ "$elapsed" -lt 30 ]; then
	passed "lossy: $moved; done in ${elapsed}s"
else
	failed "lossy: $moved; ${elapsed}s"
fi
# after the loss, the same daemons carry UC again without a fault
uc_peer uc-peer-after

# ---- the wire of all of it ----

acks=$(( $(counter a acks_sent) + $(counter b acks_sent) ))
[ "$acks" -eq 0 ] && passed "no ACK sent by either daemon" || failed "$acks ACKs sent"
daemon_stop a
daemon_stop b
# Each daemon's capture holds both directions, so tshark reads a's; b's gets the ICRC checks.
UC_OPCODES='infiniband.bth.opcode >= 0x20 && infiniband.bth.opcode <= 0x2b'
check_wire "$WORK/uc-a.pcap" "$UC_OPCODES" 1000
CHECK_WIRE_NO_TSHARK=1 check_wire "$WORK/uc-b.pcap" "$UC_OPCODES" 1000
if command -v tshark >/dev/null; then
	strays=$(HOME=$WORK tshark -r "$WORK/uc-a.pcap" \
		-Y 'infiniband.bth.a == 1 || infiniband.bth.opcode < 0x20' 2>/dev/null | wc -l)
	[ "$strays" -eq 0 ] &&
		passed "uc-a.pcap: no packet asks for an ACK, none is RC" ||
		failed "uc-a.pcap: $strays packets with AckReq or an RC opcode"
fi

finish uc
