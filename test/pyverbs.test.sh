#!/usr/bin/env bash
# rdma-core's own test suite, pyverbs (Debian's python3-pyverbs, its tests in
# /usr/share/doc/rdma-core/tests), run unmodified under rocemu-run against one daemon, as
# it runs on any RDMA device: every test must pass or skip, none may fail or error. The
# count of passes is printed beside the kernel's rxe's on the same suite (make interop
# measures it in its guest; else 86 of 273 on Debian's 6.1 kernel, as
# ../shared/anchors/pyverbs-on-rxe-linux-6.1.txt records), and every test that passes
# there and is skipped here is named.
set -u
source "$(dirname "$0")/daemons.sh"
require_root

# The kernel's rxe's results: as make interop last measured them on this machine, else as
# recorded on Debian's 6.1 kernel beside the repository.
ANCHOR=$ROCEMU_ROOT/build/interop/pyverbs-on-rxe.txt
[ -f "$ANCHOR" ] || ANCHOR=$ROCEMU_ROOT/../shared/anchors/pyverbs-on-rxe-linux-6.1.txt
SUITE=/usr/share/doc/rdma-core/tests
PYTHON=/usr/bin/python3   # Debian's, which has pyverbs; not whatever python3 PATH finds first
RUN=$BUILD/rocemu-run

[ -f "$SUITE/run_tests.py" ] && "$PYTHON" -c 'import pyverbs' 2>/dev/null ||
	skip "python3-pyverbs is missing: scripts/install-deps.sh installs it"
[ -x "$RUN" ] && [ -f "$BUILD/librocemu-verbs.so" ] || fail "$RUN or librocemu-verbs.so is missing"

# Debian compresses the suite's larger modules: a copy of our own, unpacked.
cp -r "$SUITE" "$WORK/tests" && gunzip -f "$WORK"/tests/*.gz 2>/dev/null
[ -f "$WORK/tests/base.py" ] || fail "could not unpack the suite into $WORK/tests"

# One device is enough: the suite connects QPs of one process to each other.
topology_up lo
# python's own allocations are not ours to judge under the sanitizer build
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
(cd "$WORK" && timeout 600 "$RUN" -D "$SOCK_A" "$PYTHON" tests/run_tests.py -v) \
	>"$WORK/pyverbs.out" 2>&1
status=$?

summary=$(grep -E '^(OK|FAILED)( \(|$)' "$WORK/pyverbs.out" | tail -n 1)
ran=$(sed -nE 's/^Ran ([0-9]+) tests? .*/\1/p' "$WORK/pyverbs.out")
skipped=$(sed -nE 's/.*skipped=([0-9]+).*/\1/p' <<<"$summary")
bad=$(grep -cE '^(FAIL|ERROR): ' "$WORK/pyverbs.out")
if [ $status -ne 0 ] || [ -z "$ran" ] || [ "$bad" -ne 0 ]; then
	grep -E '^(FAIL|ERROR): ' "$WORK/pyverbs.out" | sed 's/^/  /'
	tail -n 40 "$WORK/pyverbs.out" | sed 's/^/  | /'
	fail "pyverbs: exit $status, $bad failed or errored (${summary:-no summary})"
fi
passes=$((ran - ${skipped:-0}))
rxe_passes=$(grep -cE ' \.\.\. ok$' "$ANCHOR" 2>/dev/null)
echo "pyverbs: $ran tests, $passes passed, ${skipped:-0} skipped, none failed;" \
	"the kernel's rxe passes ${rxe_passes:-?} ($(basename "$ANCHOR"))"

# The tests rxe passes that rocemu skips, by name (the anchor is read in place).
if [ -f "$ANCHOR" ]; then
	"$PYTHON" - "$ANCHOR" "$WORK/pyverbs.out" <<'PY'
import re, sys
def results(path):
    text = open(path).read()
    # a test's docstring may take a line before " ... ", its own output one after it
    pat = (r'^(test\w+) \(([\w.]+)\)(?:\n(?!test)[^\n]*)?? \.\.\. (?:[^\n]*?\n)??'
           r'(ok|skipped.*|FAIL|ERROR)$')
    return {m.group(2): m.group(3) for m in re.finditer(pat, text, re.M)}
rxe, ours = results(sys.argv[1]), results(sys.argv[2])
behind = sorted(t for t, r in rxe.items() if r == 'ok' and ours.get(t) != 'ok')
ahead = sorted(t for t, r in ours.items() if r == 'ok' and rxe.get(t) != 'ok')
print(f"pyverbs: {len(behind)} of rxe's passes skipped here, {len(ahead)} passed here only")
for t in behind:
    print(f"  rxe only: {t.split('.', 1)[1]}: {ours.get(t, 'not run')[:90]}")
PY
fi
echo "pyverbs: OK"
