#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# The README's main job: a "guest" netns behind a veth, latch attached to the
# host end, one allowed and one denied destination, and the observed status.
#
#   ld-guest 192.0.2.2 --veth-- ld-host 192.0.2.1 [latch] --veth-- ld-net
#                                                                 203.0.113.10:80 (allowed)
#                                                                 203.0.113.20:80 (not allowed)
# Everything lives in namespaces this script creates; the host's own
# namespace, eth0 and its forwarding setting are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
LATCH=$PWD/build/latch
export LATCH_BPFFS=/sys/fs/bpf/latch-demo
G=ld-guest H=ld-host N=ld-net
pids=()

cleanup() {
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	nsenter --net=/run/netns/$H "$LATCH" detach demo >/dev/null 2>&1
	for ns in $G $H $N; do ip netns del $ns 2>/dev/null; done
	rm -rf "$LATCH_BPFFS"
}
trap cleanup EXIT INT TERM
[ "$(id -u)" = 0 ] || { echo "demo: run as root" >&2; exit 2; }
cleanup
mkdir -p /sys/fs/bpf
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$LATCH_BPFFS"

step() { printf '\n== %s\n' "$*"; }
inh() { nsenter --net=/run/netns/$H "$@"; }

step "a guest namespace behind a veth, and a fake internet on documentation addresses"
for ns in $G $H $N; do ip netns add $ns; ip -n $ns link set lo up; done
ip -n $H link add lt-demo type veth peer name veth-in netns $G
ip -n $H link add up0 type veth peer name veth-in netns $N
ip -n $G addr add 192.0.2.2/30 dev veth-in
ip -n $H addr add 192.0.2.1/30 dev lt-demo
ip -n $H addr add 198.51.100.1/30 dev up0
ip -n $N addr add 198.51.100.2/30 dev veth-in
ip -n $N addr add 203.0.113.10/32 dev lo
ip -n $N addr add 203.0.113.20/32 dev lo
for l in "$G veth-in" "$H lt-demo" "$H up0" "$N veth-in"; do set -- $l; ip -n $1 link set $2 up; done
ip -n $G route add default via 192.0.2.1
ip -n $N route add 192.0.2.0/30 via 198.51.100.1
# the sandbox's own routing table: the fake internet, and nothing else
ip netns exec $H sysctl -qw net.ipv4.ip_forward=1
ip -n $H rule add from 192.0.2.0/30 lookup 100
ip -n $H route add 203.0.113.0/24 via 198.51.100.2 table 100
ip -n $H route add unreachable default table 100
for a in 203.0.113.10 203.0.113.20; do
	ip netns exec $N python3 -m http.server 80 --bind $a >/dev/null 2>&1 &
	pids+=($!)
done
for _ in $(seq 50); do # up to 5 s for both servers to listen
	[ "$(ip netns exec $N ss -Hltn 'sport = :80' | wc -l)" -ge 2 ] && break
	sleep 0.1
done
gmac=$(ip -n $G -br link show veth-in | awk '{print $3}')
echo "guest 192.0.2.2 ($gmac), host end lt-demo 192.0.2.1"

probe() { # probe ADDR: can the guest fetch http://ADDR/ ?
	if ip netns exec $G timeout 3 bash -c "exec 3<>/dev/tcp/$1/80 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && head -c 15 <&3" 2>/dev/null | grep -q HTTP; then
		echo "  guest -> $1:80  reachable"
	else
		echo "  guest -> $1:80  blocked"
	fi
}

step "before latch: the guest reaches both servers"
probe 203.0.113.10
probe 203.0.113.20

step "latch attach: default deny on the host end"
inh "$LATCH" attach demo --dev lt-demo --guest-mac "$gmac" --guest-ip 192.0.2.2 --host-ip 192.0.2.1
probe 203.0.113.10
probe 203.0.113.20

step "latch egress demo allow 203.0.113.10:80"
inh "$LATCH" egress demo allow 203.0.113.10:80
probe 203.0.113.10
probe 203.0.113.20

step "latch status demo (read back from the kernel)"
inh "$LATCH" status demo
