#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_cni.sh - latch-cni chained after Debian's bridge plugin (host-local
# IPAM), run the way a runtime runs a chain: bridge's ADD with the config on
# stdin, then latch-cni's with bridge's result as prevResult, in a node
# namespace H with latchd, for pods in namespaces of their own.
#
#   P1, P2 "pods"  eth0 on bridge cni-lts0 (192.0.2.0/24, 2001:db8:1::/64, gw .1/::1)
#   H      "node"  the bridge, latchd, hi0 198.51.100.253/30   <- latch-cni attaches to each pod's veth here
#   I      "internet" fake servers on 203.0.113.x / 2001:db8:ff::x
#
# Each boundary is checked beside its control: the pod reaches what its
# profile lists and nothing else (an unlisted server, another pod, the
# node's own addresses, a spoofed source), and each of these worked before
# latch-cni's ADD.  DEL leaves nothing (pins, links, state, latchd's view)
# and a second DEL succeeds; CHECK fails once latch's program is off the
# link; an ADD whose read-back fails is a CNI error and leaves nothing.
# lts-limit: 240
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_init

CNI_BIN=$LTS_TOP/build/latch-cni
CNI_PLUGINS=/usr/lib/cni
TCX_TOOL=$LTS_TOP/build/selftests/tcx_tool
[ -x "$CNI_BIN" ] || lts_skip_all "no $CNI_BIN; run make"
[ -x "$CNI_PLUGINS/bridge" ] && [ -x "$CNI_PLUGINS/host-local" ] ||
	lts_skip_all "no bridge/host-local in $CNI_PLUGINS; apt-get install containernetworking-plugins (make deps)"
[ -x "$TCX_TOOL" ] || lts_skip_all "no $TCX_TOOL; run make selftest-bins"

P1=lts-p1-$$
P2=lts-p2-$$
ROOT=$LTS_TMP/root
BR=cni-lts0
GW4=192.0.2.1
GW6=2001:db8:1::1

for ns in "$LTS_H" "$LTS_I" "$P1" "$P2"; do
	lts_ns_add "$ns" || { fail setup "namespace $ns"; lts_done; }
done
LTS_TOPO_ERR=0
_x ip -n "$LTS_H" link add hi0 type veth peer name ih0 netns "$LTS_I"
_x ip -n "$LTS_H" addr add 198.51.100.253/30 dev hi0
_x ip -n "$LTS_H" addr add 2001:db8:fe::1/64 dev hi0 nodad
_x ip -n "$LTS_H" link set hi0 up
_x ip -n "$LTS_I" addr add 198.51.100.254/30 dev ih0
_x ip -n "$LTS_I" addr add 2001:db8:fe::2/64 dev ih0 nodad
_x ip -n "$LTS_I" link set ih0 up
for a in "$SRV_A" "$SRV_B" "$SRV_DNS" "$SRV_C"; do _x ip -n "$LTS_I" addr add "$a/32" dev lo; done
for a in "$SRV6_A" "$SRV6_B" "$SRV6_C" "$SRV6_DNS"; do _x ip -n "$LTS_I" addr add "$a/128" dev lo nodad; done
_x ip -n "$LTS_I" route add 192.0.2.0/24 via 198.51.100.253
_x ip -n "$LTS_I" -6 route add 2001:db8:1::/64 via 2001:db8:fe::1
_x ip netns exec "$LTS_H" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
_x ip -n "$LTS_H" route add 203.0.113.0/24 via 198.51.100.254 dev hi0
_x ip -n "$LTS_H" -6 route add 2001:db8:ff::/48 via 2001:db8:fe::2 dev hi0
[ "$LTS_TOPO_ERR" = 0 ] || { fail setup "could not build the test namespaces"; lts_done; }
lts_servers || { fail setup "the fake servers in I did not start"; lts_done; }

# the node's own services: on the bridge's gateway and on hi0 (a pod must reach neither)
lts_bg "$LTS_H" "$LTS_TMP/serve-h.out" "$LTS_PY" "$LTS_NET" serve --tcp 8080 --lifetime 300

# --- the operator's side: a profile, latchd
mkdir -p "$ROOT/etc/latch/profiles"
cat >"$ROOT/etc/latch/profiles/cnitest.txt" <<EOF
# live_cni.sh: one server, one port, both families
$SRV_A/32:80
[$SRV6_A/128]:80
EOF
chmod 0644 "$ROOT/etc/latch/profiles/cnitest.txt"
lts_latchd "$ROOT" || { fail setup "latchd did not start: $(tail -3 "$LTS_TMP/latchd.log")"; lts_done; }

BRIDGE_CONF=$(jq -nc --arg br "$BR" --arg dir "$LTS_TMP/ipam" '{cniVersion: "1.0.0", name: "lts-cni",
	type: "bridge", bridge: $br, isGateway: true, ipMasq: false,
	ipam: {type: "host-local", dataDir: $dir,
	       ranges: [[{subnet: "192.0.2.0/24", rangeStart: "192.0.2.10", rangeEnd: "192.0.2.50", gateway: "192.0.2.1"}],
			[{subnet: "2001:db8:1::/64", rangeStart: "2001:db8:1::10", rangeEnd: "2001:db8:1::50", gateway: "2001:db8:1::1"}]],
	       routes: [{dst: "0.0.0.0/0"}, {dst: "::/0"}]}}')
LATCH_CONF='{"cniVersion": "1.0.0", "name": "lts-cni", "type": "latch-cni", "latch": {"profile": "cnitest"}}'

# cni PLUGIN COMMAND ID NETNS: run a plugin as a runtime does, in H, the config on stdin
cni() {
	local plugin=$1 cmd=$2 id=$3 ns=$4
	shift 4
	nsenter --net="/run/netns/$LTS_H" -- env CNI_COMMAND="$cmd" CNI_CONTAINERID="$id" \
		CNI_NETNS="${ns:+/run/netns/$ns}" CNI_IFNAME=eth0 CNI_PATH="$CNI_PLUGINS" CNI_ARGS="${CNI_ARGS_X:-}" \
		LATCH_ROOT="$ROOT" LATCH_BPFFS="$LTS_BPFFS" "$@" "$plugin"
}
# latch_add ID NETNS PREV [CONF]: latch-cni's ADD with PREV (bridge's result) inserted as prevResult
latch_add() {
	jq -c --argjson prev "$3" '. + {prevResult: $prev}' <<<"${4:-$LATCH_CONF}" | cni "$CNI_BIN" ADD "$1" "$2"
}
latch_cmd() { # CMD ID NETNS PREV
	jq -c --argjson prev "$4" '. + {prevResult: $prev}' <<<"$LATCH_CONF" | cni "$CNI_BIN" "$1" "$2" "$3"
}
# sbname ID: the sandbox latch-cni makes for container ID's eth0
sbname() { printf 'cni-%s' "$(printf '%s\0eth0' "$1" | sha256sum | cut -c1-16)"; }
host_veth() { # NETNS: the host end of its eth0
	local peer
	peer=$(ip -n "$1" -j link show eth0 | jq -r '.[0].link_index')
	ip -n "$LTS_H" -j link show | jq -r --argjson i "$peer" '.[] | select(.ifindex == $i) | .ifname'
}
in_pod() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
pod_tcp() { in_pod "$1" "$LTS_PY" "$LTS_NET" tcp "${@:2}" --timeout "$LTS_T"; }
# nothing_of NAME DEV: no pins, no TCX program or clsact on DEV, no state file, latchd lists it no more
nothing_of() {
	local st
	[ ! -e "$LTS_BPFFS/latch/$1" ] || { echo "# pins left: $(ls "$LTS_BPFFS/latch/$1")" >&2; return 1; }
	if [ -n "$2" ]; then
		st=$(ip netns exec "$LTS_H" "$TCX_TOOL" list "$2" ingress; ip netns exec "$LTS_H" "$TCX_TOOL" list "$2" egress)
		[ -z "$st" ] || { echo "# TCX programs left on $2: $st" >&2; return 1; }
		! ip netns exec "$LTS_H" tc -j qdisc show dev "$2" | jq -r '.[].kind' | grep -qx clsact ||
			{ echo "# clsact left on $2" >&2; return 1; }
	fi
	# latchd first: until it has let go, it may still write what it learned
	wait_until -t 15 latchd_forgot "$1" || { echo "# latchd still serves $1" >&2; return 1; }
	st=$(find "$ROOT/var/lib/latch/policy" -name "$1.*" 2>/dev/null)
	[ -z "$st" ] || { echo "# state left: $st" >&2; return 1; }
}
# latchd_forgot NAME: latchd's last word on NAME is that its pins went (or it never served it)
latchd_forgot() {
	local last
	last=$(grep -E "^latchd: $1: (serving|pins gone|pinned again)" "$LTS_TMP/latchd.log" | tail -n 1)
	[ -z "$last" ] || [[ $last == *"pins gone"* ]]
}
# json_is TEXT JQ-ARGS...: TEXT is JSON and the filter holds (jq -e alone passes on empty input)
json_is() { [ -n "$1" ] && jq -e "${@:2}" <<<"$1" >/dev/null; }
# is_cni_error OUT CODE: OUT is one CNI error object with CODE, a "latch: " msg and the cniVersion
is_cni_error() {
	[ -n "$1" ] && jq -e --argjson c "$2" '.code == $c and (.msg | startswith("latch: ")) and .cniVersion == "1.0.0"' <<<"$1" >/dev/null ||
		{ echo "# not a CNI error $2: $1" >&2; return 1; }
}

# --- VERSION
out=$(echo '{"cniVersion": "1.0.0"}' | cni "$CNI_BIN" VERSION "" "")
check "VERSION lists 0.4.0 and 1.0.0" json_is "$out" '.supportedVersions | index("0.4.0") and index("1.0.0")'

# --- input refused before anything exists
ID0=lts-pod0-$$
rc=0
out=$(cni "$CNI_BIN" ADD "$ID0" "" <<<'{"cniVersion": "9.9.9", "name": "x", "type": "latch-cni"}' 2>/dev/null) || rc=$?
check "an unknown cniVersion: CNI error 1" eval '[ "$rc" = 1 ] && [ -n "$out" ] && jq -e ".code == 1" <<<"$out" >/dev/null'
rc=0
out=$(cni "$CNI_BIN" ADD "$ID0" "$P1" <<<"$LATCH_CONF" 2>/dev/null) || rc=$?
check "ADD without prevResult (not chained): CNI error 7 that says so" \
	eval '[ "$rc" = 1 ] && is_cni_error "$out" 7 && jq -e ".msg | contains(\"chained\")" <<<"$out" >/dev/null'
rc=0
out=$(cni "$CNI_BIN" ADD "$ID0" "$P1" <<<'{"cniVersion": "1.0.0", "name": "x", "type": "latch-cni", "latch": {"profile": "cnitest", "egress": "open"}}' 2>/dev/null) || rc=$?
check "an unknown field in the latch section: CNI error 2" eval '[ "$rc" = 1 ] && is_cni_error "$out" 2'

# --- the pods with the main plugin alone: the baselines
ID1=lts-pod1-$$
ID2=lts-pod2-$$
R1=$(cni "$CNI_PLUGINS/bridge" ADD "$ID1" "$P1" <<<"$BRIDGE_CONF") || { fail setup "bridge ADD pod1: $R1"; lts_done; }
R2=$(cni "$CNI_PLUGINS/bridge" ADD "$ID2" "$P2" <<<"$BRIDGE_CONF") || { fail setup "bridge ADD pod2: $R2"; lts_done; }
POD1_4=$(jq -r '.ips[] | select(.address | contains(".")) | .address | split("/")[0]' <<<"$R1")
POD2_4=$(jq -r '.ips[] | select(.address | contains(".")) | .address | split("/")[0]' <<<"$R2")
POD2_6=$(jq -r '.ips[] | select(.address | contains(":")) | .address | split("/")[0]' <<<"$R2")
V1=$(host_veth "$P1")
SB1=$(sbname "$ID1")
SB2=$(sbname "$ID2")
echo "# pod1 $POD1_4 on $V1 ($SB1), pod2 $POD2_4 $POD2_6 ($SB2)"
lts_bg "$P2" "$LTS_TMP/serve-p2.out" "$LTS_PY" "$LTS_NET" serve --tcp 8080 --lifetime 300
lts_wait_ready "$LTS_TMP/serve-p2.out" || fail setup "pod2's server did not start"
SPOOF4=192.0.2.99
in_pod "$P1" ip addr add "$SPOOF4/32" dev eth0
check "baseline: pod1 reaches $SRV_A:80 without latch" pod_tcp "$P1" "$SRV_A" 80
check "baseline: pod1 reaches unlisted $SRV_B:80 without latch" pod_tcp "$P1" "$SRV_B" 80
check "baseline: pod1 reaches pod2 $POD2_4:8080 without latch" pod_tcp "$P1" "$POD2_4" 8080
check "baseline: pod1 reaches the node's gateway $GW4:8080 without latch" pod_tcp "$P1" "$GW4" 8080
check "baseline: pod1 reaches the node's 198.51.100.253:8080 without latch" pod_tcp "$P1" 198.51.100.253 8080
check "baseline: pod1 reaches $SRV_A:80 from spoofed $SPOOF4 without latch" pod_tcp "$P1" "$SRV_A" 80 --bind "$SPOOF4"

# --- an ADD whose read-back fails: an XDP program on the host end runs before tc
check "an XDP program on $V1 (it would run before latch)" ip netns exec "$LTS_H" "$TCX_TOOL" xdp "$V1"
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" 2>"$LTS_TMP/add-xdp.err") || rc=$?
check_eq "ADD with XDP on the link exits 1" "$rc" 1
check "ADD with XDP on the link: CNI error 100 that says NOT ENFORCED" \
	eval 'is_cni_error "$out" 100 && jq -e ".msg | contains(\"NOT ENFORCED\")" <<<"$out" >/dev/null'
check "the failed ADD left nothing" nothing_of "$SB1" "$V1"
check "remove the XDP program" ip netns exec "$LTS_H" "$TCX_TOOL" xdp-off "$V1"

# --- ADD through the chain
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" 2>"$LTS_TMP/add1.err") || rc=$?
check_eq "ADD pod1 exits 0 ($(head -c 300 "$LTS_TMP/add1.err"))" "$rc" 0
check "ADD's output is prevResult passed through" json_is "$out" --argjson r "$R1" '. == $r'
check "status: $SB1 is enforced on $V1" eval "latch status $SB1 >/dev/null"
check "the audit log records the ADD, naming the container and the device" \
	eval 'latch audit "$SB1" | grep "cni.add" | grep -F "$ID1" | grep -qF "$V1"'
# Invariant (a limit, docs/cni.md): latchd serves one resolver per address, so a second
# container on the same gateway is refused before anything exists, not left without DNS.
rc=0
out=$(latch_add "$ID2" "$P2" "$R2" 2>/dev/null) || rc=$?
check_eq "ADD pod2 on pod1's gateway exits 1" "$rc" 1
check "ADD pod2 on pod1's gateway: CNI error 7 naming $SB1" \
	eval 'is_cni_error "$out" 7 && jq -e --arg s "$SB1" ".msg | contains(\$s)" <<<"$out" >/dev/null'
check "the refused ADD left nothing of $SB2" nothing_of "$SB2" "$(host_veth "$P2")"

# Invariant: a pod reaches what its profile lists and nothing else (controls beside each).
check "pod1 reaches $SRV_A:80 (its profile)" pod_tcp "$P1" "$SRV_A" 80
check "pod1 reaches [$SRV6_A]:80 (its profile)" pod_tcp "$P1" "$SRV6_A" 80
check_not "pod1 does not reach unlisted $SRV_B:80" pod_tcp "$P1" "$SRV_B" 80
check_not "pod1 does not reach $SRV_A:7000 (a port not listed)" pod_tcp "$P1" "$SRV_A" 7000
check_not "pod1 does not reach unlisted [$SRV6_B]:80" pod_tcp "$P1" "$SRV6_B" 80
# Invariant: another pod on the same bridge is not reachable (it is not in the profile).
check_not "pod1 does not reach pod2 $POD2_4:8080" pod_tcp "$P1" "$POD2_4" 8080
check_not "pod1 does not reach pod2 [$POD2_6]:8080" pod_tcp "$P1" "$POD2_6" 8080
# Invariant: the node's own addresses are no destination (no host port was given).
check_not "pod1 does not reach the gateway $GW4:8080" pod_tcp "$P1" "$GW4" 8080
check_not "pod1 does not reach the gateway [$GW6]:8080" pod_tcp "$P1" "$GW6" 8080
check_not "pod1 does not reach the node's 198.51.100.253:8080" pod_tcp "$P1" 198.51.100.253 8080
# Invariant: only the assigned source leaves the pod.
check "control: pod1 reaches $SRV_A:80 from its own $POD1_4" pod_tcp "$P1" "$SRV_A" 80 --bind "$POD1_4"
check_not "pod1 does not reach $SRV_A:80 from spoofed $SPOOF4" pod_tcp "$P1" "$SRV_A" 80 --bind "$SPOOF4"

# --- CHECK
rc=0
out=$(latch_cmd CHECK "$ID1" "$P1" "$R1" 2>&1) || rc=$?
check_eq "CHECK on the posture ADD made exits 0 ($out)" "$rc" 0
link=$(latch --json status "$SB1" | jq -r '.sandboxes[0].hooks["from-guest"].link_id')
check "take latch's from-guest link $link off $V1 by hand" ip netns exec "$LTS_H" "$TCX_TOOL" detach-link "$link"
rc=0
out=$(latch_cmd CHECK "$ID1" "$P1" "$R1" 2>/dev/null) || rc=$?
check_eq "CHECK after the program left the link exits 1" "$rc" 1
check "CHECK after the program left the link: CNI error 101" is_cni_error "$out" 101

# --- DEL
rc=0
out=$(latch_cmd DEL "$ID1" "$P1" "$R1" 2>&1) || rc=$?
check_eq "DEL pod1 exits 0 ($out)" "$rc" 0
check "the audit log records the DEL" eval 'latch audit "$SB1" | grep "cni.del" | grep -qF "$ID1"'
check "DEL left nothing of $SB1 (pins, links, state, latchd)" nothing_of "$SB1" "$V1"
check "after DEL pod1 reaches unlisted $SRV_B:80 again: no filter is left on its link" pod_tcp "$P1" "$SRV_B" 80
rc=0
out=$(latch_cmd DEL "$ID1" "$P1" "$R1" 2>&1) || rc=$?
check_eq "a second DEL of pod1 exits 0 ($out)" "$rc" 0

# The same container added again (a runtime's retry after a DEL): the same sandbox name, new pins;
# latchd must switch the new maps, not the ones it held of the last ADD.
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" 2>&1) || rc=$?
check_eq "ADD pod1 again after its DEL exits 0" "$rc" 0
check "pod1 added again reaches $SRV_A:80 (its profile, in the new maps)" pod_tcp "$P1" "$SRV_A" 80
check_not "pod1 added again does not reach unlisted $SRV_B:80" pod_tcp "$P1" "$SRV_B" 80

latch_cmd DEL "$ID1" "$P1" "$R1" >/dev/null 2>&1

# --- which policy: the network config says sealed; the node's pod file and runtimeConfig say otherwise
# Invariant: a pod's policy comes from the operator's side (the conflist, the runtime, the node's
# file), and the pod file is refused when someone else could have written it.
SEALED_CONF='{"cniVersion": "1.0.0", "name": "lts-cni", "type": "latch-cni", "latch": {"profile": "sealed"}}'
PODS=$ROOT/etc/latch/cni-pods
printf '# live_cni.sh\nlts-agents        sealed\nlts-agents/pod1   cnitest\n' >"$PODS"
chmod 0644 "$PODS"
rc=0
out=$(CNI_ARGS_X="IgnoreUnknown=1;K8S_POD_NAMESPACE=lts-agents;K8S_POD_NAME=pod1" latch_add "$ID1" "$P1" "$R1" "$SEALED_CONF" 2>&1) || rc=$?
check_eq "ADD pod lts-agents/pod1 with a sealed network config exits 0" "$rc" 0
check "the pod file's line for lts-agents/pod1 wins: pod1 reaches $SRV_A:80" pod_tcp "$P1" "$SRV_A" 80
latch_cmd DEL "$ID1" "$P1" "$R1" >/dev/null 2>&1
rc=0
out=$(CNI_ARGS_X="K8S_POD_NAMESPACE=lts-agents;K8S_POD_NAME=pod9" latch_add "$ID1" "$P1" "$R1" 2>&1) || rc=$?
check_eq "ADD pod lts-agents/pod9 (its namespace's line: sealed) exits 0" "$rc" 0
check_not "control: lts-agents/pod9 gets its namespace's sealed, not the config's cnitest: $SRV_A:80 refused" \
	pod_tcp "$P1" "$SRV_A" 80
latch_cmd DEL "$ID1" "$P1" "$R1" >/dev/null 2>&1
chmod 0666 "$PODS"
rc=0
out=$(CNI_ARGS_X="K8S_POD_NAMESPACE=lts-agents;K8S_POD_NAME=pod1" latch_add "$ID1" "$P1" "$R1" "$SEALED_CONF" 2>/dev/null) || rc=$?
check_eq "ADD with a world-writable pod file exits 1" "$rc" 1
check "a world-writable pod file: CNI error 7 naming the file" \
	eval 'is_cni_error "$out" 7 && jq -e ".msg | contains(\"cni-pods\")" <<<"$out" >/dev/null'
check "the refused ADD left nothing" nothing_of "$SB1" "$V1"
rm -f "$PODS"
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" "$(jq -c '. + {runtimeConfig: {latch: {profile: "cnitest"}}}' <<<"$SEALED_CONF")" 2>&1) || rc=$?
check_eq "ADD with runtimeConfig's latch.profile cnitest over a sealed config exits 0" "$rc" 0
check "runtimeConfig's profile applies: pod1 reaches $SRV_A:80" pod_tcp "$P1" "$SRV_A" 80

# a kit: its state stored for latchd, and gone with DEL; a kit that does not exist fails ADD and leaves nothing
latch_cmd DEL "$ID1" "$P1" "$R1" >/dev/null 2>&1
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" '{"cniVersion": "1.0.0", "name": "x", "type": "latch-cni", "latch": {"profile": "cnitest", "kit": "nosuchkit"}}' 2>/dev/null) || rc=$?
check "ADD with an unknown kit: CNI error 7 naming it" \
	eval '[ "$rc" = 1 ] && is_cni_error "$out" 7 && jq -e ".msg | contains(\"nosuchkit\")" <<<"$out" >/dev/null'
check "the refused ADD left nothing" nothing_of "$SB1" "$V1"
rc=0
out=$(latch_add "$ID1" "$P1" "$R1" '{"cniVersion": "1.0.0", "name": "x", "type": "latch-cni", "latch": {"profile": "cnitest", "kit": "shell"}}' 2>&1) || rc=$?
check_eq "ADD with kit shell exits 0 ($out)" "$rc" 0
check "the kit's state is stored for latchd" test -f "$ROOT/var/lib/latch/policy/$SB1.kit"
check "with the kit, pod1 still reaches its profile's $SRV_A:80" pod_tcp "$P1" "$SRV_A" 80
check_not "with the kit, pod1 still does not reach unlisted $SRV_B:80" pod_tcp "$P1" "$SRV_B" 80
latch_cmd DEL "$ID1" "$P1" "$R1" >/dev/null 2>&1
check "DEL took the kit's state and everything else" nothing_of "$SB1" "$V1"

# CNI 0.4.0, as older runtimes send it: the same ADD, the result in 0.4.0
rc=0
out=$(latch_add "$ID1" "$P1" "$(jq -c '.cniVersion = "0.4.0"' <<<"$R1")" "$(jq -c '.cniVersion = "0.4.0"' <<<"$LATCH_CONF")" 2>&1) || rc=$?
check_eq "ADD in CNI 0.4.0 exits 0" "$rc" 0
check "its result is prevResult in 0.4.0" json_is "$out" '.cniVersion == "0.4.0" and (.ips | length) == 2'
check "pod1 added in 0.4.0 reaches $SRV_A:80" pod_tcp "$P1" "$SRV_A" 80

# a DEL after the pod's netns and veth are gone (a reboot, a runtime that lost it): no CNI_NETNS
cni "$CNI_PLUGINS/bridge" DEL "$ID1" "$P1" <<<"$BRIDGE_CONF" >/dev/null
rc=0
out=$(jq -c '. + {prevResult: {}}' <<<"$LATCH_CONF" | cni "$CNI_BIN" DEL "$ID1" "") || rc=$?
check_eq "DEL of pod1 without its netns exits 0 ($out)" "$rc" 0
check "DEL without the netns left nothing of $SB1" nothing_of "$SB1" ""

# --- ptp, the other veth plugin: the pod's link is its own L3 link, so latchd's resolver answers it there
ip -n "$LTS_H" link del "$BR"
PTP_CONF=$(jq -c '.type = "ptp" | del(.bridge, .isGateway)' <<<"$BRIDGE_CONF")
R3=$(cni "$CNI_PLUGINS/ptp" ADD "$ID1" "$P1" <<<"$PTP_CONF") || { fail setup "ptp ADD pod1: $R3"; lts_done; }
check "baseline: pod1 on ptp reaches unlisted $SRV_B:80 without latch" pod_tcp "$P1" "$SRV_B" 80
rc=0
out=$(latch_add "$ID1" "$P1" "$R3" 2>&1) || rc=$?
check_eq "ADD after ptp exits 0 ($out)" "$rc" 0
check "pod1 on ptp reaches $SRV_A:80 (its profile)" pod_tcp "$P1" "$SRV_A" 80
check_not "pod1 on ptp does not reach unlisted $SRV_B:80" pod_tcp "$P1" "$SRV_B" 80
check_not "pod1 on ptp does not reach its gateway $GW4:8080" pod_tcp "$P1" "$GW4" 8080
check "pod1 on ptp gets an answer from latchd's resolver on its gateway" \
	eval '[ "$(in_pod "$P1" "$LTS_PY" "$LTS_NET" dns "$GW4" --wait "$LTS_T")" -gt 0 ]'
jq -c --argjson prev "$R3" '. + {prevResult: $prev}' <<<"$LATCH_CONF" | cni "$CNI_BIN" DEL "$ID1" "$P1" >/dev/null
check "DEL after ptp left nothing" nothing_of "$SB1" ""
cni "$CNI_PLUGINS/ptp" DEL "$ID1" "$P1" <<<"$PTP_CONF" >/dev/null

# --- STATUS, and ADD without latchd: nothing could resolve the profile or serve the pod
rc=0
out=$(cni "$CNI_BIN" STATUS "" "" <<<"$LATCH_CONF" 2>&1) || rc=$?
check_eq "STATUS with latchd answering exits 0, says nothing ($out)" "$rc:$out" "0:"
kill -TERM "$LATCHD_PID" && wait_until -t 5 lts_not kill -0 "$LATCHD_PID"
rc=0
out=$(cni "$CNI_BIN" STATUS "" "" <<<"$LATCH_CONF" 2>/dev/null) || rc=$?
check "STATUS without latchd: CNI error 50" eval '[ "$rc" = 1 ] && is_cni_error "$out" 50'
rc=0
out=$(latch_add "$ID2" "$P2" "$R2" 2>/dev/null) || rc=$?
check "ADD without latchd: CNI error 11 (try again later)" eval '[ "$rc" = 1 ] && is_cni_error "$out" 11'
check "... and it left nothing" test ! -e "$LTS_BPFFS/latch/$SB2"
cni "$CNI_PLUGINS/bridge" DEL "$ID2" "$P2" <<<"$BRIDGE_CONF" >/dev/null

lts_done
