#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 600
#
# vm_tty.sh - a terminal into a real guest (`latch exec -i/-t/-it`, under
# libvirt, TCG or KVM), driven the way a user drives it: latch runs in a
# tmux pane (a real pty, 100x30), keys go in with send-keys and the screen
# comes back with capture-pane.
#
# Invariant (docs/INVARIANTS.md): the user's terminal is never left raw.
# After every way `latch exec -t` ends (the command's own end, ^C, EOF, the
# guest destroyed under it) `stty -a` in that same pane shows icanon and
# echo again.  Beside it: the pty has the pane's size and follows a resize;
# ^C is SIGINT for the guest's command (latch exits 130); ^D ends `cat`;
# `-i` pipes stdin; controls: without -i stdin is neither read nor passed,
# and -t without a terminal is refused in one line.
#
# Test traffic: none; the pool is a documentation range and there is no
# uplink.  The tmux server is this test's own (-L), killed by the EXIT trap
# with the sandbox, pins and temp dirs, pass or fail.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-tty
TABLE=32050

TEST=vm_tty
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd virsh tmux; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
POOL=$(python3 "$TOP/selftests/free_net.py" ${LATCH_VM_POOLS:-198.51.100.0/26 198.51.100.64/26 203.0.113.128/26 203.0.113.192/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"

SOCK=lt-tty-$$ # this test's own tmux server
TMP=
BPFFS=
PIDS=()
cleanup() {
	set +e
	tmux -L "$SOCK" kill-server >/dev/null 2>&1
	vm_sandbox_down
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch tty
vm_root "documentation addresses only, and no uplink" pool=$POOL

rc=0
L up "$NAME" >"$TMP/up.out" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
	fail "up: exit $rc" "$(tail -n 5 "$TMP/up.out")"
	lts_done
fi
ok "up"

# --- the pane: a host shell on a real pty, 100 columns by 30 rows ---------------------
T() { tmux -L "$SOCK" "$@"; }
T -f /dev/null new-session -d -s t -x 100 -y 30 "env -i PATH=$PATH TERM=xterm HOME=$TMP LATCH_ROOT=$LATCH_ROOT LATCH_BPFFS=$LATCH_BPFFS LATCH_CGROUP=$LATCH_CGROUP PS1='host$ ' bash --norc --noprofile"
T set-option -g status off
T resize-window -t t -x 100 -y 30
screen() { T capture-pane -p -t t; }
type_line() { T send-keys -t t -l "$1"; T send-keys -t t Enter; }
on_screen() { screen | grep -qF -- "$1"; }
# Markers the test waits for are computed in the guest (READY$((6*7)) -> READY42), so the
# typed command line, which the screen shows too, never matches them.
# run_in_pane TAG CMD: CMD in the pane (latch's own stderr kept in TAG.err: a -t
# session's guest output is all stdout), then its status and the terminal's settings
run_in_pane() {
	rm -f "$TMP/$1.rc" "$TMP/$1.stty" "$TMP/$1.err"
	type_line "$2 2>>$TMP/$1.err; echo \$? > $TMP/$1.rc; stty -a > $TMP/$1.stty"
}
# said TAG: what latch said on stderr, for a failure's diagnostics
said() { echo "latch said: $(tr '\n' '|' <"$TMP/$1.err" 2>/dev/null)"; }
done_in_pane() { [ -s "$TMP/$1.rc" ] && [ -s "$TMP/$1.stty" ]; }
# restored TAG: the settings latch left have canonical mode and echo, as a terminal must
restored() { grep -qw icanon "$TMP/$1.stty" && grep -qw echo "$TMP/$1.stty" && ! grep -qw -- -icanon "$TMP/$1.stty"; }
wait_until -t 10 on_screen 'host$'
type_line "stty size > $TMP/host.size"
wait_until -t 10 test -s "$TMP/host.size"
echo "#   the pane's terminal: $(cat "$TMP/host.size") (rows cols)"

# --- a shell in the guest: its pty has the pane's size, and follows a resize -----------
# (the guest's command prints the first marker itself: keys typed after a latch that
# failed at once would reach the pane's host shell, which answers echo and stty alike)
in_guest() { [ ! -e "$TMP/$1.rc" ]; } # TAG: its latch still runs
run_in_pane sh "$LATCH_BIN exec -it $NAME -- sh -c 'echo GUEST-\$((6*7)); exec sh'"
check "the guest shell starts ($(said sh))" wait_until -t 60 on_screen GUEST-42
type_line "echo READY\$((6*7))"
check "the guest shell answers keys" wait_until -t 60 on_screen READY42
type_line "stty size; echo SIZE-\$((1+1))"
wait_until -t 20 on_screen SIZE-2
check_eq "the guest pty has the terminal's size" "$(screen | grep -E '^[0-9]+ [0-9]+$' | tail -n1)" "$(cat "$TMP/host.size")"
type_line "clear"
T resize-window -t t -x 120 -y 40
sleep 1
type_line "stty size; echo SIZE-\$((2+2))"
wait_until -t 20 on_screen SIZE-4
check_eq "a resize reaches the guest pty" "$(screen | grep -E '^[0-9]+ [0-9]+$' | tail -n1)" "40 120"
check "... still in the guest's shell" in_guest sh
type_line "exit 3"
check "latch exits when the guest shell does" wait_until -t 30 done_in_pane sh
check_eq "... with the shell's status ($(said sh))" "$(cat "$TMP/sh.rc" 2>/dev/null)" 3
check "the host terminal is restored after a normal end" restored sh

# --- latch shell: a login shell, the same terminal handling --------------------------------
type_line "clear"
run_in_pane shell "$LATCH_BIN shell $NAME"
wait_until -t 60 on_screen '# ' # the guest's root prompt (the pane's host shell says host$)
type_line "echo SH-\$((40+2))-\$(pwd)"
check "latch shell gives a shell at the terminal" wait_until -t 60 on_screen "SH-42-/"
check "... in the guest ($(said shell))" in_guest shell
type_line "exit 4"
check "latch shell ends with the shell" wait_until -t 30 done_in_pane shell
check_eq "... with its status" "$(cat "$TMP/shell.rc" 2>/dev/null)" 4
check "the host terminal is restored after latch shell" restored shell
rc=0
out=$(timeout 60 "$LATCH_BIN" shell "$NAME" </dev/null 2>&1) || rc=$?
check "control: latch shell without a terminal: exit 125, one line" test "$rc" = 125 -a "$(wc -l <<<"$out")" = 1

# --- ^C is the guest's: SIGINT for its command, latch exits 130 -------------------------
type_line "clear"
run_in_pane int "$LATCH_BIN exec -it $NAME -- sh -c 'echo SLEEPING-\$((6*7)); exec sleep 1000'"
wait_until -t 60 on_screen SLEEPING-42
T send-keys -t t C-c
check "^C ends the guest's sleep 1000" wait_until -t 30 done_in_pane int
check_eq "... and latch exits 130" "$(cat "$TMP/int.rc" 2>/dev/null)" 130
check "the host terminal is restored after ^C" restored int
gone=$(timeout 60 "$LATCH_BIN" exec "$NAME" -- sh -c 'pidof sleep || echo none' 2>&1)
check_eq "no sleep left in the guest" "$gone" none

# --- ^D at the start of a line is EOF for cat in the guest ---------------------------------
type_line "clear"
run_in_pane eof "$LATCH_BIN exec -it $NAME -- sh -c 'echo CATTING-\$((6*7)); cat; echo CAT-ENDED-\$((6*7))'"
wait_until -t 60 on_screen CATTING-42
type_line "typed-line-$$"
wait_until -t 20 on_screen "typed-line-$$"
T send-keys -t t C-d
check "^D ends the guest's cat" wait_until -t 30 done_in_pane eof
check "... which saw it as EOF" on_screen CAT-ENDED-42
check_eq "... and latch exits 0" "$(cat "$TMP/eof.rc" 2>/dev/null)" 0
check "the host terminal is restored after EOF" restored eof

# --- -i alone: stdin piped; controls: no -i reads nothing; -t needs a terminal ------------
out=$(echo "hi-$$" | timeout 60 "$LATCH_BIN" exec -i "$NAME" -- cat 2>&1)
check_eq "exec -i pipes stdin to the guest's cat" "$out" "hi-$$"
out=$(printf 'a\nb\nc\n' | timeout 60 "$LATCH_BIN" exec -i "$NAME" -- wc -l 2>&1)
check_eq "... every line of it, and its end" "$(tr -d ' ' <<<"$out")" 3
out=$(echo "hi-$$" | timeout 60 "$LATCH_BIN" exec "$NAME" -- cat 2>&1)
check_eq "control: without -i the guest's stdin is empty" "$out" ""
out=$( { timeout 60 "$LATCH_BIN" exec "$NAME" -- true; cat; } <<<"kept-$$" 2>&1)
check_eq "control: without -i latch reads none of its stdin" "$out" "kept-$$"
rc=0
out=$(timeout 60 "$LATCH_BIN" exec -t "$NAME" -- true </dev/null 2>&1) || rc=$?
check_eq "exec -t without a terminal: exit 125" "$rc" 125
check "... in one latch: line" test "$(wc -l <<<"$out")" = 1 -a "${out#latch: }" != "$out"

# --- the guest destroyed under a session: the terminal is restored, latch says so ----------
type_line "clear"
run_in_pane kill "$LATCH_BIN exec -it $NAME -- sh -c 'echo DOOMED-\$((6*7)); exec sleep 1000'"
wait_until -t 60 on_screen DOOMED-42
virsh -q -c qemu:///system destroy "latch-$NAME" >/dev/null 2>&1
check "latch ends when the guest is destroyed" wait_until -t 30 done_in_pane kill
krc=$(cat "$TMP/kill.rc" 2>/dev/null)
check "... exiting non-zero ($krc)" test -n "$krc" -a "$krc" != 0
echo "#   latch said: $(cat "$TMP/kill.err" 2>/dev/null)"
check "... with one latch: line" bash -c "[ \$(wc -l <'$TMP/kill.err') = 1 ] && grep -q '^latch: ' '$TMP/kill.err'"
check "the host terminal is restored after the guest died" restored kill

lts_done
