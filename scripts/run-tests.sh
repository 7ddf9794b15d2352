#!/usr/bin/env bash
# Runs the tests of one build tree, or totals several runs.
#   run-tests.sh BUILD             run BUILD/test/*_test (Check) and test/*.test.sh (integration)
#   run-tests.sh --summary-of CMD...  run each command (each a run-tests.sh run), then print
#                                  what failed (each failed check with the lines before it:
#                                  a log read from its end shows them) and the total as
#                                  "N passed, N failed"; fail if any failed.
#   run-tests.sh --summary-of --side-by-side CMD...  the same, with the commands run at once:
#                                  the first one's output as it comes, each other's whole
#                                  when the first is done (see side_by_side below)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)

# in_own_network CMD: CMD in a network and mount namespace of its own, with lo up, a
# private /run/netns and a /sys that shows this network's devices (as ip netns exec gives)
in_own_network() {
	unshare --net --mount --propagation private bash -c '
		mkdir -p /run/netns && mount -t tmpfs -o mode=0755 netns /run/netns &&
		umount -l /sys && mount -t sysfs sysfs /sys && ip link set lo up &&
		exec bash -c "$1"' in_own_network "$1"
}

# one_after_another DIR CMD...: each command in turn, writing its results and failures in
# DIR/N (N from 0)
one_after_another() {
	local dir=$1 i=0 cmd status=0
	shift
	for cmd in "$@"; do
		mkdir -p "$dir/$i"
		ROCEMU_RESULTS=$dir/$i/results ROCEMU_FAILURES=$dir/$i/failures bash -c "$cmd" ||
			status=1
		i=$((i + 1))
	done
	return $status
}

# side_by_side DIR CMD...: every command at once, each writing its results and failures in
# DIR/N. The passes' tests wait far more than they compute (on daemons, wakeups, a guest's
# boot: a pass alone keeps two cores 40% busy), so two passes side by side take little
# more than the longer one. Every command but the first runs in_own_network, so nothing
# the passes name (namespaces, lo's addresses, nftables tables) can meet; the first keeps
# the machine's network, which a test may need (the short interop fetches a kernel). Where
# namespaces cannot be made, the commands run one after another.
side_by_side() {
	local dir=$1 i cmd status=0
	local -a pids=()
	shift
	if ! in_own_network true 2>/dev/null; then
		echo "cannot make a network namespace here: the passes run one after another"
		one_after_another "$dir" "$@"
		return
	fi
	for i in $(seq 0 $(($# - 1))); do
		mkdir -p "$dir/$i"
		cmd=${*:$((i + 1)):1}
		export ROCEMU_RESULTS=$dir/$i/results ROCEMU_FAILURES=$dir/$i/failures
		if [ "$i" -eq 0 ]; then
			bash -c "$cmd" &
		else
			in_own_network "$cmd" >"$dir/$i/log" 2>&1 &
		fi
		pids+=($!)
	done
	unset ROCEMU_RESULTS ROCEMU_FAILURES
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || status=1
		[ "$i" -eq 0 ] || { echo; cat "$dir/$i/log"; }
	done
	return $status
}

if [ "${1:-}" = "--summary-of" ]; then
	shift
	runs=$(mktemp -d)
	trap 'rm -rf "$runs"' EXIT
	status=0
	if [ "${1:-}" = "--side-by-side" ]; then
		shift
		side_by_side "$runs" "$@" || status=1
	else
		one_after_another "$runs" "$@" || status=1
	fi
	results=$runs/results failures=$runs/failures
	cat "$runs"/*/results >"$results" 2>/dev/null
	cat "$runs"/*/failures >"$failures" 2>/dev/null
	if [ -s "$failures" ]; then
		echo
		echo "== what failed, each with the lines before it"
		head -n 24 "$failures"
	fi
	read -r passed failed < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$results")
	[ "$failed" -eq 0 ] || status=1
	[ "$passed" -gt 0 ] || { echo "no test ran" >&2; status=1; }
	echo
	echo "${passed} passed, ${failed} failed"
	exit $status
fi

build=${1:?usage: run-tests.sh BUILD | --summary-of CMD...}
passed=0
failed=0
failed_names=()

record() { # name status checks_passed checks_failed
	passed=$((passed + $3))
	failed=$((failed + $4))
	[ "$2" -eq 0 ] && [ "$4" -eq 0 ] || failed_names+=("$1")
}

# note_failure NAME STATUS OUTPUT: for the summary, the failed checks of a failed test with
# the lines before each (or its last lines when it failed without naming a check), after
# the first lines of any sanitizer report in OUTPUT (a report's heading is often further
# up than the lines before a check)
note_failure() {
	[ -n "${ROCEMU_FAILURES:-}" ] || return 0
	{
		echo "[$1] ($build, exit $2)"
		{
			grep -E 'runtime error: |ERROR: (Address|Leak)Sanitizer|^SUMMARY: ' <<<"$3" |
				head -n 3
			if grep -qE '^(FAIL|FAILED)' <<<"$3"; then
				grep -E -B 3 '^(FAIL|FAILED)' <<<"$3" | head -n 10
			else
				tail -n 10 <<<"$3"
			fi
		} | cut -c1-200 | sed 's/^/  /'
	} >>"$ROCEMU_FAILURES"
}

for t in "$build"/test/*_test; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	out=$(cd "$here" && "$t" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed "s/^/[$name] /"
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	checks=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
	bad=$(sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2/' <<<"$line" | awk '{print $1 + $2}')
	if [ -z "$line" ]; then checks=0; bad=1; fi
	record "$name" "$rc" $((checks - bad)) "$bad"
	[ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] || note_failure "$name" "$rc" "$out"
done

# Integration tests: shell scripts that start real programs. Exit 0 pass, 77 skip.
for t in "$here"/test/*.test.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t")
	started=$SECONDS
	out=$(ROCEMU_BUILD="$here/$build" bash "$t" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed "s/^/[$name] /"
	echo "[$name] exit $rc after $((SECONDS - started)) s"
	case $rc in
	0) record "$name" 0 1 0 ;;
	77) echo "[$name] skipped" ;;
	*) record "$name" "$rc" 0 1
	   note_failure "$name" "$rc" "$out" ;;
	esac
done

echo "== $build: ${passed} passed, ${failed} failed${failed_names:+ (${failed_names[*]})}"
if [ -n "${ROCEMU_RESULTS:-}" ]; then echo "$passed $failed" >>"$ROCEMU_RESULTS"; fi
[ "$failed" -eq 0 ]
