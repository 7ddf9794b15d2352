#!/usr/bin/env bash
# make guest-bench: perftest's bandwidth and latency inside a qemu guest, rocemu beside
# the kernel's rxe on the same vCPUs with the same perftest binaries
# (test/guest-perftest.sh): ib_write_bw of 1 MiB and of 64 bytes, and ib_write_lat of 64
# bytes, on rxe0 to the guest's own address (rxe in Linux 6.1 serves only the first
# network namespace, so its two ends cannot sit in two), on one rocemu daemon to its own
# address, and, for the record, between two daemons in two namespaces of the guest joined
# by a veth pair. Then the RDMA CM's connection rate the same three ways
# (test/guest-rates.sh, as make interop measures it in its one-vCPU guest).
# The guest is scripts/interop-vm.sh's, with VM_CPUS (default 2) vCPUs; KVM where it
# works, TCG otherwise (said at the top). GUEST_BENCH_ROUNDS (default 3) rounds, rxe's and
# rocemu's runs alternated; each target is judged on the median of the rounds' ratios and
# printed met or missed. Fails only when a case could not be measured.
#   test/guest-bench.sh [BUILD]
#   ROCEMUD_ARGS="--poll-budget 0" test/guest-bench.sh   the guest's daemons' options
set -u
ROCEMU_BUILD=$(cd "${1:-${ROCEMU_BUILD:-build}}" && pwd) || exit 1
VM_CPUS=${VM_CPUS:-2}
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
source "$ROCEMU_ROOT/scripts/interop-vm.sh"
ROUNDS=${GUEST_BENCH_ROUNDS:-3}
CM_ROUNDS=${CM_ROUNDS:-$ROUNDS}
source "$(dirname "$0")/guest-rates.sh"
require_root

NS=gb$((RANDOM % 100000))
NET=10.78.$((RANDOM % 250 + 1))
ADDR_HOST=$NET.1 ADDR_GUEST=$NET.2
CASES=(write-1m write-64 write-lat)

cleanup() {
	vm_stop
	ip netns del "$NS" 2>/dev/null
	teardown
}
trap cleanup EXIT

for p in qemu-system-x86_64 ib_write_bw; do
	command -v "$p" >/dev/null || fail "$p is missing (scripts/install-deps.sh installs it)"
done
[ -x "$BUILD/rocemu-run" ] || fail "$BUILD/rocemu-run is missing (make guest-bench builds it)"
[ -x /bin/busybox ] || fail "/bin/busybox is missing (scripts/install-deps.sh installs busybox-static)"
vm_prepare || fail "cannot prepare the guest's kernel and initramfs"
ip netns add "$NS" || fail "ip netns add $NS"
VM_ACCEL=${VM_ACCEL:-$(vm_accel)}
vm_start "$NS" "$WORK" "$ADDR_HOST" "$ADDR_GUEST" || fail "the guest did not come up"
echo "guest: $VM_CPUS vCPUs, $([[ $VM_ACCEL == *kvm* ]] && echo KVM || echo TCG)"
[ -n "${ROCEMUD_ARGS:-}" ] && echo "the guest's rocemud with: $ROCEMUD_ARGS"
RXE_GID=$(vm_rxe_gid "$ADDR_GUEST")
[ -n "$RXE_GID" ] || fail "rxe0 has no GID for $ADDR_GUEST"

declare -A V=()   # V[DEVICE-CASE] = the rounds' figures, space-separated

# measure DEVICE ARGS...: one run of test/guest-perftest.sh in the guest; each of its
# "CASE VALUE" lines appended to V[DEVICE-CASE] (or, for rocemu's, V[CASE], whose names
# say self- or two-); a case it printed no line for gets "-", and its output is shown
measure() {
	local device=$1 out name value c seen=" "
	shift
	out=$(vm_run 900 "cd $ROCEMU_ROOT && ROCEMUD_ARGS='${ROCEMUD_ARGS:-}' bash test/guest-perftest.sh $*" 2>&1)
	while read -r name value; do
		[ "$device" = rxe ] && name=rxe-$name
		V[$name]="${V[$name]:-} $value"
		seen+="$name "
	done < <(grep -E '^[a-z0-9-]+ ([0-9.]+|-)$' <<<"$out")
	grep -E ' \| ' <<<"$out" | sed "s/^/  $device: /"
	for c in "${CASES[@]}"; do
		for name in $([ "$device" = rxe ] && echo "rxe-$c" || echo "self-$c two-$c"); do
			[[ $seen == *" $name "* ]] && continue
			V[$name]="${V[$name]:-} -"
			tail -n 8 <<<"$out" | sed "s/^/  $device, no $name: /"
		done
	done
}

last() { # NAME: the latest round's figure of V[NAME]
	local all=${V[$1]:-?}
	echo "${all##* }"
}

for r in $(seq "$ROUNDS"); do
	measure rxe --rxe rxe0 "$RXE_GID" "$ADDR_GUEST"
	measure rocemu "$BUILD"
	echo "round $r (rxe, rocemu to itself, two daemons):$(for c in "${CASES[@]}"; do
		printf ' %s %s %s %s;' "$c" "$(last "rxe-$c")" "$(last "self-$c")" "$(last "two-$c")"; done)"
done

# ratios A B: each round's A/B, one per line (a round where either is "-" is left out)
ratios() {
	paste -d' ' <(tr ' ' '\n' <<<"${V[$1]:-}" | grep .) <(tr ' ' '\n' <<<"${V[$2]:-}" | grep .) |
		awk '$1 == "-" || $2 == "-" || $2 == 0 { next } { printf "%.3f\n", $1 / $2 }'
}

# judge LABEL CASE OP LIMIT: the median of the rounds' rocemu/rxe ratios against the target
# (OP ge: at least LIMIT; le: at most), with two daemons' beside it
judge() {
	local label=$1 c=$2 op=$3 limit=$4 self two verdict
	self=$(median_of $(ratios "self-$c" "rxe-$c"))
	two=$(median_of $(ratios "two-$c" "rxe-$c"))
	if [ -z "$self" ] || [[ " ${V[rxe-$c]:-} ${V[self-$c]:-} ${V[two-$c]:-} " == *" - "* ]]; then
		failed "$label: not measured in every round (rxe${V[rxe-$c]:-}; rocemu${V[self-$c]:-}; two daemons${V[two-$c]:-})"
		return
	fi
	verdict=$(awk -v m="$self" -v l="$limit" -v op="$op" 'BEGIN {
		ok = (op == "ge" ? m >= l : m <= l)
		printf "%.2fx (target %s %s: %s)", m, (op == "ge" ? ">=" : "<="), l, (ok ? "met" : "missed") }')
	passed "$label, $ROUNDS rounds, one device to itself: rocemu $(median_of ${V[self-$c]}) (${V[self-$c]# }), rxe $(median_of ${V[rxe-$c]}) (${V[rxe-$c]# }): median of the rounds' ratios $verdict; two rocemu daemons $(median_of ${V[two-$c]}) (${V[two-$c]# }), $(awk -v m="$two" 'BEGIN { printf "%.2fx", m }')"
}
judge "ib_write_bw -s 1M, MB/s" write-1m ge 1.0
judge "ib_write_bw -s 64, MB/s" write-64 ge 1.0
judge "ib_write_lat -s 64 t_typical, us" write-lat le 1.5
# and the RDMA CM's connection rate, here with the guest's VM_CPUS vCPUs (make
# interop's guest has one)
cm_rate_in_guest "$ADDR_GUEST"
finish guest-bench
