#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_task.sh - the guest state and throwaway clones: `latch backup`/`restore`,
# `down` backing up first and `up` restoring into a rebuilt guest, and
# `latch task`, whose clone is sealed and removed at the end, even when the
# task gets SIGTERM half way.
#
# Invariants defended: a clone gets nothing but host services whatever its
# source may reach; a clone never outlives its task; a tarball from the
# guest can't write outside the host's backup directory (it is parsed by a
# confined child: tests/test_vm.c); the backup outlives `destroy` unless
# --purge.
#
# Test traffic never leaves the machine: a documentation /26 the host does
# not use, no uplink (`unreachable default`), and the one allowed destination
# a listener on a documentation address in a namespace behind the host
# (lib_vm.sh vm_ctrl_net).  Everything made is
# removed by the EXIT trap, pass or fail; only processes this script started
# are killed, by PID.  Prints ok/FAIL lines and "N passed, M failed"; exit 1
# on a failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-task
TAP=lt-$NAME
TABLE=31400
POOL=${LATCH_TASK_POOL:-198.51.100.128}	# a /26 of 198.51.100.0/24 (TESTBED.md), beside other guest tests
CTRL_ADDR=203.0.113.89
CTRL_PORT=18090

TEST=vm_task
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd virsh; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
if ip -o addr show | grep -q " inet ${POOL%.*}\.\(1[3-8][0-9]\|19[01]\)/"; then
	skip_all "$POOL/26 is in use on this host"
fi

TMP=
BPFFS=
PIDS=()
ADDED_CTRL=0
cleanup() {
	local p c
	set +e
	if [ -n "$TMP" ]; then
		for c in $(ls "$TMP/root/var/lib/latch/sandboxes" 2>/dev/null); do
			"$LATCH_BIN" destroy --purge "$c" >/dev/null 2>&1
		done
	fi
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	vm_cgroups_remove
	vm_ctrl_net_down
	[ -n "$BPFFS" ] && rm -rf "$BPFFS" 2>/dev/null
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch task
vm_root "documentation addresses only, and no uplink" pool=$POOL/26
SANDBOXES=$LATCH_ROOT/var/lib/latch/sandboxes


if ! L up "$NAME" >"$TMP/up.out" 2>&1; then
	fail "up: $(cat "$TMP/up.out")"
	lts_done
fi
ok "up $NAME"

# --- backup and restore -----------------------------------------------------------
L exec "$NAME" -- sh -c 'mkdir -p /var/lib/agent-state/sub && echo remembered > /var/lib/agent-state/memo && echo deep > /var/lib/agent-state/sub/x && dd if=/dev/urandom of=/var/lib/agent-state/blob bs=1k count=100 2>/dev/null && sha256sum /var/lib/agent-state/blob' >"$TMP/sum.guest"
out=$(L backup "$NAME" 2>&1) || true
check "backup_copies_guest_state_to_host ($out)" test "$(cat "$SANDBOXES/$NAME/state/memo" 2>/dev/null)" = remembered -a \
	"$(cat "$SANDBOXES/$NAME/state/sub/x" 2>/dev/null)" = deep
check "backup_is_byte_exact" test "$(sha256sum < "$SANDBOXES/$NAME/state/blob" | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$TMP/sum.guest")"

L exec "$NAME" -- rm -rf /var/lib/agent-state
out=$(L restore "$NAME" 2>&1) || true
check "restore_puts_state_back_in_guest ($out)" bash -c "[ \"\$('$LATCH_BIN' exec $NAME -- cat /var/lib/agent-state/memo)\" = remembered ] && '$LATCH_BIN' exec $NAME -- sha256sum /var/lib/agent-state/blob | grep -q \$(cut -d' ' -f1 '$TMP/sum.guest')"

# A hostile guest: symlinks out, '..' and absolute names, a device, and a huge file.
L exec "$NAME" -- sh -c 'cd /var/lib/agent-state && ln -sf /etc/shadow evil-link && mkfifo fifo && mknod dev c 1 3' >/dev/null 2>&1 || true
L backup "$NAME" >/dev/null 2>&1 || true
check "backup_writes_no_symlink_fifo_or_device" bash -c "! find '$SANDBOXES/$NAME/state' ! -type f ! -type d | grep -q ."
# A symlink pointing out of the state directory, to a file holding a marker.
L exec "$NAME" -- sh -c 'rm -rf /var/lib/agent-state; mkdir -p /var/lib/agent-state/a; echo pwned > /var/lib/escape-me; cd /var/lib/agent-state && ln -s ../../escape-me a/l; true'
L backup "$NAME" >/dev/null 2>&1 || true
check "backup_does_not_follow_guest_symlinks" bash -c "[ ! -e '$SANDBOXES/$NAME/state/a/l' ] && ! grep -rqs pwned '$SANDBOXES/$NAME'"
L exec "$NAME" -- sh -c 'dd if=/dev/zero of=/var/lib/agent-state/huge bs=1M count=17 2>/dev/null'
rc=0
out=$(L backup "$NAME" 2>&1) || rc=$?
check "backup_over_size_cap_refused_and_old_copy_kept (exit $rc)" test "$rc" != 0 -a -d "$SANDBOXES/$NAME/state/a"
L exec "$NAME" -- sh -c 'rm -rf /var/lib/agent-state; mkdir -p /var/lib/agent-state; echo remembered > /var/lib/agent-state/memo'
L backup "$NAME" >/dev/null

# --- latchd backs the state up every backup_interval seconds --------------------------
# Its upstream is a closed loopback port: the stored profile's names are asked there,
# and no query leaves the machine.
printf 'backup_interval = 2\ndns_upstream = 127.0.0.1:53999\n' >>"$CONF"
L exec "$NAME" -- sh -c 'echo periodic > /var/lib/agent-state/memo3'
vm_latchd
memo3_backed_up() { [ "$(cat "$SANDBOXES/$NAME/state/memo3" 2>/dev/null)" = periodic ]; }
wait_until -t 20 -i 0.2 memo3_backed_up || true
check "latchd_backs_up_the_guest_state_periodically" test "$(cat "$SANDBOXES/$NAME/state/memo3" 2>/dev/null)" = periodic
# exec and the periodic backups take turns on the agent's channel
execs=0
for i in 1 2 3 4 5 6; do
	[ "$(L exec "$NAME" -- echo "turn$i" 2>/dev/null)" = "turn$i" ] && execs=$((execs + 1))
	sleep 0.5 # the point: six execs spread over three backup intervals
done
check "exec_works_beside_periodic_backups ($execs of 6)" test "$execs" = 6
kill -TERM "$LATCHD_PID"; wait "$LATCHD_PID" 2>/dev/null
check "periodic_backups_are_audited" bash -c "'$LATCH_BIN' --json audit $NAME --kind backup | jq -e '[.entries[] | select(.decision == \"ok\")] | length > 0' >/dev/null"

# --- down backs up, up restores into a rebuilt guest --------------------------------
L exec "$NAME" -- sh -c 'echo before-down > /var/lib/agent-state/memo2'
out=$(L down "$NAME" 2>&1) || true
check "down_backs_up_first ($(echo "$out" | head -1))" test "$(cat "$SANDBOXES/$NAME/state/memo2" 2>/dev/null)" = before-down
virsh -q -c qemu:///system undefine "latch-$NAME" >/dev/null 2>&1 || true
check "domain_undefined_by_hand" bash -c "! virsh -q -c qemu:///system dominfo latch-$NAME >/dev/null 2>&1"
out=$(L up "$NAME" 2>&1) || true
check "up_rebuilds_guest_and_restores_state" bash -c "[ \"\$('$LATCH_BIN' exec $NAME -- cat /var/lib/agent-state/memo2 2>/dev/null)\" = before-down ]"
echo "$out" | grep -E "state:" | sed 's/^/#   /' || true

# --- task: a sealed clone ---------------------------------------------------------
# the allowed destination, behind the host (a guest never reaches the host's own addresses)
vm_ctrl_net "$POOL/26" "$CTRL_ADDR" && vm_ctrl_http "$CTRL_ADDR" "$CTRL_PORT" || fail "control_namespace_set_up"
vm_ctrl_forward "$TAP"
L egress "$NAME" allow "$CTRL_ADDR:$CTRL_PORT" >/dev/null
check "control_source_reaches_allowed_destination" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"

set +e
out=$(L task "$NAME" -- sh -c 'cat /var/lib/agent-state/memo2; echo to-stderr >&2; exit 5' 2>"$TMP/task.err"); rc=$?
set -e
check "task_relays_stdout_and_exit_code_with_state_of_source (rc $rc)" test "$rc" = 5 -a "$out" = before-down
check "task_relays_stderr" grep -q to-stderr "$TMP/task.err"
clone=$(sed -n 's/.*clone \(task-[0-9]*\) of.*/\1/p' "$TMP/task.err" | head -1)
check "task_clone_removed_after ($clone)" bash -c "[ -n '$clone' ] && [ ! -e /sys/class/net/lt-$clone ] && [ ! -e $BPFFS/latch/$clone ] && [ ! -e $SANDBOXES/$clone ] && ! virsh -q -c qemu:///system dominfo latch-$clone >/dev/null 2>&1"

set +e
L task "$NAME" -- sh -c "echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT" >"$TMP/sealed.out" 2>/dev/null
set -e
check "task_clone_is_sealed_cannot_reach_what_source_may" bash -c "! grep -q hello '$TMP/sealed.out'"
check "source_still_reaches_it" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"

# SIGTERM mid-task: the clone goes anyway.
"$LATCH_BIN" task "$NAME" -- sh -c 'echo started; sleep 120' >"$TMP/term.out" 2>"$TMP/term.err" & # $! is latch itself
tpid=$!
PIDS+=($tpid)
task_started_or_gone() { grep -q started "$TMP/term.out" 2>/dev/null || ! kill -0 "$tpid" 2>/dev/null; }
wait_until -t 60 task_started_or_gone || true
clone=$(sed -n 's/.*clone \(task-[0-9]*\) of.*/\1/p' "$TMP/term.err" | head -1)
check "task_clone_running_before_sigterm ($clone)" bash -c "grep -q started '$TMP/term.out' && virsh -q -c qemu:///system domstate latch-$clone 2>/dev/null | grep -q running"
kill -TERM "$tpid"
trc=0
wait_until -t 30 lts_not kill -0 "$tpid" || true
wait "$tpid" || trc=$?
check "task_exits_143_on_sigterm (rc $trc)" test "$trc" = 143
check "task_clone_removed_after_sigterm" bash -c "[ -n '$clone' ] && [ ! -e /sys/class/net/lt-$clone ] && [ ! -e $BPFFS/latch/$clone ] && [ ! -e $SANDBOXES/$clone ] && ! virsh -q -c qemu:///system dominfo latch-$clone >/dev/null 2>&1"
sed "s/^/   stderr: /" "$TMP/term.err"
echo "#   left: $(ls "$SANDBOXES" | tr '\n' ' ') $(ls /sys/class/net | grep "lt-task" || true) $(ls "$BPFFS/latch" 2>/dev/null | tr '\n' ' ') $(virsh -q -c qemu:///system list --all --name | grep task || true)"

out=$(L destroy "$NAME")
check "destroy_keeps_the_guest_state_backup_and_says_so" bash -c "[ \"\$(cat '$SANDBOXES/$NAME/state/memo2')\" = before-down ] && [ ! -e '$SANDBOXES/$NAME/sandbox' ] && echo \"\$1\" | grep -q 'guest-state backup kept in'" _ "$out"
L destroy --purge "$NAME" >/dev/null
check "destroy_purge_removes_state_and_backup" test ! -e "$SANDBOXES/$NAME"

lts_done
