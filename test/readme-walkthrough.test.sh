#!/usr/bin/env bash
# The README's "## Running on two machines", run as written on two hosts made of namespaces.
# The fenced ```sh blocks of that section are read from README.md at run time, so editing
# the README changes what is tested. Each "host" is a network namespace (the pair of
# scripts/netns.sh, joined by a veth) plus a mount namespace of its own in which /run is a
# fresh tmpfs: two machines do not share /run/rocemu, and rdma-write without -D must find
# "the only socket" there, as it would on a real host. Commands run from the top of the
# repository, with these substitutions and no others, made mechanically:
#   - `eth0` becomes the host's veth (unique per run; with the private /run the default
#     socket path could not collide anyway, so no -s is added);
#   - 10.0.0.2 becomes the receiving host's address;
#   - `build/` becomes the build tree under test ($BUILD), so the ASan build runs it too;
#   - `/tmp/` becomes a folder of this run's own per host (the capture file);
#   - comments are stripped; the rocemud line gets the -d its own comment offers, and runs
#     in the background with its pid recorded (so teardown stops it by pid);
#   - `scripts/install-deps.sh && make` must be there but is not run: the suite has built.
# Block 1 runs on both hosts ("On each"), block 2 on the receiving host b (in the
# background: it waits for a client), block 3 on the writing host a, block 4 (counters and
# the capture) on host a, blocks 5 and 6 (ib_write_bw under rocemu-run) on b and a. Then
# what the section promises is checked: the daemon's socket at /run/rocemu/IFACE.sock with
# mode 0660; `local address:` / `remote address:` from both sides; the client's table
# header; `verify: OK` from both; the counters showing the packets; tshark reading the
# capture's first frames as RRoCE; perftest's table from ib_write_bw's client.
# Last, the "Loopback" bullet's two rocemud commands run in host a's network namespace,
# whose lo is its own, so 127.0.0.1 and 127.0.0.2 stay as written; only `rocemud` becomes
# $BUILD/rocemud, /tmp/ becomes this run's directory, and -d is added; an rdma-write
# --verify between the two daemons must pass, and so must one to the daemon's own address.
set -u
source "$(dirname "$0")/daemons.sh"
require_root
command -v unshare >/dev/null && command -v nsenter >/dev/null || skip "needs unshare and nsenter"

BUILD=$(cd "$BUILD" && pwd) || fail "no build tree $BUILD"
for dir in "$BUILD" "$ROCEMU_ROOT"; do
	case $dir/ in
	/run/*) skip "$dir would be hidden by the hosts' private /run" ;;
	esac
done
cd "$ROCEMU_ROOT" || fail "cannot enter $ROCEMU_ROOT"
README=$ROCEMU_ROOT/README.md
SECTION="## Running on two machines"
# The exact header line of rdma-write's table (tools/rdma-write/report.c, print_table).
TABLE_HEADER=" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
RUN_SECONDS=180

# ---- the section, its prose and its code blocks, from README.md ----

awk -v want="$SECTION" '/^## / { inside = ($0 == want) } inside' "$README" >"$WORK/section.md"
[ -s "$WORK/section.md" ] || fail "README.md has no section '$SECTION'"
# block-N.sh: the lines of the Nth ```sh block, comments stripped.
awk -v dir="$WORK" '
	/^```sh$/ { n++; inblock = 1; next }
	/^```/ { inblock = 0; next }
	inblock { sub(/[ \t]+#.*$/, ""); print > (dir "/block-" n ".sh") }
	END { print n + 0 > (dir "/blocks") }' "$WORK/section.md"
[ "$(cat "$WORK/blocks")" -eq 6 ] ||
	fail "'$SECTION' has $(cat "$WORK/blocks") sh blocks, this test knows 6 (setup on each host, receiver, writer, counters and capture, ib_write_bw's server and client)"
grep -qx 'scripts/install-deps.sh && make' "$WORK/block-1.sh" ||
	fail "block 1 lacks 'scripts/install-deps.sh && make'"
grep -v -x 'scripts/install-deps.sh && make' "$WORK/block-1.sh" >"$WORK/daemon.sh"
[ "$(wc -l <"$WORK/daemon.sh")" -eq 1 ] && grep -q '^build/rocemud ' "$WORK/daemon.sh" ||
	fail "block 1 should be the install line and one build/rocemud line: $(cat "$WORK/block-1.sh")"
grep -q -- '--server' "$WORK/block-2.sh" || fail "block 2 is not the receiver: $(cat "$WORK/block-2.sh")"
grep -q '10\.0\.0\.2' "$WORK/block-3.sh" || fail "block 3 does not write to 10.0.0.2: $(cat "$WORK/block-3.sh")"
grep -q 'rocemuctl stats' "$WORK/block-4.sh" && grep -q 'tshark -r' "$WORK/block-4.sh" ||
	fail "block 4 should read the counters and the capture: $(cat "$WORK/block-4.sh")"
grep -q '^build/rocemu-run ib_write_bw' "$WORK/block-5.sh" && ! grep -q '10\.0\.0\.2' "$WORK/block-5.sh" &&
	grep -q '^build/rocemu-run ib_write_bw .*10\.0\.0\.2' "$WORK/block-6.sh" ||
	fail "blocks 5 and 6 should be ib_write_bw's server and client: $(cat "$WORK/block-5.sh" "$WORK/block-6.sh")"
command -v ib_write_bw >/dev/null || fail "ib_write_bw is missing (scripts/install-deps.sh installs perftest)"
command -v tshark >/dev/null || fail "tshark is missing (scripts/install-deps.sh installs it)"
# The promises this test checks must still be the README's.
PROSE=$(tr '\n' ' ' <"$WORK/section.md" | tr -s ' ')
for promise in '`/run/rocemu/eth0.sock`' 'mode 0660' '`local address:` / `remote address:`' \
	'both print `verify: OK`'; do
	grep -qF -- "$promise" <<<"$PROSE" || fail "the section no longer says $promise"
done
# The table's header as the README words it (checked against the writer's below).
HEADER_WORDS=$(grep -o '`#bytes [^`]*` table' <<<"$PROSE" | sed -e 's/` table$//' -e 's/^`//')
[ -n "$HEADER_WORDS" ] || fail "the section no longer names the \`#bytes ...\` table"

# sed_escape TEXT: TEXT as a literal sed replacement (delimiter |).
sed_escape() { printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'; }

# substitute SIDE IFACE FILE: the file's commands for host SIDE, whose interface is IFACE.
substitute() {
	mkdir -p "$WORK/tmp-$1"
	# /tmp/ first: the build tree put in place of build/ may itself be under /tmp
	sed -E -e "s|(^\|[[:space:]])/tmp/|\\1$(sed_escape "$WORK/tmp-$1")/|g" \
		-e "s|\\<eth0\\>|$(sed_escape "$2")|g" \
		-e "s|\\<10\\.0\\.0\\.2\\>|$(sed_escape "$ADDR_B")|g" \
		-e "s|(^\|[[:space:]])build/|\\1$(sed_escape "$BUILD")/|g" "$3"
}

# ---- two hosts ----

export ROCEMU_NETNS_PREFIX="rw$((RANDOM % 100000))"
export ROCEMU_NETNS_SUBNET="198.18.$((RANDOM % 250 + 1))"
TOPOLOGY=netns   # teardown removes the namespaces
scripts/netns.sh up >/dev/null || fail "netns up"
IF_A=veth-$ROCEMU_NETNS_PREFIX-a IF_B=veth-$ROCEMU_NETNS_PREFIX-b
ADDR_A=$ROCEMU_NETNS_SUBNET.1 ADDR_B=$ROCEMU_NETNS_SUBNET.2

# start_host SIDE IFACE: block 1's daemon line, on a new host (network namespace + private
# /run); the daemon's pid is the host's handle.
start_host() {
	local side=$1 iface=$2 cmd sock
	cmd="$(substitute "$side" "$iface" "$WORK/daemon.sh") -d"
	echo "host $side: $cmd"
	ip netns exec "$ROCEMU_NETNS_PREFIX-$side" unshare --mount --propagation private \
		sh -c 'mount -t tmpfs rocemu-run /run && eval "exec $1"' sh "$cmd" \
		>>"$WORK/rocemud-$side.log" 2>&1 &
	DAEMON_PID[$side]=$!
	quiet_job
	# README: "creates its control socket at /run/rocemu/eth0.sock ... mode 0660", seen
	# through the daemon's own root.
	sock=/proc/${DAEMON_PID[$side]}/root/run/rocemu/$iface.sock
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "${DAEMON_PID[$side]}" 2>/dev/null || fail "rocemud $side exited at start"
		sleep 0.05
	done
	[ -S "$sock" ] || fail "rocemud $side did not create /run/rocemu/$iface.sock"
	[ "$(stat -c %a "$sock")" = 660 ] || fail "/run/rocemu/$iface.sock has mode $(stat -c %a "$sock"), not 0660"
}

start_host a "$IF_A"
start_host b "$IF_B"
# Command prefixes that run in a host: its daemon's network and mount namespaces, from the
# top of the repository. nsenter execs the command, so $! of "${IN_A[@]}" CMD & is CMD's pid.
# -r keeps the daemon's root directory: entering a mount namespace resets the root to the
# namespace's own, which in a chroot (a package builder's, a CI runner's) lies outside it.
IN_A=(nsenter -t "${DAEMON_PID[a]}" -m -n -r --wd="$ROCEMU_ROOT")
IN_B=(nsenter -t "${DAEMON_PID[b]}" -m -n -r --wd="$ROCEMU_ROOT")

substitute b "$IF_B" "$WORK/block-2.sh" >"$WORK/receiver.sh"
substitute a "$IF_A" "$WORK/block-3.sh" >"$WORK/writer.sh"
substitute a "$IF_A" "$WORK/block-4.sh" >"$WORK/inspect.sh"
RECEIVERS=()
while IFS= read -r cmd; do
	echo "host b: $cmd &"
	"${IN_B[@]}" timeout $RUN_SECONDS bash -c "$cmd" >>"$WORK/receiver.out" 2>&1 &
	RECEIVERS+=($!)
	PIDS+=($!)
done <"$WORK/receiver.sh"
status=0
while IFS= read -r cmd; do
	echo "host a: $cmd"
	"${IN_A[@]}" timeout $RUN_SECONDS bash -c "$cmd" >>"$WORK/writer.out" 2>&1 </dev/null ||
		{ status=$?; break; }
done <"$WORK/writer.sh"
for pid in "${RECEIVERS[@]}"; do wait "$pid" || status=$?; done
sed 's/^/  writer: /' "$WORK/writer.out"
sed 's/^/  receiver: /' "$WORK/receiver.out"
[ $status -eq 0 ] || fail "the walkthrough's commands failed (status $status)"

for side in writer receiver; do
	for line in 'local address:' 'remote address:' 'verify: OK'; do
		[ "$(grep -c "^$line" "$WORK/$side.out")" -eq 1 ] ||
			fail "the $side did not print '$line' exactly once"
	done
done
grep -qxF -- "$TABLE_HEADER" "$WORK/writer.out" || fail "the writer did not print the table header"
# The README's words for the header, in order, each maybe followed by the unit it leaves
# out ("BW peak" matches "BW peak[MB/sec]"), the spacing free.
header_regex=$(sed -E -e 's/[][\.*^$+?(){}|]/\\&/g' -e 's/([^ ]+)/\1(\\[[^]]*\\])?/g' \
	-e 's/ +/ +/g' <<<"$HEADER_WORDS")
grep -qE -- "^ *$header_regex\$" "$WORK/writer.out" ||
	fail "the writer's table header does not read '$HEADER_WORDS' (as /^ *$header_regex\$/)"

# Block 4, on the writing host: its counters, and its capture's first frames.
export HOME=$WORK # tshark wants a profile folder it may write, not root's
while IFS= read -r cmd; do
	echo "host a: $cmd"
	"${IN_A[@]}" timeout 60 bash -c "$cmd" >>"$WORK/inspect.out" 2>&1 </dev/null ||
		{ cat "$WORK/inspect.out"; fail "'$cmd' failed"; }
done <"$WORK/inspect.sh"
# tshark started by root always warns so on stderr (Wireshark 4.0 has no option to silence
# it): noise in a passing run, so the one exact line is left out.
sed -i '/^Running as user "root" and group "root"\. This could be dangerous\.$/d' \
	"$WORK/inspect.out"
sed 's/^/  inspect: /' "$WORK/inspect.out"
for counter in sent_pkts rcvd_pkts acks_sent; do
	grep -qE "^$counter +[0-9]+ " "$WORK/inspect.out" ||
		fail "rocemuctl stats shows no $counter line"
done
sent=$(awk '$1 == "sent_pkts" { print $2 }' "$WORK/inspect.out")
[ "${sent:-0}" -ge 256000 ] || fail "sent_pkts $sent: 1000 MiB is at least 256,000 packets"
[ "$(grep -c 'RRoCE' "$WORK/inspect.out")" -eq 4 ] ||
	fail "tshark -c 4 did not show 4 RRoCE frames"

# Blocks 5 and 6: perftest, unmodified, between the same two hosts; rocemu-run finds the only
# socket in each host's /run/rocemu, as on a real machine.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
substitute b "$IF_B" "$WORK/block-5.sh" >"$WORK/perf-server.sh"
substitute a "$IF_A" "$WORK/block-6.sh" >"$WORK/perf-client.sh"
echo "host b: $(cat "$WORK/perf-server.sh") &"
"${IN_B[@]}" timeout $RUN_SECONDS bash "$WORK/perf-server.sh" >"$WORK/perf-server.out" 2>&1 </dev/null &
server=$!
PIDS+=($server)
sleep 0.5
echo "host a: $(cat "$WORK/perf-client.sh")"
"${IN_A[@]}" timeout $RUN_SECONDS bash "$WORK/perf-client.sh" >"$WORK/perf-client.out" 2>&1 </dev/null
status=$?
wait $server || status=$?
sed 's/^/  ib_write_bw client: /' "$WORK/perf-client.out" | tail -n 4
[ $status -eq 0 ] && grep -qE '^ #bytes +#iterations +BW peak\[MB/sec\] +BW average\[MB/sec\] +MsgRate\[Mpps\]' \
	"$WORK/perf-client.out" && grep -qE '^ 1048576[[:space:]]+1000([[:space:]]+[0-9.]+){3}' "$WORK/perf-client.out" ||
	{ cat "$WORK/perf-server.out"; fail "ib_write_bw under rocemu-run between the two hosts (status $status)"; }
echo "two hosts: OK (rdma-write, counters, capture, ib_write_bw)"

# ---- the Loopback bullet, in host a's network namespace ----

LOOP=$(awk '/^- \*\*Loopback\.\*\*/ { on = 1 } on && /^- / && !/Loopback/ { on = 0 } on' \
	"$WORK/section.md" | tr '\n' ' ' | grep -o '`rocemud [^`]*`' | tr -d '`')
[ "$(wc -l <<<"$LOOP")" -eq 2 ] || fail "the Loopback bullet should give two rocemud commands: $LOOP"
LOOP_SOCKS=()
n=0
while IFS= read -r cmd; do
	n=$((n + 1))
	cmd=$(sed -E -e "s|(^\|[[:space:]])/tmp/|\\1$(sed_escape "$WORK")/|g" \
		-e "s|^rocemud |$(sed_escape "$BUILD")/rocemud |" <<<"$cmd")
	sock=$(grep -oE -- '-s [^ ]+' <<<"$cmd" | cut -d' ' -f2)
	[ -n "$sock" ] || fail "the Loopback command '$cmd' names no socket"
	echo "host a, lo: $cmd -d"
	"${IN_A[@]}" sh -c 'eval "exec $1 -d"' sh "$cmd" >>"$WORK/rocemud-lo$n.log" 2>&1 &
	DAEMON_PID[lo$n]=$!
	quiet_job
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "${DAEMON_PID[lo$n]}" 2>/dev/null ||
			fail "'$cmd' exited at start: $(cat "$WORK/rocemud-lo$n.log")"
		sleep 0.05
	done
	[ -S "$sock" ] || fail "'$cmd' did not create $sock"
	LOOP_SOCKS+=("$sock")
done <<<"$LOOP"
LOOP_ADDR_2=$(grep -oE -- '-a [^ ]+' <<<"$(sed -n 2p <<<"$LOOP")" | cut -d' ' -f2)
LOOP_ADDR_1=$(grep -oE -- '-a [^ ]+' <<<"$(sed -n 1p <<<"$LOOP")" | cut -d' ' -f2)

"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" --server --verify -s 64K -D "${LOOP_SOCKS[1]}" \
	>"$WORK/lo-server.out" 2>&1 &
server=$!
PIDS+=($server)
"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" --verify -s 64K -n 100 -D "${LOOP_SOCKS[0]}" \
	"$LOOP_ADDR_2" >"$WORK/lo-client.out" 2>&1 </dev/null
status=$?
wait $server || status=$?
[ $status -eq 0 ] && grep -qx 'verify: OK' "$WORK/lo-client.out" &&
	grep -qx 'verify: OK' "$WORK/lo-server.out" ||
	{ cat "$WORK/lo-client.out" "$WORK/lo-server.out"; fail "rdma-write between the Loopback daemons"; }
echo "loopback: 100 WRITEs of 64 KiB from $LOOP_ADDR_1 to $LOOP_ADDR_2, verify: OK on both"

# "A QP may also be connected to another QP of its own daemon."
"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" --server --verify -s 64K -D "${LOOP_SOCKS[0]}" \
	>"$WORK/self-server.out" 2>&1 &
server=$!
PIDS+=($server)
"${IN_A[@]}" timeout 60 "$BUILD/rdma-write" --verify -s 64K -n 100 -D "${LOOP_SOCKS[0]}" \
	"$LOOP_ADDR_1" >"$WORK/self-client.out" 2>&1 </dev/null
status=$?
wait $server || status=$?
[ $status -eq 0 ] && grep -qx 'verify: OK' "$WORK/self-client.out" &&
	grep -qx 'verify: OK' "$WORK/self-server.out" ||
	{ cat "$WORK/self-client.out" "$WORK/self-server.out"; fail "rdma-write to its own daemon"; }
echo "loopback: 100 WRITEs of 64 KiB between two QPs of the daemon at $LOOP_ADDR_1, verify: OK"
echo "readme walkthrough: OK"
