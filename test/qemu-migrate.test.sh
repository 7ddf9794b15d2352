#!/usr/bin/env bash
# qemu-migrate: Debian's qemu (7.2) live-migrates a VM over RDMA (`migrate rdma:HOST:PORT`,
# qemu's own RDMA transport over rdma_cm) from a qemu under rocemu-run in namespace a to
# one under rocemu-run in b, each on its own daemon. The VM's RAM is 64 MiB of random
# bytes (a private mapping of a file filled beforehand) and both VMs stay paused (-S), so
# after the migration the destination's RAM must equal the source's, byte for byte: both
# are dumped with the monitor's pmemsave and compared with the file. One row with
# rdma-pin-all (all of RAM registered at the start), one without (qemu registers and
# deregisters chunks as it goes).
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root
plain_pass_only "qemu-migrate"

QEMU=qemu-system-x86_64
needs_programs qemu-system-x86 "$QEMU"
unset ROCEMU_DEBUG

topology_up netns

MEM_MIB=64
head -c $((MEM_MIB << 20)) /dev/urandom >"$WORK/ram.src"
# the monitor's pmemsave from 1 MiB up (below it lie the BIOS's and VGA's holes)
DUMP_AT=$((1 << 20)) DUMP_LEN=$(((MEM_MIB - 1) << 20))
tail -c +$((DUMP_AT + 1)) "$WORK/ram.src" | head -c "$DUMP_LEN" >"$WORK/ram.expected"

# hmp SOCKET COMMAND: the human monitor's answer to COMMAND, its echo and prompt dropped
hmp() {
	python3 - "$@" <<'PY'
import re, socket, sys, time
def until_prompt(s):
    out, end = b"", time.time() + 10
    while not out.endswith(b"(qemu) ") and time.time() < end:
        s.settimeout(max(0.1, end - time.time()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        out += data
    return out.decode(errors="replace")
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
until_prompt(s)
s.sendall((sys.argv[2] + "\n").encode())
text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", until_prompt(s))
print("\n".join(l for l in text.splitlines()[1:] if l.strip() != "(qemu)"))
PY
}

# vm SIDE NAME BACKING [ARGS...]: a paused VM in namespace SIDE whose RAM maps BACKING
vm() {
	local side=$1 name=$2 backing=$3 prefix sock
	shift 3
	prefix=IN_${side^^}[@] sock=SOCK_${side^^}
	"${!prefix}" timeout 120 "$RUN" -D "${!sock}" "$QEMU" -M q35 -accel tcg -m "$MEM_MIB" \
		-nodefaults -no-user-config -display none -serial none -S \
		-object "memory-backend-file,id=ram,size=${MEM_MIB}M,mem-path=$backing,share=off" \
		-machine memory-backend=ram -monitor "unix:$WORK/$name.mon,server,nowait" "$@" \
		>"$WORK/$name.out" 2>&1 </dev/null &
	PIDS+=($!)
	for _ in $(seq 100); do
		[ -S "$WORK/$name.mon" ] && return
		sleep 0.05
	done
}

# row PIN: one migration, rdma-pin-all PIN (on or off)
row() {
	local pin=$1 port=$((4400 + RANDOM % 500)) status="" info dst=$WORK/ram.dst.$1 pids
	truncate -s $((MEM_MIB << 20)) "$dst"
	pids=${#PIDS[@]}
	vm b "dst-$pin" "$dst" -incoming "rdma:$ADDR_B:$port"
	vm a "src-$pin" "$WORK/ram.src"
	hmp "$WORK/src-$pin.mon" "migrate_set_capability rdma-pin-all $pin" >/dev/null
	hmp "$WORK/src-$pin.mon" "migrate -d rdma:$ADDR_B:$port" >"$WORK/migrate-$pin.out"
	for _ in $(seq 60); do
		info=$(hmp "$WORK/src-$pin.mon" "info migrate")
		status=$(sed -n 's/^Migration status: //p' <<<"$info")
		case $status in completed|failed|cancelled) break ;; esac
		sleep 0.5
	done
	hmp "$WORK/dst-$pin.mon" "pmemsave $DUMP_AT $DUMP_LEN \"$WORK/dst-$pin.mem\"" >/dev/null
	hmp "$WORK/src-$pin.mon" "pmemsave $DUMP_AT $DUMP_LEN \"$WORK/src-$pin.mem\"" >/dev/null
	if [ "$status" = completed ] && cmp -s "$WORK/ram.expected" "$WORK/dst-$pin.mem" &&
		cmp -s "$WORK/ram.expected" "$WORK/src-$pin.mem"; then
		passed "qemu migrate rdma: (rdma-pin-all $pin): $MEM_MIB MiB of RAM byte for byte in" \
			"$(sed -n 's/^total time: //p' <<<"$info"), $(sed -n 's/^throughput: //p' <<<"$info")"
	else
		sed 's/^/  | migrate: /' "$WORK/migrate-$pin.out"
		sed 's/^/  | /' <<<"$info" | head -n 12
		tail -n 4 "$WORK/src-$pin.out" "$WORK/dst-$pin.out" | sed 's/^/  | /'
		cmp "$WORK/ram.expected" "$WORK/dst-$pin.mem" 2>&1 | sed 's/^/  | /'
		failed "qemu migrate rdma: (rdma-pin-all $pin): status '${status:-none}'"
	fi
	for pid in "${PIDS[@]:$pids}"; do kill "$pid" 2>/dev/null; done
	rm -f "$dst" "$WORK"/*-"$pin".mem
}

row on
row off

daemons_alive
finish "qemu-migrate"
