#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# The README's main job: `latch up` on the built-in default guest image, the
# posture as observed from the kernel (`latch status`), commands run inside
# the guest (`latch exec`) - one allowed destination reached, one denied -
# then `latch destroy`.
#
# The sandbox lives under a temp LATCH_ROOT with a pool from a documentation
# /24 the host does not use and no uplink (its routing table ends in
# `unreachable default`), so nothing from the guest can leave the machine.
# The allowed destination is a listener on a documentation address in a
# namespace behind the host (selftests/lib_vm.sh vm_ctrl_net): no guest
# reaches an address of the host's own.
# The image is built once into /var/lib/latch/images/default and kept.
# Everything else is removed on exit, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/.."
LATCH=$PWD/build/latch
NAME=demo
ALLOWED=203.0.113.80
PORT=18088
TEST=demo
TABLE=31800
PIDS=()
. selftests/lib_vm.sh
[ "$(id -u)" = 0 ] || { echo "demo: run as root" >&2; exit 2; }

# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 selftests/free_net.py "$@"
}
POOL=$(free_pool 198.51.100.64/26 198.51.100.0/26 203.0.113.128/26)
[ -n "$POOL" ] || { echo "${0##*/}: no free documentation /26 for the pool on this host" >&2; exit 1; }

TMP=$(mktemp -d /tmp/latch-vmdemo.XXXXXX)
BPFFS=/sys/fs/bpf/latch-demo-vm
cleanup() {
	local p
	set +e
	LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS "$LATCH" destroy "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	vm_ctrl_net_down
	rm -rf "$TMP" "$BPFFS"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$TMP"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$BPFFS" "$TMP/root/etc/latch" "$TMP/www"
printf '# the demo: a documentation pool, no uplink\npool = %s\npool6 = 2001:db8:de00::/48\ntable_base = %s\nimages = %s\n' "$POOL" "$TABLE" "${LATCH_IMAGES:-/var/lib/latch/images}" \
	> "$TMP/root/etc/latch/latch.conf"
export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
bash scripts/libvirt_up.sh || exit 1

run() { echo "\$ $*"; "$@"; }
run "$LATCH" image build
run "$LATCH" up "$NAME"
run "$LATCH" status "$NAME"
run "$LATCH" exec "$NAME" -- uname -sr

# the allowed destination, behind the host; the host forwards from the tap as with an uplink
vm_ctrl_net "$POOL" "$ALLOWED" && vm_ctrl_http "$ALLOWED" "$PORT" || { echo "demo: no control namespace" >&2; exit 1; }
vm_ctrl_forward "lt-$NAME"
run "$LATCH" egress "$NAME" allow "$ALLOWED:$PORT"
run "$LATCH" exec "$NAME" -- sh -c "echo 'GET /' | nc -w 3 $ALLOWED $PORT"
echo "\$ $LATCH exec $NAME -- ping -c 1 -W 2 203.0.113.10      # not allowed"
if "$LATCH" exec "$NAME" -- ping -c 1 -W 2 203.0.113.10; then
	echo "demo: the denied destination answered" >&2
	exit 1
fi
echo "(refused by the host kernel, as it must be)"
run "$LATCH" status "$NAME"
run "$LATCH" destroy "$NAME"
