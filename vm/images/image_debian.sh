#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# image_debian.sh - build latch's `debian` guest image, for agents that need
# a real distribution: a debootstrap Debian bookworm rootfs (systemd) on a
# qcow2 disk, booted with the same Debian kernel as the default image and a
# small busybox-static initramfs that loads the virtio, block, ext4, net,
# 9p and virtio-serial modules, mounts the virtio disk (vda) and hands over
# to systemd.  In the rootfs:
#   latch-net.service    static network setup from the kernel command line
#                        (latch.ip= latch.gw= latch.ip6= latch.gw6=), the
#                        host address as resolver, and the 9p workspace;
#   latch-agent.service  the static guest agent on virtio-serial, restarted
#                        whenever it exits.
# No modules live in the rootfs: the initramfs loads every one the guest
# needs before systemd starts.
#
#   image_debian.sh [--force] [CACHE_DIR] [AGENT]
#
# CACHE_DIR defaults to /var/lib/latch/images/debian and receives vmlinuz,
# initrd.img, disk.qcow2 and manifest.txt; libvirt.c boots disk.qcow2 as a
# transient vda, so the image itself is never written by a guest.  The
# packages come from $LATCH_DEBIAN_MIRROR (default: the first deb.debian.org
# style URI of this host's apt sources, else http://deb.debian.org/debian);
# downloaded .debs are kept in /var/cache/latch/debootstrap.  An image whose
# outputs still match its manifest is kept unless --force.  Exit codes: 0 ok,
# 1 failed, 2 usage.  Slow (minutes): not part of `make check`.
set -euo pipefail
umask 022
export LC_ALL=C

MODULES=(virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	 virtio_blk crc32c_generic ext4
	 failover net_failover virtio_net
	 netfs fscache 9pnet 9pnet_virtio 9p
	 virtio_console)
PKGS=systemd,systemd-sysv,udev,kmod,iproute2,iputils-ping,netcat-openbsd,procps,ca-certificates
SUITE=${LATCH_DEBIAN_SUITE:-bookworm}
META_PKG=${LATCH_KERNEL_META:-linux-image-amd64}
BUSYBOX=${LATCH_BUSYBOX:-/bin/busybox}
DEBCACHE=${LATCH_DEBOOTSTRAP_CACHE:-/var/cache/latch/debootstrap}
DISK_SIZE=${LATCH_DEBIAN_DISK:-2G}
FORMAT=1

say() { printf 'latch: %s\n' "$*"; }
die() { printf 'latch: %s\n' "$*" >&2; exit 1; }
usage() { printf 'usage: image_debian.sh [--force] [CACHE_DIR] [AGENT]\n' >&2; exit 2; }

force=0
while [ $# -gt 0 ]; do
	case $1 in
	-f|--force) force=1; shift ;;
	-h|--help) usage ;;
	--) shift; break ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -le 2 ] || usage
CACHE=${1:-/var/lib/latch/images/debian}
AGENT=${2:-${LATCH_AGENT:-}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "$AGENT" ]; then
	for c in "$HERE/../../build/vm/latch-agent" /usr/lib/latch/latch-agent /usr/local/lib/latch/latch-agent; do
		[ -x "$c" ] && { AGENT=$c; break; }
	done
fi

[ "$(id -u)" = 0 ] || die "image build needs root (debootstrap, mknod)"
for t in debootstrap qemu-img mkfs.ext4 apt-get apt-cache dpkg-deb cpio gzip modinfo sha256sum flock; do
	command -v "$t" >/dev/null ||
		die "$t not found; apt-get install -y debootstrap qemu-utils e2fsprogs cpio gzip kmod"
done
[ -x "$BUSYBOX" ] || die "$BUSYBOX not found; apt-get install -y busybox-static"
[ -n "$AGENT" ] && [ -x "$AGENT" ] ||
	die "guest agent not found; build it with 'make build/vm/latch-agent' or pass its path"

if [ -z "${LATCH_DEBIAN_MIRROR:-}" ]; then
	LATCH_DEBIAN_MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p; s/^deb  *\(\[[^]]*\] *\)\{0,1\}\(http[^ ]*\/debian\)\/* .*/\2/p' \
		/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1 || true)
	LATCH_DEBIAN_MIRROR=${LATCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

mkdir -p "$CACHE" "$DEBCACHE"
exec 9>"$CACHE/.lock"
flock 9

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ "$force" = 0 ] && [ -f "$CACHE/manifest.txt" ] &&
	(cd "$CACHE" && sed -n 's/^sha256 \([0-9a-f]*\) \(.*\)$/\1  \2/p' manifest.txt |
		sha256sum --quiet -c - >/dev/null 2>&1); then
	say "image in $CACHE is current ($(sed -n 's/^kernel_release //p' "$CACHE/manifest.txt"), built $(sed -n 's/^built //p' "$CACHE/manifest.txt")); --force rebuilds"
	exit 0
fi

kpkg=$(apt-cache depends "$META_PKG" 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1 || true)
[ -n "$kpkg" ] || die "apt-cache can't resolve $META_PKG to a kernel package; run apt-get update"
kver=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null | sed -n 's/^Version: //p' | head -n1 || true)

TMP=$(mktemp -d "$CACHE/.build.XXXXXX")
cleanup() {
	# debootstrap mounts proc and sys in the target while it works
	for m in proc sys dev/pts dev; do
		mountpoint -q "$TMP/rootfs/$m" 2>/dev/null && umount -l "$TMP/rootfs/$m"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- the kernel and the initramfs ----------------------------------------------
t0=$SECONDS
say "kernel: $kpkg $kver (from $META_PKG)"
(cd "$TMP" && apt-get download -q -o APT::Sandbox::User=root "$kpkg=$kver" >/dev/null) ||
	die "apt-get download $kpkg=$kver failed"
deb=$(ls "$TMP"/*.deb)
dpkg-deb -x "$deb" "$TMP/kernel"
krel=$(find "$TMP/kernel/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n1)
[ -n "$krel" ] && [ -f "$TMP/kernel/boot/vmlinuz-$krel" ] || die "$kpkg has no vmlinuz and modules for one release"
KMOD=$TMP/kernel/lib/modules/$krel

IR=$TMP/initrd
mkdir -p "$IR"/{bin,sbin,etc,proc,sys,dev,newroot,usr/bin,usr/sbin,lib/modules/"$krel"}
declare -A kofile builtin state
while IFS= read -r f; do
	n=${f##*/}; n=${n%.ko*}; n=${n//-/_}
	kofile[$n]=$f
done < <(find "$KMOD/kernel" -type f \( -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz' \))
if [ -f "$KMOD/modules.builtin" ]; then
	while IFS= read -r f; do
		n=${f##*/}; n=${n%.ko}; builtin[${n//-/_}]=1
	done < "$KMOD/modules.builtin"
fi
unpack_ko() {
	case $1 in
	*.ko.xz) xz -dc "$1" > "$2" ;;
	*.ko.zst) zstd -qdc "$1" > "$2" ;;
	*.ko.gz) gzip -dc "$1" > "$2" ;;
	*) cp "$1" "$2" ;;
	esac
}
order=()
resolve() {
	local m=${1//-/_} d deps
	[ -z "${state[$m]:-}" ] || return 0
	state[$m]=seen
	[ -z "${builtin[$m]:-}" ] || return 0
	[ -n "${kofile[$m]:-}" ] || return 0
	unpack_ko "${kofile[$m]}" "$IR/lib/modules/$krel/$m.ko"
	deps=$(modinfo -F depends "$IR/lib/modules/$krel/$m.ko")
	for d in ${deps//,/ }; do
		resolve "$d"
	done
	order+=("$m")
}
for m in "${MODULES[@]}"; do
	resolve "$m"
done
printf '%s\n' "${order[@]}" > "$IR/lib/modules/$krel/latch.order"
say "initramfs modules: ${order[*]}"
cp "$BUSYBOX" "$IR/bin/busybox"
"$BUSYBOX" --list-full | while IFS= read -r a; do
	[ "$a" = bin/busybox ] || [ -e "$IR/$a" ] || ln -s /bin/busybox "$IR/$a"
done
mknod -m 0600 "$IR/dev/console" c 5 1 2>/dev/null || true
cat > "$IR/init" <<'EOF'
#!/bin/sh
# latch debian guest, stage 1: modules, then the virtio disk as root, then systemd.
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
rel=$(uname -r)
while read -r m; do
	insmod "/lib/modules/$rel/$m.ko" 2>/dev/null || echo "latch-init: insmod $m failed"
done < "/lib/modules/$rel/latch.order"
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if ! mount -t ext4 -o rw /dev/vda /newroot; then
	echo "latch-init: cannot mount /dev/vda; powering off"
	poweroff -f
fi
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /sbin/init
EOF
chmod 0755 "$IR/init"
find "$IR" -exec touch -h -d @0 {} +
(cd "$IR" && find . -mindepth 1 -print0 | sort -z |
	cpio --null --create --format=newc --owner=0:0 --reproducible --quiet) | gzip -9n > "$TMP/initrd.img"
cp "$TMP/kernel/boot/vmlinuz-$krel" "$TMP/vmlinuz"
say "kernel and initramfs in $((SECONDS - t0)) s"

# --- the rootfs ---------------------------------------------------------------------
t1=$SECONDS
R=$TMP/rootfs
say "debootstrap $SUITE from $LATCH_DEBIAN_MIRROR (packages cached in $DEBCACHE)"
debootstrap --variant=minbase --cache-dir="$DEBCACHE" --include="$PKGS" "$SUITE" "$R" "$LATCH_DEBIAN_MIRROR" \
	> "$TMP/debootstrap.log" 2>&1 || {
	tail -n 20 "$TMP/debootstrap.log" >&2
	die "debootstrap $SUITE from $LATCH_DEBIAN_MIRROR failed (log above)"
}
say "debootstrap in $((SECONDS - t1)) s"

echo latch > "$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 latch\n::1 localhost\n' > "$R/etc/hosts"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' > "$R/etc/fstab"
mkdir -p "$R/workspace" "$R/var/lib/agent-state"
install -m 0755 "$AGENT" "$R/usr/local/sbin/latch-agent"

cat > "$R/usr/local/sbin/latch-net" <<'EOF'
#!/bin/sh
# latch debian guest: static network from the kernel command line, the host
# address as resolver, and the 9p workspace when the host shares one.
ip= gw= ip6= gw6=
for arg in $(cat /proc/cmdline); do
	case $arg in
	latch.ip=*) ip=${arg#*=} ;;
	latch.gw=*) gw=${arg#*=} ;;
	latch.ip6=*) ip6=${arg#*=} ;;
	latch.gw6=*) gw6=${arg#*=} ;;
	esac
done
ip link set lo up
dev= i=0
while [ -z "$dev" ] && [ $i -lt 100 ]; do
	for d in /sys/class/net/*; do
		[ "$(cat "$d/type" 2>/dev/null)" = 1 ] && { dev=${d##*/}; break; }
	done
	[ -n "$dev" ] || sleep 0.1
	i=$((i + 1))
done
if [ -n "$dev" ]; then
	for k in accept_ra autoconf accept_dad; do
		echo 0 > "/proc/sys/net/ipv6/conf/$dev/$k" 2>/dev/null
	done
	ip link set "$dev" up
	[ -z "$ip" ] || ip addr add "$ip" dev "$dev"
	[ -z "$gw" ] || ip route add default via "$gw" dev "$dev"
	[ -z "$ip6" ] || ip -6 addr add "$ip6" dev "$dev" nodad
	[ -z "$gw6" ] || ip -6 route add default via "$gw6" dev "$dev"
	{ [ -z "$gw" ] || echo "nameserver $gw"; [ -z "$gw6" ] || echo "nameserver $gw6"; } > /etc/resolv.conf
	echo "latch-net: $dev ${ip:-no v4} via ${gw:--} ${ip6:-no v6} via ${gw6:--}"
fi
for t in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
	[ -f "$t" ] || continue
	if [ "$(tr -d '\0\n' < "$t")" = workspace ]; then
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,nosuid,nodev workspace /workspace
	fi
done
exit 0
EOF
chmod 0755 "$R/usr/local/sbin/latch-net"

cat > "$R/etc/systemd/system/latch-net.service" <<'EOF'
[Unit]
Description=latch: static network from the kernel command line, workspace
DefaultDependencies=no
After=systemd-udevd.service local-fs.target
Before=network.target latch-agent.service
Wants=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/latch-net

[Install]
WantedBy=multi-user.target
EOF
cat > "$R/etc/systemd/system/latch-agent.service" <<'EOF'
[Unit]
Description=latch guest agent (virtio-serial org.latch.agent)
After=latch-net.service

[Service]
ExecStart=/usr/local/sbin/latch-agent
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
ln -sf ../latch-net.service "$R/etc/systemd/system/multi-user.target.wants/latch-net.service"
ln -sf ../latch-agent.service "$R/etc/systemd/system/multi-user.target.wants/latch-agent.service"
# nothing in the guest waits for a network manager or a clock sync
for u in apt-daily.timer apt-daily-upgrade.timer systemd-networkd-wait-online.service \
	 systemd-timesyncd.service e2scrub_reap.service; do
	ln -sf /dev/null "$R/etc/systemd/system/$u"
done
rm -f "$R/etc/machine-id" "$R/var/lib/dbus/machine-id"
: > "$R/etc/machine-id"
passwd -R "$R" -l root >/dev/null 2>&1 || true
rm -rf "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"* 2>/dev/null || true

# --- the disk ---------------------------------------------------------------------
t2=$SECONDS
mkfs.ext4 -q -F -L latch-root -d "$R" "$TMP/disk.raw" "$DISK_SIZE" >/dev/null
qemu-img convert -q -O qcow2 "$TMP/disk.raw" "$TMP/disk.qcow2"
rm -f "$TMP/disk.raw"
say "ext4 on qcow2 in $((SECONDS - t2)) s: $(du -k "$TMP/disk.qcow2" | cut -f1) KiB used of $DISK_SIZE"

{
	printf '# latch debian guest image; written by vm/image_debian.sh\n'
	printf '# inputs\n'
	printf 'format %s\n' "$FORMAT"
	printf 'recipe %s\n' "$(sha "${BASH_SOURCE[0]}")"
	printf 'kernel_pkg %s %s\n' "$kpkg" "$kver"
	printf 'suite %s %s\n' "$SUITE" "$LATCH_DEBIAN_MIRROR"
	printf 'packages %s\n' "$PKGS"
	printf 'busybox %s\n' "$(sha "$BUSYBOX")"
	printf 'agent %s\n' "$(sha "$AGENT")"
	printf '# outputs\n'
	printf 'kernel_release %s\n' "$krel"
	printf 'debian_version %s\n' "$(cat "$R/etc/debian_version")"
	printf 'modules %s\n' "${order[*]}"
	printf 'sha256 %s vmlinuz\n' "$(sha "$TMP/vmlinuz")"
	printf 'sha256 %s initrd.img\n' "$(sha "$TMP/initrd.img")"
	printf 'sha256 %s disk.qcow2\n' "$(sha "$TMP/disk.qcow2")"
	printf 'built %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$TMP/manifest.txt"

mv -f "$TMP/vmlinuz" "$CACHE/vmlinuz"
mv -f "$TMP/initrd.img" "$CACHE/initrd.img"
mv -f "$TMP/disk.qcow2" "$CACHE/disk.qcow2"
mv -f "$TMP/manifest.txt" "$CACHE/manifest.txt"
say "image in $CACHE: $krel, debian $(sed -n 's/^debian_version //p' "$CACHE/manifest.txt"), in $((SECONDS - t0)) s"
