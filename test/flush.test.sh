#!/usr/bin/env bash
# RDMA FLUSH between two daemons in two network namespaces: test/flush_peer under
# rocemu-run, which posts it as a program built with rdma-core's later headers does
# (ibv_wr_flush after wr_atomic_write in struct ibv_qp_ex). A WRITE and a FLUSH of its
# range in one list and a FLUSH of the whole MR complete (IBV_WC_FLUSH); a FLUSH of an MR
# without IBV_ACCESS_FLUSH_GLOBAL, a persistent one and one past the MR's end draw a
# remote access error, one to a QP without the FLUSH rights an invalid request, each named
# on the receiving daemon. The receiving daemon records the wire: rocemuctl decode shows
# the FETH of every FLUSH and every ICRC valid. (The kernel's rxe in the interop guest,
# 6.1, has no FLUSH: there is no live peer test.)
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/flush_peer
[ -x "$PEER" ] || fail "$PEER is missing (make build-tests)"

topology_up netns
daemon_stop b
ROCEMUD_ARGS="--pcap $WORK/flush-b.pcap" daemon_start b

mark_refusals b rkey_no_access rkey_bounds no_flush_access
peer_pair flush-peer "$PEER"
# the MR without the right and the persistent FLUSH; past the end; q4
refusals_moved b rkey_no_access=2 rkey_bounds=1 no_flush_access=1

daemon_stop b
out=$("$BUILD/rocemuctl" decode "$WORK/flush-b.pcap" 2>&1)
flushes=$(grep -c 'RC_FLUSH .* feth global level range .* icrc ok' <<<"$out")
whole=$(grep -c 'RC_FLUSH .* feth global level mr .* icrc ok' <<<"$out")
persistent=$(grep -c 'RC_FLUSH .* feth persistent level range .* icrc ok' <<<"$out")
answers=$(grep -c 'RC_RDMA_READ_RESPONSE_ONLY .* payload 0 .* icrc ok' <<<"$out")
bad=$(decode_bad "$out")
# range: the WRITE's, the MR without the right, past the end, q4's; whole MR: one;
# answered: the two that succeeded
if [ "$flushes" -eq 4 ] && [ "$whole" -eq 1 ] && [ "$persistent" -eq 1 ] &&
	[ "$answers" -eq 2 ] && [ "$bad" -eq 0 ]; then
	passed "rocemuctl decode: $flushes FLUSHes of a range, $whole of a whole MR," \
		"$persistent persistent, $answers empty READ RESPONSEs, every ICRC valid"
else
	grep -E 'FLUSH|READ_RESPONSE' <<<"$out" | head -n 12 | sed 's/^/  | /'
	failed "rocemuctl decode: $flushes range, $whole whole MR, $persistent persistent," \
		"$answers answers, $bad bad"
fi
ref=$("$BUILD/test/pcap_icrc" "$WORK/flush-b.pcap") && passed "reference ICRC: $ref" ||
	failed "reference ICRC: $ref"

finish flush
