# SPDX-License-Identifier: GPL-2.0-only
# lib_vm.sh - what the guest tests (selftests/vm_*.sh) share; source it.
#
# The pass/fail counters with their ok/fail lines, skip_all (exit 77 with a
# closing line the runner reads), vm_scratch: a bpffs directory and a temp
# dir of the test's own, vm_root: a LATCH_ROOT in it with the test's
# latch.conf, vm_latchd: latchd under that root, and vm_images and
# vm_test_image: guest images that never answer or die booting.  The temp
# dirs are all /tmp/latch-vm-*, which is how selftests/run.sh finds and
# destroys the sandboxes of a test it had to kill.  Set TEST (the test's
# name) before sourcing.

pass=0 failn=0
ok() { echo "ok $*"; pass=$((pass + 1)); }
fail() { echo "FAIL $*"; failn=$((failn + 1)); }
skip_all() { echo "skip $TEST: $*"; echo "0 passed, 0 failed"; exit 77; }

# vm_scratch TAG: BPFFS=/sys/fs/bpf/latch-vm-TAG-PID and TMP=/tmp/latch-vm-TAG.XXXXXX,
# mounting bpffs if it is missing.  TMP is 0755: libvirtd and its qemu user walk
# into run/latch (and a workspace) under it.
vm_scratch() {
	grep -qs " /sys/fs/bpf bpf " /proc/mounts || mount -t bpf bpf /sys/fs/bpf || skip_all "no bpffs"
	BPFFS=/sys/fs/bpf/latch-vm-$1-$$
	mkdir -p "$BPFFS"
	TMP=$(mktemp -d "/tmp/latch-vm-$1.XXXXXX")
	chmod 0755 "$TMP"
}

# vm_root WHY [KEY=VALUE]...: a LATCH_ROOT under TMP whose latch.conf (CONF)
# says "# TEST: WHY", then the given keys, table_base = $TABLE and the image
# cache, root-owned and 0644.  Exports LATCH_ROOT and LATCH_BPFFS, defines L
# (latch under them) and starts virtlogd and libvirtd if they are not running.
vm_root() {
	local kv
	CONF=$TMP/root/etc/latch/latch.conf
	mkdir -p "${CONF%/*}"
	{
		echo "# $TEST: $1"
		shift
		for kv in "$@"; do echo "${kv%%=*} = ${kv#*=}"; done
		echo "table_base = $TABLE"
		echo "images = ${LATCH_IMAGES:-/var/lib/latch/images}"
	} >"$CONF"
	chmod 0644 "$CONF"
	export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
	pgrep -x virtlogd >/dev/null || virtlogd -d
	pgrep -x libvirtd >/dev/null || { libvirtd -d; sleep 1; }
}
L() { "$LATCH_BIN" "$@"; }

# vm_latchd: start the latchd beside LATCH_BIN (LATCHD_PID, added to PIDS) and
# wait up to 5 s for its socket; its log is $TMP/latchd.log.
vm_latchd() {
	"${LATCH_BIN%/*}/latchd" >"$TMP/latchd.log" 2>&1 &
	LATCHD_PID=$!
	PIDS+=("$LATCHD_PID")
	for _ in $(seq 50); do [ -S "$LATCH_ROOT/run/latch/latchd.sock" ] && break; sleep 0.1; done
}

# vm_images: IMAGES=$TMP/images, with `default` a link to the real default
# image (LATCH_IMAGES, as `make image` built it); call before vm_root, which
# then points latch.conf's `images` there.
vm_images() {
	IMAGES=$TMP/images
	mkdir -p "$IMAGES"
	ln -s "${LATCH_IMAGES:-/var/lib/latch/images}/default" "$IMAGES/default"
	LATCH_IMAGES=$IMAGES
}

# vm_test_image NAME SCRIPT: an image in IMAGES whose initramfs is busybox-static
# and an /init that runs SCRIPT (a guest that never answers, or dies), booted
# with the default image's kernel.
vm_test_image() {
	local d=$IMAGES/$1 r=$TMP/initrd-$1 a
	mkdir -p "$d" "$r/bin" "$r/dev" "$r/proc"
	cp /bin/busybox "$r/bin/busybox"
	for a in sh echo sleep poweroff mount; do ln -s busybox "$r/bin/$a"; done
	printf '#!/bin/sh\nexport PATH=/bin\nmount -t devtmpfs devtmpfs /dev\nexec </dev/console >/dev/console 2>&1\n%s\n' \
		"$2" > "$r/init"
	chmod 0755 "$r/init"
	(cd "$r" && find . | cpio -o -H newc --quiet | gzip) > "$d/initrd.img"
	cp "$IMAGES/default/vmlinuz" "$d/vmlinuz"
	chmod -R a+rX "$d"
}
