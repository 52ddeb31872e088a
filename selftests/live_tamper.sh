#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_tamper.sh - status reports what the kernel does, never what was
# configured: when someone removes the clsact qdisc or latch's filter by
# hand, or puts a foreign filter ahead of latch's, `latch status` says NOT
# ENFORCED and exits 3; `latch attach NAME` restores enforcement with the
# policy intact.  Note the gap this guards: with the clsact qdisc gone (or a
# foreign accept-all filter first) nothing filters the link at all (checked
# below), so the only defence is that status notices and says so.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

tc_h() { ip netns exec "$LTS_H" tc "$@"; }
# a foreign classic-BPF filter that matches every packet; with no action
# attached, a match means "accept" on clsact (only cls_bpf is available here)
ACCEPT_ALL=(bpf bytecode '1,6 0 0 4294967295')

# status_is CODE WHAT: `latch status NAME` exits CODE, and says WHAT
status_is() {
	local out rc
	out=$(latch status "$LTS_NAME" 2>&1)
	rc=$?
	[ "$rc" = "$1" ] && grep -q -- "$2" <<<"$out"
}

# a server in I that logs every datagram, to see one-way exfiltration
LOG=$LTS_TMP/udp.log
lts_bg "$LTS_I" "$LTS_TMP/serve-log.out" "$LTS_PY" "$LTS_NET" serve --udp 5100 --addr "$SRV_B" --log "$LOG" \
	--lifetime 120
lts_wait_ready "$LTS_TMP/serve-log.out" || fail setup "logging server did not start"
TOKEN=0

# udp_arrives: a datagram from the guest to the denied server reaches it (no reply needed)
udp_arrives() {
	TOKEN=$((TOKEN + 1))
	in_g "$LTS_PY" "$LTS_NET" udp "$SRV_B" 5100 --payload "token-$TOKEN" --timeout 0.3 >/dev/null 2>&1
	sleep 0.1
	grep -q " udp token-$TOKEN\$" "$LOG"
}

# status_honest: status never exits 0 (enforced) while anything reaches the denied server
status_honest() {
	local st reach
	latch status "$LTS_NAME" >/dev/null 2>&1
	st=$?
	udp_arrives
	reach=$?
	echo "# status exit $st, one-way datagram to the denied server arrives: $([ "$reach" = 0 ] && echo yes || echo no)"
	[ "$st" = 0 ] && [ "$reach" != 0 ] && return 0
	[ "$st" = 3 ]
}

if ! lts_attach >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow $SRV_A" latch egress "$LTS_NAME" allow "$SRV_A"
check "attached: status exits 0 and says enforced" status_is 0 "enforced (verified"
check "attached: control tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
check_not "attached: tcp $SRV_B:80 is denied" tcp_ok "$SRV_B" 80
check_not "attached: a one-way datagram to $SRV_B does not arrive" udp_arrives

# A filter after latch's (pref 2) changes nothing: latch still decides first.
check "add a foreign accept-all filter after latch's (ingress pref 2)" \
	tc_h filter add dev hg0 ingress pref 2 handle 7 "${ACCEPT_ALL[@]}"
check "a later filter: status still exits 0" status_is 0 "enforced (verified"
check_not "a later filter: tcp $SRV_B:80 is still denied" tcp_ok "$SRV_B" 80
tc_h filter del dev hg0 ingress pref 2 handle 7 bpf 2>/dev/null

# Invariant: the qdisc deleted by hand is reported, with exit 3.
check "tc qdisc del dev hg0 clsact" tc_h qdisc del dev hg0 clsact
check "no clsact: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
check_eq "no clsact: --json says enforced false, verified false" \
	"$(latch --json status "$LTS_NAME" 2>/dev/null | jq -c '[.sandboxes[0].enforced, .verified]')" '[false,false]'
latch status >/dev/null 2>&1
check_eq "no clsact: status without NAME exits 3 too" "$?" 3
# the gap, stated: nothing filters now (this is what status must not hide)
check "no clsact: tcp $SRV_B:80 now passes - nothing filters, hence the exit 3" tcp_ok "$SRV_B" 80

check "re-attach: latch attach NAME" latch attach "$LTS_NAME"
check "re-attach: status exits 0 again" status_is 0 "enforced (verified"
check_not "re-attach: tcp $SRV_B:80 is denied again" tcp_ok "$SRV_B" 80
check "re-attach: control tcp $SRV_A:80 passes (policy kept)" tcp_ok "$SRV_A" 80

# Invariant: latch's filter deleted by hand (qdisc left in place) is reported.
check "tc filter del latch's egress filter" tc_h filter del dev hg0 egress pref 1 handle 0x1a7c bpf
check "no filter: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
check "re-attach after the filter was deleted" latch attach "$LTS_NAME"
check "re-attach: status exits 0 again" status_is 0 "enforced (verified"
check "re-attach: control tcp $SRV_A:80 passes (replies come back in)" tcp_ok "$SRV_A" 80

# Invariant: a foreign filter that runs before latch's is never reported as
# enforced.  cls_bpf runs the newest filter of a priority first, so a filter
# added at latch's pref 1 under another handle goes ahead of latch's.
check "a foreign accept-all filter joins latch's pref 1 on ingress" \
	tc_h filter add dev hg0 ingress pref 1 handle 7 "${ACCEPT_ALL[@]}"
check "foreign filter first: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
check "foreign filter first: a one-way datagram to $SRV_B now arrives (the bypass status must report)" udp_arrives
check "foreign filter first: status is honest about the traffic" status_honest
out=$(latch attach "$LTS_NAME" 2>&1)
rc=$?
echo "# re-attach with a foreign filter ahead of latch's: exit $rc: $out"
# re-attach must either restore enforcement or fail and say so
if [ "$rc" = 0 ]; then
	check "foreign filter first: re-attach exited 0, so status must verify" status_is 0 "enforced (verified"
	check_not "foreign filter first: re-attach exited 0, so nothing may reach $SRV_B" udp_arrives
else
	check_eq "foreign filter first: re-attach fails with one 'latch:' line" \
		"$(grep -c '^latch:' <<<"$out")/$(wc -l <<<"$out")" "1/1"
	check "foreign filter first: status still exits 3" status_is 3 "NOT ENFORCED"
fi
check "foreign filter first: status is honest after the re-attach" status_honest
tc_h filter del dev hg0 ingress pref 1 handle 7 bpf 2>/dev/null
check "foreign filter removed: latch attach NAME" latch attach "$LTS_NAME"
check "foreign filter removed: status exits 0" status_is 0 "enforced (verified"
check_not "foreign filter removed: tcp $SRV_B:80 is denied" tcp_ok "$SRV_B" 80
check_not "foreign filter removed: a one-way datagram to $SRV_B does not arrive" udp_arrives

lts_done
