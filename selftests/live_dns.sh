#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_dns.sh - DNS goes only to the latch resolver, and only as fast as the
# sandbox's bucket allows: DNS to any other address is dropped even when that
# address is allowed outright (drop_dns_not_resolver), and a flood to the
# resolver is cut at the bucket (drop_dns_rate).  Controls: every query
# below was answered before latch was attached, the allowed server answers
# on a non-DNS port, and the resolver answers within the rate.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

RATE=5
BURST=10
FLOOD=200

# fake resolvers: the host end (the latch resolver) and a server "outside"
for a in "$HOST4" "$HOST6"; do
	lts_bg "$LTS_H" "$LTS_TMP/dns-h-$a.out" "$LTS_PY" "$LTS_NET" dns-serve "$a" --lifetime 300
	lts_wait_ready "$LTS_TMP/dns-h-$a.out" || fail setup "DNS server on $a did not start"
done
for a in "$SRV_DNS" "$SRV6_DNS"; do
	lts_bg "$LTS_I" "$LTS_TMP/dns-i-$a.out" "$LTS_PY" "$LTS_NET" dns-serve "$a" --lifetime 300
	lts_wait_ready "$LTS_TMP/dns-i-$a.out" || fail setup "DNS server on $a did not start"
done

check "baseline: DNS to $SRV_DNS answers without latch" dns_ok "$SRV_DNS"
check "baseline: DNS over TCP to $SRV_DNS answers without latch" dns_ok "$SRV_DNS" --tcp
check "baseline: DNS to $SRV6_DNS answers without latch" dns_ok "$SRV6_DNS"
check "baseline: DNS to the host $HOST4 answers without latch" dns_ok "$HOST4"
n=$(dns_answered "$HOST4" --count "$FLOOD")
check_cmp "baseline: the whole flood of $FLOOD is answered without latch (got $n)" "${n:-0}" -ge $((FLOOD * 9 / 10))

if ! lts_attach --dns-rate "$RATE" --dns-burst "$BURST" >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow $SRV_DNS and $SRV6_DNS outright" latch egress "$LTS_NAME" allow "$SRV_DNS" "$SRV6_DNS"

# Invariant: DNS only to the resolver, even to an allowed address (control: the same address on another port).
nr0=$(counter drop_dns_not_resolver)
check "control: udp $SRV_DNS:5000 passes (the entry is live)" udp_ok "$SRV_DNS" 5000
check "control: tcp $SRV_DNS:80 passes" tcp_ok "$SRV_DNS" 80
check_not "DNS over UDP to $SRV_DNS is dropped" dns_ok "$SRV_DNS"
check_not "DNS over TCP to $SRV_DNS is dropped" dns_ok "$SRV_DNS" --tcp
check "control: udp [$SRV6_DNS]:5000 passes" udp_ok "$SRV6_DNS" 5000
check_not "DNS over UDP to $SRV6_DNS is dropped" dns_ok "$SRV6_DNS"
nr1=$(counter drop_dns_not_resolver)
check_cmp "counted under drop_dns_not_resolver (was $nr0, now $nr1)" "$nr1" -ge $((nr0 + 3))
check "control: DNS to the resolver $HOST4 is answered" dns_ok "$HOST4"
check "control: DNS to the resolver $HOST6 is answered" dns_ok "$HOST6"

# Invariant: a DNS flood is cut at the bucket (burst BURST, then RATE/s).
sleep $(((BURST + RATE - 1) / RATE + 1)) # let the bucket fill up again
dr0=$(counter drop_dns_rate)
n=$(dns_answered "$HOST4" --count "$FLOOD")
dr1=$(counter drop_dns_rate)
echo "# flood: $FLOOD queries, $n answered, drop_dns_rate $dr0 -> $dr1"
check_cmp "flood: at least the burst less slack is answered ($n)" "${n:-0}" -ge $((BURST - 2))
check_cmp "flood: no more than burst + rate x 2 s is answered ($n)" "${n:-999}" -le $((BURST + 2 * RATE))
check_cmp "flood: the rest is counted under drop_dns_rate" "$dr1" -ge $((dr0 + FLOOD - BURST - 2 * RATE))
sleep 1 # the point: a second of refill at RATE/s
check "control: after the flood, the resolver answers again within the rate" dns_ok "$HOST4"

lts_done
