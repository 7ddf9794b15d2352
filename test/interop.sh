#!/usr/bin/env bash
# make interop: rocemud against the Linux kernel's Soft-RoCE (rdma_rxe) in a virtual machine
# (scripts/interop-vm.sh), live, both ways: Debian's perftest on both sides, unmodified,
# plain on rxe in the guest and under rocemu-run on this host, with rocemu as the requester
# (its perftest is the client) and as the responder (rxe's is). Then every frame of the
# run, from both sides, as rocemud recorded it (--pcap), through rocemuctl decode (every
# ICRC recomputed) and tshark (no malformed frame). One line per case; the failures are
# listed at the end. Bounded: each program has a timeout, the guest is powered off (or
# killed by pid) and the namespace removed whatever happens. Both ends serve an IPv4 and
# an IPv6 address; the cases run over IPv4, and a set of them over IPv6 too.
#   test/interop.sh [BUILD]      the whole matrix (make interop)
#   INTEROP_SHORT=1 test/interop.sh [BUILD]
#                                the short form in make check: ibv_peer and ud_peer both
#                                ways over IPv4 and IPv6, rping, udaddy and ib_write_bw -R
#                                through the kernel's rdma_cm both ways, and the wire of it
set -u
ROCEMU_BUILD=$(cd "${1:-${ROCEMU_BUILD:-build}}" && pwd) || exit 1
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
source "$ROCEMU_ROOT/scripts/interop-vm.sh"
source "$(dirname "$0")/guest-rates.sh"
require_root

NS=rxe$((RANDOM % 100000))
HOST_ADDR=10.77.$((RANDOM % 250 + 1))
ADDR_R=$HOST_ADDR.1      # rocemud, on the tap
ADDR_X=$HOST_ADDR.2      # rxe0, in the guest
HOST_ADDR6=fd52:7278:$(printf %x $((RANDOM % 65535 + 1)))
ADDR6_R=$HOST_ADDR6::1
ADDR6_X=$HOST_ADDR6::2
SHORT=${INTEROP_SHORT:-}
SOCK=$WORK/rocemu.sock
PCAP=$WORK/interop.pcap
RUN=$BUILD/rocemu-run
PEER=$BUILD/test/ibv_peer
UD_PEER=$BUILD/test/ud_peer
MW_PEER=$BUILD/test/mw_peer
CM_PEER=$BUILD/test/cm_peer
DAEMON=
DUMPCAP=
TAP_PCAP=$WORK/tap.pcap
# perftest does not free what it allocates: under a sanitizer build's rocemu-run, leaks
# are not counted against a run (our own programs' are, in the short form's peers)
[ -n "${INTEROP_SHORT:-}" ] || export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

cleanup() {
	vm_stop
	[ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	[ -n "$DUMPCAP" ] && kill "$DUMPCAP" 2>/dev/null && wait "$DUMPCAP" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	teardown
}
trap cleanup EXIT

for p in qemu-system-x86_64 ib_write_bw tshark; do
	command -v "$p" >/dev/null || fail "$p is missing (scripts/install-deps.sh installs it)"
done
[ -x "$PEER" ] && [ -x "$UD_PEER" ] || fail "$PEER or $UD_PEER is missing (make interop builds them)"
[ -x /bin/busybox ] || fail "/bin/busybox is missing (scripts/install-deps.sh installs busybox-static)"
vm_prepare || fail "cannot prepare the guest's kernel and initramfs"

ip netns add "$NS" || fail "ip netns add $NS"
ip netns exec "$NS" ip link set lo up
vm_start "$NS" "$WORK" "$ADDR_R" "$ADDR_X" "$ADDR6_R" "$ADDR6_X" || fail "the rxe guest did not come up"
# start_rocemud PCAP: rocemud on the tap (GID 0 its IPv4 address, GID 1 its IPv6 one),
# recording to PCAP (all of it: no rotation)
start_rocemud() {
	rm -f "$SOCK"
	ip netns exec "$NS" "$BUILD/rocemud" -i "$VM_TAP" -a "$ADDR_R" -a "$ADDR6_R" -s "$SOCK" -d \
		--pcap "$1" --pcap-max 4G ${ROCEMUD_EXTRA:-} >>"$WORK/rocemud.log" 2>&1 &
	DAEMON=$!
	for _ in $(seq 100); do
		[ -S "$SOCK" ] && "$BUILD/rocemuctl" -s "$SOCK" status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "rocemud did not start: $(cat "$WORK/rocemud.log")"
}

# The tap is no veth: whether runs of a QP's packets still went out as UDP GSO frames, which
# the kernel cut into segments (UDP checksums filled) before rxe saw them.
stop_rocemud() {
	local gso
	gso=$("$BUILD/rocemuctl" -s "$SOCK" stats | awk '$1 == "sent_gso_frames" || $1 == "sent_pkts" { printf "%s %s, ", $1, $2 }')
	echo "rocemud on $VM_TAP: ${gso%, }"
	kill "$DAEMON" && wait "$DAEMON" 2>/dev/null
	DAEMON=
}

# The tap computes no checksum for us: a UDP checksum on it is complete, and the guest's
# kernel checks it before rxe sees the packet (with the offload on, the kernel would
# leave it partial and the guest would trust it unchecked).
ip netns exec "$NS" ethtool -K "$VM_TAP" tx off >/dev/null 2>&1 ||
	fail "ethtool -K $VM_TAP tx off failed"
start_rocemud "$PCAP"
# The wire itself, on the tap, for the first cases: rocemud's --pcap records each packet as
# built, but the tap is no veth, and runs of a QP's packets leave as UDP GSO frames that
# the kernel cuts into segments, filling in their UDP checksums, before rxe sees them.
ip netns exec "$NS" dumpcap -q -B 64 -i "$VM_TAP" -f "udp port 4791" -w "$TAP_PCAP" >/dev/null 2>&1 &
DUMPCAP=$!

RXE_GID=$(vm_rxe_gid "$ADDR_X")
[ -n "$RXE_GID" ] || fail "rxe0 has no GID for $ADDR_X"
RXE_GID6=$(vm_rxe_gid "$ADDR6_X")
[ -n "$RXE_GID6" ] || fail "rxe0 has no GID for $ADDR6_X"
echo "rxe0's GID $RXE_GID is ::ffff:$ADDR_X, its GID $RXE_GID6 $ADDR6_X"

# run_pair NAME ROCEMU_SIDE SERVER CLIENT: the command lines SERVER and CLIENT (words, with
# @GID@ for the side's GID index and @PEER@ for the other side's IPv4 address, where the
# programs exchange their QPs over TCP), rocemu's side "client" or "server", rxe's the
# other. The GIDs are the IPv4 addresses', or with V6=1 the IPv6 ones'. Sets RC_HOST,
# RC_GUEST and CLIENT_OUT (the file with the client's output); the server's and client's
# outputs are NAME.host/NAME.guest. A perftest client refused before its server listened
# (perftest_refused_too_soon) has its server stopped at once.
# guest_listeners: how many TCP and RDMA CM listeners the guest has
guest_listeners() {
	vm_run 10 'echo $(( $(ss -Hltn | wc -l) + $(rdma resource show cm_id 2>/dev/null |
		grep -c "state LISTEN") ))'
}

# guest_server_start NAME COMMAND: COMMAND in the guest, in the background; back once it
# listens (TCP or RDMA CM), 15 s at most; with JOINS=GROUP (mckey's receivers join a
# multicast group instead), once the guest's eth0 has joined GROUP and a second more. The
# kernel's rdma_cm joins the group over IGMP before it reports the join, and librdmacm
# attaches the QP only as the program reads that event: a sender that started before
# then lost its datagrams to a receiver not yet attached, which waited for them until
# its timeout (seen once in make interop with a fixed 2 s wait). Under TCG the guest can
# take seconds to listen, and a client that finds nobody is refused: perftest -R then
# retries through ids it has destroyed and memory it has freed, and crashes (seen once in
# make check; perftest_refused_too_soon for its second listener).
guest_server_start() {
	local before now
	before=$(guest_listeners)
	vm_spawn "$1" "$2"
	if [ -n "${JOINS:-}" ]; then
		for _ in $(seq 50); do
			vm_run 10 "ip maddr show dev eth0" | grep -qw "$JOINS" && break
			sleep 0.3
		done
		sleep 1
		return
	fi
	if ! [[ $before =~ ^[0-9]+$ ]]; then
		sleep 2
		return
	fi
	for _ in $(seq 50); do
		now=$(guest_listeners)
		[[ $now =~ ^[0-9]+$ ]] && [ "$now" -gt "$before" ] && return
		sleep 0.3
	done
}

# perftest_gave_up OUT: the perftest client whose output OUT is quit on its own, leaving its
# server to wait: refused before its server listened, or unable to fit its clock (an
# emulated guest's clock often makes it: "Correlation coefficient r^2 ... < 0.9")
perftest_gave_up() {
	perftest_refused_too_soon "$1" || grep -q 'Correlation coefficient r^2' "$1"
}

run_pair() {
	local name=$1 side=$2 server=$3 client=$4 pid host guest gid_r=0 gid_x=$RXE_GID
	[ -n "${V6:-}" ] && gid_r=1 gid_x=$RXE_GID6
	if [ "$side" = client ]; then
		guest=${server//@GID@/$gid_x}
		host=${client//@GID@/$gid_r}
		guest_server_start "$name" "timeout 100 $guest"
		ip netns exec "$NS" timeout 100 "$RUN" -D "$SOCK" ${host//@PEER@/$ADDR_X} \
			>"$WORK/$name.host" 2>&1
		RC_HOST=$?
		[ "$RC_HOST" -ne 0 ] && perftest_gave_up "$WORK/$name.host" &&
			vm_run 10 "pkill -x ${guest%% *}" >/dev/null
		vm_wait "$name" 110 >"$WORK/$name.guest"
		RC_GUEST=$?
		CLIENT_OUT=$WORK/$name.host
	else
		host=${server//@GID@/$gid_r}
		guest=${client//@GID@/$gid_x}
		ip netns exec "$NS" timeout 100 "$RUN" -D "$SOCK" $host >"$WORK/$name.host" 2>&1 &
		pid=$!
		PIDS+=($pid)
		sleep 0.5
		vm_run 110 "timeout 100 ${guest//@PEER@/$ADDR_R}" >"$WORK/$name.guest"
		RC_GUEST=$?
		[ "$RC_GUEST" -ne 0 ] && perftest_gave_up "$WORK/$name.guest" && kill "$pid"
		wait "$pid"
		RC_HOST=$?
		CLIENT_OUT=$WORK/$name.guest
	fi
}

# perf_once NAME ROCEMU_SIDE TOOL ARGS...: perftest's TOOL between the two; 0 when both exit
# 0 and the client printed a row of numbers (in ROW).
perf_once() {
	local name=$1 side=$2
	shift 2
	run_pair "$name" "$side" "$* -x @GID@" "$* -x @GID@ @PEER@"
	ROW=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print; exit }' "$CLIENT_OUT")
	STATUS="rocemu exit $RC_HOST, rxe exit $RC_GUEST"
	[ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ -n "$ROW" ]
}

# perf NAME ROCEMU_SIDE TOOL ARGS...: one case. perftest fits its clock rate against
# gettimeofday for each report and gives up when the fit is poor ("Correlation coefficient
# r^2 ... < 0.9"), which an emulated guest's clock often makes it: such a run goes again.
perf() {
	local name=$1 side=$2 ok=false
	shift 2
	if perf_once "$name" "$side" "$@"; then
		ok=true
	elif grep -q 'Correlation coefficient r^2' "$WORK/$name.host" "$WORK/$name.guest"; then
		echo "  $name: perftest could not fit its clock (r^2 < 0.9); once more"
		perf_once "$name" "$side" "$@" && ok=true
	fi
	if $ok; then
		passed "$name: rocemu $side, rxe $([ "$side" = client ] && echo server || echo client): $*:$(tr -s ' \t' ' ' <<<"$ROW")"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | grep -v -e '^ *GID:' | tail -n 12
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | grep -v -e '^ *GID:' | tail -n 20
		failed "$name: rocemu $side: $* ($STATUS)"
	fi
}

# peer NAME ROCEMU_SIDE [PROGRAM]: test/ibv_peer between the two (the client WRITEs 1,
# 4095, 4096, 4097 bytes and 1 MiB from a PSN below the 24-bit wrap, the server checks each
# byte and the canaries after it; then a wrong rkey and one byte past the MR, refused with
# the target unchanged, and a READ whose source MR the server deregisters while it
# streams), or test/ud_peer (one QP sends to 16 UD QPs, every datagram and GRH area
# checked, answers through ibv_create_ah_from_wc): each of the lines either end prints is a
# case here, and what they note ("# ...") is shown. In the READ case, across an emulated
# guest the READ may be done before the deregistration takes effect (-H: rocemu sends every
# response before the guest has read many, and rxe's deregistration can wait for the READ),
# and rxe as the requester (Linux 6.1) predates its own 2022 fix and takes the NAK for
# stale (-P to rxe's client): both allowed, and shown.
peer() {
	local name=$1 side=$2 prog=${3:-$PEER} line client_opts=
	[[ $prog == "$PEER"* ]] && client_opts=$([ "$side" = client ] && echo -H || echo "-H -P")
	run_pair "$name" "$side" "$prog -x @GID@ server" "$prog $client_opts -x @GID@ client @PEER@"
	while IFS= read -r line; do
		case $line in
		"ok "*) passed "$name: rocemu $side: ${line#ok }" ;;
		"FAIL "*) failed "$name: rocemu $side: ${line#FAIL }" ;;
		"# "*) echo "  $name: rocemu $side: ${line#\# }" ;;
		esac
	done < <(cat "$WORK/$name.host" "$WORK/$name.guest")
	if [ "$RC_HOST" -ne 0 ] || [ "$RC_GUEST" -ne 0 ] || ! grep -q '^ok' "$CLIENT_OUT"; then
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 6
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 6
		failed "$name: rocemu $side: $(basename "$prog") (rocemu exit $RC_HOST, rxe exit $RC_GUEST)"
	fi
}

# ud_pingpong NAME ROCEMU_SIDE ARGS...: Debian's ibv_ud_pingpong between the two (-c: the
# receiver checks every buffer).
ud_pingpong() {
	local name=$1 side=$2 iters
	shift 2
	run_pair "$name" "$side" "ibv_ud_pingpong -g @GID@ -c $*" "ibv_ud_pingpong -g @GID@ -c $* @PEER@"
	iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$CLIENT_OUT")
	if [ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ -n "$iters" ]; then
		passed "$name: rocemu $side: ibv_ud_pingpong -c $*: $iters"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 6
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 6
		failed "$name: rocemu $side: ibv_ud_pingpong $* (rocemu exit $RC_HOST, rxe exit $RC_GUEST)"
	fi
}

# uc_pingpong NAME ROCEMU_SIDE ARGS...: Debian's ibv_uc_pingpong between the two (-c: the
# receiver checks every buffer), as ud_pingpong.
uc_pingpong() {
	local name=$1 side=$2 iters
	shift 2
	run_pair "$name" "$side" "ibv_uc_pingpong -g @GID@ -c $*" "ibv_uc_pingpong -g @GID@ -c $* @PEER@"
	iters=$(grep -oE '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$CLIENT_OUT")
	if [ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ -n "$iters" ]; then
		passed "$name: rocemu $side: ibv_uc_pingpong -c $*: $iters"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 6
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 6
		failed "$name: rocemu $side: ibv_uc_pingpong $* (rocemu exit $RC_HOST, rxe exit $RC_GUEST)"
	fi
}

# cm_pair NAME ROCEMU_SIDE SERVER CLIENT: an rdma_cm program of Debian's between the two, the
# kernel's rdma_cm in the guest and rocemud's CM here (@OWN@: the server's own address,
# which rping binds; @PEER@: the server's, for the client; @SELF@: the client's own);
# passes when both exit 0 and the client's output matches PATTERN (a grep -E) at least
# COUNT times. With V6=1 the addresses are the IPv6 ones.
cm_pair() {
	local name=$1 side=$2 server=$3 client=$4 pattern=$5 count=$6 own self seen attempt
	if [ -n "${V6:-}" ]; then
		[ "$side" = client ] && own=$ADDR6_X self=$ADDR6_R || own=$ADDR6_R self=$ADDR6_X
	else
		[ "$side" = client ] && own=$ADDR_X self=$ADDR_R || own=$ADDR_R self=$ADDR_X
	fi
	client=${client//@SELF@/$self}
	for attempt in 1 2 3; do
		# Debian's programs, not ours: their leaks are not counted in the sanitizer build
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
			run_pair "$name" "$side" "${server//@OWN@/$own}" "${client//@PEER@/$own}"
		if perftest_refused_too_soon "$CLIENT_OUT"; then
			echo "  $name: perftest's client was refused before its server listened (REJ 8, perftest's own race): again"
		elif grep -q 'Correlation coefficient r^2' "$WORK/$name.host" "$WORK/$name.guest"; then
			# as perf's: the client gives up on its report and exits 1, its server waits on
			echo "  $name: perftest could not fit its clock (r^2 < 0.9); again"
		else
			break
		fi
	done
	seen=$(grep -cE "$pattern" "$CLIENT_OUT")
	if [ "$RC_HOST" -eq 0 ] && [ "$RC_GUEST" -eq 0 ] && [ "$seen" -ge "$count" ]; then
		passed "$name: rocemu $side through rdma_cm: ${client%% *} ($seen of '$pattern')"
	else
		sed 's/^/  rocemu| /' "$WORK/$name.host" | tail -n 8
		sed 's/^/  rxe   | /' "$WORK/$name.guest" | tail -n 8
		failed "$name: rocemu $side through rdma_cm: ${client%% *} (rocemu exit $RC_HOST, rxe exit $RC_GUEST, $seen of $count)"
	fi
}

# iSER both ways: Debian's tgtd serves a 16 MiB disk on one side, libiscsi's iscsi-test-cu
# writes and checks it from the other (WRITE(10): 0xa6 blocks at its start and its end,
# which the target takes by RDMA READs; COMPARE AND WRITE; READ(16), which it answers with
# RDMA WRITEs), a login per suite (libiscsi's iSER transport fails when suites share one);
# afterwards the disk must begin with 128 KiB of 0xa6. tgt 1.0.85 logs an iSER initiator
# in only if its name is bound to the target too.
ISER_IQN=iqn.2026-11.org.rocemu:interop
ISER_INITIATOR=iqn.2026-11.org.rocemu:initiator
ISER_SUITES="ALL.CompareAndWrite ALL.Read16"
iser_setup() { # CONTROL LUN: tgtadm's commands for the target, as one line
	local a="tgtadm -C $1 --lld iser"
	echo "truncate -s 16M $2 && $a --op new --mode target --tid 1 -T $ISER_IQN &&" \
		"$a --op new --mode logicalunit --tid 1 --lun 1 -b $2 &&" \
		"$a --op bind --mode target --tid 1 -I ALL &&" \
		"$a --op bind --mode target --tid 1 -Q $ISER_INITIATOR &&" \
		"$a --op bind --mode target --tid 1 -Q $ISER_INITIATOR-2"
}
iser_tests() { # TARGET_ADDR SUITE...: the suites, a line each, run where the initiator is
	local t addr=$1
	shift
	for t in "$@"; do
		echo "timeout 60 iscsi-test-cu -i $ISER_INITIATOR -I $ISER_INITIATOR-2 -d -s -t $t" \
			"iser://$addr/$ISER_IQN/1 2>&1 | tail -n 12"
	done
}
iser_case() { # ROCEMU_SIDE (client: rocemu the initiator; server: rocemu the target)
	local side=$1 control=$((4000 + RANDOM % 2000)) out=$WORK/iser-$1.out disk=""
	# Debian's programs, not ours: their leaks are not counted in the sanitizer build
	local -x ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
	if [ "$side" = client ]; then
		guest_server_start "iser-tgtd" \
			"timeout 100 tgtd -f -C $control --iser pool_sz_mb=128"
		vm_run 30 "$(iser_setup "$control" /tmp/iser-lun.img)" >/dev/null
		(eval "$(iser_tests "$ADDR_X" ALL.Write10.Simple |
			sed "s|^|ip netns exec $NS $RUN -D $SOCK |")") >"$out" 2>&1
		disk=$(vm_run 30 "head -c 131072 /tmp/iser-lun.img | tr -d '\\246' | wc -c")
		(eval "$(iser_tests "$ADDR_X" $ISER_SUITES |
			sed "s|^|ip netns exec $NS $RUN -D $SOCK |")") >>"$out" 2>&1
		vm_run 10 "kill -9 \$(pidof tgtd)" >/dev/null
	else
		ip netns exec "$NS" timeout 100 "$RUN" -D "$SOCK" tgtd -f -C "$control" \
			--iser pool_sz_mb=128 >"$WORK/iser-tgtd.out" 2>&1 </dev/null &
		PIDS+=($!)
		disown   # killed below by its port: no word from the shell about that
		for _ in $(seq 100); do
			ip netns exec "$NS" ss -Hltn "sport = :3260" | grep -q . && break
			sleep 0.1
		done
		ip netns exec "$NS" sh -c "$(iser_setup "$control" "$WORK/iser-lun.img")" >/dev/null
		vm_run 100 "$(iser_tests "$ADDR_R" ALL.Write10.Simple)" >"$out"
		disk=$(head -c 131072 "$WORK/iser-lun.img" | tr -d '\246' | wc -c)
		vm_run 200 "$(iser_tests "$ADDR_R" $ISER_SUITES | paste -sd';')" >>"$out"
		pkill -9 -f "^tgtd -f -C $control " 2>/dev/null
		rm -f "/var/run/tgtd/socket.$control" "/var/run/tgtd/socket.$control.lock"
	fi
	if [ "$(grep -cE '^ +tests +([0-9]+) +\1 +\1 +0 ' "$out")" = 3 ] && [ "$disk" = 0 ]; then
		passed "iser-$side: rocemu $side over iSER against rxe: WRITE(10) put 0xa6 in the" \
			"disk's first 128 KiB; $(grep -E '^ +tests ' "$out" | tr -s ' ' | paste -sd';')"
	else
		sed 's/^/  | /' "$out" | tail -n 30
		failed "iser-$side: rocemu $side over iSER against rxe (bytes not 0xa6 in the first 128 KiB: '${disk:-?}')"
	fi
}

# The rest of the matrix (make interop, not the short form): loss, MTU 4096, mixed MTUs.
# Loss, duplication and reordering, injected by rocemud on both directions while it talks
# to rxe: each side's retransmissions (rxe's on a timeout or a sequence NAK from us; ours on
# rxe's NAKs) must still deliver every byte.
loss_cases() {
	local before after
	LOSS=drop=0.02,dup=0.01,reorder=0.05,seed=5
	"$BUILD/rocemuctl" -s "$SOCK" fault "$LOSS" >/dev/null || failed "rocemuctl fault $LOSS"
	before=$("$BUILD/rocemuctl" -s "$SOCK" stats)
	for side in client server; do
		peer "loss-peer-$side" $side "$PEER -l"
		perf "loss-write-$side" $side ib_write_bw -s 65536 -n 50
		perf "loss-read-$side" $side ib_read_bw -s 65536 -n 20
		perf "loss-send-$side" $side ib_send_bw -s 4096 -n 100
	done
	# reordering and duplicates that are not a dead link, with the test QPs' retry_cnt of
	# 6: a resend round costs each side one retry however many NAKs tell of it
	for LOSS in reorder=0.1,seed=8 drop=0.05,dup=0.1,seed=9; do
		"$BUILD/rocemuctl" -s "$SOCK" fault "$LOSS" >/dev/null || failed "rocemuctl fault $LOSS"
		for side in client server; do
			peer "budget-${LOSS%%,seed*}-$side" $side "$PEER -l"
		done
	done
	"$BUILD/rocemuctl" -s "$SOCK" fault off >/dev/null
	after=$("$BUILD/rocemuctl" -s "$SOCK" stats)
	echo "under these faults, rocemud's counters moved by: $(for c in fault_dropped fault_duplicated \
		fault_reordered completer_retry_err timeouts rcvd_seq_err rcvd_seq_err_in_resend \
		nak_seq_sent duplicate_request out_of_seq_request; do
		b=$(awk -v n=$c '$1 == n { print $2 }' <<<"$before"); a=$(awk -v n=$c '$1 == n { print $2 }' <<<"$after")
		printf '%s +%s, ' "$c" $((a - b)); done | sed 's/, $//')"
}

# CNPs to rxe: rocemud marks congestion whenever one more frame waits in its ring behind
# the one it reads (--cc mark=1), so rxe's requests earn CNPs; rxe ignores them, and every
# transfer must still complete, byte-exact where checked. The CNPs go through the wire
# checks with the rest.
cnp_cases() {
	local sent
	stop_rocemud
	ROCEMUD_EXTRA="--cc mark=1" start_rocemud "$WORK/interop-cnp.pcap"
	peer cnp-peer-server server
	perf cnp-write-server server ib_write_bw -s 1048576 -n 20
	perf cnp-send-server server ib_send_bw -s 65536 -n 100
	sent=$("$BUILD/rocemuctl" -s "$SOCK" stats | awk '$1 == "np_cnp_sent" { print $2 }')
	[ "${sent:-0}" -gt 0 ] && passed "CNPs to rxe: rocemud sent $sent while rxe's WRITEs and SENDs completed" ||
		failed "CNPs to rxe: rocemud sent none (np_cnp_sent ${sent:-?})"
	CAPTURES+=("$WORK/interop-cnp.pcap")
}

# Runs through a UDP socket, as on Linux before 6.2 (Debian 12's 6.1), whose packet sockets
# refuse GSO frames (test/gso_refuse.so plays it): the kernel writes each packet's headers,
# with the socket's source port and its IPv4 ids, for which rocemud patched the ICRCs, and
# fills the UDP checksums, which the guest's kernel checks (the tap's offload is off)
# before rxe sees them. In the short form too: no other peer checks those frames.
udp_socket_cases() {
	local via
	stop_rocemud
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		ROCEMUD_EXTRA= LD_PRELOAD=$BUILD/test/gso_refuse.so start_rocemud "$WORK/interop-udp.pcap"
	for side in client server; do
		peer "udp-socket-peer-$side" $side
		[ -n "$SHORT" ] || perf "udp-socket-write-1m-$side" $side ib_write_bw -s 1048576 -n 10
	done
	via=$("$BUILD/rocemuctl" -s "$SOCK" stats | awk '$1 == "sent_gso_frames" { print $2 }')
	grep -q "runs of one QP's packets go through UDP sockets" "$WORK/rocemud.log" &&
		[ "${via:-0}" -gt 0 ] &&
		passed "through a UDP socket: rocemud sent $via GSO frames that way, rxe took them all" ||
		failed "through a UDP socket: rocemud did not send through one (sent_gso_frames ${via:-?})"
	CAPTURES+=("$WORK/interop-udp.pcap")
	stop_rocemud
	# the full matrix's loss cases go on with a daemon of the usual kind, their frames
	# checked with the rest; the short form stops it unused
	start_rocemud "$WORK/interop-after-udp.pcap"
	[ -n "$SHORT" ] || CAPTURES+=("$WORK/interop-after-udp.pcap")
}

# Both links at MTU 9000: path MTU 4096 on both sides, multi-packet messages again.
mtu4096_cases() {
	local rxe_mtu
	stop_rocemud
	ip netns exec "$NS" ip link set "$VM_TAP" mtu 9000
	vm_run 30 "ip link set eth0 mtu 9000" >/dev/null || failed "the guest's eth0 refused MTU 9000"
	start_rocemud "$WORK/interop-4096.pcap"
	rxe_mtu=$(vm_run 30 "ibv_devinfo -d rxe0 | awk '/active_mtu/ { print \$2 }'")
	echo "MTU 9000 on both links: rxe0 active_mtu $rxe_mtu, rocemud: $("$BUILD/rocemuctl" -s "$SOCK" status | grep -i mtu | tr -s ' ' | head -n 2 | paste -sd';')"
	for side in client server; do
		peer "mtu4096-peer-$side" $side
		perf "mtu4096-write-1m-$side" $side ib_write_bw -s 1048576 -n 10
		perf "mtu4096-send-64k-$side" $side ib_send_bw -s 65536 -n 50
		perf "mtu4096-read-1m-$side" $side ib_read_bw -s 1048576 -n 10
	done
	CAPTURES+=("$WORK/interop-4096.pcap")
}

# Different MTUs: rxe's link back at 1500 (active MTU 1024), rocemu's still at 9000 (4096).
# ibv_peer connects at the smaller of the two, as programs that exchange it do; perftest is
# told with -m, as it must be on any such pair.
mixed_mtu_cases() {
	vm_run 30 "ip link set eth0 mtu 1500" >/dev/null || failed "the guest's eth0 refused MTU 1500"
	for side in client server; do
		peer "mixed-mtu-peer-$side" $side
		perf "mixed-mtu-write-1m-$side" $side ib_write_bw -s 1048576 -n 10 -m 1024
	done
}

for side in client server; do
	peer "peer-$side" $side
	peer "ud-peer-$side" $side "$UD_PEER"
	V6=1 peer "v6-peer-$side" $side
	V6=1 peer "v6-ud-peer-$side" $side "$UD_PEER"
	# the RDMA CM against the kernel's rdma_cm, in the short form too
	cm_pair "rping-$side" $side "rping -s -a @OWN@ -C 10 -v" "rping -c -a @PEER@ -C 10 -v" \
		'ping data: rdma-ping-' 10
	cm_pair "udaddy-$side" $side "udaddy" "udaddy -s @PEER@" 'data transfers complete' 1
	cm_pair "write-bw-cm-$side" $side "ib_write_bw -R -s 65536 -n 50" \
		"ib_write_bw -R -s 65536 -n 50 @PEER@" '^ *65536 +50 ' 1
	[ -n "$SHORT" ] && continue
	V6=1 ud_pingpong "v6-ud-pingpong-$side" $side -s 1024 -n 200
	V6=1 perf "v6-write-1m-$side" $side ib_write_bw -s 1048576 -n 10
	V6=1 perf "v6-send-4k-$side" $side ib_send_bw -s 4096 -n 200
	V6=1 perf "v6-read-64k-$side" $side ib_read_bw -s 65536 -n 50
	V6=1 perf "v6-ud-send-$side" $side ib_send_bw -c UD -n 200
	perf "write-4k-$side" $side ib_write_bw -s 4096 -n 200
	perf "write-1m-$side" $side ib_write_bw -s 1048576 -n 10
	perf "write-lat-$side" $side ib_write_lat -s 2 -n 200
	perf "send-4k-$side" $side ib_send_bw -s 4096 -n 200
	perf "send-lat-$side" $side ib_send_lat -s 2 -n 200
	perf "read-64k-$side" $side ib_read_bw -s 65536 -n 50
	perf "read-lat-$side" $side ib_read_lat -s 2 -n 200
	perf "atomic-$side" $side ib_atomic_bw -n 200
	perf "atomic-cas-$side" $side ib_atomic_bw -A CMP_AND_SWAP -n 200
	ud_pingpong "ud-pingpong-$side" $side -s 1024 -n 200
	uc_pingpong "uc-pingpong-$side" $side -s 4096 -n 200
	# multicast: the client sends 10 datagrams to the group, the server (the receiver)
	# exits 0 only once it has all 10
	JOINS=239.7.7.7 cm_pair "mckey-$side" $side "mckey -m 239.7.7.7 -b @OWN@ -C 10" \
		"mckey -m 239.7.7.7 -b @SELF@ -s -C 10" 'data transfers complete' 1
	cm_pair "ucmatose-$side" $side "ucmatose -c 4" "ucmatose -s @PEER@ -c 4" \
		'data transfers complete' 1
	V6=1 cm_pair "v6-rping-$side" $side "rping -s -a @OWN@ -C 10 -v" \
		"rping -c -a @PEER@ -C 10 -v" 'ping data: rdma-ping-' 10
	# memory windows (test/mw_peer), served by rocemu to rxe's client only: rxe 6.1 as the
	# server checks an MW access against the MR's bounds alone and would take the WRITE
	# past the window that mw_peer expects refused
	[ "$side" = server ] && peer "mw-peer-$side" $side "$MW_PEER"
	perf "ud-send-$side" $side ib_send_bw -c UD -n 200
	perf "ud-lat-$side" $side ib_send_lat -c UD -n 200
done
# What a program sees of rdma_cm where it follows rules rather than traffic, one line a
# test/cm_peer mode: binds (port-rules), rdma_disconnect (disconnect-rules), calls out of
# order (call-rules), a connection's events (event-rules; ud-rules for SIDR), the routes and
# QPs it leaves (qp-rules), synchronous ids (ep-rules), multicast (mcast-rules, on a group
# each side joins alone). Each side listens on its own address and connects to itself,
# some modes over IPv6 too: the kernel's rdma_cm on rxe0 and rocemu's here must print the
# same line.
cm_rules() { # [v6] MODE...
	local v6= mode arg port=$((7300 + RANDOM % 500)) rxe ours rc_rxe rc_ours
	local rxe_addr=$ADDR_X our_addr=$ADDR_R
	[ "$1" = v6 ] && { v6=v6-; rxe_addr=$ADDR6_X our_addr=$ADDR6_R; shift; }
	for mode in "$@"; do
		# (MODE=ARG: the mode's second argument, else a port)
		arg=$port
		case $mode in *=*) arg=${mode#*=} mode=${mode%%=*} ;; esac
		rxe=$(vm_run 60 "timeout 50 $CM_PEER $mode $rxe_addr $arg" 2>&1)
		rc_rxe=$?
		ours=$(ip netns exec "$NS" timeout 50 "$RUN" -D "$SOCK" "$CM_PEER" $mode "$our_addr" $arg 2>&1)
		rc_ours=$?
		# (both ran to their end: two usages or two failures alike are no agreement)
		if [ "$rc_rxe" -eq 0 ] && [ "$rc_ours" -eq 0 ] && [ "$rxe" = "$ours" ]; then
			passed "cm-$v6$mode: rocemu's rdma_cm answers as the kernel's: $ours"
		else
			echo "  rxe   | $rxe"
			echo "  rocemu| $ours"
			failed "cm-$v6$mode: rocemu's rdma_cm answers differ from the kernel's (exit $rc_ours, rxe's $rc_rxe)"
		fi
		port=$((port + 2))
	done
}
cm_rules port-rules disconnect-rules call-rules event-rules ud-rules qp-rules ep-rules \
	mcast-rules=239.7.7.9
cm_rules v6 event-rules ud-rules qp-rules
# (about 45 s more in the sanitizer pass of make check: make interop only)
[ -n "$SHORT" ] || for side in client server; do iser_case $side; done
kill "$DUMPCAP" && wait "$DUMPCAP" 2>/dev/null
DUMPCAP=
CAPTURES=("$PCAP")
udp_socket_cases
[ -n "$SHORT" ] || { loss_cases; cnp_cases; mtu4096_cases; mixed_mtu_cases; }
stop_rocemud

# 802.1Q VLAN devices, which this host's kernel may lack (CONFIG_VLAN_8021Q): the guest's
# kernel has them, so test/vlan.test.sh runs there, rocemud against rocemud in two network
# namespaces of the guest, IPv4 and IPv6 (tshark's look at its captures left out: under
# emulation it takes a minute each; the tagged frames are still counted by it).
vlan_in_guest() {
	local out
	if out=$(vm_run 300 "cd $ROCEMU_ROOT && CHECK_WIRE_NO_TSHARK=1 ROCEMU_BUILD=$BUILD \
		bash test/vlan.test.sh" 2>&1); then
		passed "in the guest, VLAN devices: $(tail -n 1 <<<"$out"); $(grep -c '^\[' <<<"$out") checks"
	else
		sed 's/^/  guest| /' <<<"$out" | tail -n 30
		failed "in the guest, VLAN devices: test/vlan.test.sh"
	fi
}
[ -n "$SHORT" ] || vlan_in_guest

# The RDMA CM's connection rate inside the guest (test/guest-rates.sh).
[ -n "$SHORT" ] || cm_rate_in_guest "$ADDR_X"

# rocemud where rxe is loaded: rdma_rxe holds UDP 4791 in the guest's namespace, and
# rocemud must refuse to start and say so, naming the module and how to unload it.
rocemud_beside_rxe() {
	local out
	out=$(vm_run 60 "timeout 20 $BUILD/rocemud -i eth0 -a $ADDR_X -s /run/rocemu-beside.sock 2>&1; echo exit \$?")
	if grep -q 'rdma_rxe' <<<"$out" && ! grep -q '^exit 0$' <<<"$out"; then
		passed "rocemud beside rxe0 in the guest refuses to start: $(grep -m1 rdma_rxe <<<"$out" | cut -c1-160)"
	else
		sed 's/^/  guest| /' <<<"$out" | tail -n 5
		failed "rocemud beside rxe0: no refusal naming rdma_rxe"
	fi
}
[ -n "$SHORT" ] || rocemud_beside_rxe

# rdma-core's pyverbs suite on rxe0 itself, in the guest, as test/pyverbs.test.sh runs it
# on rocemu: the count rocemu is compared with is measured here, not remembered. The whole
# output stays in $INTEROP_CACHE/pyverbs-on-rxe.txt, which test/pyverbs.test.sh reads in
# place of ../shared/anchors' when it is there. Its failures are rxe's, not ours: shown,
# and counted only when the suite did not run to its summary.
pyverbs_on_rxe() {
	local out=$WORK/pyverbs-rxe.out summary ran skipped bad
	vm_run 1500 "rm -rf /tmp/pyverbs && mkdir -p /tmp/pyverbs &&
		cp -r /usr/share/doc/rdma-core/tests /tmp/pyverbs/ &&
		gunzip -f /tmp/pyverbs/tests/*.gz; cd /tmp/pyverbs &&
		timeout 1400 /usr/bin/python3 tests/run_tests.py --dev rxe0 -v" >"$out" 2>&1
	summary=$(grep -E '^(OK|FAILED)( \(|$)' "$out" | tail -n 1)
	ran=$(sed -nE 's/^Ran ([0-9]+) tests? .*/\1/p' "$out")
	skipped=$(sed -nE 's/.*skipped=([0-9]+).*/\1/p' <<<"$summary")
	bad=$(grep -cE '^(FAIL|ERROR): ' "$out")
	if [ -z "$ran" ]; then
		tail -n 20 "$out" | sed 's/^/  guest| /'
		failed "pyverbs on rxe0: the suite did not finish"
		return
	fi
	grep -E '^(FAIL|ERROR): ' "$out" | sed 's/^/  rxe0: /'
	passed "pyverbs on rxe0 ($(vm_run 10 'uname -r')): $ran tests, $((ran - ${skipped:-0} - bad)) passed, ${skipped:-0} skipped, $bad failed or errored"
	cp "$out" "$INTEROP_CACHE/pyverbs-on-rxe.txt"
}
[ -n "$SHORT" ] || pyverbs_on_rxe

# Every frame both ways, as rocemud saw them: ours as sent, rxe's as received.
for cap in "${CAPTURES[@]}"; do
	check_wire "$cap" infiniband 1000
done

# The tap's frames as they crossed it: each segment of a GSO frame ICRC-valid on its own,
# and every UDP checksum the kernel filled in correct (RoCE v2 senders leave it 0; rxe's
# UDP socket checks one that is not, and took every one of these).
wire_checksums() {
	local filled bad
	check_wire "$TAP_PCAP" infiniband 1000
	filled=$(HOME=$WORK tshark -r "$TAP_PCAP" -Y 'udp.checksum != 0' 2>/dev/null | wc -l)
	bad=$(HOME=$WORK tshark -o udp.check_checksum:TRUE -r "$TAP_PCAP" \
		-Y 'udp.checksum.status == 0' 2>/dev/null | wc -l)
	[ "$bad" -eq 0 ] && passed "the tap's frames: $filled with a UDP checksum filled in by segmentation, none wrong" ||
		failed "the tap's frames: $bad of $filled UDP checksums wrong"
}
wire_checksums

# The captures stay for a look in Wireshark: what rxe sends is the best test our parser has.
mkdir -p "$INTEROP_CACHE" && cp "${CAPTURES[@]}" "$INTEROP_CACHE/" &&
	echo "captures of this run, in $INTEROP_CACHE: ${CAPTURES[*]##*/}"
finish "interop${SHORT:+ (short)}"
