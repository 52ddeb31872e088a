#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_room_ws.sh - a writable workspace (`--workspace DIR:rw`): the room
# writes to an overlay, the run ends with a record of every change, the
# workspace is untouched unless --apply, and with it exactly the recorded
# changes land.  The control is the same script run on a copy of the
# workspace outside any room: what --apply leaves must equal it.
# shellcheck source=selftests/lib_room.sh
. "$(dirname "$0")/lib_room.sh"
lts_room_setup

R=$LTS_TMP/r.json
SRC=$LTS_TMP/src
# snapshot DIR: every path with its type, mode, owner, and content hash (or link target)
snapshot() {
	(cd "$1" && find . -mindepth 1 -printf '%p %y %m %u:%g %l\n' | sort &&
		find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}
make_tree() {
	rm -rf "$1"
	mkdir -p "$1/sub" "$1/gone/deep" "$1/keep"
	printf 'line one\nline two\n' >"$1/a.txt"
	echo b >"$1/sub/b.txt"
	echo same >"$1/keep/same.txt"
	echo old >"$1/gone/deep/x"
	printf '\0\1\2binary' >"$1/bin.dat"
	echo mode >"$1/mode.sh"
	chown -R "$ROOM_UID:$ROOM_UID" "$1"
}
# the script the room runs, and the control runs outside
SCRIPT='printf "line one\nline 2\nline three\n" > a.txt
echo new > n.txt
rm sub/b.txt
mkdir d && echo z > d/z
ln -s a.txt link
rm -r gone
printf "\0\3changed" > bin.dat
chmod 755 mode.sh
touch keep/same.txt
cp keep/same.txt keep/copy.txt && rm keep/copy.txt'

make_tree "$SRC"
make_tree "$WS"
before=$(snapshot "$WS")
room_json "$R" --workspace "$WS:rw" -- sh -c "$SCRIPT"
check_eq "the command ran (exit 0)" "$(jget "$R" .exit_code)" 0

# Invariant: the record lists every change, and only changes (a touch with the same bytes is none).
got=$(jget "$R" '.workspace.changes[] | "\(.change) \(.kind) \(.path)"' | sort)
want=$(printf '%s\n' "modified file a.txt" "added file n.txt" "deleted file sub/b.txt" "added dir d" "added file d/z" \
	"added symlink link" "deleted dir gone" "modified file bin.dat" "modified file mode.sh" | sort)
check_eq "the record: every change, nothing else" "$got" "$want"
check "text: a unified diff of a.txt" grep -qx -- "+line 2" <<<"$(jget "$R" '.workspace.changes[] | select(.path == "a.txt") | .diff')"
check "  with the removed line" grep -qx -- "-line two" <<<"$(jget "$R" '.workspace.changes[] | select(.path == "a.txt") | .diff')"
check_eq "binary: no diff, marked binary" "$(jget "$R" '.workspace.changes[] | select(.path == "bin.dat") | [.binary, .diff] | map(tostring) | join(",")')" "true,null"
check_eq "a mode change is recorded with the new mode" "$(jget "$R" '.workspace.changes[] | select(.path == "mode.sh") | .mode')" 0755
check_eq "a symlink is recorded with its target" "$(jget "$R" '.workspace.changes[] | select(.path == "link") | .target')" a.txt

# Invariant: without --apply the workspace is exactly as it was.
check_eq "without --apply: the workspace is unchanged" "$(snapshot "$WS")" "$before"
check_eq "without --apply: applied is false" "$(jget "$R" .workspace.applied)" false

# Invariant: with --apply exactly the recorded changes land: the result equals the script run outside.
(cd "$SRC" && setpriv --reuid=$ROOM_UID --regid=$ROOM_UID --clear-groups sh -c "$SCRIPT")
room_json "$R" --apply --workspace "$WS:rw" -- sh -c "$SCRIPT"
check_eq "--apply: applied" "$(jget "$R" '[.workspace.applied, .exit] | map(tostring) | join(",")')" "true,0"
check_eq "--apply: the workspace equals the control run outside a room" "$(snapshot "$WS")" "$(snapshot "$SRC")"

# Invariant: what cannot be applied exactly is not applied at all.
make_tree "$WS"
before=$(snapshot "$WS")
room_json "$R" --apply --workspace "$WS:rw" -- sh -c 'echo x > a.txt; mkfifo pipe'
check_eq "a FIFO in the changes: nothing applied, latch's failure (125)" \
	"$(jget "$R" '[.workspace.applied, .exit] | map(tostring) | join(",")')" "false,125"
check "  and the reason is named" grep -q "pipe is a FIFO" <<<"$(jget "$R" .workspace.apply_error)"
check_eq "  the workspace is unchanged" "$(snapshot "$WS")" "$before"

# Invariant: the room's writes are bounded by its memory (the upper layer is a tmpfs of that size).
room_json "$R" --memory 32M --workspace "$WS:rw" -- sh -c 'head -c 64M /dev/zero > big 2>/dev/null; echo $?'
check_cmp "writing 64 MiB into a 32 MiB room fails" "$(jget "$R" '.output | tonumber? // 1')" -ne 0
check "  and nothing of it reaches the workspace" test ! -e "$WS/big"

# Invariant: a symlink planted by the room is applied as a link, never followed out of the workspace.
make_tree "$WS"
room_json "$R" --apply --workspace "$WS:rw" -- sh -c 'ln -s /etc escape; mkdir -p evil; ln -s /etc evil/etc'
check_eq "links to /etc are applied as links" "$(readlink "$WS/escape"),$(readlink "$WS/evil/etc")" "/etc,/etc"
check "  and nothing was written under /etc" test ! -e /etc/escape

# Invariant: --apply writes a room's content, never its authority: no set-uid, set-gid or sticky
# bit, no file capability or other extended attribute, no device node, FIFO or socket, and what
# lands is the workspace owner's, whoever the room ran as.  The attack runs as root in a
# workspace root may write to, as in the issue (`chmod 4755` on a copy of a program).
make_tree "$WS"
chmod 0777 "$WS"
room_json "$R" --user root --apply --workspace "$WS:rw" -- sh -c '
cp /usr/bin/id suid && chmod 4755 suid
cp /usr/bin/id sgid && chmod 2755 sgid
mkdir sticky && chmod 1777 sticky
mkdir sgiddir && chmod 2775 sgiddir
echo plain > plain && chmod 0755 plain
python3 -c "
import os
os.setxattr(\"plain\", \"user.latch\", b\"x\"); print(\"user xattr set\")
try:
    os.setxattr(\"suid\", \"security.capability\", bytes.fromhex(\"0100000200200000000000000000000000000000\")); print(\"capability set\")
except OSError as e:
    print(\"capability refused\", e.errno)
"
mknod dev c 1 3 2>/dev/null && echo "device made" || echo "device refused"
ls -l suid sgid'
check_eq "the set-id attack: applied (exit 0)" "$(jget "$R" '[.workspace.applied, .exit] | map(tostring) | join(",")')" "true,0"
check "  the room did make a set-uid root file and a user xattr (the attack is real)" \
	grep -q -- "-rwsr-xr-x 1 root" <<<"$(jget "$R" .output)"
check "  and its user xattr" grep -q "user xattr set" <<<"$(jget "$R" .output)"
check "  a file capability could not be set in the room (no CAP_SETFCAP)" grep -q "capability refused" <<<"$(jget "$R" .output)"
check "  nor a device node (no CAP_MKNOD)" grep -q "device refused" <<<"$(jget "$R" .output)"
check_eq "  the record shows the room's mode and the mode applied" \
	"$(jget "$R" '.workspace.changes[] | select(.path == "suid") | "\(.mode) \(.applied_mode)"')" "4755 0755"
check_eq "no set-uid, set-gid or sticky bit reached the workspace" "$(find "$WS" -perm /7000 -printf '%P %m\n')" ""
check_eq "  each applied with its permission bits, the workspace owner's" \
	"$(stat -c '%n %a %u:%g' "$WS"/suid "$WS"/sgid "$WS"/sticky "$WS"/sgiddir | sed "s|$WS/||")" \
	"$(printf '%s\n' "suid 755 $ROOM_UID:$ROOM_UID" "sgid 755 $ROOM_UID:$ROOM_UID" "sticky 777 $ROOM_UID:$ROOM_UID" "sgiddir 775 $ROOM_UID:$ROOM_UID")"
check_eq "no extended attribute reached the workspace (capability, user.*)" \
	"$(python3 -c 'import os,sys; print(sum(len(os.listxattr(os.path.join(sys.argv[1], f), follow_symlinks=False)) for f in ("suid", "sgid", "plain")))' "$WS")" 0
check "no device node in the workspace" test ! -e "$WS/dev"
# control: an ordinary 0755 file lands as 0755, the workspace owner's, with its bytes
check_eq "control: an ordinary 0755 file is applied 0755, the workspace owner's" \
	"$(stat -c '%a %u:%g' "$WS/plain"),$(cat "$WS/plain")" "755 $ROOM_UID:$ROOM_UID,plain"
chmod 0755 "$WS"

# Invariant: a socket the room bound in the workspace is never written to the host (nothing applied).
make_tree "$WS"
before=$(snapshot "$WS")
room_json "$R" --apply --workspace "$WS:rw" -- python3 -c \
	'import socket; open("x", "w").write("x"); socket.socket(socket.AF_UNIX).bind("sock")'
check "a socket in the changes: nothing applied, and why" \
	grep -q "sock is a FIFO, socket or device node" <<<"$(jget "$R" .workspace.apply_error)"
check_eq "  the workspace is unchanged" "$(snapshot "$WS")" "$before"

lts_done
