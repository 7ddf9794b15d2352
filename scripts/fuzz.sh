#!/usr/bin/env bash
# Runs each libFuzzer harness for SECONDS with ASan and UBSan; fails on any finding.
# Inputs: the committed corpus test/fuzz/corpus/NAME/ (made without the shared captures, so
# none of their bytes are in the repository) and, when they exist, one seed per frame of the
# shared captures. New inputs go to build/fuzz/corpus/NAME/, never into the repository.
#   fuzz.sh SECONDS HARNESS...
set -eu
seconds=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
captures=${ROCEMU_CAPTURES:-$here/../shared/captures}
status=0

# One seed file per frame of the shared captures (they are read in place, never copied into
# the repository).
seed_dir=$here/build/fuzz/seeds
if [ -d "$captures" ] && [ ! -d "$seed_dir" ] && command -v python3 >/dev/null; then
	mkdir -p "$seed_dir/frames"
	python3 - "$seed_dir/frames" "$captures"/*.pcap "$captures"/sniffer-mangled/*.pcap <<'PY'
import struct, sys, os
out = sys.argv[1]
n = 0
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    end = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off = 24
    while off + 16 <= len(data) and n < 4000:
        caplen = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        frame = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        open(os.path.join(out, "f%05d" % n), "wb").write(frame)
        n += 1
PY
fi

# Frames of every known opcode, built by wire/ itself.
if [ -n "${ROCEMU_SEED_TOOL:-}" ] && [ ! -d "$seed_dir/own" ]; then
	mkdir -p "$seed_dir/own"
	"$ROCEMU_SEED_TOOL" "$seed_dir/own"
fi

for harness in "$@"; do
	name=$(basename "$harness")
	corpus=$here/build/fuzz/corpus/$name
	mkdir -p "$corpus" "$here/build/fuzz/artifacts/$name"
	seeds=()
	[ -d "$here/test/fuzz/corpus/$name" ] && seeds+=("$here/test/fuzz/corpus/$name")
	[ -d "$seed_dir/own" ] && seeds+=("$seed_dir/own")
	[ -d "$seed_dir/frames" ] && seeds+=("$seed_dir/frames")
	echo "== $name: ${seconds}s"
	if ! "$harness" -max_total_time="$seconds" -max_len=9100 -print_final_stats=1 \
		-artifact_prefix="$here/build/fuzz/artifacts/$name/" "$corpus" "${seeds[@]}" \
		2>"$here/build/fuzz/$name.log"; then
		status=1
		echo "$name: FINDING, see build/fuzz/$name.log and build/fuzz/artifacts/$name/"
	fi
	grep -E 'stat::number_of_executed_units|stat::peak_rss_mb|^Done' "$here/build/fuzz/$name.log" || true
done
[ -d "$captures" ] || echo "(captures absent at $captures: no seeds from them)"
exit $status
