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

mark_refusals b rkey_bounds rkey_other_pd rkey_no_access
peer_pair rereg-peer "$PEER"
# the old address; the other PD; LOCAL_WRITE alone
refusals_moved b rkey_bounds=1 rkey_other_pd=1 rkey_no_access=1

finish rereg
