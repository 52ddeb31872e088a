#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_boot.sh - the reboot path without rebooting: `latch boot apply` puts a
# sandbox's tap and enforcement back (from the pins, or default-deny when the
# pins are gone) before libvirt starts its guest, and the qemu hook that
# `latch boot install` writes refuses a latch domain whose enforcement is
# gone.
#
# Invariant defended: the boundary arrives first - at boot, default-deny is in
# place before any guest gets a packet, and libvirt can't start a latch guest
# behind a tap latch can't verify.
#
# boot install runs from an installed copy of latch (a build tree's is
# refused).  The hook is installed for real in /etc/libvirt/hooks/qemu.d/, as
# a wrapper that hands this test's domain alone to latch's hook (and, on
# demand, makes its start slow: `up` must then name the domain start as the
# step that ran out the boot timeout); it is removed afterwards
# (lib_vm.sh's vm_hook_install: libvirtd gets a SIGHUP only if it had never
# seen a hook, and none at removal).  Test traffic never
# leaves the machine: a documentation /26, no uplink, the allowed destination
# a listener on a documentation address in a namespace behind the host
# (lib_vm.sh vm_ctrl_net).  Prints ok/FAIL lines and
# "N passed, M failed"; exit 1 on a failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-boot
TAP=lt-$NAME
DOM=latch-$NAME
TABLE=31500
CTRL_ADDR=203.0.113.90
CTRL_PORT=18095
DENIED=203.0.113.91

TEST=vm_boot
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip tc jq python3 libvirtd virtlogd virsh; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
# a documentation /26 no address of this host is in (a leftover of another run may hold one)
POOL=$(python3 "$TOP/selftests/free_net.py" ${LATCH_BOOT_POOLS:-198.51.100.192/26 203.0.113.192/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
POOL=${POOL%/*}

TMP=
BPFFS=
PIDS=()
ADDED_CTRL=0
V() { virsh -q -c qemu:///system "$@"; }
cleanup() {
	local p
	set +e
	[ -n "$TMP" ] && "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	vm_hook_remove
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	vm_ctrl_net_down
	[ -n "$BPFFS" ] && rm -rf "$BPFFS" 2>/dev/null
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch boot
vm_root "documentation addresses only, and no uplink" pool=$POOL/26
# busybox nc in the guest: an HTTP/0.9 GET, 3 s
guest_get() { L exec "$NAME" -- sh -c "echo 'GET /' | nc -w 3 $1 $2" 2>/dev/null | grep -q hello-from-host; }


if ! L up "$NAME" >"$TMP/up.out" 2>&1; then
	fail "up: $(cat "$TMP/up.out")"
	lts_done
fi
ok "up $NAME"
# the allowed destination, behind the host (a guest never reaches the host's own addresses)
vm_ctrl_net "$POOL/26" "$CTRL_ADDR" && vm_ctrl_http "$CTRL_ADDR" "$CTRL_PORT" || fail "control_namespace_set_up"
vm_ctrl_forward "$TAP"
MODE=$(L --json status "$NAME" | jq -r '.sandboxes[0].tc_mode')
TCX_TOOL=$TOP/build/selftests/tcx_tool
# latch_on_tap: latch's programs are on the tap, seen with a tool latch does not use
# for the mode it runs in (tc for clsact filters, a TCX query for links)
latch_on_tap() {
	if [ "$MODE" = tcx ]; then
		[ -n "$("$TCX_TOOL" list "$TAP" ingress)" ] && [ -n "$("$TCX_TOOL" list "$TAP" egress)" ]
	else
		tc filter show dev "$TAP" ingress | grep -q 'bpf' && tc filter show dev "$TAP" egress | grep -q 'bpf'
	fi
}
# take_enforcement_off: what root can do by hand, in that mode
take_enforcement_off() {
	if [ "$MODE" = tcx ]; then
		"$TCX_TOOL" detach-link "$(L --json status "$NAME" | jq -r '.sandboxes[0].hooks["from-guest"].link_id')"
	else
		tc qdisc del dev "$TAP" clsact
	fi
}
L egress "$NAME" allow "$CTRL_ADDR:$CTRL_PORT" >/dev/null
check "before: allowed destination answers" guest_get "$CTRL_ADDR" "$CTRL_PORT"

# --- boot install writes the unit and the hook under LATCH_ROOT -------------------
INST=$TMP/inst/usr/sbin
mkdir -p "$INST" && install -m 0755 "$LATCH_BIN" "${LATCH_BIN%/*}/latchd" "$INST/"
check "install_refuses_the_build_trees_latch" bash -c "! '$LATCH_BIN' boot install >/dev/null 2>&1"
"$INST/latch" boot install >/dev/null
UNIT=$LATCH_ROOT/etc/systemd/system/latch-boot.service
check "install_writes_unit_before_libvirt" bash -c "grep -qx 'DefaultDependencies=no' '$UNIT' && grep -q '^Before=libvirtd.service virtqemud.service' '$UNIT' && grep -qx 'ExecStart=$INST/latch boot apply' '$UNIT' && [ -L '$LATCH_ROOT/etc/systemd/system/libvirtd.service.wants/latch-boot.service' ]"
check "install_writes_executable_hook" test -x "$LATCH_ROOT/etc/libvirt/hooks/qemu.d/latch"
DUNIT=$LATCH_ROOT/etc/systemd/system/latchd.service
check "install_writes_latchd_unit_after_the_boundary" bash -c "grep -q '^After=latch-boot.service network-online.target' '$DUNIT' && grep -qx 'ExecStart=$INST/latchd' '$DUNIT' && [ -L '$LATCH_ROOT/etc/systemd/system/multi-user.target.wants/latchd.service' ]"

# --- "reboot": the domain dies, the tap and its filters are gone, the pins stay ----
V destroy "$DOM" >/dev/null
ip link del "$TAP"
check "tap_gone" test ! -e "/sys/class/net/$TAP"
rc=0
out=$(L boot apply 2>&1) || rc=$?
check "boot_apply_exit_0 ($out)" test "$rc" = 0
check "boot_apply_recreates_tap_with_verified_enforcement" bash -c "[ -e /sys/class/net/$TAP ] && '$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].enforced' >/dev/null"
check "tc_shows_latch_filters_on_new_tap ($MODE)" latch_on_tap
vm_ctrl_forward "$TAP"

# the guest starts through libvirt, not latch; the first thing it does is test the boundary
V start "$DOM" >/dev/null
wait_until -t 60 L exec "$NAME" -- true || true # the checks below say what did not come up
check "after_boot: denied destination fails" bash -c "! '$LATCH_BIN' exec $NAME -- ping -c 1 -W 2 $DENIED >/dev/null 2>&1"
check "after_boot: denied port on allowed address fails" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR 18096\" 2>/dev/null | grep -q hello"
check "after_boot: allowed destination works (policy kept in the pins)" guest_get "$CTRL_ADDR" "$CTRL_PORT"
check "after_boot: status verified" bash -c "'$LATCH_BIN' status $NAME >/dev/null"

# --- pins gone too: boot apply leaves default-deny ---------------------------------
V destroy "$DOM" >/dev/null
ip link del "$TAP"
rm -rf "$BPFFS/latch/$NAME"
rc=0
out=$(L boot apply 2>&1) || rc=$?
check "boot_apply_without_pins_makes_fresh_default_deny ($out)" bash -c "[ $rc = 0 ] && echo \"\$1\" | grep -q 'fresh default-deny'" _ "$out"
vm_ctrl_forward "$TAP"
V start "$DOM" >/dev/null
wait_until -t 60 L exec "$NAME" -- true || true # the checks below say what did not come up
if guest_get "$CTRL_ADDR" "$CTRL_PORT"; then
	fail "without_pins: formerly allowed destination now denied"
else
	ok "without_pins: formerly allowed destination now denied"
fi
L egress "$NAME" allow "$CTRL_ADDR:$CTRL_PORT" >/dev/null
check "without_pins: allowing again works" guest_get "$CTRL_ADDR" "$CTRL_PORT"

# --- the hook refuses a latch domain whose enforcement is gone -----------------------
# a slow start on demand, as libvirt re-probing QEMU on every call makes one
if ! vm_hook_install "$DOM) [ \"\$2\" = prepare ] && [ -e '$TMP/slow-start' ] && sleep 9
	exec '$LATCH_ROOT/etc/libvirt/hooks/qemu.d/latch' \"\$@\" ;;"; then
	fail "libvirtd does not run a hook in /etc/libvirt/hooks/qemu.d (even after SIGHUP)"
else
	V destroy "$DOM" >/dev/null
	rc=0
	V start "$DOM" >/dev/null 2>&1 || rc=$?
	check "hook_lets_verified_domain_start" test "$rc" = 0
	V destroy "$DOM" >/dev/null
	take_enforcement_off
	check "qdisc_removed_status_not_verified" bash -c "! '$LATCH_BIN' status $NAME >/dev/null 2>&1"
	rc=0
	out=$(V start "$DOM" 2>&1) || rc=$?
	echo "$out" > "$TMP/hook.out"
	check "hook_refuses_domain_whose_enforcement_was_removed" bash -c "[ $rc != 0 ] && grep -q 'refusing to start' '$TMP/hook.out'"
	echo "#   libvirt said: $(grep -o 'latch: refusing.*' "$TMP/hook.out" | head -1)"
	check "refused_domain_not_running" bash -c "! virsh -q -c qemu:///system domstate $DOM | grep -q running"
	L boot apply >/dev/null
	rc=0
	V start "$DOM" >/dev/null 2>&1 || rc=$?
	check "after_boot_apply_hook_lets_it_start" test "$rc" = 0

	# A domain that takes longer to start than the whole boot timeout: up names that step.
	L down "$NAME" >/dev/null 2>&1
	touch "$TMP/slow-start"
	rc=0
	out=$(L up "$NAME" --timeout 8s 2>&1) || rc=$?
	rm -f "$TMP/slow-start"
	echo "$out" | grep -m1 'slow step' | sed 's/^/#   /'
	check "up_timeout_names_the_slow_step_domain_start" bash -c "[ $rc = 1 ] && echo \"\$1\" | grep -q 'within the boot timeout (8 s): starting the domain took [0-9.]* s of it (slow step: domain start'" _ "$out"
	check "slow_start_left_down_behind_its_enforcement" bash -c "! virsh -q -c qemu:///system domstate $DOM | grep -q running && '$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].enforced' >/dev/null"
fi

lts_done
