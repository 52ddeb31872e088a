#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_spoof.sh - root inside the guest cannot borrow another source: a
# packet from a source IP (v4 or v6) or a source MAC other than the assigned
# ones is dropped and counted under drop_spoof_ip / drop_spoof_mac, even to a
# destination the guest may reach.  Controls: each spoof worked on this
# topology before latch was attached, and the same probe from the assigned
# address passes beside it.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

SPOOF4=192.0.2.6
SPOOF6=2001:db8:1::99
SPOOF_MAC=02:00:00:00:00:66

# root in the guest: a second address on its interface, to bind probes to
ip -n "$LTS_G" addr add "$SPOOF4/32" dev g0
# (deprecated, so the guest's own source selection keeps using GUEST6)
ip -n "$LTS_G" addr add "$SPOOF6/128" dev g0 nodad preferred_lft 0

# set_guest_mac MAC: what root in the guest can do to its interface
set_guest_mac() {
	ip -n "$LTS_G" link set g0 address "$1" 2>/dev/null && return 0
	# drivers that refuse a live change: down, change, up, routes back
	ip -n "$LTS_G" link set g0 down &&
		ip -n "$LTS_G" link set g0 address "$1" &&
		ip -n "$LTS_G" link set g0 up &&
		ip -n "$LTS_G" route replace default via "$HOST4" &&
		ip -n "$LTS_G" -6 route replace default via "$HOST6"
}

# Controls first: without latch, the spoofs get answers on this topology.
check "baseline: tcp from spoofed $SPOOF4 answers without latch" tcp_ok "$SRV_A" 80 --bind "$SPOOF4"
check "baseline: tcp from spoofed $SPOOF6 answers without latch" tcp_ok "$SRV6_A" 80 --bind "$SPOOF6"
if set_guest_mac "$SPOOF_MAC"; then
	check "baseline: tcp from spoofed MAC answers without latch" tcp_ok "$SRV_A" 80
	set_guest_mac "$GUEST_MAC" || fail setup "cannot restore the guest MAC"
	ip -n "$LTS_H" neigh flush dev hg0
else
	fail "baseline: set the guest MAC" "ip link set g0 address failed"
fi

if ! lts_attach >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow $SRV_A and $SRV6_A" latch egress "$LTS_NAME" allow "$SRV_A" "$SRV6_A"

# Invariant: only the assigned source IP leaves the guest (control: the assigned address passes).
ip0=$(counter drop_spoof_ip)
check "control: tcp $SRV_A:80 from $GUEST4 passes" tcp_ok "$SRV_A" 80 --bind "$GUEST4"
check_not "spoofed v4 source: tcp from $SPOOF4 is dropped" tcp_ok "$SRV_A" 80 --bind "$SPOOF4"
check_not "spoofed v4 source: udp from $SPOOF4 is dropped" udp_ok "$SRV_A" 5000 --bind "$SPOOF4"
check_not "spoofed v4 source: ping from $SPOOF4 is dropped" ping_ok "$SRV_A" --bind "$SPOOF4"
check "control: tcp [$SRV6_A]:80 from $GUEST6 passes" tcp_ok "$SRV6_A" 80 --bind "$GUEST6"
check_not "spoofed v6 source: tcp from $SPOOF6 is dropped" tcp_ok "$SRV6_A" 80 --bind "$SPOOF6"
check_not "spoofed v6 source: udp from $SPOOF6 is dropped" udp_ok "$SRV6_A" 5000 --bind "$SPOOF6"
check "control: udp [$SRV6_A]:5000 from $GUEST6 passes" udp_ok "$SRV6_A" 5000 --bind "$GUEST6"
ip1=$(counter drop_spoof_ip)
check_cmp "spoofed sources are counted under drop_spoof_ip (was $ip0, now $ip1)" "$ip1" -ge $((ip0 + 5))

# Invariant: only the assigned MAC is accepted, whatever the IP (control: the assigned MAC passes after).
mac0=$(counter drop_spoof_mac)
if set_guest_mac "$SPOOF_MAC"; then
	check_not "spoofed MAC: tcp $SRV_A:80 from $GUEST4 is dropped" tcp_ok "$SRV_A" 80
	check_not "spoofed MAC: ping6 $SRV6_A is dropped" ping_ok "$SRV6_A"
	mac1=$(counter drop_spoof_mac)
	check_cmp "spoofed MAC is counted under drop_spoof_mac (was $mac0, now $mac1)" "$mac1" -ge $((mac0 + 2))
	set_guest_mac "$GUEST_MAC" || fail "restore the guest MAC" "ip link set failed"
	check "control: with the assigned MAC back, tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
else
	fail "spoofed MAC" "could not change the guest MAC"
fi

lts_done
