#!/usr/bin/env bash
# rocemuctl status, clients, mr and qp, in text and --json, on two daemons on lo: a
# verbs_e2e holder with a 1 MiB MR, and an rdma-write pair in the middle of a long run.
set -u
source "$(dirname "$0")/daemons.sh"
require_root
command -v python3 >/dev/null || skip "needs python3 to parse --json"

CTL=$BUILD/rocemuctl
PORT=$((35000 + RANDOM % 5000))

# json_check SIDE VIEW PYTHON_EXPR: the view's --json parses and the expression holds of it
# (d is the document).
json_check() {
	local sock=$SOCK_A
	[ "$1" = b ] && sock=$SOCK_B
	"$CTL" -s "$sock" "$2" --json >"$WORK/$2.json" || fail "rocemuctl $2 --json failed"
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$WORK/$2.json" "$3" ||
		{ cat "$WORK/$2.json"; fail "rocemuctl $2 --json: not ($3)"; }
}

topology_up lo
"$BUILD/verbs_e2e" hold "$SOCK_B" 1M >"$WORK/hold.out" 2>&1 &
HOLDER=$!
PIDS+=($HOLDER)
for _ in $(seq 100); do grep -qx ready "$WORK/hold.out" && break; sleep 0.1; done
grep -qx ready "$WORK/hold.out" || fail "the holder did not start: $(cat "$WORK/hold.out")"

"$BUILD/rdma-write" --server -D "$SOCK_B" -p $PORT -s 64K >"$WORK/server.out" 2>&1 &
PIDS+=($!)
"$BUILD/rdma-write" -D "$SOCK_A" -p $PORT -s 64K -n 100000000 "$ADDR_B" \
	>"$WORK/client.out" 2>&1 &
CLIENT=$!
PIDS+=($CLIENT)
for _ in $(seq 100); do
	"$CTL" -s "$SOCK_A" qp | grep -q "state RTS" && break
	sleep 0.1
done

# status
"$CTL" -s "$SOCK_B" status >"$WORK/status" || fail "rocemuctl status"
grep -q "state: *PORT_ACTIVE" "$WORK/status" && grep -q "GID\[0\]: *::ffff:$ADDR_B" "$WORK/status" &&
	grep -q "active_mtu: *4096" "$WORK/status" || { cat "$WORK/status"; fail "status"; }
json_check b status "d['state'] == 'PORT_ACTIVE' and d['gids'][0] == '::ffff:$ADDR_B' and
 d['ipv4'] == '$ADDR_B' and d['mrs'] >= 2 and d['qps'] >= 1 and d['pinned_bytes'] >= 1048576 and
 d['rcvd_pkts'] > 0 and all(k in d for k in ('ifname', 'max_mtu', 'active_mtu', 'clients', 'sent_pkts', 'drops'))"
echo "status: $(tr '\n' ' ' <"$WORK/status" | tr -s ' ')"

# clients: the holder, with its command name and its pinned MiB
"$CTL" -s "$SOCK_B" clients | grep -q "^pid $HOLDER uid 0 comm verbs_e2e pinned_bytes 1048576 " ||
	{ "$CTL" -s "$SOCK_B" clients; fail "clients does not show the holder"; }
json_check b clients "any(c['pid'] == $HOLDER and c['comm'] == 'verbs_e2e' and c['uid'] == 0 and
 c['pinned_bytes'] == 1048576 and c['mrs'] == 1 and c['pds'] >= 1 for c in d)"
echo "clients: $("$CTL" -s "$SOCK_B" clients | grep "^pid $HOLDER ")"

# mr: the holder's 1 MiB region
"$CTL" -s "$SOCK_B" mr | grep -q "^pid $HOLDER pd [0-9]* lkey 0x[0-9a-f]* rkey 0x[0-9a-f]* iova 0x[0-9a-f]* length 1048576 access " ||
	{ "$CTL" -s "$SOCK_B" mr; fail "mr does not show the holder's region"; }
json_check b mr "any(m['pid'] == $HOLDER and m['length'] == 1048576 and m['pd'] >= 1 and
 isinstance(m['lkey'], int) and isinstance(m['rkey'], int) and isinstance(m['iova'], int) and
 'access' in m for m in d)"
echo "mr: $("$CTL" -s "$SOCK_B" mr | grep "^pid $HOLDER ")"

# qp: the writer's QP, connected to b, its timer above its round trip (once one is timed)
# and at least its 67 ms floor (rdma-write's -u 14), its rings' counts in order (posted,
# taken by the daemon, completed) and some of its WRITEs completed
for _ in $(seq 50); do
	"$CTL" -s "$SOCK_A" qp | grep "^pid $CLIENT " | grep -qv " srtt_us 0 " && break
	sleep 0.1
done
"$CTL" -s "$SOCK_A" qp >"$WORK/qp" || fail "rocemuctl qp"
grep -q "^pid $CLIENT qpn [0-9]* state RTS peer $ADDR_B dest_qpn [0-9]* sq_psn [0-9]* rq_psn [0-9]* path_mtu 4096 srtt_us [1-9][0-9]* rto_us [0-9]* rate_mbps [0-9]* last_refused none last_failed none sq_posted [1-9][0-9]* sq_taken [0-9]* sq_done [0-9]* rq_posted [0-9]* rq_taken [0-9]*$" "$WORK/qp" ||
	{ cat "$WORK/qp" "$WORK/client.out"; fail "qp does not show the writer's QP"; }
json_check a qp "any(q['pid'] == $CLIENT and q['state'] == 'RTS' and q['peer'] == '$ADDR_B' and
 q['path_mtu'] == 4096 and all(isinstance(q[k], int) for k in ('qpn', 'dest_qpn', 'sq_psn', 'rq_psn'))
 and 0 < q['srtt_us'] < q['rto_us'] and q['rto_us'] >= 67108 and q['rate_mbps'] >= 0
 and q['sq_posted'] >= q['sq_taken'] >= q['sq_done'] > 0 and q['rq_posted'] >= q['rq_taken'] for q in d)"
echo "qp: $(grep "^pid $CLIENT " "$WORK/qp")"

"$CTL" -s "$SOCK_A" qp --bogus 2>/dev/null; [ $? -eq 2 ] || fail "qp --bogus: not a usage error"
echo "rocemuctl views: OK"
