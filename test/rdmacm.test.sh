#!/usr/bin/env bash
# RDMA CM: unmodified librdmacm programs from Debian's packages under rocemu-run, between two
# daemons in two network namespaces, each a row: rping -C 100 -v (verified) over IPv4 and
# IPv6, ucmatose with 10 connections, with rdma_migrate_id (-m) and with TOS and ACK
# timeout options, rdma_server/rdma_client and rdma_xserver/rdma_xclient (synchronous ids,
# rdma_create_ep), udaddy over IPv4 and IPv6 (the UDP port space: SIDR), mckey over IPv4
# and IPv6 (multicast: two receivers, one sender), perftest over
# rdma_cm (ib_write_bw -R, -R -q 4 and --rdma_cm, ib_send_bw -R, ib_read_lat -R), cmtime
# with 50 connections at once; rsockets: rstream and riostream verified over IPv4 and IPv6
# and riostream's ping-pong that polls the last byte of its buffer,
# datagram rsockets (udpong) refused at rconnect as on the kernel's rxe,
# and netcat under librspreload moving a file intact; the CM's hardening (the daemon's
# sockets close-on-exec, a REQ given up before its answer REJECTED to the server's id, a
# synchronous rdma_disconnect, one thread's resolution not holding up another's calls, an
# id destroyed taking its events, a client short of descriptors, ids and channels used
# after their end refused with EINVAL). Then what the kernel's
# rdma_cm reports: a server that rejects gives REJECTED with status 28 (consumer defined)
# and its private data; a port nobody listens on, REJECTED with status 8 (invalid service
# ID), as a kernel passive side answers; 1,000 connect/SEND/disconnect cycles leave both
# daemons' QPs and MRs where they started and, after TimeWait, no CM state at all;
# rocemuctl cm shows a listener; the daemons still serve.
# In the sanitizer build, rocemu-run loads the sanitized layer (and its runtime) into them.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/cm_peer
needs_programs "rdmacm-utils and perftest" rping ucmatose udaddy mckey cmtime rdma_server \
	rdma_client rdma_xserver ib_write_bw ib_send_bw ib_read_lat rstream riostream udpong
[ -x "$PEER" ] || fail "$PEER is missing (make $PEER)"
unset ROCEMU_DEBUG
T=${CM_TIMEOUT:-40}

NETNS_IPV6=1 topology_up netns

rping_verified() {
	local name=$1 addr=$2 count=$3 got=
	if cm_pair "$name" rping -s -a "$addr" -C "$count" -v -- rping -c -a "$addr" -C "$count" -v &&
		got=$(grep -c '^ping data: rdma-ping-' "$OUT_C") && [ "$got" -eq "$count" ] &&
		[ "$(grep -c '^server ping data: rdma-ping-' "$OUT_S")" -eq "$count" ]; then
		passed "$name: rping -C $count -v to $addr: $got pings verified on both ends"
	else
		show_both
		grep -v 'ping data' "$OUT_C" "$OUT_S" | head -n 6 | sed 's/^/  | /'
		failed "$name: rping -C $count -v to $addr (client exit $RC_C, server exit $RC_S, ${got:-?} pings)"
	fi
}

status_of() {
	local sock=$SOCK_A
	[ "$1" = b ] && sock=$SOCK_B
	"$BUILD/rocemuctl" -s "$sock" status | awk '$1 == "qps:" || $1 == "mrs:" {printf "%s%s ", $1, $2}'
}
START_A=$(status_of a) START_B=$(status_of b)

# ---- the programs ----

rping_verified rping-ipv4 "$ADDR_B" 100
rping_verified rping-ipv6 "$ADDR6_B" 20

if cm_pair ucmatose ucmatose -c 10 -- ucmatose -s "$ADDR_B" -c 10 &&
	grep -q 'return status 0' "$OUT_C" && grep -q 'return status 0' "$OUT_S" &&
	grep -q 'data transfers complete' "$OUT_C"; then
	passed "ucmatose -c 10: 10 connections, data transfers complete, status 0 on both ends"
else
	show_both
	failed "ucmatose -c 10"
fi

if cm_pair ucmatose-m ucmatose -c 4 -m -- ucmatose -s "$ADDR_B" -c 4 -m &&
	grep -q 'return status 0' "$OUT_C" && grep -q 'return status 0' "$OUT_S" &&
	grep -q 'migrating to new event channel' "$OUT_C"; then
	passed "ucmatose -c 4 -m: rdma_migrate_id to a new channel after the transfers, status 0"
else
	show_both
	failed "ucmatose -c 4 -m"
fi

if cm_pair ucmatose-tos ucmatose -c 2 -t 32 -a 18 -- ucmatose -s "$ADDR_B" -c 2 -t 32 -a 18 &&
	grep -q 'return status 0' "$OUT_C" && grep -q 'return status 0' "$OUT_S"; then
	passed "ucmatose -t 32 -a 18: rdma_set_option TOS and ACK timeout, status 0"
else
	show_both
	failed "ucmatose -t 32 -a 18"
fi

# the UDP port space: SIDR_REQ and SIDR_REP, then UD datagrams both ways
if cm_pair udaddy udaddy -- udaddy -s "$ADDR_B" &&
	grep -q 'return status 0' "$OUT_C" && grep -q 'return status 0' "$OUT_S" &&
	grep -q 'data transfers complete' "$OUT_C"; then
	passed "udaddy (UDP port space, SIDR): data transfers complete, status 0 on both ends"
else
	show_both
	failed "udaddy"
fi
if cm_pair udaddy-ipv6 udaddy -b "$ADDR6_B" -- udaddy -s "$ADDR6_B" &&
	grep -q 'return status 0' "$OUT_C" && grep -q 'return status 0' "$OUT_S"; then
	passed "udaddy over IPv6 to $ADDR6_B: status 0 on both ends"
else
	show_both
	failed "udaddy over IPv6"
fi

# multicast: two mckey receivers in host b joined to the group, one sender in host a; each
# receiver must count every message (it waits for them all), and while they are joined
# host b's kernel holds the group at the IP level (IGMP, MLD: what a snooping switch
# sees), and not after
# ip_member GROUP: whether host b's kernel holds GROUP on its interface
ip_member() {
	local out
	out=$("${IN_B[@]}" ip maddr show dev "$IF_B")
	grep -qE "inet6? +$1( |$)" <<<"$out"
}

# mcast_counters: both daemons' multicast and drop counters that moved, on one line
mcast_counters() {
	local h sock
	for h in a b; do
		[ $h = a ] && sock=$SOCK_A || sock=$SOCK_B
		echo "$h: $("$BUILD/rocemuctl" -s "$sock" stats |
			awk '$2 != 0 && $1 ~ /mcast|drop_|ud|gso|qkey/ { printf "%s %s, ", $1, $2 }')"
	done
}

# A run whose receivers waited in vain was seen once in about 17 sanitizer runs (2026-11-26,
# not yet explained): its counters are shown and the row runs once more, so that a second
# failure fails it and a first one leaves what is needed to find the cause.
mckey_row() {
	if ! MCKEY_LAST= mckey_try "$@"; then
		echo "  $1: first attempt failed; the daemons' counters: $(mcast_counters | paste -sd' ')"
		MCKEY_LAST=1 mckey_try "$@" || mcast_counters | sed 's/^/  | /'
	fi
}

# mckey_try NAME GROUP BIND_A BIND_B MGID: one run; 1 when the receivers failed and this
# is not the last try (MCKEY_LAST empty), else the checks pass or fail
mckey_try() {
	local name=$1 group=$2 bind_a=$3 bind_b=$4 mgid=$5 i joined in_kernel=no r1 r2 s
	local -a pids=()
	for i in 1 2; do
		"${IN_B[@]}" timeout "$T" "$RUN" -D "$SOCK_B" stdbuf -oL mckey -m "$group" -b "$bind_b" \
			-C 20 >"$WORK/$name.recv$i" 2>&1 </dev/null &
		pids+=($!)
		PIDS+=($!)
	done
	for _ in $(seq 200); do
		joined=$(cat "$WORK/$name.recv1" "$WORK/$name.recv2" | grep -c "joined dgid: $mgid ")
		[ "$joined" -eq 2 ] && break
		sleep 0.05
	done
	ip_member "$group" && in_kernel=yes
	"${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" mckey -m "$group" -b "$bind_a" -s -C 20 \
		>"$WORK/$name.send" 2>&1 </dev/null
	s=$?
	wait "${pids[0]}"; r1=$?
	wait "${pids[1]}"; r2=$?
	if [ $s -eq 0 ] && [ $r1 -eq 0 ] && [ $r2 -eq 0 ] &&
		[ "$(grep -l 'data transfers complete' "$WORK/$name".* | wc -l)" -eq 3 ]; then
		passed "$name: mckey -m $group -C 20: both receivers got all 20, joined as $mgid"
	elif [ -z "$MCKEY_LAST" ]; then
		tail -n 5 "$WORK/$name".* | sed 's/^/  | /'
		return 1
	else
		tail -n 5 "$WORK/$name".* | sed 's/^/  | /'
		failed "$name: mckey -m $group (sender exit $s, receivers $r1 $r2)"
	fi
	[ $in_kernel = yes ] && ! ip_member "$group" &&
		passed "$name: $group in host b's IP multicast memberships while joined, not after" ||
		failed "$name: $group in host b's IP memberships while joined: $in_kernel, or still after"
}
mckey_row mckey 239.1.1.1 "$ADDR_A" "$ADDR_B" ::ffff:239.1.1.1
mckey_row mckey-ipv6 ff0e::1:1 "$ADDR6_A" "$ADDR6_B" ff0e::1:1

PORT=$((7000 + RANDOM % 1000))
if cm_pair rdma_xserver rdma_xserver -p "$PORT" -- rdma_xclient -s "$ADDR_B" -p "$PORT" &&
	grep -q 'rdma_xclient: end 0' "$OUT_C" && grep -q 'rdma_xserver: end 0' "$OUT_S"; then
	passed "rdma_xserver/rdma_xclient -p $PORT (RC): end 0 on both"
else
	show_both
	failed "rdma_xserver/rdma_xclient"
fi

PORT=$((7000 + RANDOM % 1000))
if cm_pair rdma_server rdma_server -p "$PORT" -- rdma_client -s "$ADDR_B" -p "$PORT" &&
	grep -q 'rdma_client: end 0' "$OUT_C" && grep -q 'rdma_server: end 0' "$OUT_S"; then
	passed "rdma_server/rdma_client -p $PORT: end 0 on both (rdma_create_ep, synchronous ids)"
else
	show_both
	failed "rdma_server/rdma_client"
fi

# perftest: -R exchanges its QPs' numbers through rdma_cm, --rdma_cm connects them with it
for args in "ib_write_bw -R" "ib_send_bw -R" "ib_read_lat -R" "ib_write_bw --rdma_cm" \
	"ib_write_bw -R -q 4"; do
	read -ra cmd <<<"$args"
	perftest_cm_pair "${cmd[0]}" "${cmd[@]}"
	if [ "$RC_C" -eq 0 ] && [ "$RC_S" -eq 0 ] && rows=$(table_rows "$OUT_C") &&
		[ "$rows" -eq 1 ]; then
		last=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { l = $0 } END { print l }' "$OUT_C")
		passed "$args (perftest over rdma_cm):$(tr -s ' \t' ' ' <<<"$last" | cut -c1-60)"
	else
		show_both
		failed "$args"
	fi
done

# cmtime's server serves until it is stopped: the client's table is the row
"${IN_B[@]}" timeout "$T" "$RUN" -D "$SOCK_B" cmtime -c 50 >"$WORK/cmtime.server" 2>&1 </dev/null &
server=$!
PIDS+=($server)
for _ in $(seq 100); do
	[ "$(listeners b)" -gt 0 ] && break
	sleep 0.05
done
out=$("${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" cmtime -s "$ADDR_B" -c 50 2>&1)
status=$?
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
if [ $status -eq 0 ] && line=$(grep -E '^connect +:' <<<"$out"); then
	passed "cmtime -c 50 (connect all, then disconnect all): $(tr -s ' ' <<<"$line")"
else
	printf '%s\n' "$out" | tail -n 12 | sed 's/^/  | /'
	failed "cmtime -c 50"
fi

# ---- rsockets: librdmacm's sockets over RDMA, on the rdma_cm layer ----
# rstream and riostream verify every byte (-T v); under librspreload netcat (nc.traditional),
# an unmodified TCP program, moves a file whose sha256 must arrive unchanged, over RDMA (the
# preload falls back to TCP when rsockets fail: the daemon's counters tell). (busybox is
# static, so no preload reaches it; nc.openbsd's accept4 is not one librspreload answers.)
# (rstream -T a is left out: its do_poll fails on POLLHUP even with data still to read, a
# race of the program's own whenever the server closes right after its last send; it
# fails so on the kernel's rxe too, 5 runs of 8 between two guests.)
RS_T=15
rs_pair() {
	local name=$1 what=$2
	shift 2
	if T=$RS_T cm_pair "$name" "$@" && grep -q '^custom' "$OUT_C" && grep -q '^custom' "$OUT_S" &&
		! grep -q 'verification failed' "$OUT_C" "$OUT_S"; then
		passed "$what: $(grep '^custom' "$OUT_C" | tr -s ' ' | cut -c1-70)"
	else
		show_both
		failed "$what (client exit $RC_C, server exit $RC_S)"
	fi
}
# (rstream's sockets are nonblocking unless -T b: its connect then goes through rpoll)
rs_pair rstream "rstream -S 1000 -C 200 -T b -T v to $ADDR_B (blocking, verified)" \
	rstream -S 1000 -C 200 -T b -T v -- rstream -s "$ADDR_B" -S 1000 -C 200 -T b -T v
rs_pair rstream-64k "rstream -S 65536 -C 20 -I 4 -T v (nonblocking, verified)" \
	rstream -S 65536 -C 20 -I 4 -T v -- rstream -s "$ADDR_B" -S 65536 -C 20 -I 4 -T v
rs_pair rstream-ipv6 "rstream -S 4096 -C 50 -T v to $ADDR6_B (verified)" \
	rstream -b "$ADDR6_B" -S 4096 -C 50 -T v -- rstream -s "$ADDR6_B" -S 4096 -C 50 -T v
rs_pair riostream "riostream -S 4096 -C 50 -T v to $ADDR_B (riomap'd, verified)" \
	riostream -S 4096 -C 50 -T v -- riostream -s "$ADDR_B" -S 4096 -C 50 -T v
rs_pair riostream-ipv6 "riostream -S 4096 -C 50 -T v to $ADDR6_B (verified)" \
	riostream -b "$ADDR6_B" -S 4096 -C 50 -T v -- riostream -s "$ADDR6_B" -S 4096 -C 50 -T v
# a ping-pong whose each side spins on the last byte of its buffer for the peer's WRITE,
# then writes its own marker there: a WRITE that stored its last byte twice put the old
# marker back over the new one, and both sides spun for good (once in 10,000 to 70,000)
# (2 to 3 s alone, in either build; more than 15 once with the machine loaded by more)
RS_T=60 rs_pair riostream-pingpong "riostream -S 64 -C 1 -I 20000 (each side polls its buffer's last byte)" \
	riostream -S 64 -C 1 -I 20000 -- riostream -s "$ADDR_B" -S 64 -C 1 -I 20000

RSPRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
if [ -f "$RSPRELOAD" ] && command -v nc.traditional >/dev/null; then
	head -c 4000000 /dev/urandom >"$WORK/nc.send"
	port=$((5300 + RANDOM % 500))
	pkts=$(counter b rcvd_pkts) est=$(counter b cm_established)
	T=$RS_T PRELOAD=$RSPRELOAD serve "$WORK/nc.recv" "$WORK/nc.server" nc.traditional -l -p "$port"
	"${IN_A[@]}" timeout "$RS_T" env LD_PRELOAD="$RSPRELOAD" "$RUN" -D "$SOCK_A" \
		nc.traditional -q 1 "$ADDR_B" "$port" <"$WORK/nc.send" >"$WORK/nc.client" 2>&1
	status=$?
	wait "$server" || status=$?
	pkts=$(($(counter b rcvd_pkts) - pkts)) est=$(($(counter b cm_established) - est))
	sum=$(sha256sum <"$WORK/nc.send" | cut -c1-16)
	if [ $status -eq 0 ] && [ "$(sha256sum <"$WORK/nc.recv" | cut -c1-16)" = "$sum" ] &&
		[ "$est" -eq 1 ] && [ "$pkts" -ge $((4000000 / 4096)) ]; then
		passed "librspreload: nc.traditional moved 4,000,000 bytes intact (sha256 $sum...) in $pkts RoCE packets"
	else
		sed 's/^/  | /' "$WORK/nc.client" "$WORK/nc.server" | head -n 6
		failed "librspreload nc.traditional (exit $status, $(stat -c %s "$WORK/nc.recv") bytes, $pkts packets, $est connections)"
	fi
else
	echo "(the librspreload row is skipped: $RSPRELOAD or nc.traditional (netcat-traditional) is missing)"
fi

# Datagram rsockets address their datagrams with an address handle of LID and no GRH,
# which a RoCE port refuses (the kernel's rdma_check_ah_attr): udpong's rconnect fails on
# the kernel's rxe with "No such file or directory" (rsockets' cleanup sets errno after
# the refusal), and must fail here the same way, at once, with no packet sent.
pkts=$(counter a sent_pkts)
out=$("${IN_A[@]}" timeout 10 "$RUN" -D "$SOCK_A" udpong -s "$ADDR_B" -p 7471 2>&1)
status=$?
if [ $status -eq 255 ] && grep -q '^rconnect: No such file or directory' <<<"$out" &&
	[ "$(counter a sent_pkts)" -eq "$pkts" ]; then
	passed "udpong (datagram rsockets): rconnect refused as on rxe (no GRH in rsockets' AH)"
else
	sed 's/^/  | /' <<<"$out" | head -n 4
	failed "udpong: exit $status, not rconnect's refusal as on rxe"
fi

# ---- CM hardening ----
# Every socket the daemon holds is close-on-exec (it spawns nft), the copies of clients'
# event channels too: checked while a server's channel is open.
sockets_without_cloexec() {
	local pid=$1 f n flags
	for f in /proc/"$pid"/fd/*; do
		n=${f##*/}
		[[ $(readlink "$f" 2>/dev/null) == socket:* ]] || continue
		flags=$(awk '$1 == "flags:" {print $2}' "/proc/$pid/fdinfo/$n" 2>/dev/null)
		[ -n "$flags" ] && (( (8#$flags & 8#2000000) == 0 )) && echo "$n"
	done
}
T=$RS_T serve "$WORK/cloexec.server" - rstream -p 7399
up=$(listeners b)
leaky=$(sockets_without_cloexec "${DAEMON_PID[b]}")
nsock=$(find /proc/"${DAEMON_PID[b]}"/fd -lname 'socket:*' 2>/dev/null | wc -l)
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
if [ "$up" -gt 0 ] && [ -z "$leaky" ]; then
	passed "with a client's CM channel open, all $nsock sockets of rocemud are close-on-exec"
else
	failed "rocemud's sockets without close-on-exec (listening: $up): fds ${leaky:-none}"
fi

# librdmacm's semantics the review found missing: a synchronous id's rdma_disconnect waits
# for its event; one thread's neighbour resolution does not hold up another's calls; an id
# destroyed takes its unread events out of the channel
PORT=$((8000 + RANDOM % 1000))
if T=$RS_T cm_pair sync-disconnect "$PEER" cycle-server "$PORT" 1 -- "$PEER" sync-client "$ADDR_B" "$PORT" &&
	grep -q 'returned with RDMA_CM_EVENT_DISCONNECTED in id->event' "$OUT_C"; then
	passed "cm_peer sync-client: $(head -n 1 "$OUT_C")"
else
	show_both
	failed "a synchronous id's rdma_disconnect: DISCONNECTED in id->event"
fi
# a client that gives up on its REQ before the server answers sends REJ TIMEOUT naming only
# its own comm ID and CA GUID: the server's request is found, and REJECTED to its id
PORT=$((8000 + RANDOM % 1000))
if T=$RS_T cm_pair late "$PEER" late-server "$PORT" -- "$PEER" give-up-client "$ADDR_B" "$PORT" &&
	grep -q 'RDMA_CM_EVENT_REJECTED status 4 on its id' "$OUT_S"; then
	passed "a REQ given up before the answer: $(grep 'not answered' "$OUT_S")"
else
	show_both
	failed "a REQ given up before the answer: REJECTED, status 4, to the request's id"
fi
silent=${ADDR_B%.*}.$(( ${ADDR_B##*.} + 101 ))
out=$("${IN_A[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_A" "$PEER" parallel-resolve "$silent" "$ADDR_A" 2>&1)
if grep -q '^rdma_listen returned before the other thread' <<<"$out"; then
	passed "cm_peer parallel-resolve: $out"
else
	echo "  | $out"
	failed "rdma_listen waited for another thread's rdma_resolve_addr"
fi
# An id bound with no port takes one of ip_local_port_range as the kernel has it now, as the
# kernel's rdma_cm does (here host a's namespace's range, narrowed for the run).
range=$("${IN_A[@]}" cat /proc/sys/net/ipv4/ip_local_port_range)
"${IN_A[@]}" sysctl -qw net.ipv4.ip_local_port_range="40123 40124"
out=$("${IN_A[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_A" "$PEER" src-ports "$ADDR_B" 6 2>&1)
# listeners on such ids each hold a port of their own, as the kernel's: a range of two
# ports gives two, then EADDRNOTAVAIL, and a listen on a port held is EADDRINUSE
held=$("${IN_A[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_A" "$PEER" any-ports "$ADDR_A" 3 2>&1)
"${IN_A[@]}" sysctl -qw net.ipv4.ip_local_port_range="$range"
if grep -qE '^(4012[34] ){5}4012[34]$' <<<"$out"; then
	passed "ids bound with no port take ports of ip_local_port_range 40123-40124: $out"
else
	echo "  | $out"
	failed "source ports outside ip_local_port_range 40123-40124"
fi
if grep -qxE '(40123 40124|40124 40123), then: Cannot assign requested address' <<<"$held" &&
	grep -qxE 'port 4012[34] listened on again: Address already in use' <<<"$held"; then
	passed "listeners on ids bound with no port: $(tr '\n' ';' <<<"$held")"
else
	echo "  | $held"
	failed "listeners on ids bound with no port: a port each, then EADDRNOTAVAIL"
fi
# as_the_kernel WHAT MODE ARG LINE: cm_peer MODE ADDR_B ARG prints LINE, the kernel's
# rdma_cm's answers (rxe's line in the interop guest, which interop.sh compares live)
as_the_kernel() {
	local out
	out=$("${IN_B[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_B" "$PEER" "$2" "$ADDR_B" "$3" 2>&1)
	if [ "$out" = "$4" ]; then
		passed "$1: $out"
	else
		echo "  | $out"
		failed "$1"
	fi
}
# A port is held from the bind, as the kernel's rdma_cm holds it (these are its results,
# run on rxe in the interop guest): a second bind of the address and port is EADDRINUSE,
# of the wildcard EADDRNOTAVAIL; binds with REUSEADDR share the port until one listens,
# and a listener shares it with nobody.
as_the_kernel "the kernel's rules for a port (bind, REUSEADDR, the wildcard)" port-rules $((PORT + 1)) \
	"bind: ok; again: Address already in use; the wildcard: Cannot assign requested address; REUSEADDR twice: ok, ok; listen beside: Address already in use; alone: ok; REUSEADDR beside a listener: Address already in use; REUSEADDR set on a listener: Invalid argument, cleared: Invalid argument"
# rdma_disconnect's answers, as the kernel's rdma_cm gives them (interop.sh compares them
# with rxe's on every run): EINVAL for an id that never had a connection, and for a listener
# on the wildcard; 0 for a listener on an address, for a connection the CM ended (a REJ),
# and in states where neither a DREQ nor a DREP is due (a request not yet answered, a
# second disconnect).
as_the_kernel "rdma_disconnect in each state, as the kernel's" disconnect-rules $((PORT + 2)) \
	"never connected: Invalid argument; a listener: ok, on the wildcard: Invalid argument; rejected as nobody listens (reason 8): ok; a request not answered: ok, rejected: ok; the id it rejected: ok; connected: ok, the other end: ok; again: ok, the other end: ok"
# Calls out of their order or made twice, as the kernel's rdma_cm answers them (interop.sh
# compares them with rxe's): each allowed once, in the state before it (an address
# resolved, its route, a request), EINVAL otherwise; a listener resolves nothing.
as_the_kernel "calls out of their order or twice, as the kernel's" call-rules $((PORT + 4)) \
	"a new id: reject Invalid argument, an unknown option Function not implemented, an unknown level Function not implemented, a TOS of one byte ok, of four Invalid argument; bound: ok, again Invalid argument, connect Invalid argument; listening: ok, again Invalid argument, resolve_addr Invalid argument, connect Invalid argument, bind Invalid argument; resolved: resolve_addr again Invalid argument, resolve_route again Invalid argument, listen Invalid argument, a second QP Invalid argument, accept Invalid argument; connecting: ok, again Invalid argument; a request: connect Invalid argument, listen Invalid argument, accept ok, again Invalid argument; connected: reject Invalid argument, accept Invalid argument, connect Invalid argument, the client's reject Invalid argument"
# The events of a connection as the kernel's rdma_cm reports them (interop.sh compares them
# with rxe's): the request's private data (56 bytes after the CMA header) and depths seen
# from the server, the REP's (196 bytes) at the client, none with the RTU, the DREQ or the
# DREP; a consumer's reject, status 28 with its 148 bytes; nobody listening, status 8.
as_the_kernel "a connection's events, as the kernel's" event-rules $((PORT + 6)) \
	"the request: RDMA_CM_EVENT_CONNECT_REQUEST status 0, private 56 'hello', depths 3/2, retries 5/6, flow control 1, srq 0; the client: RDMA_CM_EVENT_ESTABLISHED status 0, private 196 'world', depths 2/3, retries 0/4, flow control 0, srq 0; the server: RDMA_CM_EVENT_ESTABLISHED status 0, private 0, depths 0/0, retries 0/0, flow control 0, srq 0; the DREQ: RDMA_CM_EVENT_DISCONNECTED status 0, private 0, depths 0/0, retries 0/0, flow control 0, srq 0; the DREP: RDMA_CM_EVENT_DISCONNECTED status 0, private 0, depths 0/0, retries 0/0, flow control 0, srq 0; rejected: RDMA_CM_EVENT_REJECTED status 28, private 148 'nope', depths 0/0, retries 0/0, flow control 0, srq 0; nobody listening: RDMA_CM_EVENT_REJECTED status 8, private 148 '', depths 0/0, retries 0/0, flow control 0, srq 0"
# The same for the UDP port space's SIDR exchange: the request's 180 bytes (no Q_Key: a
# SIDR_REQ has none), the answer's 136 and rdma_cm's Q_Key, rdma_disconnect 0 at both ends
# afterwards; a reject and nobody listening UNREACHABLE, with the SIDR_REP's status (2 and
# 1) and its private data.
as_the_kernel "SIDR's events, as the kernel's" ud-rules $((PORT + 8)) \
	"the request: RDMA_CM_EVENT_CONNECT_REQUEST status 0, private 180 'hello', qkey 0; the answer: RDMA_CM_EVENT_ESTABLISHED status 0, private 136 'world', qkey 0x1234567; rdma_disconnect: ok, the other end: ok; rejected: RDMA_CM_EVENT_UNREACHABLE status 2, private 136 'nope', qkey 0; nobody listening: RDMA_CM_EVENT_UNREACHABLE status 1, private 136 '', qkey 0"
# What a connection leaves, as the kernel's rdma_cm leaves it (rxe's line in the interop
# guest, but for its path MTU of 1024 where these veths give 4096): RDMA_OPTION_ID_ACK_TIMEOUT
# 14 set before the route makes its packet lifetime 13 and the server's QP's timeout 16
# (the REQ's, worked out with the CA ACK delay), and 12 set again after the connect is the
# client's QP's (applied as the REP is read); the route's flow label a
# hash of the ports, in both QPs; depths and retries crossed over; the server's route the
# REQ's (lifetime 15, the traffic class and the flow label).
as_the_kernel "what a connection leaves (route, QPs), as the kernel's" qp-rules $((PORT + 10)) \
	"the route: 1 path(s), port 1, mtu 5, rate 0, packet life 13, hop_limit 64, traffic_class 32, sl 0, pkey 0xffff, reversible 1 (as stored), selectors 2/2/2, raw_traffic 0, numb_path 1, flow_label the route's; the client's QP: state 3, mtu 5, timeout 12, retries 5/4, min_rnr_timer 0, rd_atomic 4/2, access 0xe, pkey_index 0, port 1, global 1, hop_limit 64, traffic_class 32, sl 0, flow_label the route's; the server's: state 3, mtu 5, timeout 16, retries 5/6, min_rnr_timer 0, rd_atomic 2/4, access 0xe, pkey_index 0, port 1, global 1, hop_limit 64, traffic_class 32, sl 0, flow_label the route's; the server's route: 1 path(s), port 1, mtu 5, packet life 15, hop_limit 64, traffic_class 32, pkey 0xffff, reversible 1, flow_label the route's, its ports the client's crossed, the client's device yes"
# Synchronous ids as rdma_server and rdma_client make them, as librdmacm's (rxe's line in
# the interop guest): each call waits for its event and leaves it in id->event.
as_the_kernel "synchronous ids, as librdmacm's on the kernel" ep-rules $((PORT + 12)) \
	"the listener's endpoint: nothing held; listen ok; get_request ok, RDMA_CM_EVENT_CONNECT_REQUEST held by the new id, a QP made; accept ok, RDMA_CM_EVENT_ESTABLISHED held; disconnect ok, RDMA_CM_EVENT_DISCONNECTED held; the client's endpoint: RDMA_CM_EVENT_ROUTE_RESOLVED held, a QP made; connect ok, RDMA_CM_EVENT_ESTABLISHED held; disconnect ok, RDMA_CM_EVENT_DISCONNECTED held"
# Multicast joins and leaves in the UDP port space, as the kernel's rdma_cm answers them
# (rxe's line in the interop guest): a join needs a bound id; MULTICAST_JOIN gives rdma_cm's
# Q_Key, QPN 0xffffff and the group's GID; the TCP port space joins nothing.
as_the_kernel "multicast joins and leaves, as the kernel's" mcast-rules 239.7.7.8 \
	"not bound: join Invalid argument; bound: join ok, RDMA_CM_EVENT_MULTICAST_JOIN status 0, qkey 0x1234567, qp_num 0xffffff, private 0, global 1, dgid ::ffff:239.7.7.8, hop_limit 64, sl 0; again ok; leave ok, again ok; the TCP port space: join Invalid argument"
# A listen after the REQ, as qperf 0.4.11 listens after telling its peer the port: the REQ
# to the port the server's bind holds waits for that listen. The client is up before it
# reads the port, so its REQ comes within the server's 150 ms before it listens.
mkfifo "$WORK/port.fifo"
exec 7<>"$WORK/port.fifo"
before=$(counter b cm_req_waited)
"${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" "$PEER" sync-client "$ADDR_B" - <&7 \
	>"$WORK/late.client" 2>&1 &
client=$!
PIDS+=($client)
"${IN_B[@]}" timeout "$T" "$RUN" -D "$SOCK_B" "$PEER" late-listen 150 >"$WORK/late.server" 2>&1 &
server=$!
PIDS+=($server)
for _ in $(seq 300); do
	grep -q '^bound' "$WORK/late.server" && break
	sleep 0.01
done
awk '/^bound/ {print $2}' "$WORK/late.server" >&7
wait "$client" && status=0 || status=1
# a server whose REQ was refused waits for none: it goes, not to meet the rows after
[ $status -eq 0 ] || kill "$server" 2>/dev/null
wait "$server" || status=1
exec 7>&-
after=$(counter b cm_req_waited)
if [ $status -eq 0 ] && grep -q 'returned with RDMA_CM_EVENT_DISCONNECTED' "$WORK/late.client" &&
	[ "$after" = $((before + 1)) ]; then
	passed "a REQ before its listener's listen waited for it and connected (cm_req_waited $before -> $after)"
else
	sed 's/^/  client| /' "$WORK/late.client"
	sed 's/^/  server| /' "$WORK/late.server"
	failed "a REQ before the listen: connected after it (cm_req_waited $before -> $after)"
fi
out=$("${IN_A[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_A" "$PEER" destroy-drops "$ADDR_B" 2>&1)
if [ "$out" = "after rdma_destroy_id the channel has nothing to read" ]; then
	passed "cm_peer destroy-drops: $out"
else
	echo "  | $out"
	failed "rdma_destroy_id left the id's events in the channel"
fi
# what perftest 4.5's -R client does once refused: its ids and channel used after their end
if out=$("${IN_A[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_A" "$PEER" stale "$ADDR_B" 2>&1); then
	passed "cm_peer stale: $(grep -c ': EINVAL$' <<<"$out") calls given a destroyed id or channel, or a stray pointer, refused with EINVAL; a channel destroyed twice; a new id resolves afterwards"
else
	sed 's/^/  | /' <<<"$out"
	failed "cm_peer stale: a destroyed id or channel, or a stray pointer, not refused"
fi

# ---- what the kernel's rdma_cm reports ----

PORT=$((8000 + RANDOM % 1000))
if cm_pair reject "$PEER" reject-server "$PORT" 1 -- "$PEER" reject-client "$ADDR_B" "$PORT" &&
	grep -q "^RDMA_CM_EVENT_REJECTED status 28 private_data_len 148 private_data 'not today'" \
		"$OUT_C"; then
	passed "a server that rejects: $(head -n 1 "$OUT_C")"
else
	show_both
	failed "a server that rejects: REJECTED, status 28, its private data"
fi

before=$(counter b cm_rej_no_listener)
out=$("${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" "$PEER" reject-client "$ADDR_B" 9 2>&1)
after=$(counter b cm_rej_no_listener)
if grep -q '^RDMA_CM_EVENT_REJECTED status 8 ' <<<"$out" && [ "$after" -eq $((before + 1)) ]; then
	passed "no listener: $out (cm_rej_no_listener $before -> $after)"
else
	echo "  | $out"
	failed "no listener: REJECTED with status 8 (cm_rej_no_listener $before -> $after)"
fi
out=$("${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" rping -c -a "$ADDR_B" -p 9 -C 1 2>&1)
if grep -q 'RDMA_CM_EVENT_REJECTED, error 8' <<<"$out"; then
	passed "no listener, rping: $(grep 'REJECTED' <<<"$out")"
else
	echo "  | $out"
	failed "no listener, rping: REJECTED, error 8"
fi

# an address nobody answers ARP for: the kernel's rdma_cm reports ADDR_ERROR, -ETIMEDOUT
nobody=${ADDR_B%.*}.$(( ${ADDR_B##*.} + 100 ))
out=$("${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" rping -c -a "$nobody" -C 1 2>&1)
if grep -q 'RDMA_CM_EVENT_ADDR_ERROR, error -110' <<<"$out"; then
	passed "no neighbour at $nobody, rping: $(grep 'ADDR_ERROR' <<<"$out")"
else
	echo "  | $out"
	failed "no neighbour at $nobody: ADDR_ERROR, error -110"
fi

# ---- 1,000 connections in a row, and nothing left behind ----

CYCLES=1000

PORT=$((9000 + RANDOM % 1000))
"${IN_B[@]}" timeout "$T" "$RUN" -D "$SOCK_B" "$PEER" cycle-server "$PORT" $CYCLES >"$WORK/cycles.server" 2>&1 &
server=$!
PIDS+=($server)
for _ in $(seq 100); do
	[ "$(listeners b)" -gt 0 ] && break
	sleep 0.05
done
cmview=$("$BUILD/rocemuctl" -s "$SOCK_B" cm)
sid=$(printf '0x%016x' $((0x01060000 + PORT)))
if grep -qE "state LISTEN .* service_id $sid address \*" <<<"$cmview"; then
	passed "rocemuctl cm: the listener on port $PORT (service ID $sid)"
else
	echo "  | $cmview"
	failed "rocemuctl cm: no listener with service ID $sid"
fi
out=$("${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" "$PEER" cycle-client "$ADDR_B" "$PORT" $CYCLES 2>&1)
status=$?
wait "$server" || status=$?
if [ $status -eq 0 ] && grep -q "^$CYCLES connections" <<<"$out"; then
	passed "cm_peer: $out"
else
	echo "  | $out"
	sed 's/^/  server| /' "$WORK/cycles.server"
	failed "$CYCLES connect/SEND/disconnect cycles"
fi
# TimeWait is the ACK timeout (2^19 * 4.096 us, 2 s): then no connection is left
for _ in $(seq 40); do
	left=$("$BUILD/rocemuctl" -s "$SOCK_A" cm; "$BUILD/rocemuctl" -s "$SOCK_B" cm)
	[ -z "$left" ] && break
	sleep 0.1
done
# the teardowns' destroys went with no reply wanted (PROTO_NO_REPLY): none may have failed
unanswered="$(counter a ctl_unanswered_failed) $(counter b ctl_unanswered_failed)"
if [ -z "$left" ] && [ "$(status_of a)" = "$START_A" ] && [ "$(status_of b)" = "$START_B" ] &&
	[ "$unanswered" = "0 0" ]; then
	passed "after it all: $(status_of a)on a, $(status_of b)on b as at the start; no CM state left; no unanswered request failed"
else
	echo "  | ctl_unanswered_failed on a and b: $unanswered"
	printf '%s\n' "$left" | head -n 5 | sed 's/^/  | /'
	failed "left behind: a $(status_of a)(was $START_A), b $(status_of b)(was $START_B)"
fi

# a daemon short of descriptors (fewer than 32 left) gives a client only its first four
# CM channels, and still serves another client
pid=${DAEMON_PID[b]}
limit=$(prlimit --pid "$pid" --nofile --output SOFT,HARD --noheadings | tr -s ' ' ':' | sed 's/^://')
open_fds=$(find /proc/"$pid"/fd -mindepth 1 -maxdepth 1 | wc -l)
prlimit --pid "$pid" --nofile=$((open_fds + 24)):"${limit#*:}"
"${IN_B[@]}" timeout "$RS_T" "$RUN" -D "$SOCK_B" "$PEER" channels "$ADDR_B" 40 >"$WORK/channels" 2>&1 &
holder=$!
PIDS+=($holder)
for _ in $(seq 100); do
	grep -q listeners "$WORK/channels" && break
	sleep 0.05
done
"$BUILD/rocemuctl" -s "$SOCK_B" status >/dev/null 2>&1 && other=served || other=refused
wait "$holder"
prlimit --pid "$pid" --nofile="$limit"
if grep -q '^4 listeners on channels of their own, then: Too many open files' "$WORK/channels" &&
	[ "$other" = served ]; then
	passed "24 descriptors left: $(cat "$WORK/channels"); rocemuctl still served"
else
	sed 's/^/  | /' "$WORK/channels"
	failed "a client short of descriptors: 4 CM channels, then EMFILE (rocemuctl $other)"
fi

daemons_alive

finish "rdma_cm"
