#!/usr/bin/env bash
# Installs what rocemu needs to build, test and run its demo on Debian 12, make included:
# it is the first command on a machine that has only the repository (and bash, which every
# Debian has). Idempotent: when every package is already installed it changes nothing and
# does not touch the network.
#   install-deps.sh        install what is missing; say so in one line
#   install-deps.sh -q     the same, silent when nothing is missing (scripts/demo.sh)
# apt-get's own output goes to build/install-deps.log, shown (its end) only on failure.
# Runs with no terminal and no stdin (CI): nothing asks a question.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
quiet=false
case ${1:-} in
-q) quiet=true ;;
"") ;;
*) echo "usage: $0 [-q]" >&2; exit 2 ;;
esac

packages=(
	build-essential pkg-config   # compiler, make, library flags
	libpcap-dev                  # the daemon's receive path and the pcap decoder
	libev-dev                    # the daemon's event loop
	libibverbs-dev               # <infiniband/verbs.h> and libibverbs.so.1, which the verbs layer answers for
	ibverbs-utils perftest       # unmodified verbs programs the tests run under rocemu-run
	librdmacm-dev                # <rdma/rdma_cma.h> and librdmacm.so.1, which the rdma_cm layer answers for
	rdmacm-utils                 # unmodified rdma_cm programs (rping, ucmatose, rdma_server) the tests run
	netcat-traditional           # an unmodified TCP program the tests run over rsockets (librspreload)
	python3-pyverbs              # rdma-core's own test suite, run under rocemu-run
	ucx-utils                    # UCX's ucx_info and ucx_perftest, run under rocemu-run
	libfabric-bin                # libfabric's fi_info and fi_pingpong (its verbs provider), run under rocemu-run
	openmpi-bin libopenmpi-dev   # Open MPI's mpirun and mpicc: an MPI program over UCX and libfabric, under rocemu-run
	qperf                        # qperf's RC tests over rdma_cm, run under rocemu-run
	tgt libiscsi-bin             # an iSCSI target (tgtd) and initiator (libiscsi) talking iSER, under rocemu-run
	fio                          # fio's rdma engine (WRITE and READ over rdma_cm), run under rocemu-run
	dapl2-utils                  # DAPL's dtest, dtestx and dtestcm over its rdma_cm provider, run under rocemu-run
	libisal-dev                  # hardware-accelerated CRC-32 for the ICRC
	check                        # unit tests
	zlib1g-dev                   # the tests' independent reference CRC
	clang libclang-rt-14-dev     # libFuzzer harnesses (make fuzz, and the short runs in check)
	iproute2                     # network namespaces and veth for the two-host tests
	nftables                     # kernel-level packet loss on a veth in the reliability test
	python3                      # the tests' JSON validation of rocemuctl output
	man-db                       # the install test renders each man page with man -l
	systemd                      # the install test checks the unit with systemd-analyze
	tshark                       # the pcap test decodes the daemon's recordings as Wireshark does
	ethtool                      # the GSO test turns off a veth's UDP segmentation offload
	qemu-system-x86 busybox-static  # make interop: the kernel's rxe in a virtual machine; qemu's RDMA migration test
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	$quiet || echo "install-deps: all ${#packages[@]} packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root (or: sudo $0)" >&2
	exit 1
fi
command -v apt-get >/dev/null ||
	{ echo "install-deps: missing ${missing[*]}, and there is no apt-get (Debian 12 is needed)" >&2; exit 1; }

mkdir -p "$here/build"
log=$here/build/install-deps.log
printf 'install-deps: installing %s (log: %s) ... ' "${missing[*]}" "${log#"$here"/}"
start=$SECONDS
# noninteractive: no question is asked (tshark's debconf one, about capturing as non-root,
# keeps its default); DEBCONF_NOWARNINGS: no "delaying package configuration, since
# apt-utils is not installed" (preconfiguring needs apt-utils, and nothing is asked anyway).
export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
if ! { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } \
	</dev/null >"$log" 2>&1; then
	echo "failed"
	echo "install-deps: apt-get failed; the last lines of $log:" >&2
	tail -n 25 "$log" | sed 's/^/  /' >&2
	exit 1
fi
echo "done in $((SECONDS - start)) s"
