#!/usr/bin/env bash
# dapl: Debian's DAPL 2.1 (uDAT over its rdma_cm provider, libdaplofa) and its test
# programs under rocemu-run between two daemons in two network namespaces, a row each:
# dtest (SENDs, an RDMA READ whose bytes it checks, RDMA WRITEs both ways), dtestx (the IB
# extensions: CMP_SWAP and FETCH_ADD checked, WRITE and SEND with immediate data) and
# dtestcm (100 connections made and torn down). A provider is named in a dat.conf of our
# own (DAT_OVERRIDE) after each namespace's interface. dtestsrq is not run: it waits for
# good after its connection, on the kernel's rxe in the interop guest as here.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root
plain_pass_only "dapl"

needs_programs dapl2-utils dtest dtestx dtestcm
unset ROCEMU_DEBUG

topology_up netns

for side in a b; do
	iface=IF_${side^^}
	printf 'rocemu u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "%s 0" ""\n' \
		"${!iface}" >"$WORK/dat-$side.conf"
done
INFO_PORT=15828   # where the dtest programs' servers tell their clients their addresses

# row PROGRAM PASSED_LINE ARGS...: PROGRAM's server in b, its client in a; both must exit 0
# and the client's output hold PASSED_LINE
row() {
	local prog=$1 want=$2 server rc_c rc_s
	shift 2
	"${IN_B[@]}" env DAT_OVERRIDE="$WORK/dat-b.conf" timeout 60 "$RUN" -D "$SOCK_B" \
		"$prog" -P rocemu -s "$@" >"$WORK/$prog.server" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	await_listener b "$INFO_PORT" "$server"
	"${IN_A[@]}" env DAT_OVERRIDE="$WORK/dat-a.conf" timeout 60 "$RUN" -D "$SOCK_A" \
		"$prog" -P rocemu -h "$ADDR_B" "$@" >"$WORK/$prog.client" 2>&1 </dev/null
	rc_c=$?
	wait "$server"
	rc_s=$?
	if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && grep -q "$want" "$WORK/$prog.client"; then
		passed "$prog $*: $(grep -E 'PASSED|BW|Total|Connections:' "$WORK/$prog.client" |
			tail -n 2 | tr -s ' \n' ' ' | cut -c1-160)"
	else
		tail -n 6 "$WORK/$prog.client" | sed 's/^/  | client: /'
		tail -n 6 "$WORK/$prog.server" | sed 's/^/  | server: /'
		failed "$prog $* (client exit $rc_c, server exit $rc_s)"
	fi
	# the info port is the next row's: this server must be gone
	while "${IN_B[@]}" ss -Hltn "sport = :$INFO_PORT" | grep -q .; do sleep 0.05; done
}

row dtest 'DAPL Test Complete. PASSED' -B 100
row dtestx 'immed/atomic test PASSED'
row dtestcm 'ALL 100 CONNECTED on Client' -c 100

daemons_alive
finish "dapl"
