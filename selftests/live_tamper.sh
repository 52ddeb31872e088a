#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_tamper.sh - status reports what the kernel runs, never what was
# configured.  In each attach mode (TCX links, then clsact filters, forced
# with LATCH_TC_MODE), root tampers with the device's hooks by hand:
#
#   both modes   an XDP program on the device (runs before tc and could
#                redirect frames past latch): NOT ENFORCED
#   TCX          latch's link detached, its pin removed, its program
#                swapped, a foreign TCX program ahead of it: NOT ENFORCED;
#                a foreign TCX program after it, or a clsact filter (clsact
#                runs after TCX, and latch's verdict ends the chain): enforced
#   clsact       the qdisc deleted, latch's filter deleted, a foreign filter
#                ahead of it, any TCX program on the hook (TCX runs before
#                clsact): NOT ENFORCED; a filter after latch's: enforced
#
# NOT ENFORCED means `latch status` exits 3 and says so, with the reason.
# Each tamper that opens a bypass is shown to open it (a one-way datagram
# reaches a denied server, or a denied TCP connection succeeds): that is what
# status must not hide.  `latch attach NAME` then restores enforcement with
# the policy intact, or fails with one `latch:` line and status stays 3.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

TCX_TOOL=$LTS_TOP/build/selftests/tcx_tool
[ -x "$TCX_TOOL" ] || lts_skip_all "no $TCX_TOOL; run make selftest"

tc_h() { ip netns exec "$LTS_H" tc "$@"; }
tool() { ip netns exec "$LTS_H" "$TCX_TOOL" "$@"; }
# link_released ID: the link is no longer on hg0's egress chain
link_released() { ! tool list hg0 egress | grep -q " $1\$"; }
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

# status_why: the reason status gives (json)
status_why() { status_json | jq -r '.sandboxes[0].why // ""'; }

# hook_field DIR FIELD: e.g. hook_field from-guest link_id
hook_field() { status_json | jq -r --arg d "$1" --arg f "$2" '.sandboxes[0].hooks[$d][$f]'; }

# a server in I that logs every datagram, to see one-way exfiltration
LOG=$LTS_TMP/udp.log
lts_bg "$LTS_I" "$LTS_TMP/serve-log.out" "$LTS_PY" "$LTS_NET" serve --udp 5100 --addr "$SRV_B" --log "$LOG" \
	--lifetime 300
lts_wait_ready "$LTS_TMP/serve-log.out" || fail setup "logging server did not start"
TOKEN=0

# udp_arrives: a datagram from the guest to the denied server reaches it (no reply needed)
udp_arrives() {
	TOKEN=$((TOKEN + 1))
	in_g "$LTS_PY" "$LTS_NET" udp "$SRV_B" 5100 --payload "token-$TOKEN" --timeout 0.3 >/dev/null 2>&1
	# up to LTS_T for it to arrive (check_not makes that LTS_T_DENY)
	wait_until -t "$LTS_T" grep -q " udp token-$TOKEN\$" "$LOG"
}

# status_honest: status never exits 0 (enforced) while anything reaches the denied server
status_honest() {
	local st reach
	latch status "$LTS_NAME" >/dev/null 2>&1
	st=$?
	LTS_T=$LTS_T_DENY udp_arrives # no reply is expected: wait as for a denial
	reach=$?
	echo "# status exit $st, one-way datagram to the denied server arrives: $([ "$reach" = 0 ] && echo yes || echo no)"
	[ "$st" = 0 ] && [ "$reach" != 0 ] && return 0
	[ "$st" = 3 ]
}

# enforced_again M WHAT: re-attach, then enforced, denied and the control passes
enforced_again() {
	check "$1 $2: latch attach NAME" latch attach "$LTS_NAME"
	check "$1 $2: status exits 0 again" status_is 0 "enforced (verified"
	check_not "$1 $2: tcp $SRV_B:80 is denied again" tcp_ok "$SRV_B" 80
	check "$1 $2: control tcp $SRV_A:80 passes (policy kept)" tcp_ok "$SRV_A" 80
}

# reattach_or_say M WHAT: re-attach either restores enforcement or fails with one line and status stays 3
reattach_or_say() {
	local out rc
	out=$(latch attach "$LTS_NAME" 2>&1)
	rc=$?
	echo "# $1 $2: re-attach exit $rc: $out"
	if [ "$rc" = 0 ]; then
		check "$1 $2: re-attach exited 0, so status must verify" status_is 0 "enforced (verified"
		check_not "$1 $2: re-attach exited 0, so nothing may reach $SRV_B" udp_arrives
	else
		check_eq "$1 $2: re-attach fails with one 'latch:' line" \
			"$(grep -c '^latch:' <<<"$out")/$(wc -l <<<"$out")" "1/1"
		check "$1 $2: status still exits 3" status_is 3 "NOT ENFORCED"
	fi
	check "$1 $2: status is honest after the re-attach" status_honest
}

# attach_mode M: a fresh sandbox in mode M, with SRV_A allowed
attach_mode() {
	if ! LATCH_TC_MODE=$1 lts_attach >/dev/null; then
		fail "$1: attach" "latch attach failed"
		return 1
	fi
	check_eq "$1: status --json names the mode" "$(status_json | jq -r '.sandboxes[0].tc_mode')" "$1"
	check "$1: status names the mode" status_is 0 "$([ "$1" = tcx ] && echo 'TCX links' || echo 'clsact filters')"
	check "$1: allow $SRV_A" latch egress "$LTS_NAME" allow "$SRV_A"
	check "$1: attached: status exits 0 and says enforced" status_is 0 "enforced (verified"
	check "$1: attached: control tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
	check_not "$1: attached: tcp $SRV_B:80 is denied" tcp_ok "$SRV_B" 80
	check_not "$1: attached: a one-way datagram to $SRV_B does not arrive" udp_arrives
}

# Both modes.  Invariant: an XDP program on the device is reported; it runs
# before tc on every frame from the guest and can redirect frames past latch.
xdp_case() {
	local m=$1 id
	id=$(tool xdp hg0)
	check_cmp "$m: an XDP program was attached to hg0 (id $id)" "${id:-0}" -gt 0
	check "$m: XDP on the device: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: XDP on the device: the reason names XDP" grep -q "XDP program $id" <<<"$(status_why)"
	check_eq "$m: XDP on the device: --json carries its id" "$(status_json | jq -r '.sandboxes[0].xdp_prog_id')" "$id"
	check "$m: remove the XDP program" tool xdp-off hg0
	check "$m: XDP removed: status exits 0" status_is 0 "enforced (verified"
}

tcx_cases() {
	local m=tcx link id
	xdp_case $m

	# Invariant: a foreign TCX program after latch's never runs (latch's verdict ends the chain).
	id=$(tool add hg0 ingress last)
	check_cmp "$m: a foreign accept-all TCX program goes after latch's (id $id)" "${id:-0}" -gt 0
	check "$m: a later TCX program: status still exits 0" status_is 0 "enforced (verified"
	check_not "$m: a later TCX program: tcp $SRV_B:80 is still denied" tcp_ok "$SRV_B" 80
	check "$m: take it off" tool del hg0 ingress "$id"

	# Invariant: clsact filters run after TCX, so a foreign clsact filter can't get ahead of latch's link.
	check "$m: add clsact and a foreign accept-all filter on ingress" \
		eval "ip netns exec $LTS_H tc qdisc add dev hg0 clsact && ip netns exec $LTS_H tc filter add dev hg0 ingress pref 1 handle 7 ${ACCEPT_ALL[*]@Q}"
	check "$m: a clsact filter: status still exits 0" status_is 0 "enforced (verified"
	check_not "$m: a clsact filter: a one-way datagram to $SRV_B does not arrive" udp_arrives
	check "$m: remove the clsact qdisc" tc_h qdisc del dev hg0 clsact

	# Invariant: a foreign TCX program ahead of latch's link is never reported as enforced.
	id=$(tool add hg0 ingress first)
	check_cmp "$m: a foreign accept-all TCX program goes first (id $id)" "${id:-0}" -gt 0
	check "$m: foreign TCX first: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: foreign TCX first: the reason names the program" grep -q "TCX program $id runs before" <<<"$(status_why)"
	check_eq "$m: foreign TCX first: --json says who runs first" "$(hook_field from-guest ahead_prog_id)" "$id"
	check "$m: foreign TCX first: a one-way datagram to $SRV_B now arrives (the bypass status must report)" udp_arrives
	check "$m: foreign TCX first: status is honest about the traffic" status_honest
	reattach_or_say $m "foreign TCX first"
	check_eq "$m: after the re-attach, latch's link heads the chain" \
		"$(tool list hg0 ingress | head -1 | cut -d' ' -f2)" "$(hook_field from-guest link_id)"
	check "$m: remove the foreign program" tool del hg0 ingress "$id"
	check "$m: foreign program removed: status exits 0" status_is 0 "enforced (verified"

	# Invariant: latch's link detached by hand (the pin left behind) is reported.
	link=$(hook_field from-guest link_id)
	check "$m: detach latch's from-guest link $link by hand" tool detach-link "$link"
	check "$m: link detached: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: link detached: the reason says so" grep -q "was detached" <<<"$(status_why)"
	check_eq "$m: link detached: --json says enforced false, verified false" \
		"$(latch --json status "$LTS_NAME" 2>/dev/null | jq -c '[.sandboxes[0].enforced, .verified]')" '[false,false]'
	latch status >/dev/null 2>&1
	check_eq "$m: link detached: status without NAME exits 3 too" "$?" 3
	# the gap, stated: nothing filters what the guest sends now (this is what status must not hide)
	check "$m: link detached: a one-way datagram to $SRV_B arrives - nothing filters it, hence the exit 3" udp_arrives
	enforced_again $m "after the detach"

	# Invariant: latch's to-guest link removed with its pin is reported.
	link=$(hook_field to-guest link_id)
	check "$m: remove the to-guest link's pin" rm "$LTS_PINS/link_to_guest"
	wait_until -t 2 link_released "$link" # the kernel releases an unpinned link from a work queue
	check "$m: pin removed: the link left the egress chain" eval "! ip netns exec $LTS_H $TCX_TOOL list hg0 egress | grep -q ' $link\$'"
	check "$m: pin removed: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: pin removed: the reason says the link is gone" grep -q "is gone" <<<"$(status_why)"
	enforced_again $m "after the pin was removed"

	# Invariant: latch's link made to run another program is reported.
	link=$(hook_field from-guest link_id)
	id=$(tool update-link "$link")
	check_cmp "$m: latch's link now runs foreign program $id" "${id:-0}" -gt 0
	check "$m: program swapped: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: program swapped: the reason names both programs" grep -q "runs program $id, not latch's pinned" <<<"$(status_why)"
	check "$m: program swapped: a one-way datagram to $SRV_B arrives (the bypass status must report)" udp_arrives
	enforced_again $m "after the swap"
	check_eq "$m: the swap was undone on the same link (bpf_link_update)" "$(hook_field from-guest link_id)" "$link"
}

clsact_cases() {
	local m=clsact id
	xdp_case $m

	# A filter after latch's (pref 2) changes nothing: latch still decides first.
	check "$m: add a foreign accept-all filter after latch's (ingress pref 2)" \
		tc_h filter add dev hg0 ingress pref 2 handle 7 "${ACCEPT_ALL[@]}"
	check "$m: a later filter: status still exits 0" status_is 0 "enforced (verified"
	check_not "$m: a later filter: tcp $SRV_B:80 is still denied" tcp_ok "$SRV_B" 80
	tc_h filter del dev hg0 ingress pref 2 handle 7 bpf 2>/dev/null

	# Invariant: a TCX program on the hook runs before every clsact filter, latch's too.
	id=$(tool add hg0 ingress last)
	check_cmp "$m: a foreign accept-all TCX program on ingress (id $id)" "${id:-0}" -gt 0
	check "$m: a TCX program: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: a TCX program: the reason names it" grep -q "TCX program $id on hg0" <<<"$(status_why)"
	check "$m: a TCX program: a one-way datagram to $SRV_B now arrives (the bypass status must report)" udp_arrives
	reattach_or_say $m "a TCX program"
	check "$m: remove the TCX program" tool del hg0 ingress "$id"
	check "$m: TCX program removed: status exits 0" status_is 0 "enforced (verified"

	# Invariant: the qdisc deleted by hand is reported, with exit 3.
	check "$m: tc qdisc del dev hg0 clsact" tc_h qdisc del dev hg0 clsact
	check "$m: no clsact: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check_eq "$m: no clsact: --json says enforced false, verified false" \
		"$(latch --json status "$LTS_NAME" 2>/dev/null | jq -c '[.sandboxes[0].enforced, .verified]')" '[false,false]'
	latch status >/dev/null 2>&1
	check_eq "$m: no clsact: status without NAME exits 3 too" "$?" 3
	# the gap, stated: nothing filters now (this is what status must not hide)
	check "$m: no clsact: tcp $SRV_B:80 now passes - nothing filters, hence the exit 3" tcp_ok "$SRV_B" 80
	enforced_again $m "after the qdisc was deleted"

	# Invariant: latch's filter deleted by hand (qdisc left in place) is reported.
	check "$m: tc filter del latch's egress filter" tc_h filter del dev hg0 egress pref 1 handle 0x1a7c bpf
	check "$m: no filter: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	enforced_again $m "after the filter was deleted"

	# Invariant: a foreign filter that runs before latch's is never reported as
	# enforced.  cls_bpf runs the newest filter of a priority first, so a filter
	# added at latch's pref 1 under another handle goes ahead of latch's.
	check "$m: a foreign accept-all filter joins latch's pref 1 on ingress" \
		tc_h filter add dev hg0 ingress pref 1 handle 7 "${ACCEPT_ALL[@]}"
	check "$m: foreign filter first: status exits 3 and says NOT ENFORCED" status_is 3 "NOT ENFORCED"
	check "$m: foreign filter first: a one-way datagram to $SRV_B now arrives (the bypass status must report)" udp_arrives
	check "$m: foreign filter first: status is honest about the traffic" status_honest
	reattach_or_say $m "foreign filter first"
	tc_h filter del dev hg0 ingress pref 1 handle 7 bpf 2>/dev/null
	enforced_again $m "after the foreign filter was removed"
	check_not "$m: foreign filter removed: a one-way datagram to $SRV_B does not arrive" udp_arrives
}

if attach_mode tcx; then
	tcx_cases
	check "tcx: latch detach" latch detach "$LTS_NAME"
	check_eq "tcx: detached: no TCX program left on hg0" "$(tool list hg0 ingress; tool list hg0 egress)" ""
fi
if attach_mode clsact; then
	clsact_cases
	check "clsact: latch detach" latch detach "$LTS_NAME"
fi

lts_done
