#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# bench/agent.sh - how long `latch agent run` takes, and where the time goes.
# Run through `make bench` or `make bench-agent` (root, libvirt, the default
# guest image built).
#
#   dry-run   `latch agent run --dry-run KIT`: kit, workspace, name, config;
#             ROUNDS runs, median.
#   cold      `latch --json agent run --cold -w WS KIT` of a kit whose
#             command is `echo first-output`: from latch's exec to each of
#             its points (its own JSON "ms": up began, enforcement verified,
#             domain started, the guest agent answered, ready, setup done,
#             command started) and to the command's first output line on
#             latch's stdout (read here, timestamped), and the whole run
#             with the teardown; RUNS runs, median.  The guest is booted.
#   template  the first warm run, which makes the template of the image
#             and size (a boot and a save) when there is none; its own
#             JSON says how long that took.
#   warm      the same runs without --cold: the guest restored from the
#             template and adopted (vm/template.h); RUNS runs, median.
#
# Environment: BENCH_AGENT_ROUNDS (10), BENCH_AGENT_RUNS (3),
# BENCH_AGENT_MEMORY (1G, agent run's default).  Results land
# in $BENCH_OUT (default $BUILD/bench/agent-TIME).  Test traffic stays here:
# the pool is a documentation /26 the host does not use, with no uplink;
# the kit's upstream is a documentation address nothing contacts.
set -euo pipefail
cd "$(dirname "$0")/.."
TOP=$(pwd)
BUILD=$(cd "${BUILD:-build}" && pwd)
ROUNDS=${BENCH_AGENT_ROUNDS:-10}
RUNS=${BENCH_AGENT_RUNS:-3}
OUT=${BENCH_OUT:-$BUILD/bench/agent-$(date +%Y%m%d-%H%M%S)}
LATCH=$BUILD/latch
KIT=bench
MEM=${BENCH_AGENT_MEMORY:-1G}

log() { printf '[bench agent %s] %s\n' "$(date +%T)" "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root"; exit 1; }
command -v virsh >/dev/null || { log "needs virsh (libvirt)"; exit 1; }
mkdir -p "$OUT"
chmod 0755 "$OUT"
POOL=$(python3 "$TOP/selftests/free_net.py" 203.0.113.0/26 198.51.100.0/26 203.0.113.192/26)
[ -n "$POOL" ] || { log "no free documentation /26 for the pool"; exit 1; }
export LATCH_ROOT=$OUT/root LATCH_BPFFS=/sys/fs/bpf/latch-bench-agent-$$ LATCH_CGROUP=latch-bench-agent-$$
mkdir -p "$LATCH_ROOT/etc/latch/kits" "$LATCH_BPFFS" "$OUT/ws"
chmod 0755 "$OUT/ws"
{
	echo "# bench/agent.sh: documentation addresses only, no uplink"
	echo "pool = $POOL"
	echo "dns_upstream = 127.0.0.1:53997"
	echo "table_base = 32200" # routing tables of its own, away from the host's and the tests'
	echo "images = ${LATCH_IMAGES:-/var/lib/latch/images}"
} >"$LATCH_ROOT/etc/latch/latch.conf"
cat >"$LATCH_ROOT/etc/latch/kits/$KIT.yaml" <<'EOF'
name: bench
description: the kit of bench/agent.sh
command: [sh, -c, 'echo first-output']
credentials:
  - name: echo
    upstream: https://192.0.2.78
    secret: BENCH_AGENT_KEY
    header: Authorization
    env:
      BENCH_URL: "{{url}}"
      BENCH_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LATCH_ROOT/etc/latch/latch.conf" "$LATCH_ROOT/etc/latch/kits/$KIT.yaml"
export BENCH_AGENT_KEY=sk-bench-$$
LATCHD_PID=
cleanup() {
	local root n
	set +e # every step is tried; what is already gone is no failure
	for n in 1 2 3; do "$LATCH" destroy --purge "agent-$KIT-$n" >/dev/null 2>&1; done
	[ -n "$LATCHD_PID" ] && kill "$LATCHD_PID" 2>/dev/null && wait "$LATCHD_PID" 2>/dev/null
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		find "$root/$LATCH_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	rm -rf "$LATCH_BPFFS"
	return 0
}
trap cleanup EXIT
bash "$TOP/scripts/libvirt_up.sh" >/dev/null 2>&1 || true
"$BUILD/latchd" >"$OUT/latchd.log" 2>&1 &
LATCHD_PID=$!
for _ in $(seq 50); do [ -S "$LATCH_ROOT/run/latch/latchd.sock" ] && break; sleep 0.1; done

log "dry-run: $ROUNDS rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for _ in $(seq "$ROUNDS"); do
	s=$(date +%s%N)
	"$LATCH" agent run --dry-run -w "$OUT/ws" "$KIT" >/dev/null 2>&1
	echo $((($(date +%s%N) - s) / 1000)) >>"$OUT/dry.us"
done

# one_run FILE [--cold]: a run of the kit, read by a parent that timestamps its first output line
one_run() {
	local f=$1
	shift
	python3 - "$LATCH" "$OUT/ws" "$KIT" "$MEM" "$@" >>"$OUT/$f" 2>>"$OUT/runs.err" <<'PY'
import json, subprocess, sys, time
latch, ws, kit, mem = sys.argv[1:5]
t0 = time.monotonic()
p = subprocess.Popen([latch, "--json", "agent", "run", "--memory", mem, *sys.argv[5:], "-w", ws, kit],
                     stdout=subprocess.PIPE, text=True)
first, doc = None, []
for line in p.stdout:
    if first is None and line.strip() == "first-output":
        first = (time.monotonic() - t0) * 1000
    elif first is not None:
        doc.append(line)
rc = p.wait()
total = (time.monotonic() - t0) * 1000
d = json.loads("".join(doc)) if doc else {}
print(json.dumps({"rc": rc, "first_output": first, "total": total, "ms": d.get("ms", {}),
                  "started": d.get("started"), "template": d.get("template")}))
PY
}

log "cold: $RUNS runs of a kit whose command prints one line, the guest booted"
for _ in $(seq "$RUNS"); do one_run cold.jsonl --cold; done
log "template: the first warm run (makes the template when there is none)"
one_run template.jsonl
log "warm: $RUNS runs, the guest restored from the template"
for _ in $(seq "$RUNS"); do one_run warm.jsonl; done

python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
med = statistics.median
dry = [int(x) / 1000 for x in open(out + "/dry.us")]
print("latch agent run (TCG; median; ms from latch's exec):")
print("  --dry-run                          %8.1f   (%d rounds)" % (med(dry), len(dry)))
keys = [("up_began", "kit, workspace, name checked; owner mark"), ("enforced", "tap + enforcement verified"),
        ("domain_started", "domain started (cold) / restored (warm)"),
        ("agent_answered", "guest booted, agent ping (cold) / guest adopted (warm)"),
        ("ready", "kit to latchd, profile switched, env written"), ("setup_done", "kit setup (this kit has none)"),
        ("command_started", "command line and env read")]
def table(name, what):
    runs = [json.loads(l) for l in open(out + "/" + name) if l.strip()]
    good = [r for r in runs if r["rc"] == 0 and r["first_output"] is not None]
    print("%s: %d runs, exit 0 with the command's output: %d, started: %s"
          % (what, len(runs), len(good), ",".join(sorted(set(str(r["started"]) for r in runs)))))
    if not good:
        return
    prev = 0
    for k, w in keys:
        v = med([r["ms"].get(k, 0) for r in good])
        print("  %-16s %8.0f  (+%6.0f)  %s" % (k, v, v - prev, w))
        prev = v
    fo = med([r["first_output"] for r in good])
    print("  %-16s %8.0f  (+%6.0f)  exec over the agent channel, the guest runs sh" % ("first output", fo, fo - prev))
    tot = med([r["total"] for r in good])
    print("  %-16s %8.0f  (+%6.0f)  the agent's exit, destroy --purge" % ("whole run", tot, tot - fo))
table("cold.jsonl", "cold (--cold, booted)")
t = [json.loads(l) for l in open(out + "/template.jsonl") if l.strip()]
if t:
    print("template: the first warm run made it in %s ms (0: it was there), ready at %s ms, first output at %s ms"
          % (t[0]["ms"].get("template_made"), t[0]["ms"].get("ready"), t[0]["first_output"]))
table("warm.jsonl", "warm (restored from the template)")
PY
log "results in $OUT"
