# Sourced by test/interop.sh and test/guest-bench.sh, after scripts/interop-vm.sh and
# test/checks.sh: the RDMA CM's connection rate inside their guest, rxe beside rocemu.
#   cm_rate_in_guest ADDR     CM_ROUNDS rounds (default 5), ADDR being the guest's own
#                             address on rxe0; one line, passed, or failed when a rate
#                             could not be measured
#   median_of NUMBERS...      their median
# and after the rounds, what the daemon's context switches cost a connection in the guest
# (bench/pump switch-ping), beside rxe's cycle.
# The rate (test/cm_peer: connect, one SEND, disconnect, CM_CYCLES times, one after
# another): on the kernel's rxe, cm_peer on rxe0 connecting to the guest's own address
# (rxe 6.1 serves only the first network namespace, so its two ends cannot sit in two); on
# rocemu the same way, one daemon whose client connects to the daemon's own address
# (test/cm-rate.sh with CM_TO_ITSELF), on which the target is judged; and, for the record,
# two daemons in two namespaces of the guest joined by a veth pair (make check's
# topology), which adds a daemon and a wire crossing that rxe's run does not have. The
# rates and the ratios are shown beside the target (rocemu's at least rxe's), over
# CM_ROUNDS alternated rounds; a rate that could not be measured fails.
CM_CYCLES=${CM_CYCLES:-200}
CM_ROUNDS=${CM_ROUNDS:-5}
cm_rate_of() {
	sed -nE "s/^$CM_CYCLES connections .*: ([0-9]+) per second$/\1/p" <<<"$1"
}
median_of() { # numbers...
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
# cm_rate_round ADDR: rxe, rocemu to itself, two rocemu daemons, one after another; "RXE
# SELF TWO SWITCHES" on success (SWITCHES: the daemon's context switches a connection when
# it served both ends), else the outputs' tails and a nonzero status
cm_rate_round() {
	local addr=$1 port=$((9000 + RANDOM % 1000)) rxe_out self_out rocemu_out rxe self rocemu
	local switches
	# (one connection first, unmeasured, as test/cm-rate.sh makes)
	rxe_out=$(vm_run 150 "P=$BUILD/test/cm_peer
		cycles() {
			timeout 120 \$P cycle-server \$1 \$2 >/tmp/cm-rate.server 2>&1 & s=\$!
			for i in \$(seq 100); do rdma resource show cm_id | grep -q LISTEN && break; sleep 0.1; done
			timeout 120 \$P cycle-client $addr \$1 \$2; rc=\$?
			wait \$s || rc=1; return \$rc
		}
		cycles $port 1 >/dev/null && cycles $((port + 1)) $CM_CYCLES; rc=\$?
		sed 's/^/server: /' /tmp/cm-rate.server; exit \$rc" 2>&1)
	rxe=$(cm_rate_of "$rxe_out")
	self_out=$(vm_run 200 "cd $ROCEMU_ROOT && CM_TO_ITSELF=1 CM_CYCLES=$CM_CYCLES bash test/cm-rate.sh $BUILD" 2>&1)
	self=$(cm_rate_of "$self_out")
	switches=$(sed -nE 's/^daemon a: ([0-9]+) context switches a connection$/\1/p' <<<"$self_out")
	rocemu_out=$(vm_run 200 "cd $ROCEMU_ROOT && CM_CYCLES=$CM_CYCLES bash test/cm-rate.sh $BUILD" 2>&1)
	rocemu=$(cm_rate_of "$rocemu_out")
	grep -h 'ms a cycle' <<<"$rxe_out" | sed 's/^/  rxe0 to itself, /' >&2
	grep -h 'ms a cycle' <<<"$self_out" | sed 's/^/  rocemu to itself, /' >&2
	grep -h 'ms a cycle' <<<"$rocemu_out" | sed 's/^/  rocemu, two namespaces, /' >&2
	if [ -z "$rxe" ] || [ -z "$self" ] || [ -z "$rocemu" ]; then
		tail -n 6 <<<"$rxe_out" | sed 's/^/  rxe   | /' >&2
		tail -n 6 <<<"$self_out" | sed 's/^/  itself| /' >&2
		tail -n 6 <<<"$rocemu_out" | sed 's/^/  rocemu| /' >&2
		echo "${rxe:-?} ${self:-?} ${rocemu:-?}"
		return 1
	fi
	echo "$rxe $self $rocemu ${switches:-?}"
}
# CM_ROUNDS rounds, alternated, as the rates move between rounds more than between the
# devices (rxe's own from 51 to 142 a second in one boot): the target is judged on the
# median of the rounds' ratios, each round's two runs being neighbours in time
cm_rate_in_guest() {
	local addr=$1 r round rxes=() selfs=() twos=() ratios=() two_ratios=() switches=()
	for r in $(seq "$CM_ROUNDS"); do
		round=$(cm_rate_round "$addr") || {
			failed "RDMA CM connection rate in the guest, round $r (rxe, rocemu to itself, two daemons: $round)"
			return
		}
		set -- $round
		rxes+=("$1") selfs+=("$2") twos+=("$3") switches+=("$4")
		ratios+=("$(awk -v a="$2" -v b="$1" 'BEGIN { printf "%.3f", a / b }')")
		two_ratios+=("$(awk -v a="$3" -v b="$1" 'BEGIN { printf "%.3f", a / b }')")
	done
	passed "RDMA CM connections per second in the guest, $CM_CYCLES in a row, $CM_ROUNDS rounds, one device to itself: rocemu $(median_of "${selfs[@]}") (${selfs[*]}), rxe $(median_of "${rxes[@]}") (${rxes[*]}): median of the rounds' ratios $(awk -v m="$(median_of "${ratios[@]}")" 'BEGIN { printf "%.2fx (target >= 1.0: %s)", m, (m >= 1 ? "met" : "missed") }'); two rocemu daemons in two namespaces $(median_of "${twos[@]}") (${twos[*]}), $(awk -v m="$(median_of "${two_ratios[@]}")" 'BEGIN { printf "%.2fx", m }')"
	switch_cost "$(median_of "${switches[@]}")" "$(median_of "${rxes[@]}")"
}

# switch_cost SWITCHES RXE_RATE: what the daemon's runs would cost a connection in this
# guest on one vCPU, beside rxe's whole cycle. There a run of the daemon is a switch into
# its address space and one out; rxe's CM and transport run in kernel threads, which keep
# the address space they find. pump switch-ping gives a switch's price on one CPU: the
# round trip between two processes less the one between two threads, over two. (With a
# vCPU to spare the daemon mostly runs on another one, and each wakeup costs that vCPU's.)
switch_cost() {
	local out threads processes
	out=$(vm_run 60 "$BUILD/bench/pump switch-ping -n 2000" 2>&1)
	threads=$(sed -nE 's/.*"threads_us":([0-9.]+).*/\1/p' <<<"$out")
	processes=$(sed -nE 's/.*"processes_us":([0-9.]+).*/\1/p' <<<"$out")
	if [ -z "$threads" ] || [ -z "$processes" ]; then
		echo "  (no switch-ping figures: $(tail -n 1 <<<"$out"))"
		return
	fi
	echo "  a pipe round trip on one of this guest's vCPUs: $processes us between two processes," \
		"$threads us between two threads; rocemu's daemon switched $1 times a connection" \
		"(median of the rounds, to itself): on one vCPU about $(awk -v n="$1" -v p="$processes" -v t="$threads" -v r="$2" \
		'BEGIN { c = n * (p - t); printf "%.0f us a connection in switches, %.0f%% of rxe'"'"'s cycle", c, c * r / 1e4 }')"
}
