#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_workspace.sh - the 9p workspace of a VM sandbox (`latch up NAME
# --workspace DIR`), from both sides: the guest sees the host's file at
# /workspace and can write files that appear in DIR; what it can't do is
# reach past DIR or make the host trust what it wrote.
#
# EVERY FILE IN THE WORKSPACE IS UNTRUSTED.  It was written by the guest;
# the host must treat it as hostile input (docs/vm.md, "The workspace is
# untrusted").  This test never runs, sources or follows anything from DIR:
# it reads contents with `cat`/python on paths it checks first, and lstat()s
# everything else.
#
# What latch shares: one directory, `<filesystem accessmode='mapped'>`.  In
# mapped mode qemu keeps the guest's idea of owner, group, mode and file type
# in `user.virtfs.*` xattrs and creates the real host file as itself, with a
# plain mode.  So whatever root in the guest does:
#   - a chown (even to 0:0) changes only the xattr: the host file stays owned
#     by the qemu process's user (root or libvirt-qemu), never a uid the guest
#     picked;
#   - a chmod u+s / g+s / a+x changes only the xattr: the host file has no
#     setuid/setgid bit and is not executable by others;
#   - a symlink (to /etc/passwd, say) is a REGULAR FILE on the host whose
#     contents are the target; no host tool that lstat()s it sees a link;
#   - a device node is a regular file on the host;
#   - `..` from /workspace is the guest's own root; the 9p server never walks
#     above DIR, and a symlink the HOST put in DIR is resolved by the guest in
#     the guest, so the host's file it points to is never read.
# A control without --workspace shows no 9p mount and no <filesystem> at all.
#
# Test traffic: none leaves the guest; the pool is a documentation range the
# host does not use and there is no uplink.  Everything (sandbox, pins, temp
# dirs) is removed by the EXIT trap, pass or fail.
#
# Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".  Exit 1 on
# any failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-ws
TABLE=31800

TEST=vm_workspace
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd virsh stat; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 "$TOP/selftests/free_net.py" "$@"
}
POOL=$(free_pool ${LATCH_VM_POOLS:-198.51.100.0/26 198.51.100.64/26 203.0.113.128/26 203.0.113.192/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"

TMP=
BPFFS=
cleanup() {
	set +e
	[ -n "$TMP" ] && "$LATCH_BIN" destroy --purge "$NAME" >/dev/null 2>&1
	[ -n "$BPFFS" ] && rm -rf "$BPFFS"
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "$TMP" ] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch workspace
vm_root "documentation addresses only, and no uplink" pool=$POOL
G() { timeout 60 "$LATCH_BIN" exec "$NAME" -- "$@"; } # run in the guest


# The shared directory, and host files beside it that the guest must never read.
SHARE=$TMP/share # holds DIR and, beside it, what the guest must never reach
mkdir -m 0755 "$SHARE"
WS=$SHARE/ws
mkdir "$WS"
chmod 0777 "$WS" # qemu may run as libvirt-qemu; it creates the guest's files
echo "hello-from-host-$$" > "$WS/hello"
chmod 0644 "$WS/hello"
SECRET="host-secret-$$-$RANDOM"
echo "$SECRET" > "$SHARE/secret" # beside DIR, i.e. DIR/../secret on the host
chmod 0644 "$SHARE/secret"
ln -s "$SHARE/secret" "$WS/hostlink-abs" # a symlink the HOST put in DIR, pointing out of it
ln -s ../secret "$WS/hostlink-rel"
outside_before=$(cd "$SHARE" && find . -path ./ws -prune -o -print | sort)

# --- a workspace path with control characters: refused before anything exists -----
# (a newline in it would write a key of its own into the sandbox's state file)
BADWS=$SHARE/$'ws\nuplink = eth0'
mkdir "$BADWS"
rc=0
out=$(L up "$NAME" --workspace "$BADWS" 2>&1) || rc=$?
echo "#   $out"
check "workspace_with_a_newline_refused_exit_2" test "$rc" = 2 -a "$(echo "$out" | wc -l)" = 1
check "workspace_refusal_names_control_characters" bash -c "echo \"\$1\" | grep -q 'control characters'" _ "$out"
check "workspace_refusal_creates_nothing" bash -c "[ ! -e /sys/class/net/lt-$NAME ] && [ ! -e '$LATCH_ROOT/var/lib/latch/sandboxes/$NAME' ]"
rc=0
out=$(L up "$NAME" --workspace "$SHARE/"$'\e[2Jws' 2>&1) || rc=$?
check "workspace_with_an_escape_refused_exit_2" test "$rc" = 2
rmdir "$BADWS"

# --- up with the workspace ------------------------------------------------------
rc=0
L up "$NAME" --workspace "$WS" >"$TMP/up.out" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
	fail "up_with_workspace: exit $rc: $(cat "$TMP/up.out")"
	lts_done
fi
ok "up_with_workspace"

DOM=latch-$NAME
check "domain_xml_shares_dir_mapped" bash -c "virsh -q -c qemu:///system dumpxml $DOM | tr -d '\n' | grep -Eq \"<filesystem type='mount' accessmode='mapped'>.*<source dir='$WS'/>.*<target dir='workspace'/>\""
check "guest_mounts_workspace_9p_nosuid_nodev" bash -c "'$LATCH_BIN' exec $NAME -- cat /proc/mounts | grep -E '^workspace /workspace 9p ' | grep -q nosuid,nodev"
out=$(G cat /workspace/hello 2>/dev/null || true)
check "guest_reads_host_file" test "$out" = "hello-from-host-$$"

# The qemu process's user: whatever the guest does, that is who owns its files on the host.
QPID=$(pgrep -f -- "-name guest=$DOM," | head -n1 || true)
QUID=$(stat -c %u "/proc/$QPID" 2>/dev/null || echo "?")
echo "#   qemu pid $QPID runs as uid $QUID"

# --- the guest writes; the host sees a plain file -----------------------------------
G sh -c 'echo written-by-guest > /workspace/fromguest' >/dev/null 2>&1 || true
check "guest_write_appears_on_host" bash -c "[ -f '$WS/fromguest' ] && [ ! -L '$WS/fromguest' ] && [ \"\$(cat '$WS/fromguest')\" = written-by-guest ]"
check "host_file_owned_by_qemu_user" test "$(stat -c %u "$WS/fromguest")" = "$QUID"

# Root in the guest claims another owner, then root, and setuid: only xattrs change.
G sh -c 'chown 4242:4242 /workspace/fromguest' >/dev/null 2>&1 || true
gown=$(G stat -c %u:%g /workspace/fromguest 2>/dev/null || true)
check "guest_chown_seen_in_guest ($gown)" test "$gown" = 4242:4242
check "guest_chown_does_not_change_host_owner" test "$(stat -c %u:%g "$WS/fromguest")" != 4242:4242 -a "$(stat -c %u "$WS/fromguest")" = "$QUID"
check "guest_owner_kept_only_in_virtfs_xattr" python3 -c "
import os, sys
p = sys.argv[1]
sys.exit(0 if int.from_bytes(os.getxattr(p, 'user.virtfs.uid'), 'little') == 4242 else 1)" "$WS/fromguest"
G sh -c 'echo "#!/bin/sh" > /workspace/suid; chown 0:0 /workspace/suid; chmod 6755 /workspace/suid' >/dev/null 2>&1 || true
gmode=$(G stat -c %a:%u /workspace/suid 2>/dev/null || true)
hmode=$(stat -c %a "$WS/suid" 2>/dev/null || echo missing)
echo "#   guest sees suid as mode:uid $gmode; host mode $hmode owner $(stat -c %U "$WS/suid" 2>/dev/null)"
check "guest_chmod_6755_seen_in_guest" test "$gmode" = 6755:0
check "guest_setuid_never_reaches_host_mode" python3 -c "
import os, stat, sys
m = os.lstat(sys.argv[1]).st_mode
sys.exit(0 if stat.S_ISREG(m) and not m & (stat.S_ISUID | stat.S_ISGID | stat.S_IXOTH | stat.S_IWOTH) else 1)" "$WS/suid"

# A symlink the guest makes is no symlink on the host.
G ln -s /etc/passwd /workspace/evil-link >/dev/null 2>&1 || true
glink=$(G readlink /workspace/evil-link 2>/dev/null || true)
check "guest_sees_its_symlink ($glink)" test "$glink" = /etc/passwd
check "guest_symlink_is_plain_file_on_host" python3 -c "
import os, stat, sys
p = sys.argv[1]
m = os.lstat(p).st_mode
sys.exit(0 if stat.S_ISREG(m) and open(p, 'rb').read() == b'/etc/passwd' else 1)" "$WS/evil-link"
G ln -s ../../../../../../etc/shadow /workspace/evil-rel >/dev/null 2>&1 || true
check "guest_relative_symlink_is_plain_file_on_host" bash -c "[ -f '$WS/evil-rel' ] && [ ! -L '$WS/evil-rel' ]"
G mknod /workspace/evil-dev c 1 1 >/dev/null 2>&1 || true
check "guest_device_node_is_plain_file_on_host" bash -c "[ ! -e '$WS/evil-dev' ] || { [ -f '$WS/evil-dev' ] && [ ! -c '$WS/evil-dev' ]; }"

# --- no way out of DIR ------------------------------------------------------------------
out=$(G cat /workspace/../secret 2>/dev/null || true)
check "dotdot_from_workspace_is_guest_root" bash -c "! echo '$out' | grep -q '$SECRET' && '$LATCH_BIN' exec $NAME -- ls /workspace/.. | grep -qx workspace"
out=$(G sh -c "cd /workspace && cat ../../../secret ../secret ../../share/secret ../../../$(basename "$TMP")/share/secret" 2>/dev/null || true)
check "dotdot_paths_never_reach_host_files_beside_dir" bash -c "! echo '$out' | grep -q '$SECRET'"
out=$(G sh -c 'cat /workspace/hostlink-abs; cat /workspace/hostlink-rel' 2>/dev/null || true)
check "host_symlink_out_of_dir_not_followed_to_host" bash -c "! echo '$out' | grep -q '$SECRET'"
G sh -c 'echo x > /workspace/../escaped; echo y > /workspace/../../escaped2' >/dev/null 2>&1 || true
outside_after=$(cd "$SHARE" && find . -path ./ws -prune -o -print | sort)
check "guest_writes_land_only_inside_dir" bash -c "[ '$outside_before' = '$outside_after' ] && [ -z \"\$(find '$TMP' -path '$WS' -prune -o -name 'escaped*' -print)\" ]"
check "host_secret_unchanged" test "$(cat "$SHARE/secret")" = "$SECRET"

# --- control: the same sandbox without --workspace has no /workspace mount -------------
rc=0
L destroy "$NAME" >/dev/null 2>&1 || rc=$?
check "destroy_leaves_workspace_files_on_host" test "$rc" = 0 -a -f "$WS/fromguest" -a -f "$WS/hello"
rc=0
L up "$NAME" >"$TMP/up2.out" 2>&1 || rc=$?
check "control_up_without_workspace" test "$rc" = 0
if [ "$rc" = 0 ]; then
	check "control_domain_xml_has_no_filesystem" bash -c "! virsh -q -c qemu:///system dumpxml $DOM | grep -q '<filesystem'"
	check "control_guest_has_no_9p_mount" bash -c "! '$LATCH_BIN' exec $NAME -- cat /proc/mounts | grep -Eq ' 9p |/workspace'"
	check "control_guest_has_no_9p_device" bash -c "[ -z \"\$('$LATCH_BIN' exec $NAME -- sh -c 'cat /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null')\" ]"
	out=$(G sh -c 'ls -A /workspace' 2>/dev/null || true)
	check "control_guest_workspace_dir_empty" test -z "$out"
	L destroy "$NAME" >/dev/null 2>&1 || true
fi

lts_done
