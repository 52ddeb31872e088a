#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_attack.sh - a real guest under libvirt (TCG here), booted once behind
# latch, attacks from inside as root through `latch exec`.  Each attack
# must fail, a control that succeeds stands beside it, and the kernel's own
# counter for the right reason (`latch --json status`) must grow:
#
#   denied v4 and v6 destinations          drop_policy
#   a host port that is no host service    drop_host_port
#   a spoofed source IP (ip addr/route)    drop_spoof_ip
#   a spoofed MAC (ip link set address)    drop_spoof_mac
#   ARP-spoofing the gateway               drop_arp
#   raw sockets: crafted frames            drop_ethertype, drop_vlan, drop_policy
#   "flush the guest's firewall", re-route drop_policy (the guest's rules
#                                          were never the boundary)
#
# Invariant defended: the guest's packets go only where the filter on its
# tap lets them, whatever root inside the guest does.
#
# Test traffic never leaves the machine: the pool is a documentation range
# the host does not use, there is no uplink (the sandbox's table has
# `unreachable default`), denied destinations are documentation addresses,
# and the allowed ones are listeners on documentation addresses in a
# namespace behind the host (lib_vm.sh vm_ctrl_net: a guest reaches none of
# the host's own addresses).  The EXIT trap destroys the sandbox, removes
# that namespace and kills the listeners it started, by PID, pass or fail.
#
# Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".  Exit 1 on
# any failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-atk
TAP=lt-$NAME
TABLE=31700
CTRL4=203.0.113.78	# behind the host (vm_ctrl_net), allowed by an egress entry
CTRL6=2001:db8:77::78	# behind the host (vm_ctrl_net), allowed by an egress entry
CTRL_PORT=18090		# tcp, an HTTP listener on CTRL4 and CTRL6
CTRL_UDP=18091		# udp, a receiver on CTRL4 for crafted frames
HOSTSVC_PORT=18092	# listened on at the sandbox's host address; not a host service
DENIED4=203.0.113.10
DENIED6=2001:db8:ff::10
SPOOF_MAC=02:00:5e:10:00:99

TEST=vm_attack
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd ss; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 "$TOP/selftests/free_net.py" "$@"
}
# A /26 of documentation space that no route or address on this host touches
# (eth0 may sit in 192.0.2.0/24; other guest tests may hold other /26s).
POOL=$(free_pool ${LATCH_VM_POOLS:-198.51.100.0/26 198.51.100.64/26 203.0.113.128/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
POOL6=2001:db8:5a00::
if ip -6 route show table all | grep -q '^2001:db8:5a00:'; then
	skip_all "2001:db8:5a00::/48 is in use on this host"
fi
NET=${POOL%.*/*}
FIRST=${POOL#"$NET".}
FIRST=${FIRST%/*}
HOST4=$NET.$((FIRST + 1))
GUEST4=$NET.$((FIRST + 2))
SPOOF4=$NET.$((FIRST + 6))	# the next sandbox's guest address

TMP=
BPFFS=
PIDS=()
ADDED=()
cleanup() {
	local p a
	set +e
	[ -n "$TMP" ] && "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	vm_ctrl_net_down
	[ -n "$BPFFS" ] && rm -rf "$BPFFS"
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "$TMP" ] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch attack
vm_root "documentation addresses only, and no uplink" pool=$POOL pool6=$POOL6/48
G() { timeout 60 "$LATCH_BIN" exec "$NAME" -- sh -c "$1"; } # a command in the guest, as root


# --- one guest for every case ------------------------------------------------
t0=$(date +%s%N)
if ! up_json=$(L --json up "$NAME" 2>"$TMP/up.err"); then
	fail "up: $(cat "$TMP/up.err")"
	lts_done
fi
t1=$(date +%s%N)
ok "up_behind_verified_enforcement ($(( (t1 - t0) / 1000000 )) ms, $(echo "$up_json" | jq -r .accelerator))"
GUEST6=$(echo "$up_json" | jq -r '.guest_ip6 // empty')
HOST6=$(echo "$up_json" | jq -r '.host_ip6 // empty')
GMAC=$(echo "$up_json" | jq -r '.mac // empty')
TAPMAC=$(cat "/sys/class/net/$TAP/address")
DEV=$(G "ls /sys/class/net | grep -v '^lo$' | head -n1")
[ -n "$GMAC" ] || GMAC=$(G "cat /sys/class/net/$DEV/address")
echo "#   guest $GUEST4 ${GUEST6:-no-v6} mac $GMAC on $DEV; host $HOST4 ${HOST6:-} tap mac $TAPMAC"

counter() { # REASON: packets from the guest, as the kernel counted them
	L --json status "$NAME" | jq "[.sandboxes[0].counters[] | select(.reason==\"$1\" and .direction==\"from-guest\") | .packets] | add // 0"
}
# grew REASON BEFORE: the kernel counted more drops under REASON; when not,
# say where the guest's packets were counted instead
snap() { L --json status "$NAME" | jq -c '[.sandboxes[0].counters[] | select(.direction=="from-guest" and .packets > 0) | {(.reason): .packets}] | add'; }
grew() {
	test "$(counter "$1")" -gt "$2" && return 0
	echo "#   counters now: $(snap)" >&2
	return 1
}

# --- the listeners: the allowed destinations in a namespace behind the host (a
# guest never reaches an address of the host's own), a host-port listener in the host
vm_ctrl_net "$POOL $POOL6/48" "$CTRL4" "$CTRL6" && vm_ctrl_http "$CTRL4" "$CTRL_PORT" ||
	fail "control_namespace_set_up"
vm_ctrl_http "$CTRL6" "$CTRL_PORT" || fail "control_v6_listener_up"
vm_ctrl_forward "$TAP"
(cd "$TMP/www" && exec python3 -m http.server --bind "$HOST4" "$HOSTSVC_PORT" >/dev/null 2>&1) &
PIDS+=($!)
# the UDP receiver appends every datagram it gets to a file; it stops by itself
ip netns exec "$CTRL_NS" python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(1)
end = time.time() + 900
with open(sys.argv[3], "ab", buffering=0) as f:
    while time.time() < end:
        try:
            d, a = s.recvfrom(2048)
        except socket.timeout:
            continue
        f.write(d + b"\n")
' "$CTRL4" "$CTRL_UDP" "$TMP/udp.got" &
PIDS+=($!)
: > "$TMP/udp.got"
# servers_listen: the host's service and the control namespace's TCP and UDP servers all listen
servers_listen() {
	[ "$(ss -lntuH | grep -cE ":$HOSTSVC_PORT ")$(ctrl_ns ss -lntuH | grep -cE ":($CTRL_PORT|$CTRL_UDP) ")" = 13 ]
}
wait_until -t 5 servers_listen || true

L egress "$NAME" allow "$CTRL4:$CTRL_PORT" "$CTRL4:$CTRL_UDP/udp" >/dev/null
if [ -n "$GUEST6" ]; then
	L egress "$NAME" allow "[$CTRL6]:$CTRL_PORT" >/dev/null
fi

get4() { G "echo 'GET /' | nc -w 3 $1 $2" 2>/dev/null | grep -q hello-from-host; }

# --- allowed destinations work ------------------------------------------------
check "control_allowed_v4_destination_answers" get4 "$CTRL4" "$CTRL_PORT"

# --- denied v4 and v6 ---------------------------------------------------------
c=$(counter drop_policy)
check_not "denied_v4_tcp_fails" get4 "$DENIED4" 80
check_not "denied_v4_ping_fails" G "ping -c 1 -W 2 $DENIED4"
check "denied_v4_counted_drop_policy" grew drop_policy "$c"
if [ -n "$GUEST6" ]; then
	check "guest_has_assigned_v6_address" G "ip -6 addr show dev $DEV | grep -q 'inet6 $GUEST6/64'"
	check "control_allowed_v6_destination_answers" get4 "$CTRL6" "$CTRL_PORT"
	c=$(counter drop_policy)
	check_not "denied_v6_tcp_fails" get4 "$DENIED6" 80
	check_not "denied_v6_ping_fails" G "ping6 -c 1 -W 2 $DENIED6"
	check "denied_v6_counted_drop_policy" grew drop_policy "$c"
else
	fail "guest_has_v6: latch up gave the guest no v6 address (pool6 = $POOL6/48)"
fi

# --- a host port that is not a host service -----------------------------------
c=$(counter drop_host_port)
check "control_host_port_answers_from_host_itself" bash -c "python3 -c 'import urllib.request,sys; sys.exit(b\"hello\" not in urllib.request.urlopen(\"http://$HOST4:$HOSTSVC_PORT/\", timeout=3).read())'"
check_not "host_port_not_a_service_fails" get4 "$HOST4" "$HOSTSVC_PORT"
check "host_port_counted_drop_host_port" grew drop_host_port "$c"

# --- spoofed source IP: an extra address, a route that picks it ---------------
c=$(counter drop_spoof_ip)
check "guest_root_adds_spoofed_address_and_route" G "ip addr add $SPOOF4/32 dev $DEV && ip route add $CTRL4/32 via $HOST4 dev $DEV src $SPOOF4"
check_not "spoofed_source_ip_to_allowed_destination_fails" get4 "$CTRL4" "$CTRL_PORT"
check "spoofed_source_ip_counted_drop_spoof_ip" grew drop_spoof_ip "$c"
G "ip route del $CTRL4/32; ip addr del $SPOOF4/32 dev $DEV" >/dev/null 2>&1 || true
check "control_after_spoof_removed_allowed_answers" get4 "$CTRL4" "$CTRL_PORT"

# --- spoofed MAC ----------------------------------------------------------------
# One exec does it all: a MAC change with nothing to put it back would cut the
# guest off for the rest of the test (the agent rides virtio-serial, not the NIC).
c=$(counter drop_spoof_mac)
out=$(G "ip link set $DEV address $SPOOF_MAC && (echo 'GET /' | nc -w 3 $CTRL4 $CTRL_PORT; ping -c 1 -W 2 $HOST4) 2>&1; ip link set $DEV address $GMAC; echo mac-now=\$(cat /sys/class/net/$DEV/address)" 2>&1 || true)
check_not "spoofed_mac_to_allowed_destination_fails" grep -q hello-from-host <<<"$out"
check "spoofed_mac_was_restored" grep -qi "mac-now=$GMAC" <<<"$out"
check "spoofed_mac_counted_drop_spoof_mac" grew drop_spoof_mac "$c"
check "control_after_mac_restored_allowed_answers" get4 "$CTRL4" "$CTRL_PORT"

# --- ARP-spoof the gateway ------------------------------------------------------
host_neigh_before=$(ip neigh show "$HOST4" 2>/dev/null || true)
c=$(counter drop_arp)
G "arping -U -c 2 -s $HOST4 -I $DEV $HOST4" >/dev/null 2>&1 || true
G "latch-rawsend $DEV arp $GMAC $HOST4 $HOST4" >/dev/null 2>&1 || true
G "latch-rawsend $DEV arp $GMAC $SPOOF4 $HOST4" >/dev/null 2>&1 || true
check "arp_spoof_of_gateway_counted_drop_arp" grew drop_arp "$c"
check "host_neighbour_table_has_no_claim_for_gateway_or_neighbour" bash -c "! ip neigh show | grep -qiE '^($HOST4|$SPOOF4) .*$GMAC'"
check "control_guest_arp_for_gateway_still_works" G "ping -c 1 -W 3 $HOST4 >/dev/null 2>&1 || arping -c 1 -w 3 -I $DEV $HOST4"
: "$host_neigh_before"

# --- raw socket, crafted frames -------------------------------------------------
if G "command -v latch-rawsend" >/dev/null 2>&1; then
	: > "$TMP/udp.got"
	crafted_ok_arrives() {
		"$LATCH_BIN" exec "$NAME" -- latch-rawsend "$DEV" udp4 "$GMAC" "$TAPMAC" "$GUEST4" "$CTRL4" "$CTRL_UDP" crafted-ok \
			>/dev/null && wait_until -t 3 grep -q crafted-ok "$TMP/udp.got"
	}
	check "control_crafted_udp_frame_to_allowed_destination_arrives" crafted_ok_arrives
	c=$(counter drop_policy)
	G "latch-rawsend $DEV udp4 $GMAC $TAPMAC $GUEST4 $DENIED4 5000 crafted-denied" >/dev/null 2>&1 || true
	check "crafted_frame_to_denied_address_counted_drop_policy" grew drop_policy "$c"
	c=$(counter drop_spoof_ip)
	G "latch-rawsend $DEV udp4 $GMAC $TAPMAC $SPOOF4 $CTRL4 $CTRL_UDP crafted-spoof-ip" >/dev/null 2>&1 || true
	check "crafted_frame_spoofed_ip_counted_drop_spoof_ip" grew drop_spoof_ip "$c"
	c=$(counter drop_spoof_mac)
	G "latch-rawsend $DEV udp4 $SPOOF_MAC $TAPMAC $GUEST4 $CTRL4 $CTRL_UDP crafted-spoof-mac" >/dev/null 2>&1 || true
	check "crafted_frame_spoofed_mac_counted_drop_spoof_mac" grew drop_spoof_mac "$c"
	c=$(counter drop_ethertype)
	G "latch-rawsend $DEV ethertype $GMAC $TAPMAC 0x88b5" >/dev/null 2>&1 || true
	check "crafted_frame_odd_ethertype_counted_drop_ethertype" grew drop_ethertype "$c"
	c=$(counter drop_vlan)
	G "latch-rawsend $DEV vlan $GMAC $TAPMAC 7 $GUEST4 $CTRL4 $CTRL_UDP" >/dev/null 2>&1 || true
	check "crafted_vlan_tagged_frame_counted_drop_vlan" grew drop_vlan "$c"
	sleep 0.5 # the point: time for a frame that must not arrive (the control's came within this)
	check_not "no_crafted_attack_frame_reached_the_listener" grep -qE 'crafted-(denied|spoof)' "$TMP/udp.got"
else
	fail "raw_socket_attacks: latch-rawsend is not in the image (make image)"
fi

# --- "flush the guest's firewall and try again" ---------------------------------
# The guest has no firewall of its own to flush: latch's boundary is the host
# kernel's filter on the tap.  Root in the guest flushes what there is and
# rewrites its routes, then retries a denied destination.
out=$(G "for t in iptables ip6tables nft; do command -v \$t >/dev/null && echo has-\$t; done; \
	command -v iptables >/dev/null && iptables -F; command -v nft >/dev/null && nft flush ruleset; \
	ip route flush dev $DEV; ip route add $HOST4 dev $DEV; ip route add default via $HOST4 dev $DEV; \
	ip neigh flush dev $DEV; echo 1 > /proc/sys/net/ipv4/ip_forward; echo routes-rewritten" 2>&1 || true)
check "guest_root_flushes_and_rewrites_its_routes" grep -q routes-rewritten <<<"$out"
echo "#   guest firewall tools: $(grep -o 'has-[a-z0-9]*' <<<"$out" | tr '\n' ' ')(none means nothing to flush)"
c=$(counter drop_policy)
check_not "after_flush_denied_v4_still_fails" get4 "$DENIED4" 80
check_not "after_flush_denied_v4_ping_still_fails" G "ping -c 1 -W 2 $DENIED4"
check "after_flush_counted_drop_policy" grew drop_policy "$c"
check "after_flush_control_allowed_still_answers" get4 "$CTRL4" "$CTRL_PORT"

# --- the boundary held throughout ---------------------------------------------
check "still_enforced_after_attacks" bash -c "'$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].enforced' >/dev/null"

lts_done
