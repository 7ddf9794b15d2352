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

mark_refusals b rkey_bounds rkey_no_access rkey_other_qp rkey_mw_unbound rkey_stale
peer_pair mw-peer "$PEER"
# past the window; the read-only window; another QP's window; invalidated twice; the key a
# type 1 window had before its bind of length 0
refusals_moved b rkey_bounds=1 rkey_no_access=1 rkey_other_qp=1 rkey_mw_unbound=2 rkey_stale=1

finish mw
