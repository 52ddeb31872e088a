#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_restart.sh - enforcement outlives latch: `latch attach NAME` alone
# loads fresh programs onto the pinned maps, so map ids, policy entries and
# counters survive a restart, the programs are new, and an established
# connection keeps flowing across it.  Then `latch detach` takes everything
# away (pins and filters).  Controls: the denied destination stays denied
# and the allowed ones stay reachable on both sides of the re-attach.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

LOG=$LTS_TMP/recv.log
PORT=7100
MAPS=(settings exact4 exact6 prefix4 prefix6 timed4 timed6 flow4 flow6 counters dns_bucket event_bucket events)

lts_bg "$LTS_I" "$LTS_TMP/serve-log.out" "$LTS_PY" "$LTS_NET" serve --tcp "$PORT" --log "$LOG" --lifetime 120
lts_wait_ready "$LTS_TMP/serve-log.out" || fail setup "logging server did not start"

if ! lts_attach >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow entries (permanent, port, cidr, v6, timed)" latch egress "$LTS_NAME" allow "$SRV_A" "$SRV_C:443/tcp" \
	203.0.113.16/28:7000/tcp "$SRV6_A"
check "allow a timed entry" latch egress "$LTS_NAME" allow "[$SRV6_B]:443/tcp" --for 120
check "before: tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
check "before: tcp [$SRV6_B]:443 passes (timed)" tcp_ok "$SRV6_B" 443
check_not "before: tcp [$SRV6_C]:80 is denied" tcp_ok "$SRV6_C" 80

# a connection that lives across the restart: one line every 100 ms until killed
in_g "$LTS_PY" "$LTS_NET" stream "$SRV_A" "$PORT" --duration 60 >/dev/null 2>&1 &
stream=$!
LTS_PIDS+=("$stream")
sleep 0.5

before=$(status_json)
declare -A mid_before
for m in "${MAPS[@]}"; do mid_before[$m]=$(map_id "$m"); done
snap_before=$(pins_snapshot | grep -v '"seconds_left"')
prog_in0=$(jq -r '.sandboxes[0].hooks["from-guest"].attached_prog_id' <<<"$before")
prog_out0=$(jq -r '.sandboxes[0].hooks["to-guest"].attached_prog_id' <<<"$before")

# Invariant: re-attach from pins keeps the maps and counters, replaces the programs.
check "latch attach NAME re-attaches from the pins" latch attach "$LTS_NAME"
t_reattach=$(cut -d' ' -f1 /proc/uptime)
check "after: status verifies enforcement" latch status "$LTS_NAME"
after=$(status_json)
prog_in1=$(jq -r '.sandboxes[0].hooks["from-guest"].attached_prog_id' <<<"$after")
prog_out1=$(jq -r '.sandboxes[0].hooks["to-guest"].attached_prog_id' <<<"$after")
echo "# prog ids: from-guest $prog_in0 -> $prog_in1, to-guest $prog_out0 -> $prog_out1"
check_cmp "after: a new from-guest program is attached" "$prog_in1" -ne "$prog_in0"
check_cmp "after: a new to-guest program is attached" "$prog_out1" -ne "$prog_out0"
check_cmp "after: the from-guest program is live" "$prog_in1" -gt 0
same=1
for m in "${MAPS[@]}"; do
	id=$(map_id "$m")
	if [ -z "$id" ] || [ "$id" != "${mid_before[$m]}" ]; then
		same=0
		echo "# map $m: id ${mid_before[$m]} -> $id"
	fi
done
check_eq "after: every pinned map keeps its id" "$same" 1
snap_after=$(pins_snapshot | grep -v '"seconds_left"')
if [ "$snap_before" == "$snap_after" ]; then
	ok "after: pins and policy entries are unchanged"
else
	fail "after: pins and policy entries are unchanged" "$(diff <(echo "$snap_before") <(echo "$snap_after") | head -20)"
fi
check_eq "after: entry counts unchanged" "$(jq -c '.sandboxes[0].entries | del(.flow4, .flow6)' <<<"$after")" \
	"$(jq -c '.sandboxes[0].entries | del(.flow4, .flow6)' <<<"$before")"
# every counter present before is still there and did not go down
reset=$(jq -n --argjson b "$before" --argjson a "$after" '
	[$b.sandboxes[0].counters[] as $c
	 | ([$a.sandboxes[0].counters[] | select(.reason == $c.reason and .direction == $c.direction)
	    | .packets][0] // 0) as $n
	 | select($n < $c.packets) | "\($c.reason)/\($c.direction) \($c.packets)->\($n)"] | join(", ")')
check_eq "after: no counter was reset" "$reset" '""'
check_cmp "after: pass_policy counted before the restart is still there" "$(counter pass_policy)" -ge 1

# the old programs are gone once nothing holds them
gone=0
for _ in $(seq 20); do
	if ! bpftool prog show id "$prog_in0" >/dev/null 2>&1 && ! bpftool prog show id "$prog_out0" >/dev/null 2>&1; then
		gone=1
		break
	fi
	sleep 0.1
done
check_eq "after: the replaced programs were released" "$gone" 1

# enforcement is the same on the new programs
check "after: tcp $SRV_A:80 passes" tcp_ok "$SRV_A" 80
check "after: tcp $SRV_C:443 passes" tcp_ok "$SRV_C" 443
check "after: tcp [$SRV6_B]:443 passes (timed entry kept)" tcp_ok "$SRV6_B" 443
check_not "after: tcp [$SRV6_C]:80 is still denied" tcp_ok "$SRV6_C" 80
check_not "after: tcp $SRV_C:80 is still denied" tcp_ok "$SRV_C" 80

t_check=$(cut -d' ' -f1 /proc/uptime)
check "the long connection is still open" kill -0 "$stream"
last=$(awk -v a="$SRV_A" '$2 == a { t = $1 } END { print t + 0 }' "$LOG")
check_cmp "an established connection kept flowing across the re-attach (re-attach $t_reattach, last line $last)" \
	"$(awk "BEGIN{print ($last > $t_reattach + 1 && $last > $t_check - 1)}")" -eq 1
kill "$stream" 2>/dev/null

# Invariant: detach removes the pins and latch's filters (and then, nothing filters).
check "latch detach" latch detach "$LTS_NAME"
check_not "detached: no pins left" test -e "$LTS_PINS"
check_eq "detached: no latch filter on hg0 ingress" \
	"$(ip netns exec "$LTS_H" tc filter show dev hg0 ingress 2>/dev/null | grep -c 'handle 0x1a7c')" 0
check_eq "detached: no latch filter on hg0 egress" \
	"$(ip netns exec "$LTS_H" tc filter show dev hg0 egress 2>/dev/null | grep -c 'handle 0x1a7c')" 0
check "detached: tcp [$SRV6_C]:80 answers (nothing filters any more)" tcp_ok "$SRV6_C" 80
latch status "$LTS_NAME" >/dev/null 2>&1
check_eq "detached: status NAME says there is no such sandbox (exit 4)" "$?" 4

lts_done
