#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# image.sh - build latch's default guest image from Debian packages only:
# the Debian kernel that linux-image-amd64 points at, and a busybox-static
# initramfs that loads the virtio, net, 9p and virtio-serial modules, takes
# its static network setup from the kernel command line, mounts the 9p
# workspace, and runs the guest agent (/sbin/latch-agent) under busybox init.
#
#   image.sh [--force] [CACHE_DIR] [AGENT]
#
# CACHE_DIR defaults to /var/lib/latch/images/default and receives vmlinuz,
# initrd.img and manifest.txt.  AGENT is the static guest agent binary
# (make build/vm/latch-agent); $LATCH_AGENT or the usual places are tried
# when it is not given.  `latch image build` runs this as root.
#
# The manifest records every input (this recipe, the kernel package and its
# version, busybox, the agent) and the sha256 of every output.  When the
# inputs are unchanged and the outputs still match, nothing is rebuilt, so
# `latch up` can call this every time.  Exit codes: 0 ok, 1 failed, 2 usage.
#
# latch-rawsend (vm/guest_rawsend.c, static), found beside the agent or at
# $LATCH_RAWSEND, goes in too: the guest attack selftest sends crafted frames
# with it.  An image without it still boots; those attacks then fail loudly.
set -euo pipefail
umask 022
export LC_ALL=C

# In load order as the brief gives it; dependencies named by modinfo are
# put before their users whatever this order says (virtio needs virtio_ring).
MODULES=(virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	 failover net_failover virtio_net
	 netfs fscache 9pnet 9pnet_virtio 9p
	 virtio_console)
META_PKG=${LATCH_KERNEL_META:-linux-image-amd64}
BUSYBOX=${LATCH_BUSYBOX:-/bin/busybox}
FORMAT=1

say() { printf 'latch: %s\n' "$*"; }
die() { printf 'latch: %s\n' "$*" >&2; exit 1; }
usage() { printf 'usage: image.sh [--force] [CACHE_DIR] [AGENT]\n' >&2; exit 2; }

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
CACHE=${1:-/var/lib/latch/images/default}
AGENT=${2:-${LATCH_AGENT:-}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "$AGENT" ]; then
	for c in "$HERE/../../build/vm/latch-agent" /usr/lib/latch/latch-agent /usr/local/lib/latch/latch-agent; do
		[ -x "$c" ] && { AGENT=$c; break; }
	done
fi

[ "$(id -u)" = 0 ] || die "image build needs root (dpkg -x keeps ownership, mknod for /dev/console)"
for t in apt-get apt-cache dpkg-deb cpio gzip modinfo sha256sum flock; do
	command -v "$t" >/dev/null || die "$t not found; apt-get install -y apt dpkg cpio gzip kmod coreutils util-linux"
done
[ -x "$BUSYBOX" ] || die "$BUSYBOX not found; apt-get install -y busybox-static"
RAWSEND=${LATCH_RAWSEND:-}
if [ -z "$RAWSEND" ] && [ -n "$AGENT" ]; then
	RAWSEND=$(dirname "$AGENT")/latch-rawsend
fi
[ -x "$RAWSEND" ] || RAWSEND=
if [ -z "$AGENT" ] || [ ! -x "$AGENT" ]; then
	die "guest agent not found; build it with 'make build/vm/latch-agent' or pass its path"
fi
# A dynamic busybox or agent would die in the initramfs, which has no libc.
for b in "$BUSYBOX" "$AGENT" $RAWSEND; do
	if command -v readelf >/dev/null && readelf -l "$b" 2>/dev/null | grep -q INTERP; then
		die "$b is dynamically linked; the initramfs needs static binaries (busybox-static, gcc -static)"
	fi
done

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # two `latch up`s at once build once, and never read half an image

# --- inputs -------------------------------------------------------------------

sha() { sha256sum "$1" | cut -d' ' -f1; }

# The kernel the metapackage depends on, and that package's candidate version.
kpkg=$(apt-cache depends "$META_PKG" 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1 || true)
kver=""
[ -n "$kpkg" ] && kver=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null |
	sed -n 's/^Version: //p' | head -n1 || true)

inputs() {
	printf 'format %s\n' "$FORMAT"
	printf 'recipe %s\n' "$(sha "${BASH_SOURCE[0]}")"
	printf 'kernel_pkg %s %s\n' "$kpkg" "$kver"
	printf 'busybox %s\n' "$(sha "$BUSYBOX")"
	printf 'agent %s\n' "$(sha "$AGENT")"
	[ -z "$RAWSEND" ] || printf 'rawsend %s\n' "$(sha "$RAWSEND")"
}

current() {
	local m=$CACHE/manifest.txt
	[ -f "$m" ] || return 1
	# Outputs as recorded; then inputs, unless apt can't tell us (offline).
	(cd "$CACHE" && sed -n 's/^sha256 \([0-9a-f]*\) \(.*\)$/\1  \2/p' manifest.txt |
		sha256sum --quiet -c - >/dev/null 2>&1) || return 1
	if [ -z "$kver" ]; then
		say "can't resolve $META_PKG with apt-cache; keeping the cached image"
		return 0
	fi
	diff -q <(inputs) <(sed -n '/^# inputs/,/^# outputs/p' "$m" | grep -v '^#') >/dev/null
}

if [ "$force" = 0 ] && current; then
	say "image in $CACHE is current ($(sed -n 's/^kernel_release //p' "$CACHE/manifest.txt"))"
	exit 0
fi
[ -n "$kver" ] || die "apt-cache can't resolve $META_PKG to a kernel package; run apt-get update"

# --- build --------------------------------------------------------------------

TMP=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
say "kernel: $kpkg $kver (from $META_PKG)"
# apt's sandbox user can't write into our root-only temp dir; the download
# is still checked against the signed index.
(cd "$TMP" && apt-get download -q -o APT::Sandbox::User=root "$kpkg=$kver" >/dev/null) ||
	die "apt-get download $kpkg=$kver failed"
deb=$(ls "$TMP"/*.deb)
dpkg-deb -x "$deb" "$TMP/kernel"
krel=$(find "$TMP/kernel/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n1)
if [ -z "$krel" ] || [ ! -f "$TMP/kernel/boot/vmlinuz-$krel" ]; then
	die "$kpkg has no vmlinuz and modules for one release"
fi
KMOD=$TMP/kernel/lib/modules/$krel

ROOT=$TMP/root
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,workspace,usr/bin,usr/sbin,lib/modules/"$krel"}
chmod 1777 "$ROOT/tmp"
chmod 0700 "$ROOT/root"

# Module index: name (with - and _ treated alike, as the kernel does) -> file.
declare -A kofile builtin
while IFS= read -r f; do
	n=${f##*/}; n=${n%.ko*}; n=${n//-/_}
	kofile[$n]=$f
done < <(find "$KMOD/kernel" -type f \( -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz' \))
if [ -f "$KMOD/modules.builtin" ]; then
	while IFS= read -r f; do
		n=${f##*/}; n=${n%.ko}; builtin[${n//-/_}]=1
	done < "$KMOD/modules.builtin"
fi

# busybox's insmod takes plain .ko files; decompress once here.
unpack_ko() {
	local src=$1 dst=$2
	case $src in
	*.ko.xz|*.ko.zst) command -v "${src##*.ko.}" >/dev/null ||
		die "${src##*/} is compressed; apt-get install -y xz-utils zstd" ;;
	esac
	case $src in
	*.ko.xz) xz -dc "$src" > "$dst" ;;
	*.ko.zst) zstd -qdc "$src" > "$dst" ;;
	*.ko.gz) gzip -dc "$src" > "$dst" ;;
	*) cp "$src" "$dst" ;;
	esac
}

declare -A state
order=() skipped_builtin=() skipped_absent=()
resolve() {
	local m=${1//-/_} d deps
	[ -z "${state[$m]:-}" ] || return 0
	state[$m]=seen
	if [ -n "${builtin[$m]:-}" ]; then
		skipped_builtin+=("$m"); return 0
	fi
	if [ -z "${kofile[$m]:-}" ]; then
		skipped_absent+=("$m"); return 0
	fi
	unpack_ko "${kofile[$m]}" "$ROOT/lib/modules/$krel/$m.ko"
	deps=$(modinfo -F depends "$ROOT/lib/modules/$krel/$m.ko")
	for d in ${deps//,/ }; do
		resolve "$d"
	done
	order+=("$m")
}
for m in "${MODULES[@]}"; do
	resolve "$m"
done
printf '%s\n' "${order[@]}" > "$ROOT/lib/modules/$krel/latch.order"
say "modules: ${order[*]}"
[ ${#skipped_builtin[@]} -eq 0 ] || say "built in, skipped: ${skipped_builtin[*]}"
[ ${#skipped_absent[@]} -eq 0 ] || say "absent from $kpkg, skipped: ${skipped_absent[*]}"

cp "$BUSYBOX" "$ROOT/bin/busybox"
# Applet links made here, so /init never depends on `busybox --install`.
"$BUSYBOX" --list-full | while IFS= read -r a; do
	[ "$a" = bin/busybox ] || [ -e "$ROOT/$a" ] || ln -s /bin/busybox "$ROOT/$a"
done
install -m 0755 "$AGENT" "$ROOT/sbin/latch-agent"
if [ -n "$RAWSEND" ]; then
	install -m 0755 "$RAWSEND" "$ROOT/usr/bin/latch-rawsend"
else
	say "no latch-rawsend beside $AGENT; the image goes without it (make build/vm/latch-rawsend)"
fi
mknod -m 0600 "$ROOT/dev/console" c 5 1 2>/dev/null || true
mknod -m 0666 "$ROOT/dev/null" c 1 3 2>/dev/null || true

printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\n' > "$ROOT/etc/group"
printf 'latch\n' > "$ROOT/etc/hostname"
: > "$ROOT/etc/resolv.conf"

# busybox init is PID 1 after /init: it reaps orphans and respawns the agent.
cat > "$ROOT/etc/inittab" <<'EOF'
::respawn:/sbin/latch-agent
::ctrlaltdel:/sbin/poweroff -f
::shutdown:/bin/umount -a -r
EOF

cat > "$ROOT/init" <<'EOF'
#!/bin/sh
# latch default guest: mount, load modules, configure from the kernel
# command line, then hand PID 1 to busybox init (reaper, agent respawner).
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o nosuid,mode=0755 devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=0620 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /dev/shm
exec </dev/console >/dev/console 2>&1
log() { echo "latch-init: $*"; }

rel=$(uname -r)
while read -r m; do
	insmod "/lib/modules/$rel/$m.ko" || log "insmod $m failed"
done < "/lib/modules/$rel/latch.order"

ip= gw= ip6= gw6=
set -f
for arg in $(cat /proc/cmdline); do
	case $arg in
	latch.ip=*) ip=${arg#*=} ;;
	latch.gw=*) gw=${arg#*=} ;;
	latch.ip6=*) ip6=${arg#*=} ;;
	latch.gw6=*) gw6=${arg#*=} ;;
	esac
done
set +f

hostname -F /etc/hostname
ip link set lo up
# The one NIC libvirt gives us, whatever the kernel named it; MAC from libvirt.
dev=
for d in /sys/class/net/*; do
	[ "$(cat "$d/type" 2>/dev/null)" = 1 ] && { dev=${d##*/}; break; }
done
if [ -z "$dev" ]; then
	[ -z "$ip$ip6" ] || log "latch.ip/latch.ip6 given but there is no network interface"
else
	# Static only: no router advertisements, no SLAAC, no DAD wait.
	for k in accept_ra autoconf accept_dad; do
		echo 0 > "/proc/sys/net/ipv6/conf/$dev/$k" 2>/dev/null
	done
	ip link set "$dev" up
	[ -z "$ip" ] || ip addr add "$ip" dev "$dev" || log "bad latch.ip=$ip"
	[ -z "$gw" ] || ip route add default via "$gw" dev "$dev" || log "bad latch.gw=$gw"
	[ -z "$ip6" ] || ip -6 addr add "$ip6" dev "$dev" || log "bad latch.ip6=$ip6"
	[ -z "$gw6" ] || ip -6 route add default via "$gw6" dev "$dev" || log "bad latch.gw6=$gw6"
	# The host address is the resolver too.
	{ [ -z "$gw" ] || echo "nameserver $gw"; [ -z "$gw6" ] || echo "nameserver $gw6"; } > /etc/resolv.conf
	log "$dev ${ip:-no v4} via ${gw:--} ${ip6:-no v6} via ${gw6:--}"
fi

# The workspace, only if the host shares one under the tag "workspace".
for t in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
	[ -f "$t" ] || continue
	if [ "$(tr -d '\0\n' < "$t")" = workspace ]; then
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,nosuid,nodev workspace /workspace &&
			log "workspace mounted" || log "workspace mount failed"
	fi
done

mount -t tmpfs -o nosuid,nodev,mode=1777,size=50% tmpfs /tmp
mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 tmpfs /run
log "up in $(cut -d' ' -f1 /proc/uptime) s"
exec /sbin/init
EOF
chmod 0755 "$ROOT/init"

# Same inputs, same bytes: fixed mtimes and a sorted, owner-neutral archive.
find "$ROOT" -exec touch -h -d @0 {} +
(cd "$ROOT" && find . -mindepth 1 -print0 | sort -z |
	cpio --null --create --format=newc --owner=0:0 --reproducible --quiet) |
	gzip -9n > "$TMP/initrd.img"
cp "$TMP/kernel/boot/vmlinuz-$krel" "$TMP/vmlinuz"

{
	printf '# latch default guest image; written by vm/image.sh\n'
	printf '# inputs\n'
	inputs
	printf '# outputs\n'
	printf 'kernel_release %s\n' "$krel"
	printf 'deb_sha256 %s %s\n' "$(sha "$deb")" "${deb##*/}"
	printf 'modules %s\n' "${order[*]}"
	printf 'modules_builtin %s\n' "${skipped_builtin[*]}"
	printf 'modules_absent %s\n' "${skipped_absent[*]}"
	printf 'sha256 %s vmlinuz\n' "$(sha "$TMP/vmlinuz")"
	printf 'sha256 %s initrd.img\n' "$(sha "$TMP/initrd.img")"
	printf 'built %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$TMP/manifest.txt"

# Manifest last: until it lands, the old one no longer matches the outputs.
mv -f "$TMP/vmlinuz" "$CACHE/vmlinuz"
mv -f "$TMP/initrd.img" "$CACHE/initrd.img"
mv -f "$TMP/manifest.txt" "$CACHE/manifest.txt"
say "image in $CACHE: $krel, initrd $(du -k "$CACHE/initrd.img" | cut -f1) KiB"
