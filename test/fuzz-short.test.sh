#!/usr/bin/env bash
# A short libFuzzer run (10 s) of every harness over its committed corpus, one harness per
# core at a time: catches regressions that the corpus already knows how to reach. The long
# runs are `make fuzz`.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v clang >/dev/null; then
	echo "clang absent: fuzz harnesses skipped (scripts/install-deps.sh installs it)"
	exit 77
fi
# The harnesses are built with ASan and UBSan whatever the tree, so the sanitizer pass of
# make check would only repeat the plain pass's run.
case ${ROCEMU_BUILD:-} in
*/asan) echo "fuzz harnesses already ran in the plain pass (they carry ASan/UBSan themselves)"
	exit 77 ;;
esac
seconds=${ROCEMU_FUZZ_SECONDS:-10}
cd "$here"
make -s fuzz-build || exit 1
# One harness per core at a time: each runs its full time, the check takes a fraction.
jobs=$(nproc 2>/dev/null || echo 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_harness NAME: its time over a scratch copy of its corpus (a check run never rewrites
# the committed corpus); its verdict line goes to $work/NAME.verdict
run_harness() {
	local name=$1 dir=$work/$1
	mkdir -p "$dir/corpus"
	cp -r "test/fuzz/corpus/$name/." "$dir/corpus/" 2>/dev/null || true
	if "build/fuzz/$name" -max_total_time="$seconds" -max_len=9100 -artifact_prefix="$dir/" \
		"$dir/corpus" >"$dir/log" 2>&1; then
		echo "$name: $(grep -o 'Done [0-9]* runs' "$dir/log") in ${seconds}s, no finding" \
			>"$work/$name.verdict"
	else
		{
			echo "$name: FINDING"
			tail -n 40 "$dir/log"
			keep_artifacts "$name" "$dir"
		} >"$work/$name.verdict"
	fi
}

# A finding's input outlives the run: kept in build/fuzz/findings/ and printed in base64,
# so that a run whose tree is gone (CI) still tells how to reproduce it
# (base64 -d >crash; build/fuzz/NAME crash).
keep_artifacts() {
	local name=$1 dir=$2 f
	mkdir -p build/fuzz/findings
	for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
		[ -f "$f" ] || continue
		cp "$f" "build/fuzz/findings/$name-$(basename "$f")"
		echo "$name: input $(basename "$f") ($(stat -c %s "$f") bytes), kept as" \
			"build/fuzz/findings/$name-$(basename "$f"); base64:"
		base64 -w 100 "$f"
	done
}

names=()
for harness in build/fuzz/*_fuzz; do
	names+=("$(basename "$harness")")
	run_harness "${names[-1]}" &
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait
status=0
for name in "${names[@]}"; do
	if [ -f "$work/$name.verdict" ]; then
		cat "$work/$name.verdict"
		grep -q "^$name: FINDING" "$work/$name.verdict" && status=1
	else
		echo "$name: no verdict (the harness did not finish)"
		status=1
	fi
done
exit $status
