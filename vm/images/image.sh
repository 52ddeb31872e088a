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
# latch-rawsend (vm/guest/rawsend.c, static), found beside the agent or at
# $LATCH_RAWSEND, goes in too: the guest attack selftest sends crafted frames
# with it.  An image without it still boots; those attacks then fail loudly.
# latch-ask (vm/guest/ask.c, static), beside the agent or at $LATCH_ASK, is
# how the sandbox asks for a grant (docs/grants.md); it goes to /usr/bin.
set -euo pipefail

# In load order as the brief gives it; dependencies named by modinfo are
# put before their users whatever this order says (virtio needs virtio_ring).
MODULES=(virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	 failover net_failover virtio_net
	 netfs fscache 9pnet 9pnet_virtio 9p
	 virtio_console)
FORMAT=1

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
image_args /var/lib/latch/images/default "$@"
need_tools "apt dpkg cpio gzip kmod coreutils util-linux" apt-get apt-cache dpkg-deb cpio gzip modinfo sha256sum flock
RAWSEND=$(guest_tool latch-rawsend LATCH_RAWSEND)
ASK=$(guest_tool latch-ask LATCH_ASK)
check_static "$BUSYBOX" "$AGENT" $RAWSEND $ASK

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # two `latch up`s at once build once, and never read half an image

# --- inputs -------------------------------------------------------------------

kernel_resolve
inputs() {
	printf 'format %s\n' "$FORMAT"
	recipe_inputs
	printf 'kernel_pkg %s %s\n' "$kpkg" "$kver"
	printf 'busybox %s\n' "$(sha "$BUSYBOX")"
	printf 'agent %s\n' "$(sha "$AGENT")"
	[ -z "$RAWSEND" ] || printf 'rawsend %s\n' "$(sha "$RAWSEND")"
	[ -z "$ASK" ] || printf 'ask %s\n' "$(sha "$ASK")"
}

# Outputs as recorded; then inputs, unless apt can't tell us (offline).
current() {
	image_current || return 1
	if [ -z "$kver" ]; then
		say "can't resolve $META_PKG with apt-cache; keeping the cached image"
		return 0
	fi
	diff -q <(inputs) <(sed -n '/^# inputs/,/^# outputs/p' "$CACHE/manifest.txt" | grep -v '^#') >/dev/null
}

if [ "$force" = 0 ] && current; then
	say "image in $CACHE is current ($(sed -n 's/^kernel_release //p' "$CACHE/manifest.txt"))"
	exit 0
fi

# --- build --------------------------------------------------------------------

TMP=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
kernel_fetch
ROOT=$TMP/root
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,workspace,usr/bin,usr/sbin}
chmod 1777 "$ROOT/tmp"
chmod 0700 "$ROOT/root"
modules_resolve "$ROOT" "${MODULES[@]}"
busybox_install "$ROOT"
install -m 0755 "$AGENT" "$ROOT/sbin/latch-agent"
if [ -n "$RAWSEND" ]; then
	install -m 0755 "$RAWSEND" "$ROOT/usr/bin/latch-rawsend"
else
	say "no latch-rawsend beside $AGENT; the image goes without it (make build/vm/latch-rawsend)"
fi
if [ -n "$ASK" ]; then
	install -m 0755 "$ASK" "$ROOT/usr/bin/latch-ask"
else
	say "no latch-ask beside $AGENT; the image goes without it (make build/vm/latch-ask)"
fi
mknod -m 0666 "$ROOT/dev/null" c 1 3 2>/dev/null || true

printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\n' > "$ROOT/etc/group"
printf 'latch\n' > "$ROOT/etc/hostname"
: > "$ROOT/etc/resolv.conf"
# a kit's environment (URLs, placeholders, proxies): latch writes /etc/profile.d/latch.sh after boot
mkdir -p "$ROOT/etc/profile.d"
cat > "$ROOT/etc/profile" <<'EOF'
# latch default guest: login shells read the sandbox's environment (`latch env NAME` on the host)
for f in /etc/profile.d/*.sh; do [ -r "$f" ] && . "$f"; done
unset f
EOF

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
hostname -F /etc/hostname
EOF
guest_net_script latch-init >> "$ROOT/init"
cat >> "$ROOT/init" <<'EOF'

mount -t tmpfs -o nosuid,nodev,mode=1777,size=50% tmpfs /tmp
mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 tmpfs /run
log "up in $(cut -d' ' -f1 /proc/uptime) s"
exec /sbin/init
EOF
chmod 0755 "$ROOT/init"

cpio_pack "$ROOT" "$TMP/initrd.img"
cp "$TMP/kernel/boot/vmlinuz-$krel" "$TMP/vmlinuz"

{
	printf '# latch default guest image; written by vm/images/image.sh\n'
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

install_outputs vmlinuz initrd.img
say "image in $CACHE: $krel, initrd $(du -k "$CACHE/initrd.img" | cut -f1) KiB"
