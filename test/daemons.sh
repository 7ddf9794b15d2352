# Sourced by integration tests: two rocemud daemons in one of two topologies, torn down
# (by pid, then the namespaces) whenever the test exits, pass or fail.
#   topology_up lo|netns     start both; sets SOCK_A SOCK_B ADDR_A ADDR_B and the arrays
#                            IN_A IN_B (command prefixes that run in each host); with
#                            NETNS_IPV6=1 (netns only) the daemons also serve ADDR6_A and
#                            ADDR6_B (GID 1), or the test is skipped without IPv6
#   daemon_start SIDE        (re)start side a or b; daemon_stop SIDE [SIGNAL]
#   counter SIDE NAME        a counter of rocemuctl stats on side a or b
#   perftest_refused_too_soon FILE  perftest's own -R race shows in its client's output
#   perftest_figure FILE TOOL        the figure of perftest TOOL's row in its output FILE
#   PIDS+=($!)               a background process of the test's own (a holder, a client):
#                            teardown sends it SIGTERM before it stops the daemons
# Needs ROCEMU_BUILD (the build tree). Runs as root.
ROCEMU_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${ROCEMU_BUILD:-$ROCEMU_ROOT/build}
WORK=$(mktemp -d /tmp/rocemu-test.XXXXXX)
TOPOLOGY=
declare -A DAEMON_PID=()
PIDS=()

fail() {
	echo "FAIL: $*"
	for side in a b; do
		[ -f "$WORK/rocemud-$side.log" ] && sed "s/^/  rocemud-$side: /" "$WORK/rocemud-$side.log" | tail -n 20
	done
	exit 1
}

skip() {
	echo "skipped: $*"
	exit 77
}

# plain_pass_only WHAT: skip in the sanitizer pass a test of a third-party program whose
# paths through the verbs and rdma_cm layers the rdmacm, ucx and verbs-programs tests
# already take there, and which make check cannot spare the seconds for under ASan
plain_pass_only() {
	case $BUILD in */asan) skip "$1 runs in the plain pass" ;; esac
}

# needs_programs PACKAGES PROGRAM...: the test is skipped unless every PROGRAM is installed
# (scripts/install-deps.sh installs PACKAGES), and fails unless rocemu-run and the verbs
# layer it loads are built; RUN is rocemu-run
needs_programs() {
	local packages=$1 p
	shift
	for p in "$@"; do
		command -v "$p" >/dev/null ||
			skip "$p is missing: scripts/install-deps.sh installs $packages"
	done
	RUN=$BUILD/rocemu-run
	[ -x "$RUN" ] && [ -f "$BUILD/librocemu-verbs.so" ] ||
		fail "$RUN or librocemu-verbs.so is missing"
}

teardown() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
	for pid in "${DAEMON_PID[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${DAEMON_PID[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
	done
	[ "$TOPOLOGY" = netns ] && "$ROCEMU_ROOT/scripts/netns.sh" down >/dev/null 2>&1
	[ "$TOPOLOGY" = lo ] && drop_lo_tables
	rm -rf "$WORK"
}
# gid_hex ADDR: the 16 bytes of an address's GID as hex pairs (IPv4 as ::ffff:a.b.c.d)
gid_hex() {
	local addr=$1 head tail group out="" n=0
	if [[ $addr != *:* ]]; then
		printf '00 00 00 00 00 00 00 00 00 00 ff ff %02x %02x %02x %02x\n' $(tr . ' ' <<<"$addr")
		return
	fi
	head=${addr%%::*} tail=
	[[ $addr == *::* ]] && tail=${addr#*::}
	local -a hg tg
	IFS=: read -ra hg <<<"$head"
	IFS=: read -ra tg <<<"$tail"
	for group in "${hg[@]}"; do out+=" $(printf %04x $((16#$group)))"; n=$((n + 1)); done
	for ((; n < 8 - ${#tg[@]}; n++)); do out+=" 0000"; done
	for group in "${tg[@]}"; do out+=" $(printf %04x $((16#$group)))"; done
	sed -E 's/([0-9a-f]{2})([0-9a-f]{2})/\1 \2/g; s/^ //' <<<"$out"
}

# ingress_table IFINDEX ADDR...: the nftables table rocemud names for an interface and the
# addresses it serves, in the order of its GID table (FNV-1a of their 16-byte GIDs)
ingress_table() {
	local ifindex=$1 addr byte h=2166136261
	shift
	for addr; do
		for byte in $(gid_hex "$addr"); do
			h=$(((h ^ 16#$byte) * 16777619 & 0xffffffff))
		done
	done
	printf 'rocemu_if%s_%08x' "$ifindex" "$h"
}

# A daemon killed on lo leaves its nftables ingress table in this host's namespace; the
# namespaces of the netns topology take theirs with them.
drop_lo_tables() {
	local addr
	command -v nft >/dev/null || return 0
	for addr in "$ADDR_A" "$ADDR_B"; do
		nft delete table netdev "$(ingress_table "$(cat /sys/class/net/lo/ifindex)" "$addr")" \
			2>/dev/null
	done
	return 0
}
trap teardown EXIT

require_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (raw sockets, namespaces)"
}

# quiet_job: the job just started in the background leaves bash's job table. Tests stop
# daemons by pid (and kill some with SIGKILL on purpose); bash would report each such death
# as "line N: PID Killed  COMMAND", which reads like a failure in a passing run. The shell
# still reaps it, so kill -0 sees it gone.
quiet_job() {
	disown "$!"
}

daemon_start() {
	local side=$1 iface addr sock addr6
	if [ "$side" = a ]; then iface=$IF_A addr=$ADDR_A sock=$SOCK_A addr6=${ADDR6_A:-}
	else iface=$IF_B addr=$ADDR_B sock=$SOCK_B addr6=${ADDR6_B:-}; fi
	local -n prefix=IN_${side^^}
	"${prefix[@]}" "$BUILD/rocemud" -i "$iface" -a "$addr" ${addr6:+-a "$addr6"} -s "$sock" -d ${ROCEMUD_ARGS:-} \
		>>"$WORK/rocemud-$side.log" 2>&1 &
	DAEMON_PID[$side]=$!
	quiet_job
	# Started means serving: the socket may still be the one a daemon killed with SIGKILL
	# left, and the daemon runs nft (up to 5 s) after creating its socket, before it answers.
	for _ in $(seq 100); do
		[ -S "$sock" ] && timeout 10 "$BUILD/rocemuctl" -s "$sock" status >/dev/null 2>&1 &&
			return 0
		kill -0 "${DAEMON_PID[$side]}" 2>/dev/null || fail "rocemud $side exited at start"
		sleep 0.05
	done
	fail "rocemud $side did not answer on $sock"
}

daemon_stop() {
	local side=$1 sig=${2:-TERM} pid=${DAEMON_PID[$1]}
	kill -"$sig" "$pid" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$pid" 2>/dev/null && fail "rocemud $side did not stop on SIG$sig"
	unset "DAEMON_PID[$side]"
}

topology_up() {
	TOPOLOGY=$1
	SOCK_A=$WORK/a.sock
	SOCK_B=$WORK/b.sock
	case $TOPOLOGY in
	lo)
		# an address pair of 127/8 of our own, so concurrent runs do not collide
		local net="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))"
		IF_A=lo IF_B=lo ADDR_A=$net.1 ADDR_B=$net.2
		IN_A=() IN_B=()
		;;
	netns)
		export ROCEMU_NETNS_PREFIX="rt$((RANDOM % 100000))"
		export ROCEMU_NETNS_SUBNET="198.18.$((RANDOM % 250 + 1))"
		export ROCEMU_NETNS_SUBNET6="fd52:6f63:$(printf %x $((RANDOM % 65535 + 1)))"
		if [ -n "${NETNS_IPV6:-}" ]; then
			[ -d /proc/sys/net/ipv6 ] || skip "this kernel has no IPv6"
			ADDR6_A=$ROCEMU_NETNS_SUBNET6::1 ADDR6_B=$ROCEMU_NETNS_SUBNET6::2
		fi
		"$ROCEMU_ROOT/scripts/netns.sh" up ${NETNS_MTU:+--mtu $NETNS_MTU} \
			${NETNS_VLAN:+--vlan $NETNS_VLAN} >/dev/null || fail "netns up"
		IF_A=veth-$ROCEMU_NETNS_PREFIX-a IF_B=veth-$ROCEMU_NETNS_PREFIX-b
		[ -n "${NETNS_VLAN:-}" ] && IF_A=vlan-$ROCEMU_NETNS_PREFIX-a IF_B=vlan-$ROCEMU_NETNS_PREFIX-b
		ADDR_A=$ROCEMU_NETNS_SUBNET.1 ADDR_B=$ROCEMU_NETNS_SUBNET.2
		IN_A=(ip netns exec "$ROCEMU_NETNS_PREFIX-a") IN_B=(ip netns exec "$ROCEMU_NETNS_PREFIX-b")
		;;
	*) fail "unknown topology $TOPOLOGY" ;;
	esac
	daemon_start a
	daemon_start b
}

# await_listener SIDE PORT PID: until a TCP socket listens on PORT in host a or b (a
# program's own exchange before its RDMA starts), PID exits, or 10 s have passed
await_listener() {
	local -n prefix=IN_${1^^}
	for _ in $(seq 200); do
		"${prefix[@]}" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . || ! kill -0 "$3" 2>/dev/null &&
			return
		sleep 0.05
	done
}

# counter SIDE NAME: one of rocemuctl stats' counters of daemon a or b
counter() {
	local sock=$SOCK_A
	[ "$1" = b ] && sock=$SOCK_B
	"$BUILD/rocemuctl" -s "$sock" stats | awk -v n="$2" '$1 == n {print $2}'
}

# The daemon's locked memory, from /proc: what pinned buffers cost it.
vmlck_kb() {
	awk '/^VmLck:/ {print $2}' "/proc/${DAEMON_PID[$1]}/status"
}

# perftest_refused_too_soon FILE: perftest's own race shows in its client's output FILE.
# With -R, a perftest client connects its QPs through rdma_cm right after the handshake on
# its control connection, while its server only then starts to listen for them: a server
# slower than its client (in an emulated guest, or beside other tests on two cores) is not
# listening yet, and the REQ is rightly rejected (reason 8, no listener: the kernel's CM and
# rocemu's alike). perftest 4.5's client then retries through the ids and channel it has
# just destroyed (later perftest makes new ones), which rocemu refuses with EINVAL
# (librdmacm would follow them and crash), and its server waits for a connection that
# never comes: such a pair is stopped and run again.
perftest_refused_too_soon() {
	grep -q 'RDMA_CM_EVENT_REJECTED; error: 8' "$1"
}

# perftest_figure FILE TOOL: the figure of the row perftest TOOL printed in FILE (a
# bandwidth test's average MB/s, a latency test's t_typical us); nothing when there is no
# row or its figure is no number above 0 (under emulation perftest may print "inf", having
# measured its clock as 0 MHz)
perftest_figure() {
	local col=4
	[[ $2 == *_lat ]] && col=5
	awk -v c=$col '/#bytes/ { t = 1; next }
		t && /^ *[0-9]/ { if ($c ~ /^[0-9]+(\.[0-9]+)?$/ && $c > 0) print $c; exit }' "$1"
}
