#!/usr/bin/env bash
# make check's runner with its passes side by side (scripts/run-tests.sh --summary-of
# --side-by-side), on two small commands that stand for the passes: the totals add up
# over both, a failure of either fails the whole and is shown, the second runs in a
# network of its own whose namespaces the machine's cannot see (and the other way round),
# its output comes whole after the first's, and without namespaces the two run one after
# the other. No daemon; needs root for the namespaces.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (namespaces)"; exit 77; }
command -v unshare >/dev/null || { echo "skipped: no unshare"; exit 77; }
work=$(mktemp -d)
ns=sbs$$
trap 'ip netns delete "$ns" 2>/dev/null; rm -rf "$work"' EXIT
failed=0
check() { # WHAT CONDITION...
	local what=$1
	shift
	if "$@"; then echo "ok $what"; else echo "FAIL: $what"; failed=1; fi
}

# The first makes a namespace in the machine's network and says what it sees; the second
# says what it sees, makes one of the same name, and fails one check of three.
first="ip netns add $ns && echo \"first: net \$(readlink /proc/self/ns/net) sees \$(ip netns list | grep -c $ns)\"
	sleep 0.5; echo '2 0' >>\"\$ROCEMU_RESULTS\"; echo 'first: done'"
second="echo \"second: net \$(readlink /proc/self/ns/net) sees \$(ip netns list | grep -c $ns)\"
	ip netns add $ns && ip netns delete $ns && echo 'second: made its own'
	echo '2 1' >>\"\$ROCEMU_RESULTS\"; echo '[second] the stand-in check that failed' >>\"\$ROCEMU_FAILURES\"; exit 1"
out=$("$here/scripts/run-tests.sh" --summary-of --side-by-side "$first" "$second" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
net_first=$(sed -n 's/^first: net \([^ ]*\) .*/\1/p' <<<"$out")
net_second=$(sed -n 's/^second: net \([^ ]*\) .*/\1/p' <<<"$out")
check "the totals add over both passes, and a failed check fails the run" \
	test "$rc" -eq 1 -a "$(tail -n 1 <<<"$out")" = "4 passed, 1 failed"
check "the failed check is shown" grep -qx '\[second\] the stand-in check that failed' <<<"$out"
check "the second pass runs in a network of its own" \
	test -n "$net_first" -a -n "$net_second" -a "$net_first" != "$net_second"
check "the first pass keeps this one's" test "$net_first" = "$(readlink /proc/self/ns/net)"
check "the second sees none of the first's namespaces" grep -q '^second: net .* sees 0$' <<<"$out"
check "the second makes one of the same name" grep -qx 'second: made its own' <<<"$out"
check "the second's namespace is not the machine's (the first's is still there)" \
	test "$(ip netns list | grep -c "^$ns\b")" -eq 1
check "the second's output comes whole after the first's" \
	test "$(grep -n '^first: done' <<<"$out" | cut -d: -f1)" -lt \
	"$(grep -n '^second: net' <<<"$out" | cut -d: -f1)"
ip netns delete "$ns" 2>/dev/null

# Without namespaces (an unshare that cannot make one), one after the other.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 1\n' >"$work/bin/unshare"
chmod +x "$work/bin/unshare"
out=$(PATH=$work/bin:$PATH "$here/scripts/run-tests.sh" --summary-of --side-by-side \
	"sleep 0.3; echo one; echo '1 0' >>\"\$ROCEMU_RESULTS\"" \
	"echo two; echo '1 0' >>\"\$ROCEMU_RESULTS\"" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
check "without namespaces: said so, ran one after the other, and passed" \
	test "$rc" -eq 0 -a "$(grep -xE 'one|two' <<<"$out" | tr '\n' ' ')" = "one two " \
	-a "$(tail -n 1 <<<"$out")" = "2 passed, 0 failed"
check "without namespaces: the reason is given" grep -q 'cannot make a network namespace' <<<"$out"
exit $failed
