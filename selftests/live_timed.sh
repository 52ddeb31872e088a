#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_timed.sh - a timed entry stops passing packets within 1 s of its
# deadline, even on an established TCP connection, and even after every
# latch process was killed with SIGKILL: the kernel program checks the
# deadline on every packet, nothing in user space has to remove it.
# Control: a connection under a permanent entry, open in parallel the whole
# time, keeps flowing past the deadline.
# Then a grant shortened by a second `allow --for` while its connection is
# open: the connection stops within 1 s of the new, earlier deadline (flows
# and the per-CPU flow cache carry the old one), while a control connection
# keeps flowing.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

FOR=3      # seconds the timed entry lasts
AFTER=2.5  # how long the streams keep sending past the deadline
LOG=$LTS_TMP/recv.log
PORT=7100

uptime_s() { cut -d' ' -f1 /proc/uptime; } # CLOCK_BOOTTIME, the clock of latch's deadlines
# streams CONTROL TIMED SECONDS: a long connection to each (a line every 100 ms); PIDs in sa and sb
streams() {
	in_g "$LTS_PY" "$LTS_NET" stream "$1" "$PORT" --duration "$3" >/dev/null 2>&1 &
	sa=$!
	in_g "$LTS_PY" "$LTS_NET" stream "$2" "$PORT" --duration "$3" >/dev/null 2>&1 &
	sb=$!
	LTS_PIDS+=("$sa" "$sb")
}

lts_bg "$LTS_I" "$LTS_TMP/serve-log.out" "$LTS_PY" "$LTS_NET" serve --tcp "$PORT" --log "$LOG" --lifetime 120
lts_wait_ready "$LTS_TMP/serve-log.out" || fail setup "logging server did not start"
check "baseline: tcp $SRV_B:$PORT answers without latch" tcp_ok "$SRV_B" "$PORT"

if ! lts_attach >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow $SRV_A:$PORT/tcp permanently" latch egress "$LTS_NAME" allow "$SRV_A:$PORT/tcp"

# latch processes of our own, busy reading the maps while the entry is live
(for _ in $(seq 300); do latch status "$LTS_NAME" >/dev/null 2>&1; done) &
loop=$!
LTS_PIDS+=("$loop")

t0=$(uptime_s)
check "allow $SRV_B:$PORT/tcp --for $FOR" latch egress "$LTS_NAME" allow "$SRV_B:$PORT/tcp" --for "$FOR"
t1=$(uptime_s)
deadline_max=$(awk "BEGIN{print $t1 + $FOR}")
deadline_min=$(awk "BEGIN{print $t0 + $FOR}")
duration=$(awk "BEGIN{print $FOR + $AFTER}")

streams "$SRV_A" "$SRV_B" "$duration"

# SIGKILL every latch process this test started, well before the deadline:
# freeze the loop, kill its latch child in flight (if any), then the loop
sleep 0.8 # the point: the streams and the status loop run a while first
kill -STOP "$loop" 2>/dev/null
killed=0
for p in $(own_latch_pids); do
	kill -KILL "$p" 2>/dev/null && killed=$((killed + 1))
done
{
	kill -KILL "$loop"
	wait "$loop"
} 2>/dev/null
no_own_latch() { [ -z "$(own_latch_pids)" ]; }
wait_until -t 0.5 no_own_latch
echo "# SIGKILLed the status loop and $killed latch process(es) in flight"
check_eq "no latch process of this test is left (pgrep -x latch)" "$(own_latch_pids | tr '\n' ' ')" ""

wait "$sa"
ra=$?
wait "$sb"
rb=$?
check_eq "the permanent-entry connection was established" "$ra" 0
check_eq "the timed-entry connection was established" "$rb" 0

last_a=$(awk -v a="$SRV_A" '$2 == a { t = $1 } END { print t + 0 }' "$LOG")
last_b=$(awk -v b="$SRV_B" '$2 == b { t = $1 } END { print t + 0 }' "$LOG")
lines_b=$(awk -v b="$SRV_B" '$2 == b' "$LOG" | wc -l)
echo "# deadline in [$deadline_min, $deadline_max]; last line: timed $last_b ($lines_b lines), permanent $last_a"

# Invariant: the timed connection stops within 1 s of the deadline...
check_cmp "timed: the last line arrived before deadline + 1 s" \
	"$(awk "BEGIN{print ($last_b < $deadline_max + 1)}")" -eq 1
# ...but not long before it: it was passing until the deadline came
check_cmp "timed: lines kept arriving until deadline - 0.5 s" \
	"$(awk "BEGIN{print ($last_b > $deadline_min - 0.5)}")" -eq 1
# Control: the permanent connection kept flowing well past the deadline.
check_cmp "control: the permanent connection still flowed at deadline + 1.5 s" \
	"$(awk "BEGIN{print ($last_a > $deadline_max + 1.5)}")" -eq 1
# and new connections follow the same clock
check_not "timed: a new connection to $SRV_B:$PORT after the deadline is denied" tcp_ok "$SRV_B" "$PORT"
check "control: a new connection to $SRV_A:$PORT still passes" tcp_ok "$SRV_A" "$PORT"

# Invariant: a shortened grant cuts its established flows at the new deadline.
LONG=60
SHORT=2
check "allow $SRV_C:$PORT/tcp --for $LONG" latch egress "$LTS_NAME" allow "$SRV_C:$PORT/tcp" --for "$LONG"
streams "$SRV_A" "$SRV_C" "$(awk "BEGIN{print 1 + $SHORT + $AFTER}")"
sleep 1 # the point: the connection is open and flowing when its grant is shortened
v0=$(status_json | jq '.sandboxes[0].policy_version')
t0=$(uptime_s)
check "shorten: allow $SRV_C:$PORT/tcp --for $SHORT while its connection is open" \
	latch egress "$LTS_NAME" allow "$SRV_C:$PORT/tcp" --for "$SHORT"
t1=$(uptime_s)
check_cmp "shorten: the policy version was bumped, so flows are checked again" \
	"$(status_json | jq '.sandboxes[0].policy_version')" -gt "$v0"
wait "$sa"
wait "$sb"
new_min=$(awk "BEGIN{print $t0 + $SHORT}")
new_max=$(awk "BEGIN{print $t1 + $SHORT}")
last_a=$(awk -v a="$SRV_A" -v t="$t0" '$2 == a && $1 > t { t = $1 } END { print t + 0 }' "$LOG")
last_c=$(awk -v c="$SRV_C" '$2 == c { t = $1 } END { print t + 0 }' "$LOG")
echo "# new deadline in [$new_min, $new_max] (the old one was $LONG s out); last line: shortened $last_c, permanent $last_a"
check_cmp "shorten: the connection's last line arrived before the new deadline + 1 s" \
	"$(awk "BEGIN{print ($last_c < $new_max + 1)}")" -eq 1
check_cmp "shorten: it kept flowing until the new deadline - 0.5 s" \
	"$(awk "BEGIN{print ($last_c > $new_min - 0.5)}")" -eq 1
check_cmp "shorten: control: the permanent connection still flowed at the new deadline + 1.5 s" \
	"$(awk "BEGIN{print ($last_a > $new_max + 1.5)}")" -eq 1
check_not "shorten: a new connection to $SRV_C:$PORT after the new deadline is denied" tcp_ok "$SRV_C" "$PORT"

lts_done
