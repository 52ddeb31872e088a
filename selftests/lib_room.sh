# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0-only
# lib_room.sh - shared by the room selftests (selftests/live_room*.sh).
#
# A room runs in the network namespace of whoever calls `latch run`; here
# that is H, the "host" of lib.sh's topology (lts_setup), entered with
# nsenter --net so that bpffs and the cgroup mounts stay the real ones.  H
# routes to the fake internet I (203.0.113.0/24, 198.51.100.0/24,
# 2001:db8:ff::/48) and nowhere else: a fresh namespace has no default route,
# so nothing a room sends can leave the machine.  H's own services (on
# 127.0.0.1 and its address 198.51.100.253) stand for the host's.
#
# Everything is named after the test's PID: LATCH_BPFFS (lib.sh),
# LATCH_ROOT (lib.sh's temp dir) and LATCH_CGROUP=latch-selftest-PID, the
# directory latch makes in each cgroup hierarchy; lts_room_cleanup removes it.
# shellcheck source=selftests/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LTS_CGNAME=latch-selftest-$$
H4=198.51.100.253 # H's address towards I
WS=            # a workspace made by lts_room_setup, owned by ROOM_UID
ROOM_UID=4242

lts_room_cleanup() {
	local d c root roots cg2
	roots=$(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts)
	cg2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
	# rooms of this test still there (they should not be): killed through cgroup v2 first,
	# then every hierarchy's directories removed once they are empty
	for root in $roots; do
		for c in "$root/$LTS_CGNAME"/rooms/*/; do
			[ -w "$c/cgroup.kill" ] && echo 1 >"$c/cgroup.kill" 2>/dev/null
		done
	done
	wait_until -t 1 lts_not grep -qs "populated 1" "$cg2/$LTS_CGNAME"/rooms/*/cgroup.events 2>/dev/null
	for root in $roots; do
		d=$root/$LTS_CGNAME
		[ -d "$d" ] || continue
		for c in "$d"/rooms/*/; do
			[ -d "$c" ] && rmdir "$c" 2>/dev/null
		done
		rmdir "$d"/rooms "$d"/latchd "$d"/warm "$d" 2>/dev/null
	done
	lts_cleanup
}

# run_room ARGS...: `latch run` in H with this test's LATCH_* (exit status passed through)
run_room() {
	LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS LATCH_CGROUP=$LTS_CGNAME \
		nsenter --net="/run/netns/$LTS_H" -- "$LATCH_BIN" "$@"
}

# room_json OUT ARGS...: `latch --json run ARGS` into the file OUT; the exit status is latch's
room_json() {
	local out=$1
	shift
	run_room --json run "$@" >"$out" 2>"$out.err"
}

# jget FILE FILTER: one value of a room's JSON result
jget() { jq -r "$2" "$1" 2>/dev/null; }

# rcount FILE REASON HOOK: a counter of the room's programs ("packet" or "sockaddr")
rcount() {
	jq -r --arg r "$2" --arg h "$3" '[.network.counters[] | select(.reason == $r and .hook == $h) | .count] | add // 0' \
		"$1" 2>/dev/null || echo 0
}

# lts_room_setup: lib.sh's namespaces and servers, routes from H to I, a workspace
lts_room_setup() {
	lts_setup
	trap lts_room_cleanup EXIT
	ip -n "$LTS_H" route add 203.0.113.0/24 via 198.51.100.254 &&
		ip -n "$LTS_H" route add 198.51.100.0/24 via 198.51.100.254 &&
		ip -n "$LTS_H" -6 route add 2001:db8:ff::/48 via 2001:db8:fe::2 || {
		fail setup "routes from H to the fake internet"
		lts_done
	}
	WS=$LTS_TMP/ws
	mkdir -p "$WS" "$LTS_TMP/root/etc/latch/profiles"
	cp "$LTS_NET" "$WS/lts_net.py"
	chown -R "$ROOM_UID:$ROOM_UID" "$WS"
}

# room_profile NAME LINES...: a profile file of the test's LATCH_ROOT
room_profile() {
	local name=$1
	shift
	printf '%s\n' "$@" >"$LTS_TMP/root/etc/latch/profiles/$name.txt"
	chmod 644 "$LTS_TMP/root/etc/latch/profiles/$name.txt"
}

# in_room OUT [LATCH OPTIONS...] -- lts_net.py ARGS...: a probe in a room, its JSON in OUT; exit as the probe's
in_room() {
	local out=$1 opts=()
	shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		opts+=("$1")
		shift
	done
	shift
	room_json "$out" "${opts[@]}" --workspace "$WS" -- /usr/bin/python3 /workspace/lts_net.py "$@"
}
