#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_input.sh - bad input changes nothing: an unknown device, a malformed
# or host-bits CIDR, a port past 65535, a duplicate name, a caller without
# root... each exits 2 with one line starting with "latch:", and the pins
# (files and every policy map's contents) are exactly as before, and the
# link is still enforced.  Control: a good command right after each group
# does change the pins, so the comparison can see a change.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

# latch_nobody ARGS...: latch in H as uid/gid 65534 with no capabilities
latch_nobody() {
	LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- \
		setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$LATCH_BIN" "$@"
}

# rejects RUNNER NAME ARGS...: exit 2 (or WANT_EXIT: 4 is no such sandbox), one "latch:" line, pins unchanged
rejects() {
	local runner=$1 name=$2 before after out rc why= want=${WANT_EXIT:-2}
	shift 2
	before=$(pins_snapshot)
	out=$("$runner" "$@" 2>&1)
	rc=$?
	after=$(pins_snapshot)
	[ "$rc" = "$want" ] || why="exit $rc, want $want;"
	[ "$(wc -l <<<"$out")" = 1 ] && [[ "$out" == latch:* ]] ||
		why="$why output is not one 'latch:' line: $(head -c 300 <<<"$out" | tr '\n' '|');"
	[ "$before" == "$after" ] || why="$why pins changed: $(diff <(echo "$before") <(echo "$after") | head -5 | tr '\n' '|')"
	if [ -z "$why" ]; then ok "$name ($out)"; else fail "$name" "$why"; fi
}

# the good attach options, to vary one at a time
A=(--dev hg0 --guest-mac "$GUEST_MAC" --guest-ip "$GUEST4,$GUEST6" --host-ip "$HOST4,$HOST6")
B=(--guest-mac "$GUEST_MAC" --guest-ip "$GUEST4,$GUEST6" --host-ip "$HOST4,$HOST6")

# before any sandbox exists: nothing may appear under the pins root
rejects latch "attach to an unknown device" attach lts-other --dev lts-nodev0 "${B[@]}"
rejects latch "attach with an option missing its value" attach lts-other "${B[@]}" --dev
rejects latch "attach with an unknown option" attach lts-other "${A[@]}" --bogus 1
rejects latch "attach with a multicast guest MAC" attach lts-other --dev hg0 --guest-mac 01:00:5e:00:00:01 \
	--guest-ip "$GUEST4" --host-ip "$HOST4"
rejects latch "attach with a malformed guest IP" attach lts-other --dev hg0 --guest-mac "$GUEST_MAC" \
	--guest-ip 192.0.2.300 --host-ip "$HOST4"
rejects latch "attach with --host-port 70000" attach lts-other "${A[@]}" --host-port 70000
rejects latch "attach with a name in capitals" attach LTS-Other "${A[@]}"
rejects latch_nobody "attach as a non-root user" attach lts-other "${A[@]}"
no_filter_on_hg0() { ! in_h tc filter show dev hg0 ingress 2>/dev/null | grep -q bpf; }
check "nothing was attached to hg0" no_filter_on_hg0

if ! lts_attach >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "control: allow $SRV_A" latch egress "$LTS_NAME" allow "$SRV_A" "[$SRV6_A]:443/tcp"

# Invariant: a bad entry is refused whole; nothing of the command is applied.
rejects latch "allow a /33" egress "$LTS_NAME" allow 203.0.113.0/33
rejects latch "allow a CIDR with host bits set" egress "$LTS_NAME" allow 203.0.113.1/24
rejects latch "allow port 70000" egress "$LTS_NAME" allow "$SRV_C:70000"
rejects latch "allow a port range upside down" egress "$LTS_NAME" allow "$SRV_C:443-80"
rejects latch "allow an unknown protocol" egress "$LTS_NAME" allow "$SRV_C:443/sctp"
rejects latch "allow a v6 /129" egress "$LTS_NAME" allow 2001:db8::/129
rejects latch "allow v6 port 70000" egress "$LTS_NAME" allow "[$SRV6_B]:70000"
rejects latch "allow a malformed address" egress "$LTS_NAME" allow 203.0.113.256
rejects latch "a good entry then a bad one: neither is applied" egress "$LTS_NAME" allow "$SRV_C" 203.0.113.0/33
rejects latch "allow --for 0" egress "$LTS_NAME" allow "$SRV_C" --for 0
rejects latch "allow --for without seconds" egress "$LTS_NAME" allow "$SRV_C" --for
# the one duration grammar (latch(8), "Durations and sizes"): no nan, hex, exponent, sign, fraction or overflow
for bad in nan 0x10 1e3 -5 1.5m 500ms 18446744073709551616 366d; do
	rejects latch "allow --for $bad" egress "$LTS_NAME" allow "$SRV_C" --for "$bad"
done
rejects latch "egress with an unknown action" egress "$LTS_NAME" permit "$SRV_C"
WANT_EXIT=4 rejects latch "egress for an unknown sandbox: exit 4, no such sandbox" egress lts-nosuch allow "$SRV_C"
check_not "the refused entry $SRV_C:443 does not pass" tcp_ok "$SRV_C" 443

# Invariant: one name, one sandbox; a second attach under it changes nothing.
rejects latch "attach a duplicate name" attach "$LTS_NAME" "${A[@]}"
rejects latch "attach a duplicate name on another device" attach "$LTS_NAME" --dev hi0 "${B[@]}"
WANT_EXIT=4 rejects latch "detach an unknown sandbox: exit 4, no such sandbox" detach lts-nosuch
WANT_EXIT=4 rejects latch "re-attach an unknown sandbox: exit 4, no such sandbox" attach lts-nosuch

# Invariant: without root, nothing is read or changed.
rejects latch_nobody "status as a non-root user" status "$LTS_NAME"
rejects latch_nobody "egress allow as a non-root user" egress "$LTS_NAME" allow "$SRV_C"
rejects latch_nobody "egress revoke as a non-root user" egress "$LTS_NAME" revoke "$SRV_A"
rejects latch_nobody "re-attach as a non-root user" attach "$LTS_NAME"
rejects latch_nobody "detach as a non-root user" detach "$LTS_NAME"

check "after all that: status still verifies enforcement" latch status "$LTS_NAME"
check "after all that: tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
check_not "after all that: tcp $SRV_C:80 is denied" tcp_ok "$SRV_C" 80

# Control: --for takes a duration as grant --for does (5m was refused: seconds only)
check "control: allow $SRV_C:8443/tcp --for 5m" latch egress "$LTS_NAME" allow "$SRV_C:8443/tcp" --for 5m
left=$(latch --json egress "$LTS_NAME" show | jq -r --arg e "$SRV_C:8443/tcp" '.entries[] | select(.entry == $e) | .seconds_left')
left=${left%.*}
check "control: it expires in about 300 s (seconds_left $left)" test "${left:-0}" -gt 290 -a "${left:-0}" -le 300
latch egress "$LTS_NAME" revoke "$SRV_C:8443/tcp" >/dev/null 2>&1

# Control: the snapshot does see a good change.
before=$(pins_snapshot)
check "control: allow $SRV_C:443/tcp" latch egress "$LTS_NAME" allow "$SRV_C:443/tcp"
after=$(pins_snapshot)
check_cmp "control: a good command changes the pins snapshot" "$([ "$before" != "$after" ] && echo 1 || echo 0)" -eq 1
check "control: tcp $SRV_C:443 passes now" tcp_ok "$SRV_C" 443

lts_done
