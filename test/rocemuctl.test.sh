#!/usr/bin/env bash
# rocemuctl decode as a user runs it: exit codes, usage, and JSON that a JSON parser accepts.
set -u
ctl=${ROCEMU_BUILD:?}/rocemuctl
captures=${ROCEMU_CAPTURES:-../shared/captures}
fail() { echo "FAIL: $*"; exit 1; }

"$ctl" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no verb should exit 2"
"$ctl" frobnicate 2>&1 | grep -q "unknown verb 'frobnicate'" || fail "unknown verb message"
"$ctl" decode 2>&1 | grep -q "expected one pcap file" || fail "decode without a file"
out=$("$ctl" decode /nonexistent/x.pcap 2>&1); rc=$?
[ $rc -eq 2 ] || fail "missing file should exit 2, got $rc"
grep -q "/nonexistent/x.pcap" <<<"$out" || fail "missing file message should name the file"
printf 'not a pcap' >"${TMPDIR:-/tmp}/rocemu-notpcap.$$"
"$ctl" decode "${TMPDIR:-/tmp}/rocemu-notpcap.$$" >/dev/null 2>&1; rc=$?
rm -f "${TMPDIR:-/tmp}/rocemu-notpcap.$$"
[ $rc -eq 2 ] || fail "unreadable file should exit 2, got $rc"

if [ ! -d "$captures" ]; then
	echo "captures absent at $captures: JSON checks skipped"
	exit 0
fi
for f in "$captures"/*.pcap "$captures"/sniffer-mangled/*.pcap; do
	"$ctl" decode --json "$f" 2>/dev/null >"${TMPDIR:-/tmp}/rocemu-json.$$" || fail "$f: exit $?"
	if command -v python3 >/dev/null; then
		python3 - "${TMPDIR:-/tmp}/rocemu-json.$$" <<'PY' || fail "$f: bad JSON"
import json, sys
keys = {"frame", "ip_version", "src", "dst", "opcode", "opcode_name", "dest_qp", "psn",
        "ack_req", "pad", "payload_len", "icrc_ok"}
for line in open(sys.argv[1]):
    obj = json.loads(line)
    if "error" in obj:
        assert set(obj) == {"frame", "error"}, obj
        continue
    extra = set(obj) - keys
    assert keys <= set(obj) and extra <= {"deth", "reth", "aeth", "imm", "gso_piece", "gso_pieces", "cm"}, obj
    for k in ("frame", "ip_version", "opcode", "dest_qp", "psn", "pad", "payload_len"):
        assert type(obj[k]) is int, (k, obj)
PY
	fi
	"$ctl" decode "$f" | tail -n +1 | grep -q "^frames " || fail "$f: no summary"
done
rm -f "${TMPDIR:-/tmp}/rocemu-json.$$"
echo "rocemuctl decode: usage, errors and JSON OK"
