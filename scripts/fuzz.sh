#!/usr/bin/env bash
# Runs each libFuzzer harness for SECONDS on its corpus in test/fuzz/corpus/NAME/ (seeded
# from the shared captures when those exist), with ASan and UBSan; fails on any finding.
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

for harness in "$@"; do
	name=$(basename "$harness")
	corpus=$here/test/fuzz/corpus/$name
	mkdir -p "$corpus" "$here/build/fuzz/artifacts/$name"
	seeds=()
	[ -d "$seed_dir/frames" ] && seeds=("$seed_dir/frames")
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
