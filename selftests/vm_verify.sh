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
# Names, through the sandbox's real resolver (latchd, its upstream dnsmasq
# behind the host): from inside the guest, a made-up name the profile does
# not list is REFUSED beside an allowed name that is answered; with
# --rebind-name, the upstream's rebinding name (an allowed name answering
# 10.0.0.5) is REFUSED beside the name check passing it.  A profile whose
# CIDR entry exempts 10.0.0.0/8 makes exactly the rebinding rows FAIL (the
# guest really got 10.0.0.5), and nothing else.
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
DNS4=198.51.100.157   # dnsmasq behind the host: latchd's upstream
OK4=198.51.100.158    # ok.example (nothing needs to answer there)

TEST=vm_verify
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 libvirtd virtlogd dnsmasq; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
POOL=$(python3 "$HERE/free_net.py" ${LATCH_VERIFY_POOLS:-203.0.113.0/26 203.0.113.64/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"

TMP=
BPFFS=
PIDS=()
cleanup() {
	set +e
	vm_sandbox_down
	vm_ctrl_net_down
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch verify
vm_ctrl_net "$POOL" "$DNS4" || { fail "control namespace set up"; lts_done; }
ip netns exec "$CTRL_NS" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root --listen-address="$DNS4" \
	--bind-interfaces --port=53 --host-record="ok.example,$OK4" --host-record="rebind.example,10.0.0.5" \
	>"$TMP/dnsmasq.log" 2>&1 &
PIDS+=($!)
vm_root "documentation addresses only, and no uplink" pool=$POOL pool6=2001:db8:5b00::/48 dns_upstream=$DNS4 \
	profile=names
mkdir -p "$LATCH_ROOT/etc/latch/profiles"
printf 'ok.example:80\nrebind.example:80\n' >"$LATCH_ROOT/etc/latch/profiles/names.txt"
# weakened: a CIDR entry exempts 10.0.0.0/8 from the rebinding filter on its port
printf 'ok.example:80\nrebind.example:80\n10.0.0.0/8:80\n' >"$LATCH_ROOT/etc/latch/profiles/weak.txt"
chmod 0644 "$LATCH_ROOT"/etc/latch/profiles/*.txt
vm_latchd

if ! L up "$NAME" >"$TMP/up.out" 2>&1; then
	fail "up: $(cat "$TMP/up.out")"
	lts_done
fi
ok "up $NAME"
# the host forwards from the tap, as it does for a sandbox with an uplink: the
# policy alone then decides what leaves (the table's default stays unreachable)
vm_ctrl_forward "lt-$NAME"

# verify_run [ARG...]: `latch --json verify NAME ARG...`; output in $TMP/v.json, exit status in VRC
verify_run() {
	VRC=0
	L --json verify "$NAME" "$@" >"$TMP/v.json" 2>"$TMP/v.err" || VRC=$?
	echo "#   $(jq -r '[.cases[] | "\(.case)=\(.result) (\(.saw))"] | join("; ")' "$TMP/v.json" 2>/dev/null || cat "$TMP/v.err")"
	[ "$VRC" = 0 ] || [ ! -s "$TMP/v.err" ] || sed 's/^/#   stderr: /' "$TMP/v.err"
}
q() { jq -r "$1" "$TMP/v.json"; }

verify_run
check "behind latch: verify from inside the guest exits 0 (exit $VRC)" test "$VRC" = 0
check "behind latch: it ran in the guest" test "$(q .mode)" = guest
check "behind latch: at least 12 attacks, each stopped under the reason it names" \
	test "$(q '[.cases[] | select(.kind == "attack" and .result == "ok" and .saw == .want)] | length')" -ge 12
check "behind latch: every control passed" test "$(q '[.cases[] | select(.kind == "control" and .result != "ok")] | length')" = 0
row() { q ".cases[] | select(.case == \"$1\") | \"\\(.kind)/\\(.result)/\\(.saw)\""; }
check "names: control: the guest's query for an allowed name is answered through the resolver" \
	test "$(row "allowed name via the resolver")" = "control/ok/NOERROR $OK4 for ok.example"
check "names: the guest's query for a made-up unlisted name is REFUSED" \
	grep -Eqx 'attack/ok/REFUSED for latch-verify-[0-9a-f]{12}\.invalid' <<<"$(row "unlisted name via the resolver")"
check "names: the rebinding answers were test-run in latchd, each refused" \
	test "$(q '[.cases[] | select((.case | startswith("rebinding answer")) and .result == "ok" and (.saw | endswith("(test-run in latchd)")))] | length')" = 8
check "names: every name row was tried" test "$(q .not_tried)" = 0

verify_run --rebind-name rebind.example
check "--rebind-name: verify exits 0 (exit $VRC)" test "$VRC" = 0
check "--rebind-name: control: rebind.example passes the name check" \
	test "$(row "rebinding name allowed")" = "control/ok/allowed"
check "--rebind-name: the guest's query for rebind.example (10.0.0.5 upstream) is REFUSED" \
	test "$(row "rebinding name via the resolver")" = "attack/ok/REFUSED for rebind.example"

L egress "$NAME" profile weak >/dev/null
verify_run --rebind-name rebind.example
check "weak profile: verify exits 1 (exit $VRC)" test "$VRC" = 1
check "weak profile: FAIL on exactly the 10.0.0.5 rows, and the guest really got the address" \
	test "$(q '[.cases[] | select(.result == "FAIL") | "\(.case)/\(.saw)"] | join(",")')" = \
	"rebinding answer 10.0.0.5/answered for ok.example (test-run in latchd),rebinding name via the resolver/NOERROR 10.0.0.5 for rebind.example"
check "weak profile: every other row is ok" test "$(q '[.cases[] | select(.result != "ok" and .result != "FAIL")] | length')" = 0
L egress "$NAME" profile names >/dev/null
echo "#   the table, as printed:"
L verify "$NAME" --rebind-name rebind.example 2>&1 | sed 's/^/#   | /'

L egress "$NAME" allow "$DENIED4" >/dev/null
verify_run
check "weakened: verify exits 1 (exit $VRC)" test "$VRC" = 1
check "weakened: FAIL on exactly the denied-destination attack, seen passing by the kernel" \
	test "$(q '[.cases[] | select(.result == "FAIL") | "\(.case)/\(.saw)"] | join(",")')" = "denied IPv4 destination/pass_policy"
L egress "$NAME" revoke "$DENIED4" >/dev/null
verify_run
check "revoked: verify exits 0 again (exit $VRC)" test "$VRC" = 0

lts_done
