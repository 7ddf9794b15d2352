#!/usr/bin/env bash
# What programs see of the device in /sys and /dev under rocemu-run, between two daemons in
# two network namespaces (host a serves an IPv4 and, where the kernel has IPv6, an IPv6
# address): ls, cat, stat, readlink, realpath and python3 find /sys/class/infiniband/rocemu0,
# /sys/class/infiniband_verbs/uverbs0 and the character device /dev/infiniband/uverbs0 as
# the kernel lays them out and prints them; node_guid is ibv_devinfo's; the GID table and
# its types and netdevs are ibv_devinfo -v's; the port's state follows the link (one
# process reading it again sees the change); the counters are rocemuctl's after
# rdma-write's traffic; the files are read-only; a directory walked by find and grep -r,
# and a shell's working directory in it, work too. Outside rocemu-run the machine is
# unchanged, during the runs and after; each process's private tree is gone when it exits
# (one killed is swept by the next), and ibv_devinfo, which looks for a board_id file,
# makes none.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

RUN=$BUILD/rocemu-run
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3) || skip "python3 is missing"
command -v ibv_devinfo >/dev/null ||
	skip "ibv_devinfo is missing: scripts/install-deps.sh installs ibverbs-utils"
[ -x "$RUN" ] && [ -f "$BUILD/librocemu-verbs.so" ] || fail "$RUN or librocemu-verbs.so is missing"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
# The private trees go here, where the test can count them.
TREES=$WORK/tmp
mkdir -p "$TREES"
export TMPDIR=$TREES
trees() { find "$TREES" -maxdepth 1 -name 'rocemu-sysfs.*' | wc -l; }

# What the machine shows, before anything runs (in host a's namespace, where the programs
# run: ip netns exec mounts a /sys of its own).
machine() {
	"${IN_A[@]}" sh -c 'for p in /sys/class/infiniband /sys/class/infiniband_verbs \
		/dev/infiniband /sys/devices/virtual/infiniband; do
		printf "%s: " "$p"; ls -la "$p" 2>&1 | grep -v "^total"; done; ls /sys/class | md5sum'
}

[ -d /proc/sys/net/ipv6 ] && NETNS_IPV6=1
NETNS_IPV6=${NETNS_IPV6:-} topology_up netns
BEFORE=$(machine)
in_a() { "${IN_A[@]}" timeout 30 "$RUN" -D "$SOCK_A" "$@"; }
D=/sys/class/infiniband/rocemu0

# ---- the device's files ----

devinfo=$(in_a ibv_devinfo -v 2>&1)
guid=$(awk '$1 == "node_guid:" { print $2 }' <<<"$devinfo")
out=$(in_a cat "$D/node_guid" "$D/sys_image_guid" 2>&1)
if [ -n "$guid" ] && [ "$out" = "$guid"$'\n'"$guid" ]; then
	passed "cat node_guid, sys_image_guid: $guid, ibv_devinfo's"
else
	failed "node_guid: '$out', ibv_devinfo says '$guid'"
fi

out=$(in_a sh -c "cd $D && cat node_type fw_ver parent ports/1/link_layer ports/1/lid \
	ports/1/sm_lid ports/1/lid_mask_count ports/1/cap_mask ports/1/rate ports/1/pkeys/0 \
	device/numa_node" 2>&1)
want=$(printf '%s\n' "1: CA" "0.1" "$IF_A" "Ethernet" "0x0" "0x0" "0" "0x00000000" \
	"2.5 Gb/sec (1X SDR)" "0xffff" "-1")
if [ "$out" = "$want" ]; then
	passed "cd into the device, cat: $(paste -sd'|' <<<"$out" | sed 's/|/, /g')"
else
	diff <(echo "$want") <(echo "$out") | sed 's/^/  | /'
	failed "the device's files, read from a shell's working directory in it"
fi

out=$(in_a ls /sys/class/infiniband /dev/infiniband /sys/class/infiniband_verbs 2>&1 | paste -sd' ')
[ "$out" = "/dev/infiniband: uverbs0  /sys/class/infiniband: rocemu0  /sys/class/infiniband_verbs: abi_version uverbs0" ] &&
	passed "ls: rocemu0, uverbs0, abi_version" || failed "ls: $out"

out=$(in_a sh -c "readlink $D; realpath $D /dev/infiniband/uverbs0 /sys/class/infiniband_verbs/uverbs0; \
	stat -c '%F %t:%T %a %U' /dev/infiniband/uverbs0; cat /sys/class/infiniband_verbs/abi_version \
	/sys/class/infiniband_verbs/uverbs0/ibdev /sys/class/infiniband_verbs/uverbs0/abi_version \
	/sys/class/infiniband_verbs/uverbs0/dev" 2>&1 | paste -sd'|')
want="../../devices/virtual/infiniband/rocemu0|/sys/devices/virtual/infiniband/rocemu0|/dev/infiniband/uverbs0|/sys/devices/virtual/infiniband_verbs/uverbs0|character special file e7:c0 666 root|6|rocemu0|2|231:192"
[ "$out" = "$want" ] && passed "readlink, realpath, stat: $(sed 's/|/, /g' <<<"$out")" ||
	failed "links and the device node: '$out', wanted '$want'"

# The GID table, against ibv_devinfo -v: each GID in the kernel's notation, RoCE v2, the
# interface; the empty entries zero, their type and netdev unreadable (ENODATA).
ngid=$(grep -c 'GID\[ *[0-9]*\]:' <<<"$devinfo")
out=$(in_a "$PYTHON" - "$ngid" <<'PY' 2>&1
import ipaddress, os, sys
port = "/sys/class/infiniband/rocemu0/ports/1"
for i in range(len(os.listdir(port + "/gids"))):
    gid = open(f"{port}/gids/{i}").read().strip()
    try:
        kind = open(f"{port}/gid_attrs/types/{i}").read().strip()
        ndev = open(f"{port}/gid_attrs/ndevs/{i}").read().strip()
    except OSError as e:
        kind = ndev = os.strerror(e.errno)
    addr = ipaddress.IPv6Address(gid)
    print(i, addr.ipv4_mapped or addr, kind, ndev, gid, sep="|")
PY
)
ok=true
for ((i = 0; i < 8; i++)); do
	line=$(grep "^$i|" <<<"$out")
	if ((i < ngid)); then
		dv=$(sed -nE "s/.*GID\[ *$i\]:[[:space:]]+([^,]+), RoCE v2/\1/p" <<<"$devinfo")
		dv=${dv#::ffff:}        # python names an IPv4-mapped one by its IPv4 address
		[ -n "$dv" ] && [[ $line == "$i|$dv|RoCE v2|$IF_A|"* ]] || ok=false
	else
		[ "$line" = "$i|::|No data available|No data available|0000:0000:0000:0000:0000:0000:0000:0000" ] ||
			ok=false
	fi
done
if $ok && ((ngid >= 1)); then
	passed "python3: gids/0..7 are ibv_devinfo -v's $ngid GIDs ($(grep -E '^[0-9]+\|[^:|]' <<<"$out" | cut -d'|' -f5 | paste -sd' ')), RoCE v2 on $IF_A, the rest empty (ENODATA)"
else
	printf '%s\n' "$out" | sed 's/^/  | /'
	grep 'GID\[' <<<"$devinfo" | sed 's/^/  | ibv_devinfo: /'
	failed "the GID table against ibv_devinfo -v"
fi

# The counters are the daemon's, by rxe's names, after some traffic.
write_verified 65536 "$ADDR_B"
out=$(in_a sh -c "cd $D/ports/1/hw_counters && for c in sent_pkts rcvd_pkts rdma_sends; do echo \$c \$(cat \$c); done" 2>&1)
want=$(for c in sent_pkts rcvd_pkts rdma_sends; do echo "$c $(counter a "$c")"; done)
[ "$out" = "$want" ] && [ "$(counter a sent_pkts)" -gt 0 ] && passed "hw_counters: $(paste -sd, <<<"$out"), rocemuctl stats'" ||
	failed "hw_counters: '$out', rocemuctl says '$want'"

# Read-only, and what is not there is not there.
out=$(in_a sh -c "echo 1 > $D/ports/1/state; echo \$?; cat $D/board_id $D/node_guid/x; ls $D/ports/2" 2>&1 | paste -sd'|')
[[ $out == *"Permission denied|"[12]"|"*"board_id: No such file or directory|"*"Not a directory|"*"No such file or directory" ]] &&
	passed "writing refused (EACCES); board_id, node_guid/x, ports/2 absent" ||
	failed "read-only and absent files: $out"

# A directory walked with openat and fstatat through its descriptors (find, grep -r; -s:
# the empty GID entries' attributes cannot be read, as on the kernel).
out=$(in_a sh -c "find -L /sys/class/infiniband -name state -o -name gids -prune -o -name ndevs -prune | sort; \
	grep -rs Ethernet $D/ports/1/" 2>&1 | paste -sd'|')
[ "$out" = "/sys/class/infiniband/rocemu0/ports/1/gid_attrs/ndevs|/sys/class/infiniband/rocemu0/ports/1/gids|/sys/class/infiniband/rocemu0/ports/1/state|$D/ports/1/link_layer:Ethernet" ] &&
	passed "find -L and grep -r walk the tree: $(sed 's/|/, /g' <<<"$out")" || failed "find, grep -r: $out"

# ---- the port follows the link: one process reads its state as it changes ----

FIFO=$WORK/state.fifo
mkfifo "$FIFO"
"${IN_A[@]}" timeout 60 "$RUN" -D "$SOCK_A" "$PYTHON" -u -c '
import sys
port = "/sys/class/infiniband/rocemu0/ports/1/"
for line in sys.stdin:
    print(open(port + "state").read().strip() + ", " + open(port + "phys_state").read().strip(),
          flush=True)
' <"$FIFO" >"$WORK/state.out" 2>&1 &
reader=$!
PIDS+=($reader)
exec 7>"$FIFO"
read_state() { # the reader's next line
	local n
	n=$(wc -l <"$WORK/state.out")
	echo >&7
	for _ in $(seq 100); do
		[ "$(wc -l <"$WORK/state.out")" -gt "$n" ] && break
		sleep 0.05
	done
	tail -n 1 "$WORK/state.out"
}
# until the state reads as wanted (the daemon sees the link within a second or so)
state_becomes() {
	for _ in $(seq 40); do
		[ "$(read_state)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
s1=$(read_state)
# the process's tree, seen from outside only as a private directory of its own
during=$(machine)
"${IN_A[@]}" ip link set "$IF_A" down
state_becomes "1: DOWN, 3: Disabled" && s2=$(read_state) || s2=$(read_state)
"${IN_A[@]}" ip link set "$IF_A" up
state_becomes "4: ACTIVE, 5: LinkUp" && s3=$(read_state) || s3=$(read_state)
if [ "$s1" = "4: ACTIVE, 5: LinkUp" ] && [ "$s2" = "1: DOWN, 3: Disabled" ] &&
	[ "$s3" = "4: ACTIVE, 5: LinkUp" ]; then
	passed "the port follows the link in one process: $s1 -> $s2 -> $s3"
else
	sed 's/^/  | /' "$WORK/state.out"
	failed "port state across link down and up: '$s1' '$s2' '$s3'"
fi
[ "$during" = "$BEFORE" ] && [ "$(trees)" -eq 1 ] &&
	passed "while a program holds its tree, the machine shows nothing new (one private tree in \$TMPDIR)" ||
	{ diff <(echo "$BEFORE") <(echo "$during") | sed 's/^/  | /'; failed "the machine changed while a program ran ($(trees) trees)"; }

# A program killed leaves its tree; the next one made sweeps it away.
# (the program itself: killing only timeout, its parent, would let it see its input end and
# exit as usual, removing its tree)
pkill -KILL -P "$reader" 2>/dev/null
kill -9 "$reader" 2>/dev/null
exec 7>&-
wait "$reader" 2>/dev/null
left=$(trees)
in_a cat "$D/node_type" >/dev/null 2>&1
[ "$left" -eq 1 ] && [ "$(trees)" -eq 0 ] &&
	passed "a killed program's tree is swept by the next program's, which removes its own at exit" ||
	failed "trees: $left after the kill, $(trees) after the next program (wanted 1, 0)"

# ibv_devinfo asks for a board_id that is not there: no tree is made for that.
if command -v strace >/dev/null; then
	made=$("${IN_A[@]}" strace -f -e trace=mkdir -o "$WORK/devinfo.strace" timeout 30 "$RUN" \
		-D "$SOCK_A" ibv_devinfo -v >/dev/null 2>&1; grep -c rocemu-sysfs "$WORK/devinfo.strace")
	[ "$made" -eq 0 ] && passed "ibv_devinfo -v makes no tree (its board_id lookup answered without one)" ||
		failed "ibv_devinfo made a tree ($made mkdirs)"
fi

# Switched off, the program sees the machine's.
out=$("${IN_A[@]}" env ROCEMU_SYSFS=0 timeout 30 "$RUN" -D "$SOCK_A" ls /sys/class/infiniband/rocemu0 2>&1)
[[ $out == *"No such file or directory"* ]] && passed "ROCEMU_SYSFS=0: the machine's /sys" ||
	failed "ROCEMU_SYSFS=0: $out"

AFTER=$(machine)
[ "$AFTER" = "$BEFORE" ] && [ "$(trees)" -eq 0 ] &&
	passed "outside rocemu-run the machine is as it was: $(head -n 1 <<<"$AFTER" | cut -c1-60)..." ||
	{ diff <(echo "$BEFORE") <(echo "$AFTER") | sed 's/^/  | /'; failed "the machine changed ($(trees) trees left)"; }

finish "sysfs"
