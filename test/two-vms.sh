#!/usr/bin/env bash
# make two-vms: the deployment rocemu is for, two VMs without RDMA hardware, each running
# rocemud on its virtio-net NIC, measured against what the same two guests do with TCP
# (iperf3; a UDP ping-pong for the latency rows; a flow of datagrams the size of a RoCE
# packet, the ceiling of the 1 MiB rows) and with the kernel's rxe on the same
# NICs (the same perftest binaries).
# Two guests of scripts/interop-vm.sh (Debian's kernel, the host's root read-only) on a
# bridge inside a network namespace; KVM where it works, TCG otherwise (said at the top).
# First rxe0 in both guests, then rxe's module unloaded and rocemud started in each.
# Prints each row and the ratios of one run; fails only when something did not run or a
# transfer was not verified. The RDMA CM's connection rate (test/cm_peer: connect, one
# SEND, disconnect, one after another) is measured the same way, on rxe's rdma_cm and on
# rocemu's.
#   test/two-vms.sh [BUILD]
#   TWO_VMS_SHORT=1 test/two-vms.sh [BUILD]   rdma-write verified (50 MiB) and one perftest
#       row, no baseline and no ratios (make check's test/two-vms-short.test.sh)
#   VM_SUITE=bookworm-backports test/two-vms.sh [BUILD]   the guests on Linux 6.12 under qemu
#       10.0 (scripts/interop-vm.sh), whose virtio-net carries UDP GSO frames whole
#   ROCEMUD_ARGS="--poll-budget 2000" test/two-vms.sh [BUILD]   the guests' daemons' options
#   TWO_VMS_MTU=9000 test/two-vms.sh [BUILD]   jumbo frames on the guests' NICs, the taps and
#       the bridge (4096-byte RDMA MTU for both devices, as make bench's veth gives);
#       unset, virtio-net's 1500 (RDMA MTU 1024)
set -u
ROCEMU_BUILD=$(cd "${1:-${ROCEMU_BUILD:-build}}" && pwd) || exit 1
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
source "$ROCEMU_ROOT/scripts/interop-vm.sh"
require_root

NS=tv$((RANDOM % 100000))
BRIDGE=br-$NS
NET=10.79.$((RANDOM % 250 + 1))
SHORT=${TWO_VMS_SHORT:-}
declare -A ADDR=([a]=$NET.1 [b]=$NET.2) PID=() GUEST_WORK=() TAP=([a]=${NS}a [b]=${NS}b)
declare -A MAC=([a]=52:54:00:79:00:0a [b]=52:54:00:79:00:0b)
RUN=$BUILD/rocemu-run
SOCK=/run/rocemu-two-vms.sock
BRIDGE_PCAP=$WORK/bridge.pcap
DUMPCAP=

cleanup() {
	local g
	[ -n "$DUMPCAP" ] && kill "$DUMPCAP" 2>/dev/null && wait "$DUMPCAP" 2>/dev/null
	for g in a b; do
		[ -n "${PID[$g]:-}" ] || continue
		on "$g" && vm_stop
	done
	ip netns del "$NS" 2>/dev/null
	teardown
}
trap cleanup EXIT

# on GUEST: the vm_* calls that follow talk to that guest
on() {
	VM_TAP=${TAP[$1]} VM_WORK=${GUEST_WORK[$1]:-} VM_PID=${PID[$1]:-}
}

boot() {
	GUEST_WORK[$1]=$WORK/$1
	mkdir -p "${GUEST_WORK[$1]}"
	VM_TAP=${TAP[$1]} VM_MAC=${MAC[$1]} vm_start "$NS" "${GUEST_WORK[$1]}" - "${ADDR[$1]}" ||
		fail "guest $1 did not come up"
	PID[$1]=$VM_PID
	ip netns exec "$NS" ip link set "${TAP[$1]}" master "$BRIDGE" || fail "tap $1 to the bridge"
}

for p in qemu-system-x86_64 ib_write_bw; do
	command -v "$p" >/dev/null || fail "$p is missing (scripts/install-deps.sh installs it)"
done
# iperf3 is this benchmark's own need, as make bench's (which installs it the same way)
if [ -z "$SHORT" ] && ! command -v iperf3 >/dev/null; then
	echo "iperf3 is missing: the TCP baseline needs it; installing it with apt-get"
	DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 >/dev/null 2>&1 </dev/null ||
		fail "apt-get install iperf3 failed; install it and run again"
fi
vm_prepare || fail "cannot prepare the guests' kernel and initramfs"
ACCEL=${VM_ACCEL:-$(vm_accel)}
# two vCPUs, as the cloud VMs rocemu is for have at least (TWO_VMS_CPUS to change)
export VM_CPUS=${TWO_VMS_CPUS:-2}
export VM_ACCEL=$ACCEL
export VM_MTU=${TWO_VMS_MTU:-}
# the RDMA MTU both devices take on that link: the largest whose packet (IPv4, UDP, BTH,
# RETH, payload, ICRC) fits
RDMA_MTU=256
for m in 512 1024 2048 4096; do [ $((m + 60)) -le "${VM_MTU:-1500}" ] && RDMA_MTU=$m; done
echo "two guests, Linux $VM_KVER under $("${VM_QEMU[@]}" --version | head -n 1), $ACCEL," \
	"$VM_CPUS vCPU(s) and ${VM_MEM} MiB each, on a bridge, MTU ${VM_MTU:-1500}; $(nproc) host cores"
[ -n "${ROCEMUD_ARGS:-}" ] && echo "the guests' rocemud with: $ROCEMUD_ARGS"

ip netns add "$NS" || fail "ip netns add $NS"
ip netns exec "$NS" ip link add "$BRIDGE" ${VM_MTU:+mtu "$VM_MTU"} type bridge || fail "no bridge"
ip netns exec "$NS" ip link set "$BRIDGE" up
boot a
boot b

# pair NAME SERVER CLIENT: SERVER in guest b (in the background), CLIENT in guest a, each a
# command line (@B@: guest b's address); the client's output in NAME.out, its status in RC
pair() {
	on b
	vm_spawn "$1" "timeout 120 $2"
	sleep 2   # the guest is slow to listen under TCG
	on a
	vm_run 130 "timeout 120 ${3//@B@/${ADDR[b]}}" >"$WORK/$1.out" 2>&1
	RC=$?
	on b
	vm_wait "$1" 130 >"$WORK/$1.server" 2>&1 || [ "$RC" -ne 0 ] || RC=1
}

# perftest NAME PREFIX GID TOOL ARGS...: one perftest row between the guests; ROW gets its
# average (MB/s for bandwidth, t_typical in us for latency). An emulated guest's clock
# fails perftest now and then, on rocemu's rows and rxe's alike: it quits when the fit of
# its clock to the CPU's is poor ("Correlation coefficient r^2 ... < 0.9"), or prints a
# latency of "inf"; such a row runs again, three times in all.
perftest() {
	local name=$1 prefix=$2 gid=$3 tool=$4 try
	shift 4
	for try in 1 2 3; do
		pair "$name" "$prefix $tool $* -x $gid" "$prefix $tool $* -x $gid @B@"
		ROW=$(perftest_figure "$WORK/$name.out" "$tool")
		if [ "$RC" -eq 0 ]; then
			[ -n "$ROW" ] && break
			echo "  $name: perftest gave no figure (try $try of 3)"
		else
			grep -q 'Correlation coefficient r^2' "$WORK/$name.out" "$WORK/$name.server" ||
				break
			echo "  $name: perftest could not fit its clock (try $try of 3)"
		fi
	done
	if [ "$RC" -eq 0 ] && [ -n "$ROW" ]; then
		passed "$name: $tool $*: $ROW"
	else
		# perftest's stderr lands above its buffered stdout: its complaints first
		grep -hiE 'error|fail|correlation|couldn|unable' "$WORK/$name.out" \
			"$WORK/$name.server" | head -n 6 | sed 's/^/  ! /'
		tail -n 8 "$WORK/$name.out" "$WORK/$name.server" | sed 's/^/  | /'
		failed "$name: $tool $* (exit $RC)"
		ROW=
	fi
}

declare -A R=()
CM_CYCLES=200
CM_PORT=$((9000 + RANDOM % 1000))

# cm_rate NAME PREFIX: CM_CYCLES connections one after another from guest a to guest b's
# cm_peer (under PREFIX); R[NAME] gets the connections per second, and where a cycle's
# time went is printed
cm_rate() {
	local peer="$2 $BUILD/test/cm_peer"
	pair "$1" "$peer cycle-server $CM_PORT $CM_CYCLES" "$peer cycle-client @B@ $CM_PORT $CM_CYCLES"
	R[$1]=$(sed -nE "s/^$CM_CYCLES connections .*: ([0-9]+) per second$/\1/p" "$WORK/$1.out")
	if [ "$RC" -eq 0 ] && [ -n "${R[$1]}" ]; then
		passed "$1: $(grep '^[0-9]* connections' "$WORK/$1.out")"
		sed -n "s/^ms a cycle:/  $1 client, ms a cycle:/p" "$WORK/$1.out"
		sed -n "s/^ms a cycle:/  $1 server, ms a cycle:/p" "$WORK/$1.server"
	else
		tail -n 8 "$WORK/$1.out" "$WORK/$1.server" | sed 's/^/  | /'
		failed "$1: cm_peer, $CM_CYCLES connect/SEND/disconnect cycles (exit $RC)"
	fi
}
# ratio LABEL A B [ge|le LIMIT]: A/B to two places, against the issue's target when one
# is given, or "-" when either is missing
ratio() {
	if [ -n "${R[$2]:-}" ] && [ -n "${R[$3]:-}" ]; then
		awk -v l="$1" -v a="${R[$2]}" -v b="${R[$3]}" -v op="${4:-}" -v lim="${5:-}" 'BEGIN {
			r = a / b; printf "  %-46s %s / %s = %.2fx", l, a, b, r
			if (op != "") {
				ok = op == "ge" ? r >= lim : r <= lim
				printf " (target %s %s: %s)", op == "ge" ? ">=" : "<=", lim, ok ? "met" : "missed"
			}
			printf "\n" }'
	else
		printf '  %-46s -\n' "$1"
	fi
}

# --- TCP between the same two guests
if [ -z "$SHORT" ]; then
	pair iperf3 "iperf3 -s -1" "iperf3 -c @B@ -t 5 -f m"
	R[iperf3]=$(awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") v = $i } END { if (v) printf "%.1f", v / 8 * 1e6 / 1048576 }' "$WORK/iperf3.out")
	[ -n "${R[iperf3]}" ] && passed "iperf3, one TCP stream: ${R[iperf3]} MB/s" || failed "iperf3 (exit $RC)"
	# the guests' own UDP round trip (64-byte datagrams, both ends asleep on their sockets),
	# the floor under the latency rows; perftest's latency is half a round trip
	pair udp "$BUILD/bench/pump udp-echo -b ${ADDR[b]} -t 3" \
		"$BUILD/bench/pump udp-ping -c @B@ -n 1000 -t 10"
	R[udp_rtt]=$(sed -nE 's/.*"median_us":([0-9.]+).*/\1/p' "$WORK/udp.out")
	if [ "$RC" -eq 0 ] && [ -n "${R[udp_rtt]}" ]; then
		R[udp_half]=$(awk -v r="${R[udp_rtt]}" 'BEGIN { printf "%.2f", r / 2 }')
		passed "UDP ping-pong, 64 B: a round trip's median ${R[udp_rtt]} us"
	else
		tail -n 4 "$WORK/udp.out" "$WORK/udp.server" | sed 's/^/  | /'
		failed "UDP ping-pong between the guests (exit $RC)"
	fi
	# The guests' ceiling for a RoCEv2 device at this MTU: RoCE is a UDP datagram a packet,
	# so one flow of datagrams the size of a WRITE's middle packet (BTH, RDMA_MTU bytes,
	# ICRC), sent as the guest's kernel takes them fastest (UDP GSO) and counted at a socket
	# in the other guest (with GRO), is at least as fast as any RoCE stack on the guests'
	# network path, which must also build, check and acknowledge its packets: its payload
	# goodput is the ceiling of the 1 MiB rows
	pair udp-flood "$BUILD/bench/pump udp-sink -b ${ADDR[b]} -t 20" \
		"$BUILD/bench/pump udp-flood -c @B@ -s $((RDMA_MTU + 16)) -t 5"
	line=$(grep '"udp-sink"' "$WORK/udp-flood.server")
	R[udp_flood]=$(sed -nE 's/.*"datagrams":([0-9]+),.*"seconds":([0-9.]+),.*/\1 \2/p' <<<"$line" |
		awk -v m="$RDMA_MTU" '$1 > 0 && $2 > 0 { printf "%.1f", $1 * m / $2 / 1048576 }')
	if [ "$RC" -eq 0 ] && [ -n "${R[udp_flood]}" ]; then
		passed "UDP, one flow of $((RDMA_MTU + 16))-byte datagrams (a RoCE packet at RDMA MTU $RDMA_MTU): ${R[udp_flood]} MB/s of payload"
		echo "  sent: $(grep -o '"datagrams".*' "$WORK/udp-flood.out")"
		echo "  received: $(grep -o '"datagrams".*' <<<"$line")"
	else
		tail -n 4 "$WORK/udp-flood.out" "$WORK/udp-flood.server" | sed 's/^/  | /'
		failed "UDP flow between the guests (exit $RC)"
	fi
fi

# --- the kernel's rxe on both guests' eth0
GID_A=$(on a && vm_rxe_gid "${ADDR[a]}")
[ -n "$GID_A" ] || fail "rxe0 in guest a has no GID for ${ADDR[a]}"
if [ -z "$SHORT" ]; then
	perftest rxe-write-1m "" "$GID_A" ib_write_bw -d rxe0 -s 1048576 -n 50; R[rxe_1m]=$ROW
	perftest rxe-write-64 "" "$GID_A" ib_write_bw -d rxe0 -s 64 -n 5000; R[rxe_64]=$ROW
	perftest rxe-write-lat "" "$GID_A" ib_write_lat -d rxe0 -s 64 -n 500; R[rxe_lat]=$ROW
	cm_rate rxe-cm ""
fi

# --- rocemu: rxe unloaded (it holds UDP 4791), rocemud on each guest's eth0; what crosses
# the bridge from here on is recorded and checked at the end
ip netns exec "$NS" dumpcap -q -B 64 -i "$BRIDGE" -f "udp port 4791" -w "$BRIDGE_PCAP" \
	>/dev/null 2>&1 &
DUMPCAP=$!
for g in a b; do
	on "$g"
	out=$(vm_run 60 "rdma link delete rxe0 && busybox rmmod rdma_rxe && echo unloaded") ||
		fail "guest $g: cannot unload rdma_rxe: $out"
	vm_spawn "rocemud-$g" "$BUILD/rocemud -i eth0 -a ${ADDR[$g]} -s $SOCK -d ${ROCEMUD_ARGS:-}"
done
for g in a b; do
	on "$g"
	vm_run 60 "for i in \$(seq 100); do [ -S $SOCK ] && exit 0; sleep 0.1; done; exit 1" >/dev/null ||
		fail "rocemud did not start in guest $g: $(cat "${GUEST_WORK[$g]}/vm/out.rocemud-$g")"
done

WRITES=200
[ -n "$SHORT" ] && WRITES=50
pair rdma-write "$BUILD/rdma-write --server --verify -s 1M -D $SOCK" \
	"$BUILD/rdma-write --verify -s 1M -n $WRITES --json -D $SOCK @B@"
line=$(grep '^{' "$WORK/rdma-write.out" | tail -n 1)
R[rw_1m]=$(sed -nE 's/.*"bw_avg_mbps":([0-9.]+).*/\1/p' <<<"$line")
if [ "$RC" -eq 0 ] && grep -q '"verify":"OK"' <<<"$line" && [ -n "${R[rw_1m]}" ]; then
	passed "rocemu: rdma-write --verify -s 1M -n $WRITES: ${R[rw_1m]} MB/s, every byte verified"
else
	tail -n 8 "$WORK/rdma-write.out" "$WORK/rdma-write.server" | sed 's/^/  | /'
	failed "rocemu: rdma-write --verify -s 1M -n $WRITES (exit $RC)"
fi
perftest rocemu-write-1m "$RUN -D $SOCK" 0 ib_write_bw -s 1048576 -n 50; R[roce_1m]=$ROW
if [ -z "$SHORT" ]; then
	perftest rocemu-write-64 "$RUN -D $SOCK" 0 ib_write_bw -s 64 -n 5000; R[roce_64]=$ROW
	perftest rocemu-write-lat "$RUN -D $SOCK" 0 ib_write_lat -s 64 -n 500; R[roce_lat]=$ROW
	cm_rate rocemu-cm "$RUN -D $SOCK"
fi
on a
gso=$(vm_run 30 "$BUILD/rocemuctl -s $SOCK stats" | awk '$1 == "sent_gso_frames" || $1 == "sent_pkts" { printf "%s %s ", $1, $2 }')
echo "rocemud in guest a: $gso"
# how its frames left and whether nftables kept them from the guest's IP input
grep -hiE "ingress|GSO|UDP socket" "${GUEST_WORK[a]}/vm/out.rocemud-a" | sed 's/^/  guest a: /'
kill "$DUMPCAP" && wait "$DUMPCAP" 2>/dev/null
DUMPCAP=
check_wire "$BRIDGE_PCAP" infiniband 1000

[ -n "$SHORT" ] && finish "two VMs (short)"
echo "ratios, one run ($ACCEL):"
ratio "rdma-write 1 MiB / iperf3" rw_1m iperf3 ge 1.0
ratio "rdma-write 1 MiB / UDP at RoCE's packet size" rw_1m udp_flood
ratio "UDP at RoCE's packet size / iperf3" udp_flood iperf3
ratio "ib_write_bw 1 MiB: rocemu / rxe" roce_1m rxe_1m ge 1.0
ratio "ib_write_bw 1 MiB (rocemu) / iperf3" roce_1m iperf3
ratio "ib_write_bw 64 B: rocemu / rxe" roce_64 rxe_64 ge 2.0
ratio "ib_write_lat 64 B t_typical: rocemu / rxe" roce_lat rxe_lat le 1.5
ratio "ib_write_lat (rxe) / half a UDP round trip" rxe_lat udp_half
ratio "ib_write_lat (rocemu) / half a UDP round trip" roce_lat udp_half
ratio "CM connections per second: rocemu / rxe" rocemu-cm rxe-cm ge 1.0
finish "two VMs"
