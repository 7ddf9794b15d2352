#!/usr/bin/env bash
# UD queue pairs between two daemons in two network namespaces, both recording the wire:
# Debian's ibv_ud_pingpong (-c: the receiver checks every buffer; default, 4096 bytes x
# 2000, events) and perftest's ib_send_bw / ib_send_lat -c UD (default,
# -a and -e for the bandwidth, 4 QPs, 4 KiB latency),
# all unmodified under rocemu-run; then test/ud_peer, one QP sending to 16 QPs through an
# address handle each with every datagram checked (GRH area, src_qp, payload), a wrong
# Q_Key and a datagram with no receive posted dropped and counted (qkey_viol,
# drop_ud_no_recv), and answers through ibv_create_ah_from_wc. Every recorded frame must
# pass rocemuctl decode, the tests' reference ICRC (test/pcap_icrc) and tshark.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/ud_peer
for p in ibv_ud_pingpong ib_send_bw ib_send_lat; do
	command -v "$p" >/dev/null ||
		skip "$p is missing: scripts/install-deps.sh installs ibverbs-utils and perftest"
done
[ -x "$PEER" ] && [ -x "$BUILD/test/pcap_icrc" ] || fail "$PEER or pcap_icrc is missing (make build-tests)"

NETNS_MTU=9000 topology_up netns
for side in a b; do
	daemon_stop $side
	ROCEMUD_ARGS="--pcap $WORK/ud-$side.pcap --pcap-max 2G" daemon_start $side
done

pingpong ud-pingpong "$ADDR_B" ibv_ud_pingpong -g 0 -c
pingpong ud-pingpong-4k "$ADDR_B" ibv_ud_pingpong -g 0 -c -s 4096 -n 2000
pingpong ud-pingpong-events "$ADDR_B" ibv_ud_pingpong -g 0 -c -e -n 500
perf ib_send_bw-ud 1 "$ADDR_B" ib_send_bw -c UD
# -a on UD: every size from 2 bytes to the MTU, 4096 (12 rows)
perf ib_send_bw-ud-all 12 "$ADDR_B" ib_send_bw -c UD -a -n 100
perf ib_send_bw-ud-events 1 "$ADDR_B" ib_send_bw -c UD -e -n 1000
perf ib_send_bw-ud-4qp 1 "$ADDR_B" ib_send_bw -c UD -q 4 -n 1000
perf ib_send_lat-ud 1 "$ADDR_B" ib_send_lat -c UD
# (not -a: perftest calibrates its clock for each size; ib_send_bw's -a row covers them)
perf ib_send_lat-ud-4k 1 "$ADDR_B" ib_send_lat -c UD -s 4096 -n 500

# One QP to 16, the datagrams checked one by one, two that must be dropped and counted.
viol0=$(counter b qkey_viol) norecv0=$(counter b drop_ud_no_recv)
peer_pair ud-peer "$PEER"
viol=$(( $(counter b qkey_viol) - viol0 )) norecv=$(( $(counter b drop_ud_no_recv) - norecv0 ))
[ "$viol" -eq 1 ] && [ "$norecv" -eq 1 ] &&
	passed "counters: qkey_viol +1 and drop_ud_no_recv +1 on the receiving daemon" ||
	failed "counters: qkey_viol +$viol, drop_ud_no_recv +$norecv (wanted +1 each)"

# ---- the wire of all of it ----

daemon_stop a
daemon_stop b
# Each daemon's capture holds both directions, so tshark reads a's; b's gets the ICRC checks.
check_wire "$WORK/ud-a.pcap" 'infiniband.deth' 1000
CHECK_WIRE_NO_TSHARK=1 check_wire "$WORK/ud-b.pcap" 'infiniband.deth' 1000

finish ud
