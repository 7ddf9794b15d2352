#!/usr/bin/env bash
# rocemuctl clients, mr and qp when the daemon's answer takes several PROTO_LIST pages: every
# client, MR and QP that list_pages_e2e made is listed exactly once, in text and in --json,
# and nothing else is. First one holder fills exactly one page of each kind (counting
# rocemuctl's own connection among the clients), then a second holder adds one page and one
# entry more of each, so that pages end at, and cross, the boundary between two clients.
set -u
source "$(dirname "$0")/daemons.sh"
require_root
command -v python3 >/dev/null || skip "needs python3 to parse --json"

CTL=$BUILD/rocemuctl
HOLD=$BUILD/list_pages_e2e

read -r _ _ PAGE_CLIENTS _ PAGE_MRS _ PAGE_QPS < <("$HOLD" pages) || fail "$HOLD pages"
[ "${PAGE_MRS:-0}" -gt 0 ] && [ "${PAGE_QPS:-0}" -gt 0 ] && [ "${PAGE_CLIENTS:-0}" -gt 1 ] ||
	fail "unexpected page sizes: $("$HOLD" pages)"
echo "a page holds $PAGE_CLIENTS clients, $PAGE_MRS MRs, $PAGE_QPS QPs"

topology_up lo

# hold NAME MRS QPS CONTEXTS: a list_pages_e2e on daemon a, its lines in $WORK/NAME.out.
hold() {
	local name=$1
	shift
	"$HOLD" "$SOCK_A" "$@" >"$WORK/$name.out" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 200); do
		grep -qx ready "$WORK/$name.out" && return 0
		kill -0 "${PIDS[-1]}" 2>/dev/null || break
		sleep 0.05
	done
	fail "$name did not get ready: $(tail -n 3 "$WORK/$name.out")"
}

# text_entries VIEW: the text view's entries in the holder's words (rocemuctl's own
# connection as "self"); a line that does not parse is kept, so that it shows in the diff.
text_entries() {
	case $1 in
	mr) awk '$1 == "pid" && $5 == "lkey" { print "mr", $2, $6, $8, $10; next } { print "unparsed:", $0 }' ;;
	qp) awk '$1 == "pid" && $3 == "qpn" { print "qp", $2, $4; next } { print "unparsed:", $0 }' ;;
	clients) awk '$1 == "pid" && $9 == "pds" { print "client", ($6 == "rocemuctl" ? "self" : $2), $10; next }
		{ print "unparsed:", $0 }' ;;
	esac
}

# json_entries DIR VIEW...: each DIR/VIEW.json (rocemuctl VIEW --json) parsed, its entries
# in the same words, into DIR/VIEW.json.got (one python3 for all: it is slow to start).
json_entries() {
	python3 -c 'import json, sys
dir = sys.argv[1]
for view in sys.argv[2:]:
    lines = []
    for e in json.load(open("%s/%s.json" % (dir, view))):
        if view == "mr":
            lines.append("mr %d 0x%x 0x%x 0x%x" % (e["pid"], e["lkey"], e["rkey"], e["iova"]))
        elif view == "qp":
            lines.append("qp %d %d" % (e["pid"], e["qpn"]))
        else:
            lines.append("client %s %d" % ("self" if e["comm"] == "rocemuctl" else e["pid"],
                                           e["pds"]))
    open("%s/%s.json.got" % (dir, view), "w").write("".join(l + "\n" for l in lines))' "$@"
}

VIEWS=(clients mr qp)
declare -A PREFIX=([clients]=client [mr]=mr [qp]=qp)
declare -A PAGE=([clients]=$PAGE_CLIENTS [mr]=$PAGE_MRS [qp]=$PAGE_QPS)

# check_all CLIENTS MRS QPS: the holders made that many of each (the clients counting
# rocemuctl), each with its own key; rocemuctl clients, mr and qp, as text and --json, list
# exactly those, each once.
check_all() {
	declare -A count=([clients]=$1 [mr]=$2 [qp]=$3)
	local view want got n form
	for view in "${VIEWS[@]}"; do
		"$CTL" -s "$SOCK_A" "$view" >"$WORK/$view.text" || fail "rocemuctl $view"
		text_entries "$view" <"$WORK/$view.text" >"$WORK/$view.text.got"
		"$CTL" -s "$SOCK_A" "$view" --json >"$WORK/$view.json" || fail "rocemuctl $view --json"
	done
	json_entries "$WORK" "${VIEWS[@]}" || fail "rocemuctl --json output does not parse"
	for view in "${VIEWS[@]}"; do
		want=$WORK/$view.want
		cat "$WORK"/holder-*.out | grep "^${PREFIX[$view]} " >"$want"
		[ "$view" = clients ] && echo "client self 0" >>"$want"
		sort -o "$want" "$want"
		n=$(wc -l <"$want")
		[ "$n" -eq "${count[$view]}" ] && [ "$(sort -u "$want" | wc -l)" -eq "$n" ] ||
			fail "the holders made $n ${PREFIX[$view]} entries, not ${count[$view]} distinct ones"
		for form in text json; do
			got=$WORK/$view.$form.got
			sort -o "$got" "$got"
			diff -u "$want" "$got" >"$WORK/$view.diff" ||
				{ cat "$WORK/$view.diff"; fail "rocemuctl $view ($form): not every entry exactly once"; }
		done
		echo "$view: $n entries, $(((n + ${PAGE[$view]} - 1) / ${PAGE[$view]})) page(s) of ${PAGE[$view]}, each listed once in text and --json"
	done
}

hold holder-1 "$PAGE_MRS" "$PAGE_QPS" $((PAGE_CLIENTS - 1))
check_all "$PAGE_CLIENTS" "$PAGE_MRS" "$PAGE_QPS"
hold holder-2 $((PAGE_MRS + 1)) $((PAGE_QPS + 1)) $((PAGE_CLIENTS + 1))
check_all $((2 * PAGE_CLIENTS + 1)) $((2 * PAGE_MRS + 1)) $((2 * PAGE_QPS + 1))
echo "rocemuctl pages: OK"
