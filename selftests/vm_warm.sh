#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 900
#
# vm_warm.sh - `latch agent run`'s warm start (vm/template.h) on the default
# image (TCG here): one template guest, booted and saved once, restored for
# each sandbox, each restored guest made its own before the agent runs.
#
# Invariants defended (docs/agents.md, "A warm start"):
#   - two sandboxes restored from one template, side by side, are two
#     guests: each has its own address, the workspace given to it, and a
#     random generator reseeded after the restore (the kernel says so; the
#     first bytes of /dev/urandom differ; without a VM generation ID the
#     adoption refuses and the guest is booted: seen red) (control: the
#     template is made once and the second run restores it);
#   - (not tested here: the clock.  Under TCG a restored guest's clock
#     follows the host's TSC, so it is right with or without latch setting
#     it; under KVM kvmclock resumes at the saved time, which is why latch
#     sets it.  This machine has no KVM.)
#   - the restored guest comes up behind enforcement that was verified
#     before the restore (the run's own times: enforced before the domain);
#   - nothing of a kit is ever in a template: neither the key nor the
#     placeholder is in the saved memory (control: a string the template's
#     guest does hold is found there);
#   - a template latch can't read is never restored: the run says why,
#     boots the guest instead and works, and the next run makes a new one;
#   - a kept warm sandbox, stopped and started again, boots as any other
#     with its own address (the domain latch defined for that);
#   - --cold boots (control), and status says which sandbox was restored.
#
# Test traffic never leaves the machine: a documentation /26 pool with no
# uplink (`unreachable default`), a kit upstream on a documentation address
# nothing contacts, latchd's DNS upstream a closed loopback port.  The EXIT
# trap destroys every sandbox of the test and kills the processes it
# started, pass or fail.  Exit 1 on a failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
KIT=tw
TABLE=32150
KEY=sk-vm-warm-$$-$(openssl rand -hex 12)

TEST=vm_warm
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq virsh libvirtd virtlogd openssl socat; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

TMP=
BPFFS=
PIDS=()
NAMES=(warm-a warm-b warm-c warm-d)
NAME=warm-a # vm_sandbox_down's
cleanup() {
	set +e
	for n in "${NAMES[@]}"; do "$LATCH_BIN" destroy --purge "$n" >/dev/null 2>&1; done
	vm_sandbox_down
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch warm
vm_tree_image
# a template of this test's own: a memory size no other test asks for
MEM=320
POOL=$(python3 "$HERE/free_net.py" ${LATCH_WARM_POOLS:-198.51.100.192/26 203.0.113.192/26 198.51.100.128/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=127.0.0.1:53996
TEMPLATES=${LATCH_IMAGES:-/var/lib/latch/images}/default/templates
rm -f "$TEMPLATES/m$MEM-c1-"*

mkdir -p "$LATCH_ROOT/etc/latch/kits"
cat >"$LATCH_ROOT/etc/latch/kits/$KIT.yaml" <<'EOF'
name: tw
description: the kit of vm_warm.sh
command: [sh, -c, 'echo "addr=$(ip -4 addr show | sed -n "s/.*inet \([0-9.]*\)\/30.*/\1/p")"; echo "ws=$(cat /workspace/marker)"; echo "reseeded=$(dmesg | grep -c "crng reseeded due to virtual machine fork")"; echo "random=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n")"; echo "key=$TW_KEY"; [ "$1" != sleep ] || { echo sleeping; sleep 600; }', tw]
credentials:
  - name: echo
    upstream: https://192.0.2.79
    secret: VM_WARM_KEY
    header: Authorization
    scheme: "Bearer "
    env:
      TW_URL: "{{url}}"
      TW_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LATCH_ROOT/etc/latch/kits/$KIT.yaml"
for w in a b; do
	mkdir -p "$TMP/ws-$w"
	chmod 0755 "$TMP/ws-$w"
	echo "marker-$w-$$" >"$TMP/ws-$w/marker"
done
vm_latchd
export VM_WARM_KEY=$KEY
run() { # NAME WS OUT ARGS...: a kept run
	local n=$1 ws=$2 out=$3
	shift 3
	"$LATCH_BIN" --json agent run --keep --memory "$MEM" --name "$n" -w "$ws" "$KIT" "$@" >"$out" 2>"$out.err"
}
field() { sed -n "s/^$1=//p" "$2"; }
json() { sed -n '/^{/,$p' "$1" | jq -r "$2"; }

# --- the first run makes the template, the second restores it; both kept, side by side
run warm-a "$TMP/ws-a" "$TMP/a.out" || fail "the first warm run failed: $(tail -3 "$TMP/a.out.err")"
run warm-b "$TMP/ws-b" "$TMP/b.out" || fail "the second warm run failed: $(tail -3 "$TMP/b.out.err")"
grep -h "ready in\|template\|warm" "$TMP/a.out.err" "$TMP/b.out.err" | sed 's/^/# /' || true
check "the first run made the template" test "$(json "$TMP/a.out" .ms.template_made)" -gt 0
check_eq "the first run's guest was restored from it" "$(json "$TMP/a.out" .started)" restored
check_eq "control: the second run made none" "$(json "$TMP/b.out" .ms.template_made)" 0
check_eq "the second run's guest was restored" "$(json "$TMP/b.out" .started)" restored
check "the template is root's alone" test "$(stat -c %a "$TEMPLATES/m$MEM-c1-tcg.save")" = 600
for w in a b; do
	check "warm-$w is running" bash -c "virsh domstate latch-warm-$w | grep -q running"
	check_eq "warm-$w's guest has its own address" "$(field addr "$TMP/$w.out")" \
		"$("$LATCH_BIN" --json status "warm-$w" | jq -r '.. | objects | select(.sandbox? == "warm-'$w'") | .guest_ip4')"
	check_eq "warm-$w's guest has the workspace given to it" "$(field ws "$TMP/$w.out")" "marker-$w-$$"
	check_eq "warm-$w's kernel reseeded its random generator after the restore" "$(field reseeded "$TMP/$w.out")" 1
	check "warm-$w's enforcement was verified before its domain was restored" \
		test "$(json "$TMP/$w.out" .ms.enforced)" -lt "$(json "$TMP/$w.out" .ms.domain_started)"
	check "status says warm-$w was restored" \
		bash -c "'$LATCH_BIN' status warm-$w | grep -q 'started: *restored from the image.s template m$MEM-c1-tcg'"
	check_eq "... and so does its JSON" \
		"$("$LATCH_BIN" --json status "warm-$w" | jq -r '.. | objects | select(.sandbox? == "warm-'$w'") | .template')" \
		"m$MEM-c1-tcg"
done
check_not "the two restored guests' first random bytes differ" \
	test "$(field random "$TMP/a.out")" = "$(field random "$TMP/b.out")"
check_not "... and their addresses" test "$(field addr "$TMP/a.out")" = "$(field addr "$TMP/b.out")"

# --- nothing of a kit is in a template: it was saved before any kit, and stays so
PH=$(field key "$TMP/a.out")
check "control: the guest got a placeholder" grep -qE '^latch-placeholder-[0-9a-f]{32}$' <<<"$PH"
check_eq "the key is not in the template" "$(grep -c -a -F "$KEY" "$TEMPLATES/m$MEM-c1-tcg.save" || true)" 0
check_eq "the placeholder is not in the template" "$(grep -c -a -F "$PH" "$TEMPLATES/m$MEM-c1-tcg.save" || true)" 0
check "control: what the template's guest holds is found in it (its agent's channel name)" \
	grep -q -a -F "org.latch.agent" "$TEMPLATES/m$MEM-c1-tcg.save"

# --- a kept warm sandbox stopped and started again boots, on its own address
L down warm-a >/dev/null 2>&1 || fail "down warm-a"
rc=0
L up warm-a >"$TMP/up-a.out" 2>&1 || rc=$?
check_eq "a stopped warm sandbox starts again (a boot)" "$rc" 0
[ "$rc" = 0 ] || tail -5 "$TMP/up-a.out" | sed 's/^/#   /'
check_eq "... with its own address" \
	"$(L exec warm-a -- sh -c 'ip -4 addr show | sed -n "s/.*inet \([0-9.]*\)\/30.*/\1/p"' 2>/dev/null)" \
	"$(field addr "$TMP/a.out")"
check_eq "... and its workspace" "$(L exec warm-a -- cat /workspace/marker 2>/dev/null)" "marker-a-$$"
for n in warm-a warm-b; do L destroy --purge "$n" >/dev/null 2>&1 || fail "destroy --purge $n"; done
check_eq "destroy leaves nothing of a warm sandbox" "$(vm_left warm-a) $(vm_left warm-b)" " "

# --- a template latch can't read is never restored: the run boots, says why, and the next remakes it
printf 'NotLibvirtSave!!' | dd of="$TEMPLATES/m$MEM-c1-tcg.save" bs=16 count=1 conv=notrunc status=none
rc=0
run warm-c "$TMP/ws-a" "$TMP/c.out" || rc=$?
check_eq "a run over a damaged template still works" "$rc" 0
check "... warning why it was not restored" \
	grep -q "^latch: warning: warm start failed (.*is not a save file this latch knows" \
	"$TMP/c.out.err"
check_eq "... and booting the guest" "$(json "$TMP/c.out" .started)" booted
check_eq "... which is a guest of its own" "$(field ws "$TMP/c.out")" "marker-a-$$"
L destroy --purge warm-c >/dev/null 2>&1 || fail "destroy --purge warm-c"
rc=0
run warm-d "$TMP/ws-b" "$TMP/d.out" || rc=$?
check "the next run made the template again" test "$(json "$TMP/d.out" .ms.template_made)" -gt 0
check_eq "... and restored it" "$(json "$TMP/d.out" .started)" restored
L destroy --purge warm-d >/dev/null 2>&1 || fail "destroy --purge warm-d"

# --- control: --cold boots
rc=0
"$LATCH_BIN" --json agent run --cold --memory "$MEM" --name warm-c -w "$TMP/ws-a" "$KIT" >"$TMP/cold.out" \
	2>"$TMP/cold.out.err" || rc=$?
check_eq "control: --cold runs" "$rc" 0
check_eq "control: --cold boots the guest" "$(json "$TMP/cold.out" .started)" booted
check_eq "control: a booted guest has its own random generator too" "$(field reseeded "$TMP/cold.out")" 0
check_eq "after the --cold run nothing is left" "$(vm_left warm-c)" ""
rm -f "$TEMPLATES/m$MEM-c1-"*
lts_done
