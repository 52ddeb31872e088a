#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# bench/room.sh - how long a room takes, beside bubblewrap and a plain
# fork/exec in the same run, and what latch's cgroup programs add to a
# socket call.  Run through `make bench` or `make bench-room` (root).
#
#   start   bench/room_start: ROUNDS rounds, each runs every variant once in
#           an order rotated per round, for `true` (bench/room_stamp, a
#           static program that prints its clock as its first act) and a
#           small shell script: ms to the command's first instruction, ms to
#           the end of the run, and the CPU time of the process tree.
#             exec         fork + exec, no isolation (the floor)
#             bwrap        bubblewrap, the issue's reference configuration:
#                          --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
#                          --unshare-all --die-with-parent --new-session
#                          --cap-drop ALL --clearenv
#             latch run    `latch run --workspace DIR -- CMD`: sealed, cgroup,
#                          BPF hooks attached and read back, seccomp, limits
#             room-lean    the same room behind a binary that links only
#                          room/ and loader/ (bench/room_lean)
#             latch-start  `latch help run`: the latch binary's start and exit
#   hook    bench/room_hook: socket+connect+close and sendto() in a plain
#           cgroup and in a room, median over rounds of the per-round
#           difference; and the programs' own ns per run from the kernel's
#           BPF statistics.
#
# Environment: BENCH_ROOM_ROUNDS (30), BENCH_HOOK_ROUNDS (20) of
# BENCH_HOOK_N (5000) iterations.  Results land in $BENCH_OUT (default
# $BUILD/bench/room-TIME).  The target: `latch run` reaches the command's
# first instruction in at most 1.5x bubblewrap's time (median); a miss
# prints MISS, the exit status is 0 all the same (machines are noisy).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${BUILD:-build}" && pwd)
ROUNDS=${BENCH_ROOM_ROUNDS:-30}
HOOK_ROUNDS=${BENCH_HOOK_ROUNDS:-20}
HOOK_N=${BENCH_HOOK_N:-5000}
OUT=${BENCH_OUT:-$BUILD/bench/room-$(date +%Y%m%d-%H%M%S)}
WS=$BUILD/bench/room-ws
BWRAP=$(command -v bwrap || true)

log() { printf '[bench room %s] %s\n' "$(date +%T)" "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root"; exit 1; }
[ -n "$BWRAP" ] || log "no bwrap (Debian's bubblewrap): its column stays empty"
mkdir -p "$OUT" "$WS"
install -m 755 "$BUILD/bench/room_stamp" "$WS/room_stamp"
# rooms of this run under a cgroup name, pins and state of their own
export LATCH_CGROUP=latch-bench-$$ LATCH_BPFFS=/sys/fs/bpf/latch-bench-room-$$ LATCH_ROOT=$OUT/root
LATCHD_PID=
cleanup() {
	local root
	[ -n "$LATCHD_PID" ] && kill "$LATCHD_PID" 2>/dev/null && wait "$LATCHD_PID" 2>/dev/null
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		rmdir "$root/$LATCH_CGROUP"/rooms/* "$root/$LATCH_CGROUP"/rooms "$root/$LATCH_CGROUP"/warm \
			"$root/$LATCH_CGROUP"/latchd \
			"$root/$LATCH_CGROUP" 2>/dev/null || true
	done
	rm -rf "$LATCH_BPFFS" "$LATCH_ROOT"
}
trap cleanup EXIT
mkdir -p "$LATCH_BPFFS"

# latchd runs, confined, as it does where latch is installed: each run's audit record goes to it
"$BUILD/latchd" --dns-port 5353 >"$OUT/latchd.log" 2>&1 &
LATCHD_PID=$!
for _ in $(seq 50); do grep -q listening "$OUT/latchd.log" && break; sleep 0.1; done
grep -q listening "$OUT/latchd.log" || { log "latchd did not start: $(cat "$OUT/latchd.log")"; exit 1; }
log "start: $ROUNDS rounds of exec, bwrap, latch run, room-lean and latch-start (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/latch" run --workspace "$WS" -- /workspace/room_stamp >/dev/null # loads and pins the programs once
"$BUILD/bench/room_start" "$ROUNDS" "$WS" "$BUILD/latch" "$BWRAP" "$BUILD/bench/room_lean" >"$OUT/start.csv"
log "hook: $HOOK_ROUNDS rounds of $HOOK_N connect() and sendto()"
"$BUILD/bench/room_hook" "$HOOK_ROUNDS" "$HOOK_N" >"$OUT/hook.csv"
LATCH_ROOM_TIMING=1 "$BUILD/latch" run --workspace "$WS" -- /workspace/room_stamp 2>"$OUT/steps.txt" >/dev/null

python3 - "$OUT" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/start.csv")))
med = lambda xs: statistics.median(xs) if xs else float("nan")
def m(v, c, k):
    return med([int(r[k]) / 1e6 for r in rows if r["variant"] == v and r["command"] == c])
cols = ["exec", "bwrap", "latch", "room-lean", "latch-start"]
print("room start (median of %d rounds, ms)       %8s %8s %9s %9s %11s" % (len({r["round"] for r in rows}), *["exec", "bwrap", "latch run", "room-lean", "latch-start"]))
for c, cname in (("true", "true  "), ("script", "script")):
    for k, kname in (("first_ns", "to the first instruction"), ("total_ns", "whole run"), ("cpu_ns", "CPU, process tree")):
        vals = [m(v, c if v != "latch-start" else "-", k) if not (v == "latch-start" and k == "first_ns") else float("nan") for v in cols]
        print("  %s %-30s %8.2f %8.2f %9.2f %9.2f %11s" % (cname, kname, *vals[:4], "-" if vals[4] != vals[4] else "%.2f" % vals[4]))
lf, bf = m("latch", "true", "first_ns"), m("bwrap", "true", "first_ns")
lt, bt = m("latch", "true", "total_ns"), m("bwrap", "true", "total_ns")
ratio, tratio = lf / bf, lt / bt
print("  latch run / bwrap, true: first instruction %.2fx, whole run %.2fx; target <= 1.5x: %s" %
      (ratio, tratio, "PASS" if ratio <= 1.5 else "MISS"))
print("  room-lean / bwrap, true: first instruction %.2fx (the room without the latch binary's start)" %
      (m("room-lean", "true", "first_ns") / bf))
h = list(csv.reader(open(out + "/hook.csv")))
for what in ("connect", "sendto"):
    d = [int(r[3]) - int(r[2]) for r in h if r[0] == what]
    p = [int(r[2]) for r in h if r[0] == what]
    print("hook: %-7s plain %7.0f ns, in a room +%.0f ns (median of per-round differences, %d rounds)" %
          (what + "()", med(p), med(d), len(d)))
for r in h:
    if r[0] == "prog":
        print("      program %-9s %6.0f ns per run (kernel BPF stats, %s runs)" % (r[1], float(r[3]), r[2]))
steps = open(out + "/steps.txt").read().strip().splitlines()
print("one latch run, step by step (LATCH_ROOM_TIMING=1):")
for s in steps:
    print("  " + s.replace("latch: room ", ""))
PY
log "results in $OUT"
