#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_restart.sh - enforcement outlives latch: `latch attach NAME` alone
# loads fresh programs onto the pinned maps, so map ids, policy entries and
# counters survive a restart, the programs are new, and an established
# connection keeps flowing across it.  Then `latch detach` takes everything
# away (pins and filters).  Both attach modes: TCX links (the re-attach
# updates the pinned link) and clsact filters (replaced in place).  Controls: the denied destination stays denied
# and the allowed ones stay reachable on both sides of the re-attach.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

LOG=$LTS_TMP/recv.log
PORT=7100
TCX_TOOL=$LTS_TOP/build/selftests/tcx_tool
MAPS=(settings exact4 exact6 prefix4 prefix6 timed4 timed6 flow4 flow6 counters dns_bucket event_bucket events)

lts_bg "$LTS_I" "$LTS_TMP/serve-log.out" "$LTS_PY" "$LTS_NET" serve --tcp "$PORT" --log "$LOG" --lifetime 120
lts_wait_ready "$LTS_TMP/serve-log.out" || fail setup "logging server did not start"

# restart_in_mode MODE: attach in MODE (tcx or clsact), re-attach under traffic, detach
# progs_released ID...: no BPF program of these ids is loaded any more
progs_released() {
	local id
	for id in "$@"; do
		bpftool prog show id "$id" >/dev/null 2>&1 && return 1
	done
	return 0
}

restart_in_mode() {
	local mode=$1
	declare -A mid_before
	if ! LATCH_TC_MODE=$mode lts_attach >/dev/null; then
		fail "$mode: attach" "latch attach failed"
		return
	fi
	check_eq "$mode: attached in that mode" "$(status_json | jq -r '.sandboxes[0].tc_mode')" "$mode"
	check "$mode: allow entries (permanent, port, cidr, v6, timed)" latch egress "$LTS_NAME" allow "$SRV_A" "$SRV_C:443/tcp" \
		203.0.113.16/28:7000/tcp "$SRV6_A"
	check "$mode: allow a timed entry" latch egress "$LTS_NAME" allow "[$SRV6_B]:443/tcp" --for 120
	check "$mode: before: tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
	check "$mode: before: tcp [$SRV6_B]:443 passes (timed)" tcp_ok "$SRV6_B" 443
	check_not "$mode: before: tcp [$SRV6_C]:80 is denied" tcp_ok "$SRV6_C" 80

	# a connection that lives across the restart: one line every 100 ms until killed
	in_g "$LTS_PY" "$LTS_NET" stream "$SRV_A" "$PORT" --duration 60 >/dev/null 2>&1 &
	stream=$!
	LTS_PIDS+=("$stream")
	sleep 0.5 # the point: the connection is open and flowing before the restart

	before=$(status_json)
	for mp in "${MAPS[@]}"; do mid_before[$mp]=$(map_id "$mp"); done
	snap_before=$(pins_snapshot | grep -v '"seconds_left"')
	prog_in0=$(jq -r '.sandboxes[0].hooks["from-guest"].attached_prog_id' <<<"$before")
	prog_out0=$(jq -r '.sandboxes[0].hooks["to-guest"].attached_prog_id' <<<"$before")

	# Invariant: re-attach from pins keeps the maps and counters, replaces the programs.
	check "$mode: latch attach NAME re-attaches from the pins" latch attach "$LTS_NAME"
	t_reattach=$(cut -d' ' -f1 /proc/uptime)
	check "$mode: after: status verifies enforcement" latch status "$LTS_NAME"
	after=$(status_json)
	prog_in1=$(jq -r '.sandboxes[0].hooks["from-guest"].attached_prog_id' <<<"$after")
	prog_out1=$(jq -r '.sandboxes[0].hooks["to-guest"].attached_prog_id' <<<"$after")
	echo "# prog ids: from-guest $prog_in0 -> $prog_in1, to-guest $prog_out0 -> $prog_out1"
	check_cmp "$mode: after: a new from-guest program is attached" "$prog_in1" -ne "$prog_in0"
	check_cmp "$mode: after: a new to-guest program is attached" "$prog_out1" -ne "$prog_out0"
	check_cmp "$mode: after: the from-guest program is live" "$prog_in1" -gt 0
	same=1
	for mp in "${MAPS[@]}"; do
		id=$(map_id "$mp")
		if [ -z "$id" ] || [ "$id" != "${mid_before[$mp]}" ]; then
			same=0
			echo "# map $mp: id ${mid_before[$mp]} -> $id"
		fi
	done
	check_eq "$mode: after: every pinned map keeps its id" "$same" 1
	snap_after=$(pins_snapshot | grep -v '"seconds_left"')
	if [ "$snap_before" == "$snap_after" ]; then
		ok "$mode: after: pins and policy entries are unchanged"
	else
		fail "$mode: after: pins and policy entries are unchanged" "$(diff <(echo "$snap_before") <(echo "$snap_after") | head -20)"
	fi
	check_eq "$mode: after: entry counts unchanged" "$(jq -c '.sandboxes[0].entries | del(.flow4, .flow6)' <<<"$after")" \
		"$(jq -c '.sandboxes[0].entries | del(.flow4, .flow6)' <<<"$before")"
	# every counter present before is still there and did not go down
	reset=$(jq -n --argjson b "$before" --argjson a "$after" '
		[$b.sandboxes[0].counters[] as $c
		 | ([$a.sandboxes[0].counters[] | select(.reason == $c.reason and .direction == $c.direction)
		    | .packets][0] // 0) as $n
		 | select($n < $c.packets) | "\($c.reason)/\($c.direction) \($c.packets)->\($n)"] | join(", ")')
	check_eq "$mode: after: no counter was reset" "$reset" '""'
	check_cmp "$mode: after: pass_policy counted before the restart is still there" "$(counter pass_policy)" -ge 1

	# the old programs are gone once nothing holds them
	gone=0
	wait_until -t 2 progs_released "$prog_in0" "$prog_out0" && gone=1
	check_eq "$mode: after: the replaced programs were released" "$gone" 1

	# enforcement is the same on the new programs
	check "$mode: after: tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
	check "$mode: after: tcp $SRV_C:443 passes" tcp_ok "$SRV_C" 443
	check "$mode: after: tcp [$SRV6_B]:443 passes (timed entry kept)" tcp_ok "$SRV6_B" 443
	check_not "$mode: after: tcp [$SRV6_C]:80 is still denied" tcp_ok "$SRV6_C" 80
	check_not "$mode: after: tcp $SRV_C:80 is still denied" tcp_ok "$SRV_C" 80

	t_check=$(cut -d' ' -f1 /proc/uptime)
	check "$mode: the long connection is still open" kill -0 "$stream"
	last=$(awk -v a="$SRV_A" '$2 == a { t = $1 } END { print t + 0 }' "$LOG")
	check_cmp "$mode: an established connection kept flowing across the re-attach (re-attach $t_reattach, last line $last)" \
		"$(awk "BEGIN{print ($last > $t_reattach + 1 && $last > $t_check - 1)}")" -eq 1
	kill "$stream" 2>/dev/null

	# Invariant: detach removes the pins and latch's filters (and then, nothing filters).
	check "$mode: latch detach" latch detach "$LTS_NAME"
	check_not "$mode: detached: no pins left" test -e "$LTS_PINS"
	check_eq "$mode: detached: no latch filter on hg0 ingress" \
		"$(ip netns exec "$LTS_H" tc filter show dev hg0 ingress 2>/dev/null | grep -c 'handle 0x1a7c')" 0
	check_eq "$mode: detached: no latch filter on hg0 egress" \
		"$(ip netns exec "$LTS_H" tc filter show dev hg0 egress 2>/dev/null | grep -c 'handle 0x1a7c')" 0
	check_eq "$mode: detached: no TCX program on hg0" \
		"$(ip netns exec "$LTS_H" "$TCX_TOOL" list hg0 ingress; ip netns exec "$LTS_H" "$TCX_TOOL" list hg0 egress)" ""
	check "$mode: detached: tcp [$SRV6_C]:80 answers (nothing filters any more)" tcp_ok "$SRV6_C" 80
	latch status "$LTS_NAME" >/dev/null 2>&1
	check_eq "$mode: detached: status NAME says there is no such sandbox (exit 4)" "$?" 4
}

restart_in_mode tcx
restart_in_mode clsact
lts_done
