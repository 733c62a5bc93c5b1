#!/usr/bin/env bash
# image.sh DIR - the guest's kernel and initramfs, built into DIR (cached).
#
# The kernel and its modules come from Debian's own linux-image package,
# downloaded and unpacked here, never installed.  The initramfs is
# busybox-static, the modules soft-RoCE and the 9p root need, and init.
# Prints nothing on a cache hit; writes DIR/vmlinuz and DIR/initrd.gz.
set -euo pipefail

dir=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"

# The kernel Debian's metapackage names today, unless pinned.
ver=${RMA_VM_KERNEL:-$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1)}
[[ -n "$ver" ]] || { echo "image.sh: no linux-image-*-amd64 in apt's lists (apt-get update?)" >&2; exit 1; }

stamp="$ver $(sha1sum "$here/init" "$0" | sha1sum | cut -c1-12)"
if [[ -f "$dir/stamp" && "$(cat "$dir/stamp")" == "$stamp" &&
      -f "$dir/vmlinuz" && -f "$dir/initrd.gz" ]]; then
	exit 0
fi

echo "image.sh: building the guest image for linux $ver in $dir"
work=$dir/work
rm -rf "$work"
mkdir -p "$work/deb" "$work/root"
deb=$(ls "$dir"/linux-image-"$ver"_*.deb 2>/dev/null | head -1 || true)
if [[ -z "$deb" ]]; then
	(cd "$dir" && apt-get download "linux-image-$ver" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	deb=$(ls "$dir"/linux-image-"$ver"_*.deb 2>/dev/null | head -1 || true)
	[[ -n "$deb" ]] || { echo "image.sh: apt-get download linux-image-$ver failed" >&2; exit 1; }
fi
dpkg-deb -x "$deb" "$work/deb"
mods=$work/deb/lib/modules/$ver
depmod -b "$work/deb" "$ver"

# Modules in load order: each after what modules.dep says it needs.
want=(crc32_generic rdma_rxe rdma_ucm virtio_pci 9pnet_virtio 9p veth vrf overlay)
declare -A seen=()
order=()
add() { # add REL-PATH: its dependencies first, then itself
	local rel=$1 deps d
	[[ -n "${seen[$rel]:-}" ]] && return
	seen[$rel]=1
	deps=$(grep -E "^$rel:" "$mods/modules.dep" | cut -d: -f2-)
	for d in $deps; do add "$d"; done
	order+=("$rel")
}
for m in "${want[@]}"; do
	rel=$(grep -oE "^[^:]*/$m\.ko(\.xz)?:" "$mods/modules.dep" | head -1 | tr -d :)
	[[ -n "$rel" ]] || { echo "image.sh: module $m not in linux $ver" >&2; exit 1; }
	add "$rel"
done

r=$work/root
mkdir -p "$r"/{bin,dev,proc,sys,mnt,modules,tmp}
cp /bin/busybox "$r/bin/busybox"
for a in sh mount umount mkdir insmod chroot cat echo sleep poweroff switch_root ls; do
	ln -s busybox "$r/bin/$a"
done
: > "$r/modules/order"
for rel in "${order[@]}"; do
	f=$(basename "$rel")
	case $f in
	*.xz) xz -dc "$mods/$rel" > "$r/modules/${f%.xz}"; f=${f%.xz} ;;
	*) cp "$mods/$rel" "$r/modules/$f" ;;
	esac
	echo "$f" >> "$r/modules/order"
done
install -m 755 "$here/init" "$r/init"
(cd "$r" && find . | cpio -o -H newc --quiet) | gzip -1 > "$dir/initrd.gz"
cp "$work/deb/boot/vmlinuz-$ver" "$dir/vmlinuz"
rm -rf "$work"
echo "$stamp" > "$dir/stamp"
