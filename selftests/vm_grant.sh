#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_grant.sh - a grant asked for from inside a real guest (TCG here) with
# the default image's latch-ask, approved on the host with `latch approve`.
#
# Invariants defended (docs/INVARIANTS.md, the grant rows):
#   - the guest reaches the granted destination only after the approval, and
#     not after the deadline; a control destination beside it stays closed;
#   - the host resolves: the guest names the host, latchd looks it up;
#   - the guest can't approve: nothing inside it reaches latchd's socket, and
#     the ask endpoint refuses an approval sent to it.
#
# Test traffic never leaves the machine: a documentation /26 the host does
# not use, no uplink (`unreachable default`), and the destinations (an HTTP
# server for docs.example and one for a control address) and latchd's DNS
# upstream (dnsmasq naming docs.example) in a namespace behind the host
# (lib_vm.sh vm_ctrl_net).  The EXIT trap destroys the sandbox and removes
# the namespace, pass or fail; only processes this script started are
# killed, by PID.  Prints ok/FAIL lines and "N passed, M failed"; exit 1 on a
# failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-grant
TAP=lt-$NAME
TABLE=31800
DOCS=203.0.113.91  # docs.example, behind the host
OTHER=203.0.113.92 # a control on the same far side, never granted
DNS4=203.0.113.93  # dnsmasq behind the host: latchd's upstream
PORT=18095
FOR=20 # the grant's seconds: the checks after the approval take a few execs on TCG

TEST=vm_grant
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd dnsmasq ss; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
POOL=$(python3 "$TOP/selftests/free_net.py" ${LATCH_GRANT_POOLS:-198.51.100.192/26 203.0.113.192/26})
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

vm_scratch grant
vm_tree_image ask="$TOP/build/vm/latch-ask" # latch-ask and the agent in the guest are this tree's
vm_ctrl_net "$POOL" "$DOCS" "$OTHER" "$DNS4" && vm_ctrl_http "$DOCS" "$PORT" && vm_ctrl_http "$OTHER" "$PORT" ||
	{ fail "control_namespace_set_up"; lts_done; }
ip netns exec "$CTRL_NS" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root --listen-address="$DNS4" \
	--bind-interfaces --port=53 --local-ttl=2 --host-record="docs.example,$DOCS" \
	--host-record="other.example,$OTHER" >"$TMP/dnsmasq.log" 2>&1 &
PIDS+=($!)
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=$DNS4 dns_ttl_min=1 dns_ttl_max=3 \
	grant_ask_wait=120
vm_latchd

if ! up_json=$(L --json up "$NAME" 2>"$TMP/up.err"); then
	fail "up: $(tail -3 "$TMP/up.err")" "$(jq -r .error <<<"$up_json" 2>/dev/null)"
	lts_done
fi
ok "up $NAME, no kit ($(jq -r .accelerator <<<"$up_json"))"
vm_ctrl_forward "$TAP"
HOST4=$(jq -r .host_ip4 <<<"$up_json")
G() { timeout 60 "$LATCH_BIN" exec "$NAME" -- sh -c "$1"; } # a command in the guest, as root
reach() { G "echo 'GET /' | nc -w 3 $1 $PORT" 2>/dev/null | grep -q hello-from-host; }
pending_id() { wait_until -t 20 -i 0.2 pending_known && echo "$id"; }
pending_known() { # sets id
	id=$(L --json grants "$NAME" | jq -r '[.grants[] | select(.state == "pending") | .id][0] // empty')
	[ -n "$id" ]
}

check "latch-ask is in the default image" G "command -v latch-ask"
check_not "before: docs.example's address is closed to the guest" reach "$DOCS"

# --- the guest asks (in a session of its own: the agent runs one command at a time, and this one
# waits for a person); a person on the host approves
G "setsid sh -c 'latch-ask --for $FOR --port $PORT --reason \"the docs, from a real guest\" docs.example \
	>/tmp/ask.out 2>&1; echo \$? >/tmp/ask.rc' </dev/null >/dev/null 2>&1 &"
id=$(pending_id) || true
check "the guest's ask is pending on the host ($id)" test -n "$id"
check_not "  nothing is open while it waits" reach "$DOCS"
check "  the ask names the host and the sandbox's words" \
	bash -c "'$LATCH_BIN' --json grants $NAME | jq -e '.grants[0].hosts[0].name == \"docs.example\" and .grants[0].sandbox_says == \"the docs, from a real guest\"'"

# --- the guest can't approve: no socket of latchd inside, and the ask endpoint decides nothing
check_not "the guest has no latchd socket" G "test -e /run/latch/latchd.sock"
check_not "a POST to /latch/approve from the guest fails" \
	G "wget -q -O - --post-data '{\"id\":\"$id\"}' http://$HOST4:8119/latch/approve"
check_not "an ask carrying the id and a decision fails" \
	G "wget -q -O - --header 'Content-Type: application/json' --post-data '{\"id\":\"$id\",\"decision\":\"approve\"}' http://$HOST4:8119/latch/grant"
check_eq_state=$(L --json grants "$NAME" | jq -r --arg id "$id" '.grants[] | select(.id == $id) | .state')
check "  after both the ask is still pending" test "$check_eq_state" = pending
check_not "  and docs.example is still closed" reach "$DOCS"

t_approve=$SECONDS
check "latch approve ID on the host" L approve "$id"
ask_returned() { rc=$(G "cat /tmp/ask.rc 2>/dev/null") && [ -n "$rc" ]; } # sets rc
rc=
wait_until -t 10 -i 0.5 ask_returned || true
G "cat /tmp/ask.out" >"$TMP/ask.out" 2>&1 || true
check "the guest's latch-ask returns approved (exit ${rc:-none})" test "${rc:-}" = 0
check "  naming the address the host resolved" grep -q "approved: docs.example:$PORT ($DOCS)" "$TMP/ask.out"
sed 's/^/#   guest: /' "$TMP/ask.out"
check "the guest reaches docs.example's address after the approval" reach "$DOCS"
check_not "  a control address beside it stays closed" reach "$OTHER"
check "  the guest's resolver answers docs.example" bash -c "'$LATCH_BIN' exec $NAME -- nslookup docs.example $HOST4 | grep -q '$DOCS'"

# --- the deadline
left=$((FOR - (SECONDS - t_approve) + 2))
[ "$left" -gt 0 ] && sleep "$left" # the point: the grant's deadline passes
check_not "after the deadline the guest no longer reaches it" reach "$DOCS"
audit() { L --json audit "$NAME" --kind grant | jq -r '[.entries[].decision] | join(" ")'; }
decisions=$(audit)
echo "#   grant decisions in the audit log: $decisions"
# in order: the ask, the refusals of the two tries above to decide it from the guest, the approval, the expiry
check "the ask, the guest's two tries to decide it, the approval and the expiry are audited" \
	test "$decisions" = "ask refuse refuse approve expire"

lts_done
