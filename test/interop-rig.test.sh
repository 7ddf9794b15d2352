#!/usr/bin/env bash
# The VM rig's module list (scripts/interop-vm.sh), without booting anything: a kernel tree
# made here of small ELF objects whose .modinfo names their dependencies, some compressed
# as Debian's 6.12 ships them (.ko.xz), one built in (modules.builtin). Checked:
# - a module comes after everything it depends on, each once, built-in ones left out;
# - a compressed module's dependencies are read and its file comes out as the original;
# - a module the kernel has neither as a file nor built in is refused, by name;
# - the kernel package is linux-image-amd64's, or VM_KERNEL's when set.
set -u
source "$(dirname "$0")/daemons.sh"
source "$(dirname "$0")/checks.sh"
source "$ROCEMU_ROOT/scripts/interop-vm.sh"
for p in cc objcopy xz; do
	command -v "$p" >/dev/null || skip "$p is missing"
done
# temporary files in a directory of this run's own: make check runs this test in both
# passes at once, and each looks for what the rig left behind
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"

VM_KVER=6.99.0-test
VM_KDIR=$WORK/kernel
mods=$VM_KDIR/lib/modules/$VM_KVER
mkdir -p "$mods/kernel/net" "$mods/kernel/drivers"
echo 'int rig_test_symbol;' >"$WORK/empty.c"
cc -c -o "$WORK/empty.o" "$WORK/empty.c" || fail "cannot compile an object"

# module NAME DEPENDS [xz]: NAME.ko under the tree, its .modinfo saying depends=DEPENDS
module() {
	local f=$mods/kernel/net/$1.ko
	printf 'license=GPL\0depends=%s\0name=%s\0' "$2" "$1" >"$WORK/$1.modinfo"
	# allocated, as a module's is: objcopy -O binary copies no other section
	objcopy --add-section .modinfo="$WORK/$1.modinfo" \
		--set-section-flags .modinfo=alloc,contents,readonly "$WORK/empty.o" "$f" ||
		fail "objcopy cannot make $1.ko"
	[ "${3:-}" = xz ] && { cp "$f" "$WORK/$1.plain"; xz "$f"; }
	return 0
}
module rdma_rxe ib_core,udp_tunnel,virtio_pci xz
module ib_core ""
module udp_tunnel ib_core xz
echo "kernel/drivers/virtio/virtio_pci.ko" >"$mods/modules.builtin"

VM_MODULES=
if vm_add_module rdma_rxe 2>"$WORK/err"; then
	[ "$VM_MODULES" = " ib_core udp_tunnel rdma_rxe" ] &&
		passed "dependencies first, each once, the built-in virtio_pci left out:$VM_MODULES" ||
		failed "the order was '$VM_MODULES', not ' ib_core udp_tunnel rdma_rxe'"
else
	failed "vm_add_module rdma_rxe failed: $(cat "$WORK/err")"
fi

f=$(vm_module_file rdma_rxe)
[ "$f" = "$mods/kernel/net/rdma_rxe.ko.xz" ] && vm_module_plain "$f" | cmp -s - "$WORK/rdma_rxe.plain" &&
	passed "a compressed module is found and comes out as its original" ||
	failed "rdma_rxe.ko.xz: found '$f', or it did not decompress to the original"
[ -z "$(find "$TMPDIR" -maxdepth 1 -newer "$WORK/empty.o" -name 'tmp.*' -type f 2>/dev/null |
	xargs -r grep -l rig_test_symbol 2>/dev/null)" ] &&
	passed "reading a compressed module's dependencies leaves no temporary file" ||
	failed "a decompressed module was left in $TMPDIR"

VM_MODULES=
module needs_ghost ghost_driver
if vm_add_module needs_ghost 2>"$WORK/err"; then
	failed "a module depending on one the kernel lacks was taken: $VM_MODULES"
else
	grep -q "the kernel has no ghost_driver.ko" "$WORK/err" &&
		passed "a missing dependency is refused by name: $(cat "$WORK/err")" ||
		failed "a missing dependency was refused without its name: $(cat "$WORK/err")"
fi
# Which kernel package vm_kernel unpacks: the one linux-image-amd64 names, or VM_KERNEL's
# (apt and the unpacking stood in for: nothing is downloaded)
vm_apt() { printf 'linux-image-amd64\n  Depends: linux-image-6.1.0-99-amd64\n'; }
vm_unpack() { UNPACKED=$1; mkdir -p "$2"; }
kernel_choice() { # VM_KERNEL: prints the package unpacked and VM_KVER
	UNPACKED=
	VM_KERNEL=$1 INTEROP_CACHE=$WORK/cache vm_kernel && echo "$UNPACKED $VM_KVER"
}
[ "$(kernel_choice "")" = "linux-image-6.1.0-99-amd64 6.1.0-99-amd64" ] &&
	passed "without VM_KERNEL, the kernel linux-image-amd64 names" ||
	failed "without VM_KERNEL: $(kernel_choice "")"
[ "$(kernel_choice 6.12.117+deb12-amd64)" = \
	"linux-image-6.12.117+deb12-amd64 6.12.117+deb12-amd64" ] &&
	passed "VM_KERNEL=6.12.117+deb12-amd64: linux-image-6.12.117+deb12-amd64" ||
	failed "VM_KERNEL=6.12.117+deb12-amd64: $(kernel_choice 6.12.117+deb12-amd64)"
finish "interop rig"
