#!/usr/bin/env bash
# A virtual machine running the Linux kernel's Soft-RoCE (rdma_rxe), for live interop tests
# against rocemud. Sourced by test/interop.sh; needs root.
#
# The guest is Debian 12's own kernel package, fetched with apt-get download and unpacked
# with dpkg -x under $INTEROP_CACHE (never installed), booted by qemu with a small busybox
# initramfs that loads the modules it needs, mounts this host's / read-only over virtio-9p
# under a tmpfs overlay (so the guest has this host's rdma-core, perftest and builds), adds
# rxe0 on its virtio-net, and then runs the commands the host drops in a shared folder.
# The guest's NIC is a tap device inside a network namespace of the caller's, where
# rocemud serves the tap.
#   vm_prepare                   the kernel, qemu and the initramfs (cached; a first run
#                                downloads)
# VM_SUITE=bookworm-backports: the guests run that suite's kernel (Linux 6.12, whose
# virtio-net can carry UDP GSO frames whole: tx-udp-segmentation) under its qemu (10.0,
# whose tap and virtio-net pass them). Both are fetched through apt with a list of their
# own under $INTEROP_CACHE (the system's sources untouched), checked against Debian's
# archive key, unpacked with dpkg -x and never installed; qemu runs on Debian 12's
# libraries. Unset: Debian 12's own kernel and the installed qemu.
# VM_KERNEL=VERSION (say 6.12.117+deb12-amd64): the package linux-image-VERSION instead of
# the one linux-image-amd64 names, from the same lists (Debian 12's own include
# bookworm-security, which carries its later 6.12 kernels).
# VM_APPEND: more of the guest kernel's command line (say clocksource=tsc tsc=reliable).
# VM_MTU: the guest's eth0 and the host's tap take this MTU (say 9000: jumbo frames, as a
# RoCE network is set up for 4096-byte RDMA MTU, and as make bench's veth has); unset,
# virtio-net's 1500.
#   vm_start NETNS WORK ADDR_HOST ADDR_GUEST [ADDR6_HOST ADDR6_GUEST]
#                                boots the guest; returns when rxe0 is up (or fails).
#                                ADDR_HOST "-": the tap gets no address (a bridge's port)
# Several guests: each with its own VM_TAP, VM_MAC and WORK; VM_PID and VM_WORK name the
# one the other calls talk to (test/two-vms.sh switches them).
#   vm_run SECONDS COMMAND       runs COMMAND (sh) in the guest, prints its output, returns
#                                its status (124 when it outlasts SECONDS)
#   vm_spawn NAME COMMAND        starts COMMAND in the guest in the background;
#                                vm_wait NAME SECONDS waits for it as vm_run does
#   vm_stop                      powers the guest off (killed by pid if it will not)
#   vm_rxe_gid ADDR              the index of rxe0's GID for the guest's address ADDR
set -u

INTEROP_CACHE=${INTEROP_CACHE:-${ROCEMU_ROOT:-.}/build/interop}
VM_TAP=${VM_TAP:-rxetap0}
VM_MAC=${VM_MAC:-52:54:00:12:34:56}
VM_MEM=${VM_MEM:-1024}
VM_CPUS=${VM_CPUS:-1}
VM_BOOT_SECONDS=${VM_BOOT_SECONDS:-180}
VM_SUITE=${VM_SUITE:-}
VM_KERNEL=${VM_KERNEL:-}
VM_MTU=${VM_MTU:-}
VM_QEMU=(qemu-system-x86_64)
VM_PID=
VM_WORK=

# The modules the guest needs; vm_initramfs adds what they depend on, in order.
# rxe asks the crypto API for "crc32" (its ICRC), which is a module here. nf_tables lets a
# rocemud in the guest keep RoCE frames out of the kernel's IP input with its ingress rule,
# as on any Debian VM; it needs libcrc32c, which asks the crypto API for "crc32c" (a soft
# dependency, which vm_add_module does not follow: without crc32c_generic first, libcrc32c
# and then nf_tables fail to load, and nft cannot read the kernel's tables).
VM_WANTED="virtio_pci virtio_net 9pnet_virtio 9p overlay crc32_generic rdma_rxe veth 8021q rdma_ucm
	crc32c_generic nf_tables"

vm_say() { echo "interop-vm: $*" >&2; }

# apt-get or apt-cache (the first argument) on VM_SUITE's own package list, when one is
# chosen; the list is fetched again after a day.
vm_apt() {
	local tool=$1 dir=$INTEROP_CACHE/apt-$VM_SUITE
	local -a opts=(-o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Dir::State::status=/dev/null)
	shift
	[ -n "$VM_SUITE" ] || { "$tool" "$@"; return; }
	if [ -z "$(find "$dir/lists" -name '*Packages*' -mtime -1 2>/dev/null)" ]; then
		mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" &&
			echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(vm_mirror) $VM_SUITE main" \
				>"$dir/sources.list" &&
			apt-get "${opts[@]}" update >/dev/null 2>&1 ||
			{ vm_say "cannot fetch $VM_SUITE's package list"; return 1; }
	fi
	"$tool" "${opts[@]}" "$@"
}

# the Debian mirror the system's own sources name (deb822 or one-line)
vm_mirror() {
	local uri
	uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" && $2 ~ /debian\/?$/ { print $2; exit }')
	[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
	echo "${uri:-http://deb.debian.org/debian}"
}

# vm_unpack PACKAGE DIR [VERSION]: the package's .deb (downloaded into the cache once)
# unpacked in DIR
vm_unpack() {
	local pkg=$1 dir=$2 ver=${3:-} deb
	[ -d "$dir" ] && return 0
	mkdir -p "$INTEROP_CACHE"
	deb=$(cd "$INTEROP_CACHE" && ls "${pkg}_${ver/:/%3a}"*.deb 2>/dev/null | head -n 1)
	if [ -z "$deb" ]; then
		vm_say "downloading $pkg${VM_SUITE:+ from $VM_SUITE} (once)"
		(cd "$INTEROP_CACHE" && vm_apt apt-get download "$pkg${ver:+=$ver}" >/dev/null 2>&1) ||
			{ vm_say "apt-get download $pkg failed"; return 1; }
		deb=$(cd "$INTEROP_CACHE" && ls "${pkg}_${ver/:/%3a}"*.deb | head -n 1)
	fi
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" &&
		dpkg -x "$INTEROP_CACHE/$deb" "$dir.tmp" && mv "$dir.tmp" "$dir"
}

# The kernel package behind linux-image-amd64 (Debian's current 6.1, or VM_SUITE's), or
# VM_KERNEL's: its version in VM_KVER, where it is unpacked in VM_KDIR; 0 when it is there.
vm_kernel_cached() {
	VM_KPKG=${VM_KERNEL:+linux-image-$VM_KERNEL}
	[ -n "$VM_KPKG" ] || VM_KPKG=$(vm_apt apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-/ { print $2; exit }')
	[ -n "$VM_KPKG" ] || { vm_say "apt-cache does not know linux-image-amd64"; return 2; }
	VM_KVER=${VM_KPKG#linux-image-}
	VM_KDIR=$INTEROP_CACHE/kernel-$VM_KVER
	[ -f "$VM_KDIR/boot/vmlinuz-$VM_KVER" ]
}

# That kernel, unpacked (downloaded first when it is not).
vm_kernel() {
	vm_kernel_cached
	case $? in
	0) ;;
	1) vm_unpack "$VM_KPKG" "$VM_KDIR" ;;
	*) return 1 ;;
	esac
}

# VM_SUITE's qemu, unpacked beside the kernel; the binary, its firmware and its modules
# come from its three packages.
vm_qemu() {
	local ver dir p
	[ -n "$VM_SUITE" ] || return 0
	ver=$(vm_apt apt-cache policy qemu-system-x86 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || { vm_say "$VM_SUITE has no qemu-system-x86"; return 1; }
	dir=$INTEROP_CACHE/qemu-${ver//[:~+]/_}
	for p in qemu-system-x86 qemu-system-common qemu-system-data; do
		vm_unpack "$p" "$dir/$p" "$ver" || return 1
	done
	VM_QEMU=("$dir/qemu-system-x86/usr/bin/qemu-system-x86_64" -L "$dir/qemu-system-data/usr/share/qemu")
	"${VM_QEMU[@]}" --version >/dev/null 2>&1 || { vm_say "$VM_SUITE's qemu does not run here"; return 1; }
}

# A module's file, .ko or compressed (.ko.xz, as Debian's kernels from 6.12); nothing for
# a module built into the kernel.
vm_module_file() {
	find "$VM_KDIR/lib/modules/$VM_KVER" \( -name "$1.ko" -o -name "$1.ko.xz" \) | head -n 1
}

vm_builtin() {
	grep -q "/$1\.ko\$" "$VM_KDIR/lib/modules/$VM_KVER/modules.builtin" 2>/dev/null
}

# vm_add_module NAME: NAME after everything it depends on (the .modinfo section's
# depends=, read with objcopy: kmod may not be installed here), into VM_MODULES.
vm_add_module() {
	local f dep
	case " $VM_MODULES " in *" $1 "*) return 0 ;; esac
	f=$(vm_module_file "$1")
	if [ -z "$f" ]; then
		vm_builtin "$1" && return 0
		vm_say "the kernel has no $1.ko"
		return 1
	fi
	for dep in $(vm_modinfo "$f" | tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '); do
		vm_add_module "$dep" || return 1
	done
	VM_MODULES="$VM_MODULES $1"
}

# a module's file uncompressed, on stdout (busybox's insmod takes no .xz)
vm_module_plain() {
	case $1 in *.xz) xz -dc "$1" ;; *) cat "$1" ;; esac
}

# its .modinfo section, read from an uncompressed copy (objcopy wants a file it can seek in)
vm_modinfo() {
	local plain
	plain=$(mktemp) || return 1
	vm_module_plain "$1" >"$plain" && objcopy -O binary --only-section=.modinfo "$plain" /dev/stdout
	rm -f "$plain"
}

vm_initramfs() {
	local out=$INTEROP_CACHE/initramfs-$VM_KVER.cpio.gz root m f
	VM_MODULES=
	for m in $VM_WANTED; do vm_add_module "$m" || return 1; done
	[ -f "$out" ] && [ "$out" -nt "${BASH_SOURCE[0]}" ] && { VM_INITRD=$out; return 0; }
	root=$(mktemp -d)
	mkdir -p "$root"/{bin,dev,proc,sys,mnt/lower,mnt/rw,newroot,modules}
	cp /bin/busybox "$root/bin/busybox"
	for m in $VM_MODULES; do vm_module_plain "$(vm_module_file "$m")" >"$root/modules/$m.ko"; done
	cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(echo $VM_MODULES); do insmod /modules/\$m.ko || echo "interop guest: insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=none hostroot /mnt/lower &&
	mount -t tmpfs tmpfs /mnt/rw && mkdir -p /mnt/rw/upper /mnt/rw/work &&
	mount -t overlay overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work /newroot ||
	{ echo "interop guest: cannot mount the host's root"; poweroff -f; }
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh $ROCEMU_ROOT/scripts/interop-guest.sh
EOF
	chmod 755 "$root/init"
	(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$out.tmp" && mv "$out.tmp" "$out"
	rm -rf "$root"
	VM_INITRD=$out
}

vm_prepare() {
	command -v qemu-system-x86_64 >/dev/null || { vm_say "qemu-system-x86_64 is missing"; return 1; }
	[ -x /bin/busybox ] || { vm_say "/bin/busybox is missing (busybox-static)"; return 1; }
	# make check's two passes prepare at once (a guest in each): one fills the cache, the
	# other waits for it rather than unpacking into the same places
	mkdir -p "$INTEROP_CACHE" && exec {VM_LOCK}>"$INTEROP_CACHE/prepare.lock" &&
		flock "$VM_LOCK" || { vm_say "cannot lock $INTEROP_CACHE"; return 1; }
	vm_kernel && vm_qemu && vm_initramfs
	local rc=$?
	flock -u "$VM_LOCK"
	exec {VM_LOCK}>&-
	return $rc
}

# KVM when it works, else TCG. Working means the probe guest printed the kernel's banner
# within 10 s: qemu's exit status says nothing (a guest given too little memory resets at
# once, under either accelerator, and exits 0), and a /dev/kvm that cannot run this guest,
# as on some paravirtualised cloud VMs, opens fine and then shows nothing at all.
vm_accel() {
	local out
	if [ -w /dev/kvm ]; then
		out=$(timeout 10 "${VM_QEMU[@]}" -accel kvm -cpu host -M q35 -m 256 -nographic \
			-no-reboot -kernel "$VM_KDIR/boot/vmlinuz-$VM_KVER" \
			-append "console=ttyS0 panic=-1 rdinit=/nonexistent" 2>&1 </dev/null | tr -d '\0')
		if grep -aq 'Linux version' <<<"$out"; then
			echo "-accel kvm -cpu host"
			return
		fi
		vm_say "/dev/kvm is there but cannot run the guest (no kernel banner within 10 s): TCG"
	fi
	echo "-accel tcg -cpu max"
}

vm_start() {
	local ns=$1 addr_host=$3 addr_guest=$4 addr6_host=${5:-} addr6_guest=${6:-} accel
	VM_WORK=$2
	mkdir -p "$VM_WORK/vm"
	rm -f "$VM_WORK/vm/"*
	cat >"$VM_WORK/vm/net" <<EOF
ADDR=$addr_guest
ADDR6=$addr6_guest
MTU=$VM_MTU
EOF
	ip netns exec "$ns" ip tuntap add dev "$VM_TAP" mode tap || return 1
	[ "$addr_host" = - ] || ip netns exec "$ns" ip addr add "$addr_host/24" dev "$VM_TAP"
	[ -z "$addr6_host" ] || ip netns exec "$ns" ip addr add "$addr6_host/64" dev "$VM_TAP" nodad
	[ -z "$VM_MTU" ] || ip netns exec "$ns" ip link set "$VM_TAP" mtu "$VM_MTU" || return 1
	ip netns exec "$ns" ip link set "$VM_TAP" up
	accel=${VM_ACCEL:-$(vm_accel)}
	vm_say "booting $VM_KVER ($accel${VM_APPEND:+, with $VM_APPEND}${VM_MTU:+, MTU $VM_MTU}) in $ns"
	ip netns exec "$ns" "${VM_QEMU[@]}" $accel -M q35 -m "$VM_MEM" -smp "$VM_CPUS" -nographic \
		-no-reboot -kernel "$VM_KDIR/boot/vmlinuz-$VM_KVER" -initrd "$VM_INITRD" \
		-append "console=ttyS0 panic=-1 quiet ${VM_APPEND:-}" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs local,path="$VM_WORK/vm",mount_tag=work,security_model=none \
		-netdev tap,id=n0,ifname="$VM_TAP",script=no,downscript=no \
		-device virtio-net-pci,netdev=n0,mac="$VM_MAC" \
		</dev/null >"$VM_WORK/vm-console.log" 2>&1 &
	VM_PID=$!
	for _ in $(seq $((VM_BOOT_SECONDS * 10))); do
		[ -f "$VM_WORK/vm/ready" ] && { vm_say "rxe0 up: $(cat "$VM_WORK/vm/ready")"; return 0; }
		[ -f "$VM_WORK/vm/failed" ] && break
		kill -0 "$VM_PID" 2>/dev/null || break
		sleep 0.1
	done
	vm_say "the guest did not come up; its console:"
	tail -n 30 "$VM_WORK/vm-console.log" >&2
	return 1
}

# (an earlier run of the same name leaves its status and output: gone first, or vm_wait
# would take them for this run's)
vm_spawn() {
	rm -f "$VM_WORK/vm/rc.$1" "$VM_WORK/vm/out.$1"
	printf '%s\n' "$2" >"$VM_WORK/vm/cmd.$1.tmp" && mv "$VM_WORK/vm/cmd.$1.tmp" "$VM_WORK/vm/cmd.$1"
}

vm_wait() {
	local name=$1 seconds=$2
	for _ in $(seq $((seconds * 10))); do
		if [ -f "$VM_WORK/vm/rc.$name" ]; then
			cat "$VM_WORK/vm/out.$name"
			return "$(cat "$VM_WORK/vm/rc.$name")"
		fi
		sleep 0.1
	done
	cat "$VM_WORK/vm/out.$name" 2>/dev/null
	return 124
}

# A name of its own each time, from a subshell ($(vm_run ...)) too.
vm_run() {
	local name=run.$BASHPID.$RANDOM$RANDOM
	vm_spawn "$name" "$2"
	vm_wait "$name" "$1"
}

# rxe keeps a GID for each of the guest's addresses (its IPv6 link-local one among them)
# in an order of its own, so programs are told the index; sysfs shows a GID as eight
# groups of four hex digits. Needs test/daemons.sh's gid_hex.
vm_rxe_gid() {
	local want
	want=$(gid_hex "$1" | tr -d ' ' | sed -E 's/(....)/\1:/g; s/:$//')
	vm_run 30 "cd /sys/class/infiniband/rxe0/ports/1/gids && for g in *; do
		[ \"\$(cat \$g)\" = $want ] && echo \$g && break; done"
}

vm_stop() {
	[ -n "$VM_PID" ] || return 0
	[ -n "$VM_WORK" ] && : >"$VM_WORK/vm/poweroff"
	for _ in $(seq 50); do kill -0 "$VM_PID" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$VM_PID" 2>/dev/null
	wait "$VM_PID" 2>/dev/null
	VM_PID=
}
