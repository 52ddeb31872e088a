#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_room_net.sh - a room's network, enforced by latch's cgroup programs:
# sealed by default; a profile's address and CIDR entries open exactly their
# destinations, ports and protocols, IPv6 alike; the host's own services are
# out of reach; DNS goes to the room's resolver only.  Every refusal has a
# control: the same probe from the test's host (H) outside the room, or the
# allowed destination inside it; and every refusal is read back from the
# room's own counters in its JSON result.
# shellcheck source=selftests/lib_room.sh
. "$(dirname "$0")/lib_room.sh"
lts_room_setup

R=$LTS_TMP/r.json
in_h() { nsenter --net="/run/netns/$LTS_H" -- "$@"; }
h_probe() { in_h "$LTS_PY" "$LTS_NET" "$@" --timeout "$LTS_T"; }

# H's own services: what a room on this host must not reach
lts_bg "$LTS_H" "$LTS_TMP/serve-h.out" "$LTS_PY" "$LTS_NET" serve --tcp 8022 --udp 8022 --lifetime 300
lts_wait_ready "$LTS_TMP/serve-h.out" || fail setup "server in H did not start"
for a in "$SRV_DNS" "$SRV_C"; do
	lts_bg "$LTS_I" "$LTS_TMP/dns-$a.out" "$LTS_PY" "$LTS_NET" dns-serve "$a" --lifetime 300
	lts_wait_ready "$LTS_TMP/dns-$a.out" || fail setup "DNS server on $a did not start"
done

# (an entry without ports means 443 and 80, as in every profile)
room_profile roomnet "# the fake internet: two ports of one address, one port over TCP, one v6 address" \
	"$SRV_A:80,5000" "$SRV_C:80/tcp" "[$SRV6_A]:80,5000" "203.0.113.16/28:7000/tcp"

# Invariant: sealed by default: no destination at all, counted in the kernel.
check "control: tcp $SRV_A:80 answers from H" h_probe tcp "$SRV_A" 80
in_room "$R" -- tcp "$SRV_A" 80 --timeout "$LTS_T_DENY"
check_cmp "sealed: tcp $SRV_A:80 fails in the room" "$(jget "$R" .exit_code)" -ne 0
check_cmp "sealed: refused at connect, counted drop_policy (sockaddr)" "$(rcount "$R" drop_policy sockaddr)" -ge 1
check_eq "sealed: the profile is sealed, enforced, read back" "$(jget "$R" '[.network.profile, .network.enforced] | join(",")')" \
	"sealed,true"
in_room "$R" -- udp "$SRV_A" 5000 --timeout "$LTS_T_DENY"
check_cmp "sealed: udp $SRV_A:5000 fails" "$(jget "$R" .exit_code)" -ne 0
in_room "$R" -- tcp "$SRV6_A" 80 --timeout "$LTS_T_DENY"
check_cmp "sealed: tcp [$SRV6_A]:80 fails" "$(jget "$R" .exit_code)" -ne 0

# Invariant: a profile's entries open their destinations, and only those.
in_room "$R" --profile roomnet -- tcp "$SRV_A" 80
check_eq "allowed: tcp $SRV_A:80 answers in the room" "$(jget "$R" .exit_code)" 0
check_cmp "allowed: counted pass_policy (sockaddr)" "$(rcount "$R" pass_policy sockaddr)" -ge 1
check_cmp "allowed: its packets pass on the socket's verdict (pass_flow)" "$(rcount "$R" pass_flow packet)" -ge 1
in_room "$R" --profile roomnet -- udp "$SRV_A" 5000
check_eq "allowed: udp $SRV_A:5000 answers" "$(jget "$R" .exit_code)" 0
in_room "$R" --profile roomnet -- tcp "$SRV6_A" 80
check_eq "allowed v6: tcp [$SRV6_A]:80 answers" "$(jget "$R" .exit_code)" 0
in_room "$R" --profile roomnet -- udp "$SRV6_A" 5000
check_eq "allowed v6: udp [$SRV6_A]:5000 answers" "$(jget "$R" .exit_code)" 0
check "control: tcp $SRV_B:80 answers from H" h_probe tcp "$SRV_B" 80
in_room "$R" --profile roomnet -- tcp "$SRV_B" 80 --timeout "$LTS_T_DENY"
check_cmp "denied: tcp $SRV_B:80 fails" "$(jget "$R" .exit_code)" -ne 0
check_cmp "denied: counted drop_policy" "$(rcount "$R" drop_policy sockaddr)" -ge 1
check "control: tcp [$SRV6_C]:80 answers from H" h_probe tcp "$SRV6_C" 80
in_room "$R" --profile roomnet -- tcp "$SRV6_C" 80 --timeout "$LTS_T_DENY"
check_cmp "denied v6: tcp [$SRV6_C]:80 fails" "$(jget "$R" .exit_code)" -ne 0
check_cmp "denied v6: counted drop_policy" "$(rcount "$R" drop_policy sockaddr)" -ge 1
in_room "$R" --profile roomnet -- tcp "$SRV_C" 80
check_eq "port entry: tcp $SRV_C:80 answers" "$(jget "$R" .exit_code)" 0
in_room "$R" --profile roomnet -- tcp "$SRV_C" 443 --timeout "$LTS_T_DENY"
check_cmp "port entry: tcp $SRV_C:443 fails" "$(jget "$R" .exit_code)" -ne 0
in_room "$R" --profile roomnet -- udp "$SRV_C" 443 --timeout "$LTS_T_DENY"
check_cmp "port entry is /tcp: udp $SRV_C:443 fails" "$(jget "$R" .exit_code)" -ne 0
in_room "$R" --profile roomnet -- tcp "$SRV_B" 7000
check_eq "cidr entry: tcp $SRV_B:7000 (203.0.113.16/28:7000/tcp) answers" "$(jget "$R" .exit_code)" 0

# Invariant: the host's own services are out of reach (the room shares the host's network namespace).
check "control: tcp 127.0.0.1:8022 answers from H" h_probe tcp 127.0.0.1 8022
check "control: tcp $H4:8022 answers from H" h_probe tcp "$H4" 8022
for a in 127.0.0.1 "$H4" ::1; do
	in_room "$R" --profile roomnet -- tcp "$a" 8022 --timeout "$LTS_T_DENY"
	check_cmp "host service: tcp [$a]:8022 fails in the room" "$(jget "$R" .exit_code)" -ne 0
done
in_room "$R" --profile roomnet -- udp 127.0.0.1 8022 --timeout "$LTS_T_DENY"
check_cmp "host service: udp 127.0.0.1:8022 fails in the room" "$(jget "$R" .exit_code)" -ne 0

# Invariant: DNS only to the room's resolver, even to an address the profile allows on every port.
room_profile dnsopen "$SRV_C:1-65535"
check "control: DNS to $SRV_C answers from H" test "$(in_h "$LTS_PY" "$LTS_NET" dns "$SRV_C" --wait "$LTS_T")" -gt 0
in_room "$R" --profile dnsopen --resolver "$SRV_DNS" -- tcp "$SRV_C" 80
check_eq "control: $SRV_C is allowed on every port (tcp 80 answers)" "$(jget "$R" .exit_code)" 0
in_room "$R" --profile dnsopen --resolver "$SRV_DNS" -- dns "$SRV_C" --wait "$LTS_T_DENY"
check_cmp "DNS to $SRV_C (allowed, not the resolver) fails" "$(jget "$R" .exit_code)" -ne 0
check_cmp "counted drop_dns_not_resolver" "$(rcount "$R" drop_dns_not_resolver sockaddr)" -ge 1
in_room "$R" --profile dnsopen --resolver "$SRV_DNS" -- dns "$SRV_DNS" --wait "$LTS_T"
check_eq "DNS to the room's resolver $SRV_DNS answers" "$(jget "$R" .exit_code)" 0
check_cmp "counted pass_dns (packet)" "$(rcount "$R" pass_dns packet)" -ge 1
room_json "$R" --resolver "$SRV_DNS" -- cat /etc/resolv.conf
check "the room's resolv.conf names its resolver only" grep -qx "nameserver $SRV_DNS" <<<"$(jget "$R" .output)"
in_room "$R" -- dns "$SRV_DNS" --wait "$LTS_T_DENY"
check_cmp "without --resolver, DNS to $SRV_DNS fails" "$(jget "$R" .exit_code)" -ne 0

# Invariant: a profile with names is refused whole while rooms have no resolver of latch's (nothing half applied).
room_profile named "$SRV_A" "example.com:443"
run_room run --profile named -- true 2>"$LTS_TMP/named.err"
check_eq "a profile with a host name: latch refuses (125)" "$?" 125
check "  and names the file, line and entry" grep -q "named.txt:2: example.com:443" "$LTS_TMP/named.err"

lts_done
