#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# agent_proof.sh - boot the default guest image under plain qemu (TCG, no
# NIC at all) and drive its agent with build/vm/agent_selftest.  A manual
# proof of vm/images/image.sh + vm/guest/agent.c + vm/agent_client.c before libvirt is in
# the loop; not CI yet.
#
#   agent_proof.sh [IMAGE_DIR] [SELFTEST]
#
# The guest gets no network device whatsoever (-nodefaults -nic none), so
# nothing it does can leave the machine.  Only the qemu this script started
# is killed, by PID, and its temp dir is removed, pass or fail.
set -euo pipefail

IMG=${1:-/var/lib/latch/images/default}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELFTEST=${2:-$HERE/../build/selftests/agent_selftest}
LIMIT_S=${LATCH_PROOF_LIMIT_S:-180} # qemu never outlives this

for f in "$IMG/vmlinuz" "$IMG/initrd.img" "$SELFTEST"; do
	[ -e "$f" ] || { echo "agent_proof: $f missing" >&2; exit 1; }
done

TMP=$(mktemp -d /tmp/latch-proof.XXXXXX)
QPID=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
		kill "$QPID" 2>/dev/null || true
		wait "$QPID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

APPEND="console=ttyS0 panic=-1 ${LATCH_PROOF_APPEND:-quiet} latch.ip=192.0.2.2/30 latch.gw=192.0.2.1"
APPEND+=" latch.ip6=2001:db8:1::2/64 latch.gw6=2001:db8:1::1"

# A workspace, to show the 9p share mounts; a file share, not a network.
mkdir "$TMP/ws"
export LATCH_SELFTEST_WORKSPACE="hello from the host"
printf '%s\n' "$LATCH_SELFTEST_WORKSPACE" > "$TMP/ws/hello"

start=$(date +%s%N)
timeout --signal=KILL "$LIMIT_S" qemu-system-x86_64 \
	-machine q35 -accel tcg -cpu "${LATCH_PROOF_CPU:-max}" -m 256 -smp 1 \
	-nodefaults -nic none -no-reboot -display none \
	-serial "file:$TMP/console.log" -monitor none \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" -append "$APPEND" \
	-device virtio-serial-pci,id=vs0 \
	-chardev "socket,id=agent,path=$TMP/agent.sock,server=on,wait=off" \
	-device virtserialport,bus=vs0.0,chardev=agent,name=org.latch.agent \
	-fsdev "local,id=ws,path=$TMP/ws,security_model=none,readonly=on" \
	-device virtio-9p-pci,fsdev=ws,mount_tag=workspace \
	&
QPID=$!

rc=0
"$SELFTEST" "$TMP/agent.sock" 120000 || rc=$?
end=$(date +%s%N)
echo "proof wall time: $(( (end - start) / 1000000 )) ms (qemu start to last check)"
echo "--- guest console ---"
cat "$TMP/console.log" || true
exit "$rc"
