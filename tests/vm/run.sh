#!/usr/bin/env bash
# run.sh BUILD LIST - boot the soft-RoCE guest once and run LIST inside.
#
# LIST has a test a line: "NAME TIMEOUT COMMAND...", run from BUILD in the
# guest by guest.sh; each test's output and exit status land in
# BUILD/vm/out/NAME.log and NAME.rc, which result.sh reports to ctest.
# Exits 77, saying why, only where QEMU cannot run at all.
set -euo pipefail

build=$(cd "$1" && pwd)
list=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
here=$(cd "$(dirname "$0")" && pwd)
vm=$build/vm
out=$vm/out

rm -rf "$out"
mkdir -p "$out"
skip() { # every test of the list skips, saying why (result.sh)
	echo "$*" | tee "$out/skipped"
	exit 77
}
qemu=$(command -v qemu-system-x86_64 || true)
[[ -n "$qemu" ]] || skip "run.sh: no qemu-system-x86_64 (apt-get install --no-install-recommends qemu-system-x86)"
bash "$here/image.sh" "$vm/image"

cp "$list" "$out/list"
# What the job needs to know of the host side, read by guest.sh.
{
	echo "build=$build"
	echo "src=$(cd "$here/../.." && pwd)"
	echo "path=$PATH"
} > "$out/env"

# TCG: KVM inside this kind of host hangs at boot (nested virtualization).
timeout "${RMA_VM_TIMEOUT:-900}" "$qemu" -accel tcg,thread=multi -cpu max \
	-smp "${RMA_VM_CPUS:-2}" -m "${RMA_VM_MEM:-4096}" \
	-nographic -no-reboot -nic none \
	-kernel "$vm/image/vmlinuz" -initrd "$vm/image/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 rma_job=$here/guest.sh rma_out=$out" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$out",mount_tag=rmaout,security_model=none,multidevs=remap \
	</dev/null > "$vm/console.log" 2>&1 || rc=$?
if [[ ! -f "$out/done" ]]; then
	echo "run.sh: the guest did not finish its list (qemu rc ${rc:-0}); its console:"
	tail -n 40 "$vm/console.log"
	exit 1
fi
cat "$out/summary"
