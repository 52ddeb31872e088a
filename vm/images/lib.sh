# SPDX-License-Identifier: GPL-2.0-only
# lib.sh - what latch's image recipes (image.sh, image_debian.sh) share;
# they source it.  Nothing here runs on its own.
#
#   image_args DEFAULT_CACHE "$@"    [--force] [CACHE_DIR] [AGENT]: sets force, CACHE, AGENT
#   need_tools "HINT" TOOL...        die naming the packages when a tool is missing
#   check_static BINARY...           die when one is dynamically linked
#   guest_tool NAME VAR              a guest program beside the agent (or at $VAR), or ""
#   kernel_resolve                   kpkg and kver: the kernel linux-image-amd64 points at
#   kernel_fetch                     download and unpack it into $TMP/kernel: krel, KMOD, deb
#   modules_resolve DEST MODULE...   copy the modules and what they depend on into
#                                    DEST/lib/modules/$krel in load order (latch.order)
#   busybox_install ROOT             busybox-static with its applet links
#   cpio_pack ROOT OUT               a reproducible gzip'd newc archive of ROOT
#   guest_net_script LOG_PREFIX      the guest's network setup from the kernel command
#                                    line and its workspace mount, as a shell script
#   image_current                    the cache's outputs still match its manifest
#   install_outputs FILE...          move the outputs into CACHE, manifest.txt last
#
# The manifest's inputs record this file's hash beside the recipe's, so a
# change here rebuilds the images.
umask 022
export LC_ALL=C

RECIPE=$(basename "$0")
LIB_SH=${BASH_SOURCE[0]}
META_PKG=${LATCH_KERNEL_META:-linux-image-amd64}
BUSYBOX=${LATCH_BUSYBOX:-/bin/busybox}

say() { printf 'latch: %s\n' "$*"; }
die() { printf 'latch: %s\n' "$*" >&2; exit 1; }
usage() { printf 'usage: %s [--force] [CACHE_DIR] [AGENT]\n' "$RECIPE" >&2; exit 2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

image_args() {
	local default_cache=$1 c
	shift
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
	CACHE=${1:-$default_cache}
	AGENT=${2:-${LATCH_AGENT:-}}
	if [ -z "$AGENT" ]; then
		# the build tree's, the one installed beside this script (PREFIX/lib/latch), the usual places
		for c in "$(dirname "$LIB_SH")/../../build/vm/latch-agent" "$(dirname "$LIB_SH")/latch-agent" \
			 /usr/lib/latch/latch-agent \
			 /usr/local/lib/latch/latch-agent; do
			[ -x "$c" ] && { AGENT=$c; break; }
		done
	fi
	[ "$(id -u)" = 0 ] || die "image build needs root (dpkg -x keeps ownership, mknod for /dev/console)"
}

need_tools() {
	local hint=$1 t
	shift
	for t in "$@"; do
		command -v "$t" >/dev/null || die "$t not found; apt-get install -y $hint"
	done
	[ -x "$BUSYBOX" ] || die "$BUSYBOX not found; apt-get install -y busybox-static"
	[ -n "$AGENT" ] && [ -x "$AGENT" ] ||
		die "guest agent not found; build it with 'make build/vm/latch-agent' or pass its path"
}

# A dynamic busybox or agent would die in an initramfs, which has no libc.
check_static() {
	local b
	for b in "$@"; do
		if command -v readelf >/dev/null && readelf -l "$b" 2>/dev/null | grep -q INTERP; then
			die "$b is dynamically linked; the initramfs needs static binaries (busybox-static, gcc -static)"
		fi
	done
}

# Optional guest programs live beside the agent (make builds them into build/vm/).
guest_tool() {
	local p=${!2:-$(dirname "$AGENT")/$1}
	[ -x "$p" ] && echo "$p"
	return 0
}

kernel_resolve() {
	kpkg=$(apt-cache depends "$META_PKG" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1 || true)
	kver=""
	[ -z "$kpkg" ] || kver=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null |
		sed -n 's/^Version: //p' | head -n1 || true)
}

kernel_fetch() {
	[ -n "$kver" ] || die "apt-cache can't resolve $META_PKG to a kernel package; run apt-get update"
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
}

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

# Modules in the order given; the dependencies modinfo names go before their
# users whatever that order says (virtio needs virtio_ring).  Names with - and
# _ are alike, as the kernel has them.  Sets order, skipped_builtin, skipped_absent.
modules_resolve() {
	local dest=$1/lib/modules/$krel f n m
	shift
	mkdir -p "$dest"
	declare -gA kofile=() builtin=() mstate=()
	order=() skipped_builtin=() skipped_absent=()
	while IFS= read -r f; do
		n=${f##*/}; n=${n%.ko*}; n=${n//-/_}
		kofile[$n]=$f
	done < <(find "$KMOD/kernel" -type f \( -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz' \))
	if [ -f "$KMOD/modules.builtin" ]; then
		while IFS= read -r f; do
			n=${f##*/}; n=${n%.ko}; builtin[${n//-/_}]=1
		done < "$KMOD/modules.builtin"
	fi
	for m in "$@"; do
		module_add "$dest" "$m"
	done
	printf '%s\n' "${order[@]}" > "$dest/latch.order"
	say "modules: ${order[*]}"
	[ ${#skipped_builtin[@]} -eq 0 ] || say "built in, skipped: ${skipped_builtin[*]}"
	[ ${#skipped_absent[@]} -eq 0 ] || say "absent from $kpkg, skipped: ${skipped_absent[*]}"
}

module_add() {
	local dest=$1 m=${2//-/_} d deps
	[ -z "${mstate[$m]:-}" ] || return 0
	mstate[$m]=seen
	if [ -n "${builtin[$m]:-}" ]; then
		skipped_builtin+=("$m"); return 0
	fi
	if [ -z "${kofile[$m]:-}" ]; then
		skipped_absent+=("$m"); return 0
	fi
	unpack_ko "${kofile[$m]}" "$dest/$m.ko"
	deps=$(modinfo -F depends "$dest/$m.ko")
	for d in ${deps//,/ }; do
		module_add "$dest" "$d"
	done
	order+=("$m")
}

busybox_install() {
	local root=$1 a
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev}
	cp "$BUSYBOX" "$root/bin/busybox"
	# Applet links made here, so /init never depends on `busybox --install`.
	"$BUSYBOX" --list-full | while IFS= read -r a; do
		[ "$a" = bin/busybox ] || [ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
	done
	mknod -m 0600 "$root/dev/console" c 5 1 2>/dev/null || true
}

# Same inputs, same bytes: fixed mtimes and a sorted, owner-neutral archive.
cpio_pack() {
	local root=$1 out=$2
	find "$root" -exec touch -h -d @0 {} +
	(cd "$root" && find . -mindepth 1 -print0 | sort -z |
		cpio --null --create --format=newc --owner=0:0 --reproducible --quiet) | gzip -9n > "$out"
}

# The guest's static network from latch.ip= latch.gw= latch.ip6= latch.gw6=
# on its kernel command line, the host address as its resolver, and the 9p
# workspace when the host shares one (tag "workspace").  Static only: no
# router advertisements, no SLAAC, no DAD wait.  The NIC is the one libvirt
# gives, whatever the kernel named it; udev may take a moment to show it.
guest_net_script() {
	cat <<EOF
ip= gw= ip6= gw6=
set -f
for arg in \$(cat /proc/cmdline); do
	case \$arg in
	latch.ip=*) ip=\${arg#*=} ;;
	latch.gw=*) gw=\${arg#*=} ;;
	latch.ip6=*) ip6=\${arg#*=} ;;
	latch.gw6=*) gw6=\${arg#*=} ;;
	esac
done
set +f
ip link set lo up
dev= i=0
while [ -z "\$dev" ] && [ \$i -lt 100 ]; do
	for d in /sys/class/net/*; do
		[ "\$(cat "\$d/type" 2>/dev/null)" = 1 ] && { dev=\${d##*/}; break; }
	done
	[ -n "\$dev" ] || sleep 0.1
	i=\$((i + 1))
done
if [ -z "\$dev" ]; then
	[ -z "\$ip\$ip6" ] || echo "$1: latch.ip/latch.ip6 given but there is no network interface"
else
	for k in accept_ra autoconf accept_dad; do
		echo 0 > "/proc/sys/net/ipv6/conf/\$dev/\$k" 2>/dev/null
	done
	ip link set "\$dev" up
	[ -z "\$ip" ] || ip addr add "\$ip" dev "\$dev" || echo "$1: bad latch.ip=\$ip"
	[ -z "\$gw" ] || ip route add default via "\$gw" dev "\$dev" || echo "$1: bad latch.gw=\$gw"
	[ -z "\$ip6" ] || ip -6 addr add "\$ip6" dev "\$dev" || echo "$1: bad latch.ip6=\$ip6"
	[ -z "\$gw6" ] || ip -6 route add default via "\$gw6" dev "\$dev" || echo "$1: bad latch.gw6=\$gw6"
	{ [ -z "\$gw" ] || echo "nameserver \$gw"; [ -z "\$gw6" ] || echo "nameserver \$gw6"; } > /etc/resolv.conf
	echo "$1: \$dev \${ip:-no v4} via \${gw:--} \${ip6:-no v6} via \${gw6:--}"
fi
for t in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
	[ -f "\$t" ] || continue
	if [ "\$(tr -d '\0\n' < "\$t")" = workspace ]; then
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,nosuid,nodev workspace /workspace &&
			echo "$1: workspace mounted" || echo "$1: workspace mount failed"
	fi
done
EOF
}

# Outputs as the manifest records them.
image_current() {
	[ -f "$CACHE/manifest.txt" ] || return 1
	(cd "$CACHE" && sed -n 's/^sha256 \([0-9a-f]*\) \(.*\)$/\1  \2/p' manifest.txt |
		sha256sum --quiet -c - >/dev/null 2>&1)
}

# The recipe and this library, as manifest input lines.
recipe_inputs() {
	printf 'recipe %s\n' "$(sha "$0")"
	printf 'recipe_lib %s\n' "$(sha "$LIB_SH")"
}

# Manifest last: until it lands, the old one no longer matches the outputs.
install_outputs() {
	local f
	for f in "$@"; do
		mv -f "$TMP/$f" "$CACHE/$f"
	done
	mv -f "$TMP/manifest.txt" "$CACHE/manifest.txt"
}
