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
# The allowed destination is a listener on a documentation address on lo.
# The image is built once into /var/lib/latch/images/default and kept.
# Everything else is removed on exit, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/.."
LATCH=$PWD/build/latch
NAME=demo
ALLOWED=203.0.113.80
PORT=18088
[ "$(id -u)" = 0 ] || { echo "demo: run as root" >&2; exit 2; }

# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 selftests/free_net.py "$@"
}
POOL=$(free_pool 198.51.100.64/26 198.51.100.0/26 203.0.113.128/26)
[ -n "$POOL" ] || { echo "${0##*/}: no free documentation /26 for the pool on this host" >&2; exit 1; }

TMP=$(mktemp -d /tmp/latch-vmdemo.XXXXXX)
BPFFS=/sys/fs/bpf/latch-demo-vm
SRV=
ADDED=0
cleanup() {
	set +e
	LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS "$LATCH" destroy "$NAME" >/dev/null 2>&1
	[ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
	[ "$ADDED" = 1 ] && ip addr del "$ALLOWED/32" dev lo 2>/dev/null
	rm -rf "$TMP" "$BPFFS"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$TMP"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$BPFFS" "$TMP/root/etc/latch" "$TMP/www"
printf '# the demo: a documentation pool, no uplink\npool = %s\npool6 = 2001:db8:de00::/48\ntable_base = 31800\nimages = %s\n' "$POOL" "${LATCH_IMAGES:-/var/lib/latch/images}" \
	> "$TMP/root/etc/latch/latch.conf"
export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
pgrep -x virtlogd >/dev/null || virtlogd -d
pgrep -x libvirtd >/dev/null || { libvirtd -d; sleep 1; }

run() { echo "\$ $*"; "$@"; }
run "$LATCH" image build
run "$LATCH" up "$NAME"
run "$LATCH" status "$NAME"
run "$LATCH" exec "$NAME" -- uname -sr

echo hello-from-the-allowed-destination > "$TMP/www/index.html"
ip addr add "$ALLOWED/32" dev lo && ADDED=1
(cd "$TMP/www" && exec python3 -m http.server --bind "$ALLOWED" "$PORT" >/dev/null 2>&1) &
SRV=$!
sleep 1
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
