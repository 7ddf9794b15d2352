#!/usr/bin/env bash
# The README's first command. Today rocemu has its libraries (ICRC, RoCEv2 codec, Memory
# Regions) and the capture decoder; the daemon and rdma-write are the next step (issue #3).
# So the demo installs, builds, and shows the decoder checking the ICRC of real RoCE NIC
# captures: the same code the daemon will use to accept or drop every packet.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

scripts/install-deps.sh
make -s all
captures=${ROCEMU_CAPTURES:-$here/../shared/captures}
demo_pcap=$captures/magnate3_soft-roce__rdma-write-read__ibdump__read2.pcap
if [ ! -f "$demo_pcap" ]; then
	echo "demo: no capture at $demo_pcap; decode your own with: build/rocemuctl decode FILE.pcap"
	exit 0
fi
echo
echo "== build/rocemuctl decode $(basename "$demo_pcap")"
build/rocemuctl decode "$demo_pcap"
echo
echo "== the same packets as JSON (first three)"
build/rocemuctl decode --json "$demo_pcap" 2>/dev/null | head -n 3
echo
echo "demo: OK"
