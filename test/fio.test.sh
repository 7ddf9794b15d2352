#!/usr/bin/env bash
# fio: Debian's fio (3.33) and its rdma engine under rocemu-run between two daemons in two
# network namespaces, a row per verb: RDMA WRITE and RDMA READ of the server's buffers,
# 64 KiB blocks four at a time over rdma_cm. Each row passes when
# both ends exit 0 with no error, the client moved all its bytes, and the daemons carried
# at least a packet per block. fio's rdma server is the side with rw=read and takes no
# bindname (3.33 reads one as an address byte); its verify option does not apply to this
# engine's writes (the server never reads them back), so the rows check what moved.
# In the sanitizer build, rocemu-run loads the sanitized layer (and its runtime) into them.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
require_root
plain_pass_only "fio"

needs_programs fio fio
unset ROCEMU_DEBUG

topology_up netns

# await_cm_listener PORT PID: until daemon b lists an rdma_cm listener on TCP port PORT
# (service ID 0x0106 then the port) or PID ends
await_cm_listener() {
	local service
	service=$(printf 'service_id 0x000000000106%04x' "$1")
	for _ in $(seq 200); do
		"$BUILD/rocemuctl" -s "$SOCK_B" cm 2>/dev/null | grep 'state LISTEN' | grep -q "$service" ||
			! kill -0 "$2" 2>/dev/null && return
		sleep 0.05
	done
}

SIZE_MIB=32
BLOCK_KIB=64
# row VERB: one fio server and client pair, a fresh port each
row() {
	local verb=$1 port=$((19700 + RANDOM % 200)) server rc_c rc_s sent_before sent
	local common=(--ioengine=rdma --port="$port" --bs="${BLOCK_KIB}k" --size="${SIZE_MIB}m"
		      --iodepth=4 --output-format=terse --terse-version=3)
	sent_before=$(counter a sent_pkts)
	# (fio takes an engine's options after --ioengine; a job stuck at the end is waited
	# for 300 s after SIGTERM, so a stuck one is killed)
	"${IN_B[@]}" timeout -k 5 60 "$RUN" -D "$SOCK_B" fio --name=server --rw=read \
		"${common[@]}" >"$WORK/$verb.server" 2>&1 </dev/null &
	server=$!
	PIDS+=($server)
	await_cm_listener "$port" "$server"
	"${IN_A[@]}" timeout -k 5 60 "$RUN" -D "$SOCK_A" fio --name=client --rw=write \
		"${common[@]}" --verb="$verb" --hostname="$ADDR_B" >"$WORK/$verb.client" 2>&1 </dev/null
	rc_c=$?
	wait "$server"
	rc_s=$?
	sent=$(($(counter a sent_pkts) - sent_before))
	# terse v3: field 5 is the job's error, 47 the KiB written, 48 its KiB/s
	local fields err kib bw
	fields=$(grep -E '^3;' "$WORK/$verb.client" | tail -n 1)
	err=$(cut -d';' -f5 <<<"$fields") kib=$(cut -d';' -f47 <<<"$fields")
	bw=$(cut -d';' -f48 <<<"$fields")
	if [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] && [ "$err" = 0 ] &&
		[ "$kib" = $((SIZE_MIB * 1024)) ] && [ "$sent" -ge $((SIZE_MIB * 1024 / BLOCK_KIB)) ] &&
		! grep -qiE 'fio: .*(fail|error|status)' "$WORK/$verb.client" "$WORK/$verb.server"; then
		passed "fio rdma verb=$verb: $kib KiB in ${BLOCK_KIB} KiB blocks, $bw KiB/s; daemon a sent $sent packets"
	else
		sed 's/^/  | client: /' "$WORK/$verb.client" | tail -n 5
		sed 's/^/  | server: /' "$WORK/$verb.server" | tail -n 5
		failed "fio rdma verb=$verb (client exit $rc_c, server exit $rc_s, error '$err', $kib KiB, $sent packets from a)"
	fi
}

row write
row read
# verb=send is not a row: fio 3.33's client may SEND before its server has posted the
# receives, and its rnr_retry of 0 ends the job with IBV_WC_RNR_RETRY_EXC_ERR (seen once in
# a CI run; the race is fio's, whatever the device)

daemons_alive
finish "fio"
