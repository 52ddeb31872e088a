#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_reach.sh - default deny on a live link: what is allowed is reachable,
# everything else is not, over TCP, UDP, ICMP echo and IPv6; wrong ports and
# protocols are denied; nothing unsolicited gets in; a revoke takes effect.
#
# Every denial is paired with a control: the same probe succeeded on the same
# topology before latch was attached, and an allowed destination still
# answers after.  So a "denied" can only be latch's doing.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

# services on the host end: 8080 is a host service, 8022 is not
lts_bg "$LTS_H" "$LTS_TMP/serve-h.out" "$LTS_PY" "$LTS_NET" serve --tcp 8080 --tcp 8022 --lifetime 300
lts_wait_ready "$LTS_TMP/serve-h.out" || fail setup "server in H did not start"
# a listener in the guest, for unsolicited inbound connections
lts_bg "$LTS_G" "$LTS_TMP/serve-g.out" "$LTS_PY" "$LTS_NET" serve --tcp 2222 --lifetime 300
lts_wait_ready "$LTS_TMP/serve-g.out" || fail setup "server in G did not start"

# tcp_from_i HOST PORT: a connection from the internet side
tcp_from_i() { in_i "$LTS_PY" "$LTS_NET" tcp "$@" --timeout "$LTS_T"; }

# Controls first: without latch every probe that latch must stop goes through.
check "baseline: tcp $SRV_B:80 answers without latch" tcp_ok "$SRV_B" 80
check "baseline: udp $SRV_B:5000 answers without latch" udp_ok "$SRV_B" 5000
check "baseline: ping $SRV_B answers without latch" ping_ok "$SRV_B"
check "baseline: tcp [$SRV6_C]:80 answers without latch" tcp_ok "$SRV6_C" 80
check "baseline: ping $SRV6_C answers without latch" ping_ok "$SRV6_C"
check "baseline: tcp $SRV_C:80 answers without latch" tcp_ok "$SRV_C" 80
check "baseline: tcp $HOST4:8022 answers without latch" tcp_ok "$HOST4" 8022
check "baseline: I connects to the guest without latch" tcp_from_i "$GUEST4" 2222

if ! lts_attach --host-port 8080 >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "attach: status verifies enforcement" latch status "$LTS_NAME"
check "allow entries" latch egress "$LTS_NAME" allow "$SRV_A" "$SRV_C:443/tcp" 203.0.113.16/28:7000/tcp \
	"$SRV6_A" "[$SRV6_B]:443/tcp"

# Invariant: an address with an entry and no ports is reachable over TCP, UDP and ICMP echo.
check "allowed v4: tcp $SRV_A:80" tcp_ok "$SRV_A" 80
check "allowed v4: udp $SRV_A:5000" udp_ok "$SRV_A" 5000
check "allowed v4: ping $SRV_A" ping_ok "$SRV_A"
check "allowed v6: tcp [$SRV6_A]:80" tcp_ok "$SRV6_A" 80
check "allowed v6: udp [$SRV6_A]:5000" udp_ok "$SRV6_A" 5000
check "allowed v6: ping $SRV6_A" ping_ok "$SRV6_A"

# Invariant: default deny - an address with no entry is unreachable by any protocol.
drops0=$(counter drop_policy)
check_not "denied v4: tcp $SRV_B:80" tcp_ok "$SRV_B" 80
check_not "denied v4: udp $SRV_B:5000" udp_ok "$SRV_B" 5000
check_not "denied v4: ping $SRV_B" ping_ok "$SRV_B"
check_not "denied v6: tcp [$SRV6_C]:80" tcp_ok "$SRV6_C" 80
check_not "denied v6: udp [$SRV6_C]:5000" udp_ok "$SRV6_C" 5000
check_not "denied v6: ping $SRV6_C" ping_ok "$SRV6_C"
check_cmp "denials are counted under drop_policy" "$(counter drop_policy)" -ge $((drops0 + 6))

# Invariant: a port entry opens that port and protocol only (control: the allowed port answers).
check "port entry: tcp $SRV_C:443 (allowed)" tcp_ok "$SRV_C" 443
check_not "port entry: tcp $SRV_C:80 is denied" tcp_ok "$SRV_C" 80
check_not "port entry: tcp $SRV_C:8080 is denied" tcp_ok "$SRV_C" 8080
check_not "port entry: udp $SRV_C:443 is denied (entry is /tcp)" udp_ok "$SRV_C" 443
check_not "port entry: ping $SRV_C is denied (ports do not open ICMP)" ping_ok "$SRV_C"
check "v6 port entry: tcp [$SRV6_B]:443 (allowed)" tcp_ok "$SRV6_B" 443
check_not "v6 port entry: tcp [$SRV6_B]:80 is denied" tcp_ok "$SRV6_B" 80
check_not "v6 port entry: udp [$SRV6_B]:443 is denied (entry is /tcp)" udp_ok "$SRV6_B" 443
check "cidr port entry: tcp $SRV_B:7000 (allowed by 203.0.113.16/28:7000/tcp)" tcp_ok "$SRV_B" 7000
check_not "cidr port entry: tcp $SRV_B:80 is denied" tcp_ok "$SRV_B" 80

# Invariant: the host address answers only on host services (control: 8080 is one).
check "host service: tcp $HOST4:8080 (--host-port 8080)" tcp_ok "$HOST4" 8080
hp0=$(counter drop_host_port)
check_not "host address: tcp $HOST4:8022 is denied" tcp_ok "$HOST4" 8022
check_cmp "host address: counted under drop_host_port" "$(counter drop_host_port)" -gt "$hp0"

# Invariant: nothing gets into the guest that the guest did not ask for
# (control: the same connection worked before attach; replies to the guest's flows pass above).
nf0=$(counter drop_no_flow to-guest)
check_not "inbound: I cannot connect to the guest" tcp_from_i "$GUEST4" 2222
check_cmp "inbound: counted under drop_no_flow (to-guest)" "$(counter drop_no_flow to-guest)" -gt "$nf0"

# Invariant: a revoke closes the destination (control: another entry keeps working).
check "revoke $SRV_A" latch egress "$LTS_NAME" revoke "$SRV_A"
check_not "revoked: tcp $SRV_A:80 is denied" tcp_ok "$SRV_A" 80
check_not "revoked: ping $SRV_A is denied" ping_ok "$SRV_A"
check "revoked: control tcp $SRV_C:443 still answers" tcp_ok "$SRV_C" 443

lts_done
