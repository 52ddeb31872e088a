#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# debian_proof.sh - `make vm-debian-proof`: build the `debian` guest image
# (slow: debootstrap) and show that `latch up --image debian` boots it behind
# verified enforcement: systemd up, the agent answering `latch exec`, the
# assigned address, node at the image's pinned version (and npm, git, rg),
# a denied destination refused, and `destroy` cleaning up.
# Not part of `make check` (minutes of debootstrap and a systemd boot on TCG).
#
# Same traffic rules as the selftests: a documentation pool the host does not
# use, no uplink, a documentation address as the denied destination; the
# EXIT trap destroys the sandbox and removes the temp LATCH_ROOT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-deb

[ "$(id -u)" = 0 ] || { echo "debian_proof: needs root" >&2; exit 2; }
command -v debootstrap >/dev/null && command -v qemu-img >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap qemu-utils e2fsprogs >&2
# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 "$TOP/selftests/free_net.py" "$@"
}
POOL=$(free_pool 198.51.100.64/26 198.51.100.0/26 203.0.113.128/26)
[ -n "$POOL" ] || { echo "${0##*/}: no free documentation /26 for the pool on this host" >&2; exit 1; }

TMP=$(mktemp -d /tmp/latch-vmdebian.XXXXXX)
BPFFS=/sys/fs/bpf/latch-vmtest-$$
cleanup() {
	set +e
	LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	rm -rf "$BPFFS" "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
chmod 0755 "$TMP"
grep -qs " /sys/fs/bpf bpf " /proc/mounts || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$BPFFS" "$TMP/root/etc/latch"
printf 'pool = %s\ntable_base = 31500\nimages = %s\n' "$POOL" "${LATCH_IMAGES:-/var/lib/latch/images}" \
	> "$TMP/root/etc/latch/latch.conf"
export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
bash "$TOP/scripts/libvirt_up.sh" || exit 1

echo "## latch image build --image debian"
t0=$SECONDS
"$LATCH_BIN" image build --image debian
echo "   ($((SECONDS - t0)) s)"

echo "## latch up $NAME --image debian --memory 512 --timeout 240"
t0=$(date +%s%N)
"$LATCH_BIN" --json up "$NAME" --image debian --memory 512 --timeout 240 > "$TMP/up.json" || { cat "$TMP/up.json"; exit 1; }
t1=$(date +%s%N)
jq -r '"   enforced after \(.ms_to_enforced) ms, domain started after \(.ms_to_domain_started) ms, agent after \(.ms_to_agent) ms; accelerator \(.accelerator); guest \(.guest_ip4) kernel \(.guest_release)"' "$TMP/up.json"
echo "   ($(( (t1 - t0) / 1000000 )) ms wall)"

x() { echo "\$ latch exec $NAME -- $*"; "$LATCH_BIN" exec "$NAME" --timeout 60 -- "$@"; }
x cat /etc/debian_version /etc/os-release
x sh -c 'systemctl is-system-running --wait 2>/dev/null || systemctl --failed --no-legend'
x systemctl is-active latch-agent.service latch-net.service
x ip -4 addr show
x findmnt /
# node from the image's pin (vm/images/image_debian.sh), what the built-in kits' CLIs run on
pin=$(sed -n 's/^NODE_VERSION=//p' "$TOP/vm/images/image_debian.sh")
x sh -c 'node --version; npm --version; git --version; rg --version | head -n1; bash --version | head -n1'
got=$("$LATCH_BIN" exec "$NAME" --timeout 60 -- node --version)
if [ "$got" != "v$pin" ]; then
	echo "FAIL: node --version in the guest says '$got', the image's pin is $pin"
	exit 1
fi
echo "   node $got, as pinned"
echo "\$ latch exec $NAME -- ping -c 1 -W 2 203.0.113.10   (denied; must fail)"
if "$LATCH_BIN" exec "$NAME" -- ping -c 1 -W 2 203.0.113.10; then
	echo "FAIL: the denied destination answered"
	exit 1
fi
echo "   refused, as it must be"
echo "## latch status $NAME"
"$LATCH_BIN" status "$NAME"
echo "## latch destroy $NAME"
"$LATCH_BIN" destroy "$NAME"
echo "debian proof: ok"
