#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_uplink.sh - the uplink path of a VM sandbox: `uplink` and `gateway` in
# latch.conf, a routing table of the sandbox's own with the default towards
# the uplink, and masquerade for the sandbox's subnet only.
#
# The uplink is a veth into a fake-internet namespace this test creates
# (ltu-net-PID): its root-namespace end ltu-upPID is the configured `uplink`,
# the namespace end is the `gateway`, and an HTTP server sits in the
# namespace on another documentation address, reached only via that veth.
# Shown with tools latch does not use:
#   (a) before `egress allow` the guest can't reach the server;
#   (b) after it, it can;
#   (c) the server sees the connection from the uplink's address (masquerade);
#   (d) the sandbox's table holds exactly latch's two routes (its subnet on the
#       tap, default via the gateway on the uplink).  With an uplink latch's
#       table has `default via GATEWAY`, not `unreachable default`, so instead
#       of "unrouted is unreachable" this shows that nothing from the guest is
#       ever routed to the host's default-route device (eth0): `ip route get
#       ADDR from GUEST iif TAP` for the server, other documentation addresses,
#       the host's own gateway and LAN never names it, and a guard nft table of
#       this test counts (and drops) every packet forwarded to it while the
#       guest sends to such addresses after they were allowed: the count stays
#       0 while the counter of the allowed path grows;
#   (e) `nft list table inet latch` masquerades `ip saddr . oifname` in a set
#       whose one element is SUBNET/30 . uplink, and nothing else;
#   (f) after destroy: no latch table (or at least no element), no rule, no
#       routes, and `ip route show table main` and `ip rule` exactly as before;
#   and `latch doctor` checks the uplink: it exists (a missing one fails), its
#   forwarding is off until a sandbox uses it, on while one does, and off
#   under a running sandbox is a failure.
#
# Test traffic never leaves the machine: every address is documentation
# space, the server lives in the test's namespace, the namespace does not
# forward, and the guard table drops anything forwarded to the default-route
# device for the whole run, whatever latch does.  The EXIT trap destroys the
# sandbox, kills the server (by PID), and removes the namespace, the veth, the
# guard table and the temp dirs, pass or fail.
#
# Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".  Exit 1 on
# any failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-upl
TAP=lt-$NAME
TABLE=31900
NS=ltu-net-$$
UP=ltu-up$$		# root-namespace end: the configured uplink
PEER=ltu-pe$$		# namespace end: the gateway
SRV=203.0.113.99	# the fake-internet server, on the namespace's lo
SRV_PORT=18095
OTHER=203.0.113.44	# a documentation address nobody answers
GUARD=ltu_guard_$$	# this test's own nft table (inet)

TEST=vm_uplink
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd nft ss; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

# free_net CIDR...: the first candidate that overlaps no route and no address on this host
free_net() {
	python3 "$TOP/selftests/free_net.py" "$@"
}
# The host's default-route device and gateway (eth0 and 192.0.2.1 here): never to be used.
DEFDEV=$(ip -j route show default | jq -r '.[0].dev // "eth0"')
DEFGW=$(ip -j route show default | jq -r '.[0].gateway // "192.0.2.1"')
DEFNET=$(ip -j -4 addr show dev "$DEFDEV" 2>/dev/null | jq -r '.[0].addr_info[0].local // "192.0.2.2"')
LANADDR=${DEFNET%.*}.77 # another address on the host's LAN

UPNET=$(free_net 203.0.113.248/30 198.51.100.248/30)
[ -n "$UPNET" ] || skip_all "no free documentation /30 for the uplink veth"
UPBASE=${UPNET%/*}
UPADDR=${UPBASE%.*}.$((${UPBASE##*.} + 1))	# ours, on $UP
GW=${UPBASE%.*}.$((${UPBASE##*.} + 2))	# the namespace's, the gateway

TMP=
BPFFS=
PIDS=()
cleanup() {
	local p
	set +e
	[ -n "$TMP" ] && "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	ip link del "$UP" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	nft delete table inet "$GUARD" 2>/dev/null
	[ -n "$BPFFS" ] && rm -rf "$BPFFS"
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "$TMP" ] && rm -rf "$TMP"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch uplink

# --- the guard, first: anything forwarded to the default-route device is counted and dropped
nft -f - <<EOF
table inet $GUARD {
	counter to_default_dev { }
	counter guest_to_uplink { }
	chain guardfwd {
		type filter hook forward priority -400; policy accept;
		oifname "$DEFDEV" counter name to_default_dev drop
		iifname "$TAP" oifname "$UP" counter name guest_to_uplink
	}
}
EOF
guard() { nft -j list counter inet "$GUARD" "$1" | jq '.nftables[] | select(.counter) | .counter.packets'; }

# --- the fake internet ---------------------------------------------------------------
ip netns add "$NS"
ip link add "$UP" type veth peer name "$PEER"
ip link set "$PEER" netns "$NS"
ip addr add "$UPADDR/30" dev "$UP"
ip link set "$UP" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$GW/30" dev "$PEER"
ip -n "$NS" addr add "$SRV/32" dev lo
ip -n "$NS" link set "$PEER" up
# The namespace knows only its veth and lo: no default, no route to the sandbox pool, no forwarding.
echo 0 | ip netns exec "$NS" tee /proc/sys/net/ipv4/ip_forward >/dev/null
mkdir -p "$TMP/www"
echo "hello-from-fake-internet" > "$TMP/www/index.html"
(cd "$TMP/www" && exec ip netns exec "$NS" python3 -m http.server --bind "$SRV" "$SRV_PORT" >"$TMP/srv.log" 2>&1) &
PIDS+=($!)
srv_listens() { ip netns exec "$NS" ss -ltnH "( sport = :$SRV_PORT )" | grep -q .; }
wait_until -t 5 srv_listens || true

POOL=$(free_net ${LATCH_VM_POOLS:-198.51.100.0/26 198.51.100.64/26 203.0.113.128/26 203.0.113.192/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
NET=${POOL%.*/*}
FIRST=${POOL#"$NET".}
FIRST=${FIRST%/*}
SUBNET=$NET.$FIRST/30
HOST4=$NET.$((FIRST + 1))
GUEST4=$NET.$((FIRST + 2))

vm_root "documentation addresses only; the uplink is a veth into $NS" pool=$POOL uplink=$UP gateway=$GW
G() { timeout 60 "$LATCH_BIN" exec "$NAME" -- "$@"; } # run in the guest
guest_get() { G sh -c "echo 'GET /' | nc -w 3 $1 $2" 2>/dev/null || true; }


# The root namespace's routing before latch touches it (the veth is the test's, already there).
main_before=$(ip route show table main)
rule_before=$(ip rule show)
rule6_before=$(ip -6 rule show)
had_latch_table=0
nft list table inet latch >/dev/null 2>&1 && had_latch_table=1

# --- doctor: the uplink exists; its forwarding is off until a sandbox uses it ---------------
uplink_row() { L --json doctor 2>/dev/null | jq -c '.checks[] | select(.check == "uplink")' >"$TMP/row.json"; cat "$TMP/row.json"; }
row_is() { jq -e "$1" "$TMP/row.json"; }
row=$(uplink_row)
echo "#   doctor before up: $row"
check "doctor_sees_the_uplink_with_forwarding_off_before_up" row_is ".result == \"ok\" and (.detail | test(\"uplink $UP exists.*forwarding is off until\"))"
cp "$CONF" "$TMP/conf.good"
sed -i "s/^uplink = .*/uplink = ltu-none$$/" "$CONF"
row=$(uplink_row)
cp "$TMP/conf.good" "$CONF"
check "doctor_fails_an_uplink_that_does_not_exist" row_is ".result == \"FAIL\" and (.detail | test(\"ltu-none$$ .*does not exist\")) and (.fix | test(\"uplink\"))"

# --- up ----------------------------------------------------------------------------------
rc=0
up_json=$(L --json up "$NAME" 2>"$TMP/up.err") || rc=$?
if [ "$rc" != 0 ]; then
	fail "up_with_uplink: exit $rc: $(cat "$TMP/up.err") $(jq -r .error <<<"$up_json" 2>/dev/null)"
	lts_done
fi
ok "up_with_uplink (guest $(echo "$up_json" | jq -r .guest_ip4), accelerator $(echo "$up_json" | jq -r .accelerator))"
check "guest_has_assigned_address" bash -c "'$LATCH_BIN' exec $NAME -- ip -4 addr show | grep -q 'inet $GUEST4/30'"
check "rule_from_subnet_to_own_table" bash -c "ip rule show | grep -q 'from $SUBNET lookup $TABLE'"

# (a) not yet allowed
out=$(guest_get "$SRV" "$SRV_PORT")
check "a_guest_cannot_reach_server_before_allow" bash -c "! echo '$out' | grep -q hello && ! grep -q 'GET /' '$TMP/srv.log'"

# (b) allowed
L egress "$NAME" allow "$SRV:$SRV_PORT" >/dev/null
out=$(guest_get "$SRV" "$SRV_PORT")
check "b_guest_reaches_server_after_allow" bash -c "echo '$out' | grep -q hello-from-fake-internet"
check "b_allow_opens_only_that_port" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 2 $SRV 18096\" 2>/dev/null | grep -q ."

# (c) masquerade: the server saw the uplink's address, never the guest's
srcs=$(grep 'GET /' "$TMP/srv.log" | awk '{print $1}' | sort -u | tr '\n' ' ')
echo "#   server saw: ${srcs:-nothing}"
check "c_server_sees_uplink_address_not_guest" test "$srcs" = "$UPADDR "

# (d) the sandbox's table: exactly latch's two routes
tbl=$(ip route show table "$TABLE" | sed 's/ *$//' | sort)
want=$(printf '%s\n' "$SUBNET dev $TAP proto static scope link" "default via $GW dev $UP proto static" | sort)
echo "#   table $TABLE: $(echo "$tbl" | tr '\n' ';')"
check "d_table_holds_exactly_latch_routes" test "$tbl" = "$want"
check "d_table_has_no_route_naming_$DEFDEV" bash -c "! ip route show table $TABLE | grep -qw '$DEFDEV'"
bad=
for dst in "$SRV" "$OTHER" 198.51.100.250 203.0.113.1 "$DEFGW" "$LANADDR" "$HOST4"; do
	r=$(ip route get "$dst" from "$GUEST4" iif "$TAP" 2>&1 || true)
	echo "#   route get $dst from $GUEST4 iif $TAP: $(echo "$r" | head -n1)"
	case "$dst" in
	"$HOST4") echo "$r" | grep -q "^local $HOST4 " || bad="$bad $dst" ;; # the host's own address on the tap
	*) echo "$r" | grep -q " via $GW dev $UP " || bad="$bad $dst" ;;
	esac
	echo "$r" | grep -qw "$DEFDEV" && bad="$bad $dst($DEFDEV)"
done
check "d_route_get_never_names_${DEFDEV}_only_uplink${bad:+ (wrong:$bad)}" test -z "$bad"

# Allow addresses that are not the server, including the host's own gateway and LAN, and send to them.
L egress "$NAME" allow "$OTHER" "$DEFGW" "$LANADDR" >/dev/null
g0=$(guard to_default_dev)
u0=$(guard guest_to_uplink)
for dst in "$OTHER" "$DEFGW" "$LANADDR"; do
	out=$(guest_get "$dst" 80)
	[ -z "$out" ] || bad="$bad $dst"
	G ping -c 2 -W 1 "$dst" >/dev/null 2>&1 && bad="$bad ping:$dst"
done
check "d_allowed_but_unrouted_destinations_unreachable${bad:+ (answered:$bad)}" test -z "$bad"
g1=$(guard to_default_dev)
u1=$(guard guest_to_uplink)
echo "#   forwarded guest->uplink packets +$((u1 - u0)), forwarded to $DEFDEV +$((g1 - g0)) (whole run: $g1)"
check "d_guest_traffic_forwarded_to_uplink_counted" test "$u1" -gt "$u0"
check "d_nothing_forwarded_to_${DEFDEV}" test "$g1" = 0

# (e) masquerade for the sandbox's subnet only
nft list table inet latch > "$TMP/nft.txt" 2>&1 || true
sed 's/^/#   | /' "$TMP/nft.txt"
elems=$(nft -j list set inet latch masq4 | jq -c '[.nftables[] | select(.set) | .set.elem[]? | .concat | [.[0].prefix.addr + "/" + (.[0].prefix.len|tostring), .[1]]]')
echo "#   masq4 elements: $elems"
if [ "$had_latch_table" = 0 ]; then
	check "e_masq4_has_exactly_this_subnet_and_uplink" test "$elems" = "[[\"$NET.$FIRST/30\",\"$UP\"]]"
else
	check "e_masq4_has_this_subnet_and_uplink" bash -c "echo '$elems' | jq -e 'index([\"$NET.$FIRST/30\",\"$UP\"]) != null'"
fi
check "e_no_masquerade_element_for_${DEFDEV}" bash -c "! echo '$elems' | grep -q '\"$DEFDEV\"' && ! nft -j list set inet latch masq6 | grep -q '\"$DEFDEV\"'"
masq_rules=$(nft -j list table inet latch | jq -c '[.nftables[] | select(.rule) | select(.rule.expr | any(has("masquerade"))) | .rule.expr[0].match.right]')
check "e_every_masquerade_rule_matches_the_sets_only ($masq_rules)" test "$masq_rules" = '["@masq4","@masq6"]'
check "e_no_other_masquerade_on_host_names_${DEFDEV}" bash -c "! nft list ruleset | grep -E 'masquerade|snat' | grep -qw '$DEFDEV'"

# (g) latch turned forwarding on for the uplink (it was off on this fresh veth), so
# the uplink is guarded: packets arriving on it are forwarded only as replies into
# latch's taps, never for the uplink's network to anywhere else.
check "g_uplink_forwarding_on_while_a_sandbox_uses_it" test "$(cat /proc/sys/net/ipv4/conf/"$UP"/forwarding)" = 1
check "g_uplink_is_in_latchs_forward_guard" bash -c "nft list set inet latch fwd_guard | grep -q '\"$UP\"'"
row=$(uplink_row)
check "g_doctor_sees_the_uplink_forwarding" row_is '.result == "ok" and (.detail | test("forwarding on"))'
# forwarding turned off under a running sandbox (a network manager resetting it): doctor fails it
echo 0 > "/proc/sys/net/ipv4/conf/$UP/forwarding"
row=$(uplink_row)
echo 1 > "/proc/sys/net/ipv4/conf/$UP/forwarding"
echo "#   doctor with forwarding off under a sandbox: $row"
check "g_doctor_fails_uplink_forwarding_off_under_a_sandbox" row_is '.result == "FAIL" and (.fix | test("latch boot apply"))'
check "g_up_says_where_allowed_traffic_goes" grep -q "routing: table $TABLE, default via uplink $UP" "$TMP/up.err"
echo "$up_json" >"$TMP/up.json"
check "g_up_json_says_allowed_traffic_is_routed" jq -e '.allowed_traffic_routed and .routing_note == null' "$TMP/up.json"
guard_drops() { nft -j list chain inet latch forward | jq '[.nftables[] | select(.rule) | .rule.expr[] | select(.counter) | .counter.packets] | add // 0'; }
no_flow() { "$LATCH_BIN" --json status "$NAME" | jq '[.sandboxes[0].counters[] | select(.reason == "drop_no_flow") | .packets] | add // 0'; }
# The attack from the uplink side: the fake internet routes the sandbox subnet at us
# and opens new connections to the guest (only ever towards the tap, never eth0).
ip -n "$NS" route add "$SUBNET" via "$UPADDR" dev "$PEER"
d0=$(guard_drops); n0=$(no_flow)
ip netns exec "$NS" ping -c 3 -i 0.2 -W 1 "$GUEST4" >/dev/null 2>&1 || true
ip netns exec "$NS" timeout 3 bash -c "exec 3<>/dev/tcp/$GUEST4/22" 2>/dev/null || true
d1=$(guard_drops); n1=$(no_flow)
check "g_new_connections_from_the_uplink_side_dropped_by_the_guard (+$((d1 - d0)))" test "$d1" -gt "$d0"
check "g_they_never_reached_the_tap (drop_no_flow +$((n1 - n0)))" test "$n1" = "$n0"
out=$("$LATCH_BIN" exec "$NAME" -- sh -c "echo 'GET /' | nc -w 3 $SRV $SRV_PORT" 2>/dev/null || true)
check "g_control_replies_to_the_guest_still_pass" bash -c "echo '$out' | grep -q hello-from-fake-internet"
ip -n "$NS" route del "$SUBNET" via "$UPADDR" dev "$PEER"

# (f) destroy: everything latch made for the sandbox is gone, the root namespace's routing is as before
rc=0
L destroy "$NAME" >/dev/null 2>&1 || rc=$?
check "f_destroy_exits_0" test "$rc" = 0
check "f_destroy_removes_tap" test ! -e "/sys/class/net/$TAP"
check "f_destroy_removes_rule" bash -c "! ip rule show | grep -q 'lookup $TABLE'"
check "f_destroy_removes_table_routes" test -z "$(ip route show table "$TABLE" 2>/dev/null)"
if [ "$had_latch_table" = 0 ]; then
	check "f_destroy_removes_latch_nft_table" bash -c "! nft list table inet latch"
else
	check "f_destroy_removes_masquerade_element" bash -c "! nft list set inet latch masq4 | grep -q '$NET.$FIRST/30'"
fi
# The main table and the rules as before, in every line that names this test's tap, uplink,
# subnet or table: other tests on this host add and remove their own meanwhile (printed, not judged).
ours() { grep -E -w -- "$TAP|$UP|${SUBNET//./\\.}|lookup $TABLE" || true; }
same_as_before() { # BEFORE NOW
	[ "$(ours <<<"$1")" = "$(ours <<<"$2")" ] && return 0
	diff <(ours <<<"$1") <(ours <<<"$2") | sed 's/^/#   /' || true
	return 1
}
main_now=$(ip route show table main)
rule_now=$(ip rule show)$'\n'$(ip -6 rule show)
[ "$main_now" = "$main_before" ] ||
	{ echo "#   the main table changed meanwhile (other tests on this host, unless a line below names this one):"; diff <(echo "$main_before") <(echo "$main_now") | sed 's/^/#   /' || true; }
check "f_main_table_as_before" same_as_before "$main_before" "$main_now"
check "f_ip_rules_as_before" same_as_before "$rule_before"$'\n'"$rule6_before" "$rule_now"
check "f_no_route_left_naming_$TAP" bash -c "! ip route show table all | grep -E -w '$TAP'"
check "f_destroy_turns_uplink_forwarding_back_off" test "$(cat /proc/sys/net/ipv4/conf/"$UP"/forwarding)" = 0
check "f_nothing_forwarded_to_${DEFDEV}_whole_run" test "$(guard to_default_dev)" = 0

lts_done
