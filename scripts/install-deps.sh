#!/usr/bin/env bash
# Installs what rocemu needs to build, test and run its demo on Debian 12. Idempotent: when
# every package is already installed it changes nothing and does not touch the network.
set -eu

packages=(
	build-essential pkg-config   # compiler, make, library flags
	libpcap-dev                  # the daemon's receive path and the pcap decoder
	libev-dev                    # the daemon's event loop
	libibverbs-dev               # <infiniband/verbs.h>: IBV_ACCESS_*, ibv_wc_status, ibv_mtu
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
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#packages[@]} packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root (or: sudo $0)" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
