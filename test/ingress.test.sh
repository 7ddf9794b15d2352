#!/usr/bin/env bash
# What the kernel does for each RoCE frame on the receiving host. The sending packet socket
# is not bound to an EtherType, so it receives nothing (no clone of every frame queued
# unread). The nftables ingress drop: rocemud adds a netdev table that drops UDP 4791 to its address
# after the capture ring has seen the frame, so the kernel's IP input (and the guard UDP socket) never
# sees a RoCE frame; it removes the table when it stops, replaces one a killed daemon left,
# and without nft (or with --no-ingress-drop) falls back to the guard socket alone. In each
# case transfers stay byte-exact and the kernel sends no ICMP port unreachable. An nft that
# hangs is killed after 5 s.
#
# Where the frames go is read from the guard socket itself (ss: the bytes it holds and the
# kernel's drop count for it), not from UDP InDatagrams (counted only when a program reads a
# datagram, which nobody does here) nor RcvbufErrors alone: on a veth most frames are UDP GSO
# frames, and the kernel's UDP input, which cannot cut them, drops each one's packets in
# UDP InErrors and the socket's drop count without RcvbufErrors; only the frames sent alone,
# a number that depends on timing, reach the full buffer. With the drop, the socket gets
# nothing; without it, every frame: at least every request rocemud b took, at most every
# frame rocemud a sent.
set -u
source "$(dirname "$0")/daemons.sh"
require_root
command -v nft >/dev/null || skip "nft is missing (scripts/install-deps.sh installs nftables)"

PORT=$((41000 + RANDOM % 5000))

# snmp_b GROUP FIELD: a counter of /proc/net/snmp in host b
snmp_b() {
	"${IN_B[@]}" awk -v g="$1:" -v f="$2" '$1 == g && !n { for (i = 2; i <= NF; i++) h[i] = $i; n = 1; next }
		$1 == g && n { for (i = 2; i <= NF; i++) if (h[i] == f) print $i }' /proc/net/snmp
}

table_b() { # the table rocemud b names for its interface and address
	ingress_table "$("${IN_B[@]}" cat "/sys/class/net/$IF_B/ifindex")" "$ADDR_B" ${ADDR6_B:-}
}

tables_b() { "${IN_B[@]}" nft list tables netdev | grep -c "rocemu_" ; }

# guard_b: "HELD DROPS" of rocemud b's guard socket (UDP 4791 on its address, never read):
# the bytes waiting in its buffer and the datagrams the kernel dropped for it (ss's skmem r
# and d; d is the drops column of /proc/net/udp).
guard_b() {
	"${IN_B[@]}" ss -H -u -a -n -m src "$ADDR_B:4791" |
		sed -nE 's/.*skmem:\(r([0-9]+),.*,d([0-9]+)\).*/\1 \2/p'
}

# transfer WHAT: 2000 x 4 KiB byte-exact, no ICMP from host b. Sets, for host b's guard
# socket: GUARD_GOT (datagrams the kernel handed it: dropped, plus the one a fresh socket's
# buffer holds), and the bounds it must lie in when the kernel's IP input sees every frame:
# at least every request daemon b took (accepted, duplicate or ahead of its PSN: its ring
# sees each frame before the kernel's IP input does), at most every frame daemon a sent.
transfer() {
	local what=$1 icmp0 icmp1 err0 err1 buf0 buf1 held0 held1 drops0 drops1 rc
	local sent0 sent1 senterr0 senterr1 took0 took1
	PORT=$((PORT + 1))
	read -r held0 drops0 < <(guard_b)
	[ -n "${drops0:-}" ] || fail "$what: no guard socket on $ADDR_B:4791 in host b"
	err0=$(snmp_b Udp InErrors) buf0=$(snmp_b Udp RcvbufErrors) icmp0=$(snmp_b IcmpMsg OutType3)
	sent0=$(counter a sent_pkts) senterr0=$(counter a send_err) took0=$(took_b)
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s 4096 --verify \
		>"$WORK/server.out" 2>&1 &
	local server=$!
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s 4096 -n 2000 --verify \
		--json "$ADDR_B" >"$WORK/client.json" 2>"$WORK/client.err"
	rc=$?
	wait $server
	[ $rc -eq 0 ] && [ $? -eq 0 ] && grep -q '"verify":"OK"' "$WORK/client.json" ||
		{ cat "$WORK/client.json" "$WORK/client.err" "$WORK/server.out"; fail "transfer ($what)"; }
	read -r held1 drops1 < <(guard_b)
	err1=$(snmp_b Udp InErrors) buf1=$(snmp_b Udp RcvbufErrors) icmp1=$(snmp_b IcmpMsg OutType3)
	sent1=$(counter a sent_pkts) senterr1=$(counter a send_err) took1=$(took_b)
	[ "${icmp1:-0}" = "${icmp0:-0}" ] || fail "$what: the kernel sent $((icmp1 - icmp0)) ICMP unreachables"
	# The socket's buffer is the kernel's minimum (SO_RCVBUF 1), smaller than one 4 KiB
	# frame: it holds the first frame it is handed and drops every later one.
	[ "$held0" -eq 0 ] || fail "$what: the guard socket held $held0 bytes before the transfer"
	GUARD_GOT=$((drops1 - drops0 + (held1 > 0 ? 1 : 0)))
	B_TOOK=$((took1 - took0)) A_SENT=$(((sent1 - sent0) - (senterr1 - senterr0)))
	UDP_ERRORS=$((err1 - err0)) UDP_FULL=$((buf1 - buf0))
	[ "$B_TOOK" -ge 2000 ] || fail "$what: rocemud b took only $B_TOOK requests for 2000 WRITEs"
	echo "ingress: $what: 2000 x 4 KiB byte-exact; a sent $A_SENT frames, b took $B_TOOK;" \
		"the guard socket got $GUARD_GOT (UDP InErrors +$((err1 - err0)), RcvbufErrors +$((buf1 - buf0)))"
}

# took_b: the requests rocemud b's receive path took for a QP: accepted, duplicates, ahead
took_b() {
	echo $(( $(counter b rcvd_pkts) + $(counter b duplicate_request) + $(counter b out_of_seq_request) ))
}

# guard_got_all WHAT: without the ingress drop, the guard socket got every frame the
# kernel's IP input saw, within the bounds transfer measured; and every one of UDP's
# errors was the full buffer's: a kernel UDP socket (rxe's, too) could cut each of rocemud
# a's GSO frames into its packets (it cannot when the first header's lengths cover only
# the first packet: IP input trims the frame to them).
guard_got_all() {
	[ "$GUARD_GOT" -ge "$B_TOOK" ] && [ "$GUARD_GOT" -le "$A_SENT" ] ||
		fail "$1: the guard socket got $GUARD_GOT frames, not between the $B_TOOK rocemud b took and the $A_SENT rocemud a sent"
	[ "$UDP_ERRORS" -eq "$UDP_FULL" ] ||
		fail "$1: UDP InErrors +$UDP_ERRORS but RcvbufErrors +$UDP_FULL: the kernel could not take some frames whole"
}

topology_up netns
TABLE=$(table_b)
grep -q "dropped at ingress after capture (nftables table netdev $TABLE)" "$WORK/rocemud-b.log" ||
	fail "rocemud b did not report its ingress drop: $(cat "$WORK/rocemud-b.log")"
"${IN_B[@]}" nft list table netdev "$TABLE" | grep -q "ip daddr $ADDR_B udp dport 4791 drop" ||
	fail "table $TABLE lacks the drop rule: $("${IN_B[@]}" nft list ruleset)"
transfer "with the ingress drop"
[ "$GUARD_GOT" -eq 0 ] || fail "with the ingress drop the guard socket still got $GUARD_GOT RoCE frames"
# /proc/net/packet: sk RefCnt Type Proto Iface R(unning hook) Rmem User Inode. Only the
# capture ring (ETH_P_ALL, 0003) may have a receive hook, and nothing may sit unread.
packets=$("${IN_B[@]}" awk 'NR > 1' /proc/net/packet)
[ "$(awk '$6 == 1 && $4 != "0003"' <<<"$packets")" = "" ] ||
	fail "a packet socket other than the capture ring receives frames: $packets"
[ "$(awk '$7 != 0' <<<"$packets")" = "" ] || fail "frames wait unread in a packet socket: $packets"
echo "ingress: only the capture ring receives; no packet socket holds unread frames"

daemon_stop b
[ "$(tables_b)" -eq 0 ] || fail "rocemud b left its table behind on SIGTERM"
echo "ingress: SIGTERM removes table $TABLE"

daemon_start b
daemon_stop b KILL
[ "$(tables_b)" -eq 1 ] || fail "a killed rocemud should leave its table (found $(tables_b))"
daemon_start b
[ "$(tables_b)" -eq 1 ] || fail "a restarted rocemud should replace the left-over table"
transfer "after replacing a killed daemon's table"
[ "$GUARD_GOT" -eq 0 ] || fail "with the replaced table the guard socket still got $GUARD_GOT RoCE frames"
daemon_stop b
[ "$(tables_b)" -eq 0 ] || fail "the replaced table stayed after SIGTERM"
echo "ingress: a table left by SIGKILL is replaced at the next start and removed at its stop"

ROCEMUD_ARGS=--no-ingress-drop daemon_start b
[ "$(tables_b)" -eq 0 ] || fail "--no-ingress-drop added a table"
transfer "--no-ingress-drop"
guard_got_all "--no-ingress-drop"
daemon_stop b

saved=("${IN_B[@]}")
IN_B=("${saved[@]}" env PATH=/nonexistent)
daemon_start b
IN_B=("${saved[@]}")
grep -q "no ingress drop (cannot run nft: No such file or directory)" "$WORK/rocemud-b.log" ||
	fail "without nft rocemud should say so: $(tail -n 3 "$WORK/rocemud-b.log")"
transfer "without nft"
guard_got_all "without nft"
echo "ingress: without nft, or with --no-ingress-drop, the guard socket keeps the kernel quiet"
daemon_stop b

# an nft that never finishes: the daemon gives up after 5 s and serves with the guard socket
mkdir -p "$WORK/hung-bin"
printf '#!/bin/sh\necho $$ >"%s"\nexec sleep 60\n' "$WORK/hung.pid" >"$WORK/hung-bin/nft"
chmod +x "$WORK/hung-bin/nft"
IN_B=("${saved[@]}" env PATH="$WORK/hung-bin:$PATH")
daemon_start b
IN_B=("${saved[@]}")
for _ in $(seq 100); do grep -q "nft did not finish" "$WORK/rocemud-b.log" && break; sleep 0.1; done
grep -q "no ingress drop (nft did not finish in 5 s and was killed)" "$WORK/rocemud-b.log" ||
	fail "a hung nft should be killed after 5 s: $(tail -n 3 "$WORK/rocemud-b.log")"
kill -0 "$(cat "$WORK/hung.pid")" 2>/dev/null && fail "the hung nft was left running"
transfer "after a hung nft"
guard_got_all "after a hung nft"
echo "ingress: an nft that hangs is killed after 5 s and the daemon serves with the guard socket"
