#!/usr/bin/env bash
# Memory windows between two daemons in two network namespaces: test/mw_peer under
# rocemu-run. The server's MR grants no remote right; its type 1 windows (ibv_bind_mw) and
# type 2 windows (IBV_WR_BIND_MW) carry a WRITE and a READ byte for byte, and every
# access out of a window's bounds, without the window's right, through another QP's
# type 2 window, after LOCAL_INV, after a SEND WITH INVALIDATE or after a bind of length
# 0 is refused with IBV_WC_REM_ACCESS_ERR, the server's memory unchanged. The receiving
# daemon must name each refusal (rocemuctl stats: refused_rkey_*).
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/mw_peer
[ -x "$PEER" ] || fail "$PEER is missing (make build-tests)"

topology_up netns

refusals() {
	local name
	for name in rkey_bounds rkey_no_access rkey_other_qp rkey_mw_unbound rkey_stale; do
		eval "R_$name=$(counter b refused_$name)"
	done
}

refusals
b0=$R_rkey_bounds a0=$R_rkey_no_access q0=$R_rkey_other_qp u0=$R_rkey_mw_unbound s0=$R_rkey_stale
SERVER_ARGS=("$PEER" server)
if pair mw-peer "$ADDR_B" "$PEER" client; then
	passed "mw_peer: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks"
else
	show_both
	failed "mw_peer"
fi
grep -hE '^(ok|FAIL)' "$OUT_C" "$OUT_S" | sed 's/^/  /'
unset SERVER_ARGS

refusals
moved="rkey_bounds +$((R_rkey_bounds - b0)), rkey_no_access +$((R_rkey_no_access - a0)),"
moved+=" rkey_other_qp +$((R_rkey_other_qp - q0)), rkey_mw_unbound +$((R_rkey_mw_unbound - u0)),"
moved+=" rkey_stale +$((R_rkey_stale - s0))"
# past the window; the read-only window; another QP's window; invalidated twice; the key a
# type 1 window had before its bind of length 0
if [ $((R_rkey_bounds - b0)) -eq 1 ] && [ $((R_rkey_no_access - a0)) -eq 1 ] &&
	[ $((R_rkey_other_qp - q0)) -eq 1 ] && [ $((R_rkey_mw_unbound - u0)) -eq 2 ] &&
	[ $((R_rkey_stale - s0)) -eq 1 ]; then
	passed "the receiving daemon named each refusal: $moved"
else
	failed "refusals on b: $moved"
fi

finish mw
