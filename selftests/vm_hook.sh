#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_hook.sh - the libvirt hook can't break libvirt: with latch's hook in
# /etc/libvirt/hooks/qemu.d/ and the latch binary it calls gone, a domain
# that is not latch's still starts, and a latch domain whose enforcement
# can't be verified (no state, then no binary) is refused.
#
# Invariant defended: the hook acts on latch's own domains only, and fails
# closed for them.  The hook is `boot install`'s, from an installed copy of
# latch under this test's temp dir, unchanged; the real qemu.d gets a hook of
# this test's own that hands it this test's two domains only
# (lib_vm.sh's vm_hook_install: other tests' guests on this host never meet
# it, and libvirtd gets a SIGHUP only if it had never seen a hook).  The
# domains are tiny, diskless and NIC-less (SeaBIOS with nothing to boot),
# transient, and destroyed at the end.  Prints ok/FAIL lines and
# "N passed, M failed".
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
TEST=vm_hook
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
for t in virsh libvirtd virtlogd; do command -v "$t" >/dev/null || skip_all "needs $t"; done
OTHER=hooktest-other-$$
MINE=latch-hooktest$$
V() { virsh -q -c qemu:///system "$@"; }
cleanup() {
	set +e
	V destroy "$OTHER" >/dev/null 2>&1
	V destroy "$MINE" >/dev/null 2>&1
	vm_hook_remove
	[ -n "${BPFFS:-}" ] && rm -rf "$BPFFS"
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
vm_scratch hook
vm_root "the hook test: no sandbox is made"

domxml() { # NAME: a diskless, NIC-less transient domain
	cat <<X
<domain type='qemu'><name>$1</name><memory unit='MiB'>32</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>
X
}
domxml "$OTHER" >"$TMP/other.xml"
domxml "$MINE" >"$TMP/mine.xml"

INST=$TMP/inst/usr/sbin
# latch and latchd side by side, as `make install` puts them (boot install enables latchd.service)
mkdir -p "$INST" && install -m 0755 "$LATCH_BIN" "$INST/latch" &&
	install -m 0755 "${LATCHD_BIN:-$TOP/build/latchd}" "$INST/latchd"
"$INST/latch" boot install >"$TMP/install.out" 2>&1 || { fail "boot install: $(cat "$TMP/install.out")"; lts_done; }
vm_hook_install "$MINE|$OTHER) exec '$LATCH_ROOT/etc/libvirt/hooks/qemu.d/latch' \"\$@\" ;;" ||
	{ fail "libvirtd does not run a hook in /etc/libvirt/hooks/qemu.d (even after SIGHUP)"; lts_done; }

# control: the hook runs: latch's domain with no latch state is refused by latch
rc=0; out=$(V create "$TMP/mine.xml" 2>&1) || rc=$?
check "a latch domain with no state is refused" bash -c "[ $rc != 0 ] && grep -q 'refusing to start $MINE' <<<\"\$1\"" _ "$out"
check "another domain starts with latch installed" V create "$TMP/other.xml"
V destroy "$OTHER" >/dev/null 2>&1
# the binary gone (make clean, an uninstall): other domains are not latch's business
rm -f "$INST/latch"
check "another domain starts with latch's binary gone" V create "$TMP/other.xml"
check "... and runs" bash -c "virsh -q -c qemu:///system domstate '$OTHER' | grep -q running"
V destroy "$OTHER" >/dev/null 2>&1
rc=0; V create "$TMP/mine.xml" >/dev/null 2>&1 || rc=$?
check "a latch domain is refused with latch's binary gone (fails closed)" test "$rc" != 0
check "... and does not run" bash -c "! virsh -q -c qemu:///system domstate '$MINE' 2>/dev/null | grep -q running"

lts_done
