#!/usr/bin/env bash
# RDMA CM on lo, where the kernel's routes give 127.0.0.1 as the source for every address of
# 127/8 and no daemon serves 127.0.0.1: unmodified librdmacm programs that name no source
# connect to their own daemon's address and to another daemon on lo, as the kernel's cma
# binds a loopback destination to a local device. Rows: rping -C 50 -v to the other daemon
# and to its own (pings verified on both ends), ucmatose with 10 connections to its own,
# ib_write_bw -R to the other daemon.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

needs_programs "rdmacm-utils and perftest" rping ucmatose ib_write_bw
unset ROCEMU_DEBUG
T=${CM_TIMEOUT:-40}

topology_up lo

# rping_row NAME SIDE ADDR: rping -C 50 -v, the server on SIDE listening on ADDR
rping_row() {
	local name=$1 side=$2 addr=$3 got=
	if CM_SERVER=$side cm_pair "$name" rping -s -a "$addr" -C 50 -v -- rping -c -a "$addr" -C 50 -v &&
		got=$(grep -c '^ping data: rdma-ping-' "$OUT_C") && [ "$got" -eq 50 ] &&
		[ "$(grep -c '^server ping data: rdma-ping-' "$OUT_S")" -eq 50 ]; then
		passed "$name: rping -C 50 -v to $addr, no source named: $got pings verified on both ends"
	else
		show_both
		failed "$name: rping -C 50 -v to $addr (client exit $RC_C, server exit $RC_S, ${got:-?} pings)"
	fi
}

rping_row rping-other-daemon b "$ADDR_B"
rping_row rping-own-daemon a "$ADDR_A"

if CM_SERVER=a cm_pair ucmatose-own ucmatose -c 10 -- ucmatose -s "$ADDR_A" -c 10 &&
	grep -q 'return status 0' "$OUT_C"; then
	passed "ucmatose -c 10 to its own daemon's $ADDR_A"
else
	show_both
	failed "ucmatose -c 10 to $ADDR_A (client exit $RC_C, server exit $RC_S)"
fi

if perftest_cm_pair write-bw-other ib_write_bw -R -n 500 &&
	[ "$(table_rows "$OUT_C")" -ge 1 ]; then
	row=$(awk '/#bytes/ { t = 1; next } t && /^ *[0-9]/ { print; exit }' "$OUT_C")
	passed "ib_write_bw -R -n 500 to $ADDR_B: $(tr -s ' \t' ' ' <<<"$row")"
else
	show_both
	failed "ib_write_bw -R -n 500 to $ADDR_B (client exit $RC_C, server exit $RC_S)"
fi

for side in a b; do
	pid=${DAEMON_PID[$side]}
	kill -0 "$pid" 2>/dev/null && passed "rocemud $side still running" ||
		failed "rocemud $side died"
done
finish "rdma_cm on lo"
