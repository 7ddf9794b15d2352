#!/usr/bin/env bash
# ibv_rereg_mr between two daemons in two network namespaces: test/rereg_peer under
# rocemu-run. The server re-registers its MR with each IBV_REREG_MR_CHANGE_* flag and all
# three at once while the client writes into it with the rkey it was given once (rocemu
# keeps an MR's keys): a WRITE after the move lands in the new buffer, one to the old
# address, one while the MR is in another PD and one after REMOTE_WRITE was taken away
# complete with IBV_WC_REM_ACCESS_ERR, the server's memory unchanged. The receiving daemon
# must name each refusal (rocemuctl stats: refused_rkey_bounds, _other_pd, _no_access).
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/pairs.sh"
require_root

PEER=$BUILD/test/rereg_peer
[ -x "$PEER" ] || fail "$PEER is missing (make build-tests)"

topology_up netns

b0=$(counter b refused_rkey_bounds)
p0=$(counter b refused_rkey_other_pd)
a0=$(counter b refused_rkey_no_access)
SERVER_ARGS=("$PEER" server)
if pair rereg-peer "$ADDR_B" "$PEER" client; then
	passed "rereg_peer: $(grep -c '^ok' "$OUT_C") client and $(grep -c '^ok' "$OUT_S") server checks"
else
	show_both
	failed "rereg_peer"
fi
grep -hE '^(ok|FAIL)' "$OUT_C" "$OUT_S" | sed 's/^/  /'
unset SERVER_ARGS

db=$(($(counter b refused_rkey_bounds) - b0))
dp=$(($(counter b refused_rkey_other_pd) - p0))
da=$(($(counter b refused_rkey_no_access) - a0))
moved="rkey_bounds +$db, rkey_other_pd +$dp, rkey_no_access +$da"
# the old address; the other PD; LOCAL_WRITE alone
if [ "$db" -eq 1 ] && [ "$dp" -eq 1 ] && [ "$da" -eq 1 ]; then
	passed "the receiving daemon named each refusal: $moved"
else
	failed "refusals on b: $moved"
fi

finish rereg
