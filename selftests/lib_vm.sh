# SPDX-License-Identifier: GPL-2.0-only
# lib_vm.sh - what the guest tests (selftests/vm_*.sh) share; source it.
#
# The pass/fail counters with their ok/fail lines, skip_all (exit 77 with a
# closing line the runner reads), and vm_scratch: a bpffs directory and a
# temp dir of the test's own.  The temp dirs are all /tmp/latch-vm-*, which
# is how selftests/run.sh finds and destroys the sandboxes of a test it had
# to kill.  Set TEST (the test's name) before sourcing.

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
