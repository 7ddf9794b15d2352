#!/usr/bin/env bash
# Two hosts on one machine: network namespaces rocemu-a (198.18.0.1/24, fd52:6f63:1::1/64)
# and rocemu-b (198.18.0.2/24, fd52:6f63:1::2/64: the benchmarking range and a unique
# local prefix) joined by a veth pair (veth-rocemu-a and veth-rocemu-b), MTU 9000 by
# default. The IPv6 addresses are added where the kernel has IPv6. With --vlan ID the
# addresses go on an 802.1Q device over each veth end instead (vlan-rocemu-a and
# vlan-rocemu-b, VLAN ID), so every frame between the two carries the tag.
#   netns.sh up [--mtu N] [--vlan ID]
#                             create them (fails if they exist; run down first)
#   netns.sh down             remove everything; safe to run twice
#   netns.sh status           show them
set -eu

# ROCEMU_NETNS_PREFIX (default rocemu) names the pair, so test runs can have their own;
# ROCEMU_NETNS_SUBNET (default 198.18.0) the /24 they share, ROCEMU_NETNS_SUBNET6 (default
# fd52:6f63:1) what comes before ::1 and ::2 in their IPv6 /64.
PREFIX=${ROCEMU_NETNS_PREFIX:-rocemu}
SUBNET=${ROCEMU_NETNS_SUBNET:-198.18.0}
SUBNET6=${ROCEMU_NETNS_SUBNET6:-fd52:6f63:1}
NS_A=$PREFIX-a
NS_B=$PREFIX-b
IF_A=veth-$PREFIX-a
IF_B=veth-$PREFIX-b
ADDR_A=$SUBNET.1/24
ADDR_B=$SUBNET.2/24
ADDR6_A=$SUBNET6::1/64
ADDR6_B=$SUBNET6::2/64
if [ ${#IF_A} -gt 15 ]; then
	echo "netns: prefix '$PREFIX' is too long for interface names (at most 8 characters)" >&2
	exit 2
fi

usage() {
	echo "usage: $0 up [--mtu N] [--vlan ID] | down | status" >&2
	exit 2
}

ns_exists() { ip netns list | grep -q "^$1\( \|$\)"; }

v6() { [ -d /proc/sys/net/ipv6 ] && echo " ${1%/*}"; }

in_range() { # OPTION VALUE MIN MAX: exits 2 with a message unless MIN <= VALUE <= MAX
	case $2 in
	'' | *[!0-9]*) echo "netns: $1 takes a number, got '$2'" >&2; exit 2 ;;
	esac
	if [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
		echo "netns: $1 $2 is outside $3..$4" >&2
		exit 2
	fi
}

up() {
	local mtu=9000 vlan="" dev_a=$IF_A dev_b=$IF_B
	while [ $# -gt 0 ]; do
		case $1 in
		--mtu) [ $# -ge 2 ] || usage; mtu=$2; shift 2 ;;
		--vlan) [ $# -ge 2 ] || usage; vlan=$2; shift 2 ;;
		*) usage ;;
		esac
	done
	in_range --mtu "$mtu" 1280 65535
	if [ -n "$vlan" ]; then
		in_range --vlan "$vlan" 1 4094
		dev_a=vlan-$PREFIX-a dev_b=vlan-$PREFIX-b
	fi
	# ip netns (add, exec, -n) makes / a slave mount in a mount namespace of its own, which
	# fails with EINVAL where / is no mount point: in a chroot whose directory is not one.
	if command -v mountpoint >/dev/null && ! mountpoint -q /; then
		echo "netns: / is not a mount point (a chroot?), and ip netns needs it to be one:" \
			"bind-mount the chroot's directory onto itself (mount --bind DIR DIR) before entering it" >&2
		exit 1
	fi
	if ns_exists $NS_A || ns_exists $NS_B; then
		echo "netns: $NS_A or $NS_B exists already; run '$0 down' first" >&2
		exit 1
	fi
	trap 'down >/dev/null 2>&1' ERR
	ip netns add $NS_A
	ip netns add $NS_B
	ip link add $IF_A netns $NS_A type veth peer name $IF_B netns $NS_B
	for side in "$NS_A $IF_A $dev_a $ADDR_A $ADDR6_A" "$NS_B $IF_B $dev_b $ADDR_B $ADDR6_B"; do
		set -- $side
		ip -n "$1" link set lo up
		ip -n "$1" link set "$2" mtu "$mtu" up
		if [ -n "$vlan" ]; then
			ip -n "$1" link add link "$2" name "$3" type vlan id "$vlan"
			ip -n "$1" link set "$3" up
		fi
		ip -n "$1" addr add "$4" dev "$3"
		# nodad: usable at once, not after duplicate address detection's second or two
		[ -d /proc/sys/net/ipv6 ] && ip -n "$1" addr add "$5" dev "$3" nodad
	done
	trap - ERR
	echo "netns: $NS_A ($dev_a ${ADDR_A%/*}$(v6 "$ADDR6_A")) <-> $NS_B ($dev_b ${ADDR_B%/*}$(v6 "$ADDR6_B")), MTU $mtu${vlan:+, VLAN $vlan}"
}

down() {
	local ns
	for ns in $NS_A $NS_B; do
		ns_exists "$ns" && ip netns delete "$ns"
	done
	return 0
}

status() {
	local ns
	for ns in $NS_A $NS_B; do
		if ns_exists "$ns"; then
			ip -n "$ns" -brief addr show
		else
			echo "$ns: absent"
		fi
	done
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
up) up "$@" ;;
down) [ $# -eq 0 ] || usage; down ;;
status) status ;;
*) usage ;;
esac
