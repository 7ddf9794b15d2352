#!/usr/bin/env bash
# MPI: Debian's Open MPI runs test/mpi_pingpong (two ranks, messages of 1 byte to 4 MiB,
# every byte checked at both ends, then an MPI_Allreduce) with one rank in each of two
# network namespaces, each under rocemu-run on its own daemon, as on two hosts: mpirun
# starts in a and launches its daemon (orted) in b through a launcher that enters b's
# namespace where ssh would log in. Each a row: over UCX (pml ucx, its rc_verbs and
# ud_verbs transports), and over libfabric (pml cm, mtl ofi, the verbs provider's RDM
# endpoints over ofi_rxm). A row passes when every message arrived intact and the ranks'
# traffic crossed the daemons (their RoCE packet counters grew by at least a packet per
# message). Open MPI's openib BTL is not tried: Debian builds it without its rdma_cm
# connection manager, the only one it has for RoCE, whatever the device.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root
plain_pass_only "Open MPI"

RUN=$BUILD/rocemu-run
PROG=$BUILD/test/mpi_pingpong
command -v mpirun >/dev/null || skip "mpirun is missing: scripts/install-deps.sh installs openmpi-bin"
[ -x "$PROG" ] || skip "$PROG is missing: it is built where Open MPI's mpicc is (libopenmpi-dev)"
[ -x "$RUN" ] && [ -f "$BUILD/librocemu-verbs.so" ] || fail "$RUN or librocemu-verbs.so is missing"
T=${MPI_TIMEOUT:-90}
ROUNDS=50
# the messages of a run, both ways: ROUNDS of each of the four small sizes and a tenth as
# many of the two large, each way
MESSAGES=$((2 * (4 * ROUNDS + 2 * ((ROUNDS + 9) / 10))))

topology_up netns

# mpirun's launcher for host b: its namespace and its daemon, where ssh would log in (what
# rocemu-run preloaded into mpirun for a is left behind: b's programs get b's)
cat >"$WORK/launch-b" <<EOF
#!/bin/sh
[ "\$1" = b ] || { echo "launch-b: no host \$1 here" >&2; exit 1; }
shift
exec env -u LD_PRELOAD ${IN_B[*]} "$RUN" -D "$SOCK_B" sh -c "\$*"
EOF
chmod +x "$WORK/launch-b"

# mpi_row NAME MCA...: mpi_pingpong on host a (here) and b, Open MPI's MCA options given
mpi_row() {
	local name=$1 subnet=${ADDR_A%.*}.0/24 out=$WORK/$1.out rc pkts_a pkts_b
	shift
	pkts_a=$(counter a rcvd_pkts) pkts_b=$(counter b rcvd_pkts)
	"${IN_A[@]}" timeout "$T" "$RUN" -D "$SOCK_A" mpirun --allow-run-as-root -np 2 \
		--host "$(uname -n),b" --mca plm_rsh_agent "$WORK/launch-b" \
		--mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet" \
		"$@" "$PROG" "$ROUNDS" >"$out" 2>&1 </dev/null
	rc=$?
	pkts_a=$(($(counter a rcvd_pkts) - pkts_a)) pkts_b=$(($(counter b rcvd_pkts) - pkts_b))
	if [ $rc -eq 0 ] && grep -q '^allreduce: 2 ranks, 0 bytes wrong in all$' "$out" &&
		[ "$pkts_a" -ge "$MESSAGES" ] && [ "$pkts_b" -ge "$MESSAGES" ]; then
		passed "$name: mpi_pingpong, 1 B to 4 MiB intact, $(grep -E '^ +64 bytes' "$out" |
			sed -E 's/.*: +([0-9.]+) us.*/\1/') us a 64 B round trip, $pkts_a and $pkts_b RoCE packets in"
	else
		sed 's/^/  | /' "$out" | grep -v '^  | *$' | tail -n 12
		failed "$name: mpi_pingpong (exit $rc, $pkts_a and $pkts_b RoCE packets in)"
	fi
}

mpi_row "Open MPI over UCX" --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self
mpi_row "Open MPI over libfabric" --mca pml cm --mca mtl ofi -x FI_PROVIDER=verbs

daemons_alive
finish "MPI"
