#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_verify.sh - `latch verify NAME` from inside a real guest.
#
# Invariant defended: verify attacks from where the attacker sits (root in
# the guest, crafted frames through the guest's own NIC) and is judged by
# the kernel's counters; it exits 0 only when every attack was stopped and
# every control passed, and what it calls FAIL is a real leak.  A guest
# behind latch verifies (exit 0); the same guest with a deliberately
# weakened policy (an entry that allows verify's denied destination) gets
# exit 1 and FAIL on exactly that attack; revoked, exit 0 again.
#
# Test traffic never leaves the machine: a documentation /26 the host does
# not use, no uplink (`unreachable default`), every frame to documentation
# addresses or the host; forwarding is on for the tap alone, so that a
# frame the filter passed would be routed, into `unreachable default`.  The EXIT trap destroys the sandbox, pass or fail.
# Prints ok/FAIL lines and "N passed, M failed"; exit 1 on a failure, 77
# when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-verify
TABLE=31200
DENIED4=203.0.113.251 # verify's denied destination (loader/verify.c)

TEST=vm_verify
. "$HERE/lib_vm.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 libvirtd virtlogd; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
POOL=$(python3 "$HERE/free_net.py" ${LATCH_VERIFY_POOLS:-203.0.113.0/26 203.0.113.64/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"

TMP=
BPFFS=
cleanup() {
	set +e
	[ -n "$TMP" ] && "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	[ -n "$BPFFS" ] && rm -rf "$BPFFS" 2>/dev/null
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "$TMP" ] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch verify
vm_root "documentation addresses only, and no uplink" pool=$POOL pool6=2001:db8:5b00::/48

if ! L up "$NAME" >"$TMP/up.out" 2>&1; then
	fail "up: $(cat "$TMP/up.out")"
	echo "$pass passed, $failn failed"
	exit 1
fi
ok "up $NAME"
# the host forwards from the tap, as it does for a sandbox with an uplink: the
# policy alone then decides what leaves (the table's default stays unreachable)
vm_ctrl_forward "lt-$NAME"

# verify_run: `latch --json verify NAME`; output in $TMP/v.json, exit status in VRC
verify_run() {
	VRC=0
	L --json verify "$NAME" >"$TMP/v.json" 2>"$TMP/v.err" || VRC=$?
	echo "   $(jq -r '[.cases[] | "\(.case)=\(.result) (\(.saw))"] | join("; ")' "$TMP/v.json" 2>/dev/null || cat "$TMP/v.err")"
	[ "$VRC" = 0 ] || [ ! -s "$TMP/v.err" ] || sed 's/^/   stderr: /' "$TMP/v.err"
}
q() { jq -r "$1" "$TMP/v.json"; }

verify_run
check "behind latch: verify from inside the guest exits 0 (exit $VRC)" test "$VRC" = 0
check "behind latch: it ran in the guest" test "$(q .mode)" = guest
check "behind latch: at least 12 attacks, each stopped under the reason it names" \
	test "$(q '[.cases[] | select(.kind == "attack" and .result == "ok" and .saw == .want)] | length')" -ge 12
check "behind latch: every control passed" test "$(q '[.cases[] | select(.kind == "control" and .result != "ok")] | length')" = 0

L egress "$NAME" allow "$DENIED4" >/dev/null
verify_run
check "weakened: verify exits 1 (exit $VRC)" test "$VRC" = 1
check "weakened: FAIL on exactly the denied-destination attack, seen passing by the kernel" \
	test "$(q '[.cases[] | select(.result == "FAIL") | "\(.case)/\(.saw)"] | join(",")')" = "denied IPv4 destination/pass_policy"
L egress "$NAME" revoke "$DENIED4" >/dev/null
verify_run
check "revoked: verify exits 0 again (exit $VRC)" test "$VRC" = 0

echo "$pass passed, $failn failed"
[ "$failn" = 0 ]
