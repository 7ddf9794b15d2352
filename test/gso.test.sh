#!/usr/bin/env bash
# UDP GSO on veth and lo: rocemud sends a run of one QP's packets as one GSO frame (one
# send, one skb through the veth), and its receive ring cuts GSO frames back into their
# packets. Checked here:
# - transfers stay byte-exact at 64 B to 1 MiB, PMTU 4096 and 1024, with a short last
#   segment, and every GSO frame sent is one received, with no ICRC or other drop;
# - a capture on the sender's veth holds the GSO frames whole, and rocemuctl decode and the
#   reference ICRC read them as their packets, every ICRC valid;
# - with UDP segmentation offload off on the sender's veth the kernel cuts the GSO frames
#   itself, as a NIC or a peer's UDP socket would: the receiver gets plain frames and their
#   ICRCs hold, so the IPv4 ids and lengths rocemud builds each packet with are Linux's;
# - --no-gso sends none; a kernel that refuses GSO on packet sockets (played by a preloaded
#   sendmmsg, as before Linux 6.2) makes rocemud send every packet alone where the veth
#   would keep a UDP socket's GSO frames whole (such a kernel's packet sockets cannot
#   receive them), and runs through a UDP socket where the kernel cuts them (segmentation
#   offload off): the ids and source port the frames were given are the kernel's, or the
#   ICRCs would fail; a UDP send refused (a firewall) goes by the packet socket; the
#   daemon names the offload the veth offers and has off, and not when it is on;
# - GSO frames on lo;
# - a GSO frame larger than a ring slot, and one whose segments are not RoCE, are counted
#   and dropped, and the daemon carries on.
set -u
source "$(dirname "$0")/daemons.sh"
require_root
command -v ethtool >/dev/null || skip "ethtool is missing (scripts/install-deps.sh installs it)"
PRELOAD=$BUILD/test/gso_refuse.so
[ -f "$PRELOAD" ] || fail "$PRELOAD is missing (make $PRELOAD)"

PORT=$((44000 + RANDOM % 5000))
declare -A BEFORE=()

COUNTERS="sent_pkts rcvd_pkts sent_gso_frames rcvd_gso_frames send_err drop_bad_icrc
	drop_malformed drop_truncated drop_ring_full drop_unknown_qp send_udp_refused"
snapshot() {
	for side in a b; do
		for c in $COUNTERS; do BEFORE[$side.$c]=$(counter $side $c); done
	done
}
delta() { echo $(( $(counter "$1" "$2") - ${BEFORE[$1.$2]} )); }

# transfer WHAT SIZE ITERS [client args]: byte-exact, or the test fails
transfer() {
	local what=$1 size=$2 iters=$3 rc
	shift 3
	PORT=$((PORT + 1))
	"${IN_B[@]}" timeout 60 "$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s "$size" \
		--verify >"$WORK/server.out" 2>&1 &
	local server=$!
	"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s "$size" -n "$iters" \
		--verify --json "$@" "$ADDR_B" >"$WORK/client.json" 2>"$WORK/client.err"
	rc=$?
	wait $server
	[ $rc -eq 0 ] && [ $? -eq 0 ] && grep -q '"verify":"OK"' "$WORK/client.json" ||
		{ cat "$WORK/client.json" "$WORK/client.err" "$WORK/server.out"; fail "$what: $iters x $size not byte-exact"; }
}

no_drops() { # WHAT: no frame of the transfer was lost or refused on either side
	for side in a b; do
		for c in send_err drop_bad_icrc drop_malformed drop_truncated drop_ring_full; do
			[ "$(delta $side $c)" -eq 0 ] || fail "$1: $side counted $c +$(delta $side $c)"
		done
	done
	[ "$(delta a sent_pkts)" -eq "$(delta b rcvd_pkts)" ] ||
		fail "$1: a sent $(delta a sent_pkts) packets, b took $(delta b rcvd_pkts)"
}

# gso_transfer WHAT SIZE ITERS [args]: GSO frames went a to b, each one arriving whole
gso_transfer() {
	local what=$1
	snapshot
	transfer "$@"
	no_drops "$what"
	local sent=$(delta a sent_gso_frames) got=$(delta b rcvd_gso_frames)
	[ "$sent" -gt 0 ] || fail "$what: a sent no GSO frame"
	[ "$sent" -eq "$got" ] || fail "$what: a sent $sent GSO frames, b cut $got"
	echo "gso: $what: $3 x $2 byte-exact; $(delta a sent_pkts) packets in $sent GSO frames"
}

topology_up netns
grep -q "go out as UDP GSO frames" "$WORK/rocemud-a.log" ||
	fail "rocemud a does not send GSO frames on a veth: $(cat "$WORK/rocemud-a.log")"
! grep -q "tx-udp-segmentation is off" "$WORK/rocemud-a.log" ||
	fail "rocemud a says $IF_A's UDP segmentation offload is off, which it is not"
transfer "a first look" 4096 100
! grep -q "the kernel refuses UDP GSO frames" "$WORK/rocemud-a.log" ||
	skip "Linux $(uname -r) refuses UDP GSO frames on packet sockets (6.2 added them): rocemud sends every packet alone here"
gso_transfer "64 B" 64 20000 --tx-depth 128
gso_transfer "4 KiB" 4096 2000
gso_transfer "1 MiB" 1M 20
gso_transfer "1 MiB at PMTU 1024" 1M 20 --mtu 1024
gso_transfer "65537 B (a short last segment)" 65537 50 --mtu 1024

# A capture on the sender's veth holds the GSO frames themselves (several packets, each
# with its ICRC, in one frame): rocemuctl decode and the reference ICRC read them as the
# packets they hold
if command -v dumpcap >/dev/null; then
	"${IN_A[@]}" dumpcap -q -P -i "$IF_A" -f "udp port 4791" -w "$WORK/gso.pcap" \
		>"$WORK/dumpcap.out" 2>&1 &
	capture=$!
	PIDS+=($capture)
	for _ in $(seq 100); do grep -q "File:" "$WORK/dumpcap.out" && break; sleep 0.1; done
	gso_transfer "1 MiB, captured on the sender's veth" 1M 10
	gso_transfer "64 B, captured on the sender's veth" 64 5000 --tx-depth 128
	sleep 0.5
	kill -INT $capture
	wait $capture
	out=$("$BUILD/rocemuctl" decode "$WORK/gso.pcap" 2>&1)
	grep -q " icrc ok  gso piece 2 of " <<<"$out" ||
		fail "rocemuctl decode shows no GSO frame's packets: $(tail -n 5 <<<"$out")"
	! grep -q " icrc BAD" <<<"$out" ||
		fail "rocemuctl decode: $(grep -c ' icrc BAD' <<<"$out") packets with a bad ICRC"
	ref=$("$BUILD/test/pcap_icrc" "$WORK/gso.pcap") && grep -q "GSO frames holding" <<<"$ref" ||
		fail "reference ICRC: $ref"
	echo "gso: a capture on the sender's veth: $(grep '^GSO frames' <<<"$out"); reference ICRC: ${ref#*: }"
else
	echo "gso: dumpcap is missing: no capture of GSO frames on the veth"
fi

"${IN_A[@]}" ethtool -K "$IF_A" tx-udp-segmentation off >/dev/null ||
	fail "ethtool cannot turn off UDP segmentation offload on $IF_A"
snapshot
transfer "segmented by the kernel" 1M 20
transfer "segmented by the kernel" 64 5000 --tx-depth 128
no_drops "segmented by the kernel"
[ "$(delta a sent_gso_frames)" -gt 0 ] && [ "$(delta b rcvd_gso_frames)" -eq 0 ] ||
	fail "with tx-udp-segmentation off: a sent $(delta a sent_gso_frames) GSO frames, b cut $(delta b rcvd_gso_frames) (expected some, and none)"
echo "gso: the kernel cut $(delta a sent_gso_frames) GSO frames into $(delta b rcvd_pkts) plain frames; every ICRC held"
"${IN_A[@]}" ethtool -K "$IF_A" tx-udp-segmentation on >/dev/null

daemon_stop a
ROCEMUD_ARGS=--no-gso daemon_start a
grep -q "no GSO (--no-gso)" "$WORK/rocemud-a.log" || fail "rocemud a did not report --no-gso"
snapshot
transfer "--no-gso" 1M 20
no_drops "--no-gso"
[ "$(delta a sent_gso_frames)" -eq 0 ] || fail "--no-gso: a sent $(delta a sent_gso_frames) GSO frames"
echo "gso: --no-gso: 20 x 1 MiB byte-exact, no GSO frame sent"

# refused: as Linux 6.1 does (the preload plays it), the packet socket takes no GSO frame
refusing_daemon() { # [rocemud args]: daemon a restarted under the refusal
	daemon_stop a
	: >"$WORK/rocemud-a.log"
	ROCEMUD_ARGS="$*" LD_PRELOAD=$PRELOAD \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 daemon_start a
}
# ... on a veth that would pass a UDP socket's GSO frames whole (which a packet socket of
# such a kernel cannot receive), every packet alone
refusing_daemon
snapshot
transfer "a kernel that refuses GSO, on a veth that keeps GSO frames whole" 1M 20
transfer "a kernel that refuses GSO, on a veth that keeps GSO frames whole" 64 5000 --tx-depth 128
no_drops "a kernel that refuses GSO, on a veth that keeps GSO frames whole"
[ "$(delta a sent_gso_frames)" -eq 0 ] || fail "a sent GSO frames a 6.1 peer could not receive"
grep -q "would pass a UDP socket's whole" "$WORK/rocemud-a.log" ||
	fail "rocemud a did not say why each packet goes alone: $(cat "$WORK/rocemud-a.log")"
echo "gso: packet socket refusing GSO, a veth that keeps GSO frames whole: every packet alone, byte-exact"
# ... where the kernel cuts them before the interface (segmentation offload off, as on a
# 6.1 guest's virtio-net), runs go through a UDP socket: the receiver gets plain frames
# and their ICRCs hold, so the ids and source port the frames were given are the kernel's
"${IN_A[@]}" ethtool -K "$IF_A" tx-udp-segmentation off >/dev/null
refusing_daemon
snapshot
transfer "through a UDP socket" 1M 20
transfer "through a UDP socket" 64 5000 --tx-depth 128
transfer "through a UDP socket" 65537 50 --mtu 1024
no_drops "through a UDP socket"
sent=$(delta a sent_gso_frames) got=$(delta b rcvd_gso_frames)
[ "$sent" -gt 0 ] || fail "through a UDP socket: a sent no GSO frame"
[ "$got" -eq 0 ] || fail "through a UDP socket: b still got $got GSO frames whole"
[ "$(delta a send_udp_refused)" -eq 0 ] || fail "a UDP socket refused $(delta a send_udp_refused) sends"
grep -q "the kernel refuses UDP GSO frames on packet sockets (Linux 6.2" "$WORK/rocemud-a.log" ||
	fail "rocemud a did not report the refused GSO frame: $(cat "$WORK/rocemud-a.log")"
grep -q "$IF_A can cut UDP GSO frames itself, but its tx-udp-segmentation is off" "$WORK/rocemud-a.log" ||
	fail "rocemud a did not name the offload $IF_A offers and has off: $(cat "$WORK/rocemud-a.log")"
echo "gso: packet socket refusing GSO: $(delta a sent_pkts) packets in $sent GSO frames through a UDP socket, cut by the kernel, byte-exact"
# ... a UDP socket's send refused (a firewall rule here): those packets go by the packet
# socket, nothing lost
if command -v nft >/dev/null; then
	echo 'table ip rocemu_gso_test { chain out { type filter hook output priority 0; udp dport 4791 reject; }; }' |
		"${IN_A[@]}" nft -f - || fail "nft: cannot add the test's output rule"
	snapshot
	transfer "UDP sends refused by a firewall" 1M 10
	"${IN_A[@]}" nft delete table ip rocemu_gso_test
	no_drops "UDP sends refused by a firewall"
	[ "$(delta a send_udp_refused)" -gt 0 ] || fail "the firewall refused no UDP send of a's"
	echo "gso: $(delta a send_udp_refused) UDP sends refused by a firewall rule went by the packet socket, byte-exact"
fi
# ... and with --no-gso, every packet alone
refusing_daemon --no-gso
snapshot
transfer "a kernel that refuses GSO, --no-gso" 1M 20
no_drops "a kernel that refuses GSO, --no-gso"
[ "$(delta a sent_gso_frames)" -eq 0 ] || fail "--no-gso under a refusing kernel: a sent GSO frames"
"${IN_A[@]}" ethtool -K "$IF_A" tx-udp-segmentation on >/dev/null
daemon_stop a
: >"$WORK/rocemud-a.log"
daemon_start a

# inject SIZE SEGMENT: one GSO frame from a's side to b's address, UDP 4791
inject() {
	"${IN_A[@]}" python3 - "$IF_A" "$("${IN_B[@]}" cat /sys/class/net/$IF_B/address)" \
		"$ADDR_A" "$ADDR_B" "$1" "$2" <<'EOF' || fail "injecting a GSO frame"
import socket, struct, sys
ifname, dst, src_ip, dst_ip, size, seg = sys.argv[1:7]
size, seg = int(size), int(seg)
SOL_PACKET, PACKET_VNET_HDR = 263, 15
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
s.bind((ifname, 0))
src = s.getsockname()[4]
payload = bytes(size)
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + seg, 0x1234, 0x4000, 64, 17, 0,
                 socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
udp = struct.pack("!HHHH", 49152, 4791, 8 + seg, 0)
vnet = struct.pack("<BBHHHH", 1, 5, 42, seg, 34, 6)   # NEEDS_CSUM, GSO_UDP_L4
s.send(vnet + bytes.fromhex(dst.replace(":", "")) + src + b"\x08\x00" + ip + udp + payload)
EOF
}

snapshot
inject 30000 1000
inject 1000 100
sleep 0.5
kill -0 "${DAEMON_PID[b]}" 2>/dev/null || fail "rocemud b died on an injected GSO frame"
[ "$(delta b drop_truncated)" -eq 1 ] ||
	fail "a 30 kB GSO frame: drop_truncated +$(delta b drop_truncated), expected +1"
[ "$(delta b rcvd_gso_frames)" -eq 1 ] && [ "$(delta b drop_unknown_qp)" -eq 10 ] ||
	fail "a GSO frame of 10 zeroed segments: rcvd_gso_frames +$(delta b rcvd_gso_frames), drop_unknown_qp +$(delta b drop_unknown_qp) (expected +1, +10)"
[ "$(delta b rcvd_pkts)" -eq 0 ] || fail "b accepted an injected packet"
transfer "after injected GSO frames" 4096 200
echo "gso: a GSO frame larger than a ring slot counted in drop_truncated; one of 10 zeroed segments cut into 10 drops; b carries on"

daemon_stop a
daemon_stop b
"$ROCEMU_ROOT/scripts/netns.sh" down >/dev/null
TOPOLOGY=
: >"$WORK/rocemud-a.log"
: >"$WORK/rocemud-b.log"
topology_up lo
grep -q "go out as UDP GSO frames" "$WORK/rocemud-a.log" ||
	fail "rocemud a does not send GSO frames on lo"
gso_transfer "1 MiB on lo" 1M 20
gso_transfer "64 B on lo" 64 20000 --tx-depth 128
