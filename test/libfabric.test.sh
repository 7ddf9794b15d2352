#!/usr/bin/env bash
# libfabric: Debian's fi_info and fi_pingpong (libfabric-bin) under rocemu-run, through
# libfabric's own verbs provider, between two daemons in two network namespaces, each a
# row. fi_info lists rocemu0 for every endpoint type the provider offers on RoCE: MSG
# (rdma_cm and RC QPs), DGRAM (UD QPs) and RDM over MSG (ofi_rxm). The provider finds its
# devices by binding an rdma_cm id to "localhost", which the kernel's cma takes as the
# wildcard: a rocemu that refused it offered no MSG endpoint to fi_pingpong and no RDM one
# over ofi_rxm. fi_pingpong then runs over each, every message checked (-c): MSG and RDM
# at every size from 64 bytes to 6 MiB, over IPv4 and IPv6, DGRAM up to the MTU.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root
plain_pass_only "libfabric"

needs_programs libfabric-bin fi_info fi_pingpong ss
T=${FABRIC_TIMEOUT:-60}

NETNS_IPV6=1 topology_up netns

# the endpoint types fi_info offers on rocemu0, "TYPE/PROTOCOL" a line
offered() {
	"${IN_A[@]}" timeout 20 "$RUN" -D "$SOCK_A" fi_info -p verbs 2>&1 |
		awk '$1 == "domain:" { d = $2 } $1 == "type:" { t = $2 }
		     $1 == "protocol:" && d ~ /^rocemu0/ { print t "/" $2 }' | sort -u
}
types=$(offered)
want="FI_EP_DGRAM/FI_PROTO_IB_UD FI_EP_MSG/FI_PROTO_RDMA_CM_IB_RC FI_EP_RDM/FI_PROTO_RXM"
missing=
for w in $want; do grep -qx "$w" <<<"$types" || missing+=" $w"; done
if [ -z "$missing" ]; then
	passed "fi_info -p verbs: rocemu0 offers $(tr '\n' ' ' <<<"$types")"
else
	sed 's/^/  | /' <<<"$types"
	failed "fi_info -p verbs: rocemu0 does not offer$missing"
fi

# pingpong NAME ADDR ARGS...: fi_pingpong ARGS in b, waited for on its control port, and
# ARGS ADDR in a; passes when both exit 0 having printed the same rows
pingpong() {
	local name=$1 addr=$2 port=$((47000 + RANDOM % 2000)) server rc_c rc_s rows_c rows_s
	shift 2
	"${IN_B[@]}" timeout "$T" "$RUN" -D "$SOCK_B" fi_pingpong "$@" -B "$port" \
		>"$WORK/$name.server" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	await_listener b "$port" "$server"
	"${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" fi_pingpong "$@" -P "$port" "$addr" \
		>"$WORK/$name.client" 2>&1 </dev/null
	rc_c=$?
	wait "$server"
	rc_s=$?
	rows_c=$(grep -cE '^[0-9.]+[kmg]? +[0-9]' "$WORK/$name.client")
	rows_s=$(grep -cE '^[0-9.]+[kmg]? +[0-9]' "$WORK/$name.server")
	if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ "$rows_c" -gt 0 ] && [ "$rows_c" -eq "$rows_s" ]; then
		passed "fi_pingpong $* to $addr: $rows_c sizes checked, up to $(grep -E '^[0-9.]+[kmg]? +[0-9]' "$WORK/$name.client" | tail -n 1 | tr -s ' ' | cut -d' ' -f1,6 | sed 's/ / at /') MB/s"
	else
		sed 's/^/  client | /' "$WORK/$name.client" | tail -n 4
		sed 's/^/  server | /' "$WORK/$name.server" | tail -n 4
		failed "fi_pingpong $* to $addr (client exit $rc_c, server exit $rc_s, rows $rows_c and $rows_s)"
	fi
}

pingpong msg "$ADDR_B" -p verbs -e msg -S all -I 10 -c
pingpong msg-ipv6 "$ADDR6_B" -p verbs -e msg -S all -I 5 -c -6
pingpong rdm "$ADDR_B" -p verbs -e rdm -S all -I 10 -c
pingpong dgram "$ADDR_B" -p verbs -e dgram -I 200 -c

daemons_alive
finish "libfabric"
