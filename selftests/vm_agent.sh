#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 1500
#
# vm_agent.sh - `latch agent run` on the default image (TCG here): a kit whose
# command is a shell one-liner runs in a fresh VM sandbox, in the workspace,
# with the kit's environment; its exit status is latch's; and the sandbox
# is gone afterwards, whichever way the run ended.
#
# Invariants defended (docs/agents.md, "Teardown"):
#   - the agent runs in /workspace (the host directory given), with the
#     kit's placeholder and URL, never the key; exit 7 -> latch exits 7;
#   - after the agent exits nothing of the sandbox is left: no domain, no
#     tap, no pins, no broker in latchd, no kit state, no owner mark
#     (control: --keep keeps it);
#   - --dry-run starts nothing: no domain, no tap, no state;
#   - SIGTERM and SIGHUP while the agent runs, and SIGTERM while the
#     sandbox comes up, tear it down and latch exits 128+N, leaving nothing
#     (SIGINT is the same path; a background job of a script ignores it);
#   - SIGKILL leaves the sandbox, marked: `latch doctor` names it with the
#     command that removes it (control: a live run's is not named), and the
#     next `agent run` removes it, saying so;
#   - a mark whose PID now belongs to another process (another start time)
#     is no live owner: doctor names it and the next run removes it
#     (control: a mark of a live process with its start time is left alone).
#
# Test traffic never leaves the machine: the pool is a documentation /26 the
# host does not use, with no uplink (`unreachable default`); the kit's
# upstream is a documentation address that nothing here contacts; latchd's
# DNS upstream is a closed loopback port.  The EXIT trap destroys every
# sandbox of the test and kills the processes it started (by PID), pass or
# fail.  Exit 1 on a failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
KIT=ta
NAME=agent-ta-1 # the first free agent-KIT-N
TABLE=32100
KEY=sk-vm-agent-$$-$(openssl rand -hex 12)

TEST=vm_agent
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq virsh timeout libvirtd virtlogd openssl socat; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

TMP=
BPFFS=
PIDS=()
RUNS=() # latch agent run processes of this test
cleanup() {
	set +e
	local p
	for p in "${RUNS[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	for n in "$NAME" agent-ta-2 agent-ta-3; do "$LATCH_BIN" destroy --purge "$n" >/dev/null 2>&1; done
	vm_sandbox_down
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch agent
vm_tree_image
POOL=$(python3 "$HERE/free_net.py" ${LATCH_AGENT_POOLS:-203.0.113.128/26 198.51.100.128/26 203.0.113.64/26 \
	198.51.100.64/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=127.0.0.1:53998

# --- the kit: a one-liner that says where it runs and what it was given, then exits 7
# (or, given `sleep`, waits: the run to stop)
mkdir -p "$LATCH_ROOT/etc/latch/kits"
cat >"$LATCH_ROOT/etc/latch/kits/$KIT.yaml" <<'EOF'
name: ta
description: the kit of vm_agent.sh
command: [sh, -c, 'echo "pwd=$(pwd)"; echo "key=$TA_KEY"; echo "url=$TA_URL"; echo "arg=$1"; cat marker; if [ "$1" = sleep ]; then echo sleeping; sleep 600; fi; exit 7', ta]
credentials:
  - name: echo
    upstream: https://192.0.2.77
    secret: VM_AGENT_KEY
    header: Authorization
    scheme: "Bearer "
    env:
      TA_URL: "{{url}}"
      TA_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LATCH_ROOT/etc/latch/kits/$KIT.yaml"
WS=$TMP/ws
mkdir -p "$WS"
chmod 0755 "$WS"
echo "marker-$$" >"$WS/marker"
vm_latchd

POLICY=$LATCH_ROOT/var/lib/latch/policy
# left N: what is left of sandbox N (lib_vm.sh)
left() { vm_left "$1"; }
export VM_AGENT_KEY=$KEY

# --- the owner mark: its PID alone does not make a run alive; a PID reused by another process is
# no owner (its start time differs).  Two marks by hand, no sandbox behind them: t-live names a
# live process with its start time (control), t-reused the same PID with another start time.
mkdir -p "$POLICY"
chmod 0700 "$POLICY"
sleep 900 &
SLEEPER=$!
PIDS+=("$SLEEPER")
START=$(sed 's/.*) //' "/proc/$SLEEPER/stat" | cut -d' ' -f20) # field 22, after "PID (COMM) "
mark() { printf '# vm_agent.sh\npid = %s\nstart = %s\nkit = %s\n' "$2" "$3" "$KIT" >"$POLICY/$1.agent"
	chmod 0600 "$POLICY/$1.agent"; }
mark t-live "$SLEEPER" "$START"
mark t-reused "$SLEEPER" $((START + 1))
"$LATCH_BIN" doctor >"$TMP/doctor0.out" 2>&1 || true
check "doctor names a mark whose PID now belongs to another process" \
	grep -q "agent sandboxes .*t-reused (kit $KIT, pid $SLEEPER)" "$TMP/doctor0.out"
check_not "control: doctor does not name a mark whose process lives" grep -q "t-live" "$TMP/doctor0.out"

# --- --dry-run: says everything, starts nothing
rc=0
L agent run --dry-run -w "$WS" "$KIT" >"$TMP/dry.out" 2>&1 || rc=$?
check_eq "--dry-run exits 0" "$rc" 0
check "--dry-run names the kit and the sandbox" grep -q "^latch: kit $KIT (.*), image default, sandbox $NAME" \
	"$TMP/dry.out"
check "--dry-run names the workspace" grep -qF "latch: workspace $WS -> /workspace" "$TMP/dry.out"
check "--dry-run names the route" grep -q "route /echo on the broker (port [0-9]*) -> https://192.0.2.77" "$TMP/dry.out"
check "--dry-run says it stopped" grep -q -- "--dry-run, stopping before creating the sandbox" "$TMP/dry.out"
check_eq "--dry-run left nothing (no domain, tap, state)" "$(left "$NAME")" ""
cp "$LATCH_ROOT/etc/latch/kits/$KIT.yaml" "$TMP/$KIT.yaml"
rc=0
L agent run --dry-run -w "$WS" "$TMP/$KIT.yaml" >"$TMP/elsewhere.out" 2>&1 || rc=$?
check_eq "a kit file outside the kits directory is refused, 125" "$rc" 125
check "... naming where it goes" grep -q "is not in the kits directory" "$TMP/elsewhere.out"
check "control: the kit's file in the kits directory is taken as KIT" \
	"$LATCH_BIN" agent run --dry-run -w "$WS" "$LATCH_ROOT/etc/latch/kits/$KIT.yaml"

# --- a run: the agent's output, its status, nothing left
rc=0
L agent run -w "$WS" "$KIT" >"$TMP/run1.out" 2>"$TMP/run1.err" || rc=$?
check_eq "the agent's exit 7 is latch's" "$rc" 7
[ "$rc" = 7 ] || sed 's/^/#   /' "$TMP/run1.err" | tail -5
grep -h "ready in" "$TMP/run1.err" | sed 's/^/# /' || true
check "it ran in /workspace" grep -qx "pwd=/workspace" "$TMP/run1.out"
check "the workspace is the host directory given" grep -qx "marker-$$" "$TMP/run1.out"
check "it has the kit's placeholder" grep -qE '^key=latch-placeholder-[0-9a-f]{32}$' "$TMP/run1.out"
check "it has the kit's URL" grep -qE '^url=http://[0-9.]+:[0-9]+/echo$' "$TMP/run1.out"
check_eq "the key is nowhere in its output" "$(grep -c "$KEY" "$TMP/run1.out" "$TMP/run1.err" | awk -F: '{ s += $2 } END { print s }')" 0
check "latch said the sandbox was ready" grep -qE "^latch: sandbox $NAME ready in [0-9]+ ms" "$TMP/run1.err"
check "latch said the sandbox was removed" grep -q "^latch: sandbox $NAME removed" "$TMP/run1.err"
check "the run removed the reused-PID mark's sandbox, saying so" \
	grep -q "^latch: removed sandbox t-reused (kit $KIT): its \`latch agent run\` (pid $SLEEPER) was killed" "$TMP/run1.err"
check "control: and left the live run's mark" test -e "$POLICY/t-live.agent"
rm -f "$POLICY/t-live.agent"
check_eq "after the agent exits nothing is left" "$(left "$NAME")" ""

# --- control: --keep keeps it, and ARGS follow the kit's command
rc=0
L agent run --keep -w "$WS" "$KIT" -- hello >"$TMP/keep.out" 2>"$TMP/keep.err" || rc=$?
check_eq "--keep: the agent's status still" "$rc" 7
check "ARGS after -- reach the command" grep -qx "arg=hello" "$TMP/keep.out"
check_eq "control: --keep keeps the domain, tap, pins, kit state and latchd's broker" "$(left "$NAME")" \
	"domain tap pins kit-state profile sandbox-dir latchd"
check "a kept sandbox is not an orphan: doctor names none" bash -c "'$LATCH_BIN' doctor 2>&1 | grep -q 'agent sandboxes *none left'"
L destroy --purge "$NAME" >/dev/null 2>&1 || fail "destroy --purge of the kept sandbox"

# --- SIGTERM while the agent runs
run_bg() { # OUT ARGS...: a run in the background, its PID in RUN
	local out=$1
	shift
	"$LATCH_BIN" agent run -w "$WS" "$KIT" "$@" >"$out" 2>&1 &
	RUN=$!
	RUNS+=("$RUN")
}
# started OUT: the agent said it sleeps, or the run ended (the check after says which)
started() { grep -q '^sleeping' "$1" || ! kill -0 "$RUN" 2>/dev/null; }
run_bg "$TMP/term.out" -- sleep
wait_until -t 300 started "$TMP/term.out" && grep -q '^sleeping' "$TMP/term.out" || fail "the agent did not start: $(tail -3 "$TMP/term.out")"
check "control: doctor does not name a live run's sandbox" \
	bash -c "'$LATCH_BIN' doctor 2>&1 | grep -q 'agent sandboxes *none left'"
kill -TERM "$RUN"
rc=0
wait "$RUN" || rc=$?
check_eq "SIGTERM while the agent runs: latch exits 143" "$rc" 143
check "... saying the sandbox was removed" grep -q "^latch: sandbox $NAME removed" "$TMP/term.out"
check_eq "... and nothing is left" "$(left "$NAME")" ""

# --- SIGHUP (the terminal closed) while the agent runs
run_bg "$TMP/hup.out" -- sleep
wait_until -t 300 started "$TMP/hup.out" && grep -q '^sleeping' "$TMP/hup.out" ||
	fail "the agent did not start: $(tail -3 "$TMP/hup.out")"
kill -HUP "$RUN"
rc=0
wait "$RUN" || rc=$?
check_eq "SIGHUP while the agent runs: latch exits 129" "$rc" 129
check_eq "... and nothing is left" "$(left "$NAME")" ""

# --- SIGTERM while the sandbox comes up: taken when up returns, before the command runs
run_bg "$TMP/termup.out"
wait_until -t 120 virsh dominfo "latch-$NAME" || fail "the domain never appeared"
kill -TERM "$RUN"
rc=0
wait "$RUN" || rc=$?
check_eq "SIGTERM during up: latch exits 143" "$rc" 143
check_not "... the command never ran" grep -q '^pwd=' "$TMP/termup.out"
check_eq "... and nothing is left" "$(left "$NAME")" ""

# --- SIGKILL: the sandbox stays, marked; doctor names it; the next run removes it
run_bg "$TMP/kill.out" -- sleep
wait_until -t 300 started "$TMP/kill.out" && grep -q '^sleeping' "$TMP/kill.out" || fail "the agent did not start: $(tail -3 "$TMP/kill.out")"
KILLED=$RUN
kill -KILL "$RUN"
wait "$RUN" 2>/dev/null || true
check_eq "SIGKILL leaves the sandbox, marked" "$(left "$NAME")" \
	"domain tap pins kit-state owner-mark profile sandbox-dir latchd"
"$LATCH_BIN" doctor >"$TMP/doctor.out" 2>&1 || true
check "doctor names it, with the run's pid" grep -q "agent sandboxes .*$NAME (kit $KIT, pid $KILLED)" "$TMP/doctor.out"
check "doctor gives the command that removes it" grep -q "fix: latch destroy --purge $NAME" "$TMP/doctor.out"
rc=0
L agent run -w "$WS" "$KIT" >"$TMP/next.out" 2>&1 || rc=$?
check_eq "the next run runs (exit 7)" "$rc" 7
check "the next run removes it, saying so in one line" \
	grep -q "^latch: removed sandbox $NAME (kit $KIT): its \`latch agent run\` (pid $KILLED) was killed" "$TMP/next.out"
check "... and takes its name again, being the first free" grep -q "^latch: sandbox $NAME removed" "$TMP/next.out"
check_eq "after both nothing is left" "$(left "$NAME")" ""
lts_done
