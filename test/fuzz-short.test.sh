#!/usr/bin/env bash
# A short libFuzzer run (15 s) of every harness over its committed corpus: catches
# regressions that the corpus already knows how to reach. The long runs are `make fuzz`.
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
seconds=${ROCEMU_FUZZ_SECONDS:-15}
cd "$here"
make -s fuzz-build || exit 1
status=0
for harness in build/fuzz/*_fuzz; do
	name=$(basename "$harness")
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	# run over a scratch copy so a check run never rewrites the committed corpus
	cp -r "test/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
	if "$harness" -max_total_time="$seconds" -max_len=9100 -artifact_prefix="$work/" \
		"$work" >"$work.log" 2>&1; then
		echo "$name: $(grep -o 'Done [0-9]* runs' "$work.log") in ${seconds}s, no finding"
	else
		echo "$name: FINDING"
		tail -n 40 "$work.log"
		status=1
	fi
	rm -rf "$work" "$work.log"
done
exit $status
