#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 900 (72-124 s with the debian image current; its build 161 s cold here, ~9 min on a slow mirror)
#
# vm_claude.sh - `make vm-claude`: the real Claude Code (the built-in
# `claude` kit's pinned @anthropic-ai/claude-code-linux-x64) at the desk in a
# real guest of the `debian` image (TCG here), through
# `latch agent run --image debian -w WS tclaude -- -p "say hi" --model M`:
# its setup fetched from a fake npm registry serving the REAL pinned tarball
# (.ci/deps.sh packs it once into /opt/latch-clients/tarballs/), verified on
# the host and streamed into the guest; its requests through latchd's broker
# to a fake Anthropic upstream (selftests/budget_net.py, as live_clients.sh).
# In `make check` (and `make vm-claude` alone): with the debian image current
# 72-124 s on TCG, 31-62 s of it the 196 MB streamed into the guest; the
# image's build first when it is not (161 s cold here).
#
# Invariants defended (docs/INVARIANTS.md, "Keys never cross the desk",
# "Money is a boundary too"; docs/agents.md, "Teardown"; docs/kits.md,
# "Setup"):
#   - the answer comes back on latch's stdout and latch exits 0, the agent's;
#   - the upstream saw the real key in x-api-key, never the placeholder; the
#     key is in none of latch's output;
#   - `latch usage` and the ledger charged the fake's usage at the table's
#     prices;
#   - after the agent exits nothing of the sandbox is left;
#   - the first run makes the image's template with the kit's setup in it
#     (installed once every installer verified), and a second run restores
#     it: Claude Code answers with no setup run and no template made;
#   - the image carries this tree's guest agent (`latch image build --image
#     debian` rebuilds an image built with another one);
#   - attack: the registry serves other bytes than the pin: the run is refused
#     in one line before the sandbox exists, and nothing is created.
#
# Test traffic never leaves the machine: the registry and the fake upstream
# are on a documentation address in a namespace of this test's own, at the
# far end of a veth only the host's side reaches; the pool is a documentation
# /26 with no uplink; latchd's DNS upstream is a closed loopback port.  The
# EXIT trap destroys the sandbox, removes the namespace, veth, processes (by
# PID) and temp dirs, pass or fail.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
CLIENTS=${LATCH_CLIENTS:-/opt/latch-clients}
PKG=@anthropic-ai/claude-code-linux-x64
KIT=tclaude
NAME=$KIT-1 # the first free KIT-N
MODEL=claude-sonnet-4-5
TABLE=32300
NS=lts-cl-$$
UP=ltscl-up$$
PEER=ltscl-pe$$
KEY=sk-ant-vm-claude-$$-$(openssl rand -hex 12)
IN=1200 OUT=345 # the usage the fake reports for every answer

TEST=vm_claude
. "$HERE/lib_vm.sh"
. "$HERE/lib_broker.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd openssl socat virsh; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
VERSION=$(sed -n 's/^    version: "\(.*\)"$/\1/p' "$TOP/kit/kits/claude.yaml")
PIN=$(sed -n 's/^    integrity: "\(.*\)"$/\1/p' "$TOP/kit/kits/claude.yaml")
TARBALL=$CLIENTS/tarballs/anthropic-ai-claude-code-linux-x64-$VERSION.tgz
[ -f "$TARBALL" ] || skip_all "no $TARBALL; run bash .ci/deps.sh"
UPNET=$(python3 "$HERE/free_net.py" 203.0.113.232/30 198.51.100.232/30 203.0.113.208/30 198.51.100.208/30)
[ -n "$UPNET" ] || skip_all "no free documentation /30 for the registry's veth"
UPBASE=${UPNET%/*}
UPADDR=${UPBASE%.*}.$((${UPBASE##*.} + 1))
SRV=${UPBASE%.*}.$((${UPBASE##*.} + 2))

TMP=
BPFFS=
PIDS=()
cleanup() {
	set +e
	"$LATCH_BIN" destroy --purge "$NAME" >/dev/null 2>&1
	vm_sandbox_down
	ip link del "$UP" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
T0=$SECONDS

vm_scratch claude
# --- the image: `latch image build --image debian` must leave one that carries this tree's agent
t=$SECONDS
"$LATCH_BIN" image build --image debian >"$TMP/image.out" 2>&1 || fail "image build --image debian: $(tail -3 "$TMP/image.out")"
echo "# latch image build --image debian: $((SECONDS - t)) s ($(tail -1 "$TMP/image.out"))"
check "the debian image carries this tree's guest agent" grep -qx "agent $(sha256sum "$TOP/build/vm/latch-agent" | cut -d' ' -f1)" \
	"${LATCH_IMAGES:-/var/lib/latch/images}/debian/manifest.txt"

ip netns add "$NS"
ip -n "$NS" link set lo up
ip link add "$UP" type veth peer name "$PEER" netns "$NS"
ip addr add "$UPADDR/30" dev "$UP"
ip link set "$UP" up
ip -n "$NS" addr add "$SRV/30" dev "$PEER"
ip -n "$NS" link set "$PEER" up
POOL=$(python3 "$HERE/free_net.py" ${LATCH_CLAUDE_POOLS:-198.51.100.128/26 203.0.113.128/26 198.51.100.64/26 203.0.113.64/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
broker_test_pki "$TMP" "IP:$SRV" || fail "could not make the test CA"
chmod 0644 "$TMP/ca.pem"
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=127.0.0.1:53997 \
	npm_registry=https://$SRV npm_ca_file=$TMP/ca.pem budget_dollars_per_day=1000 \
	budget_requests_per_hour=none budget_requests_per_day=none budget_host_dollars_per_day=none \
	budget_host_requests_per_hour=none budget_host_requests_per_day=none
LEDGER=$LATCH_ROOT/var/lib/latch/ledger.db

# the built-in kit as tclaude: its upstream the fake's, with the test's CA, its key from VM_CLAUDE_KEY
mkdir -p "$LATCH_ROOT/etc/latch/kits"
sed -e "s|^name: claude\$|name: $KIT|" -e "s|^    upstream: https://.*\$|    upstream: https://$SRV:8443\\n    ca_file: $TMP/ca.pem|" \
	-e "s|^    secret: .*\$|    secret: VM_CLAUDE_KEY|" "$TOP/kit/kits/claude.yaml" >"$LATCH_ROOT/etc/latch/kits/$KIT.yaml"
chmod 0644 "$LATCH_ROOT/etc/latch/kits/$KIT.yaml"
L kit check "$LATCH_ROOT/etc/latch/kits/$KIT.yaml" >/dev/null || fail "kit $KIT does not check"

# the registry: first the tampered tarball (one byte other than the pin's), then the real one
REG=$TMP/registry
TGZ=$REG/$PKG/-/claude-code-linux-x64-$VERSION.tgz
mkdir -p "${TGZ%/*}"
cp "$TARBALL" "$TGZ"
printf '\x42' | dd of="$TGZ" bs=1 seek=100000 conv=notrunc status=none
ip netns exec "$NS" python3 "$HERE/npm_registry.py" --addr "$SRV" --root "$REG" --cert "$TMP/srv.pem" \
	--key "$TMP/srv.key" --log "$TMP/registry.log" --lifetime 2000 >"$TMP/reg.out" 2>&1 &
PIDS+=($!)
ip netns exec "$NS" python3 "$HERE/budget_net.py" serve --addr "$SRV" --port 8443 --cert "$TMP/srv.pem" \
	--key "$TMP/srv.key" --log "$TMP/up.log" --usage "in=$IN,out=$OUT" --provider anthropic --lifetime 2000 >"$TMP/up.out" 2>&1 &
PIDS+=($!)
wait_until -t 5 grep -qs '^ready' "$TMP/reg.out" || fail "the registry did not start: $(cat "$TMP/reg.out")"
wait_until -t 5 grep -qs 'ready' "$TMP/up.out" || fail "the fake upstream did not start: $(cat "$TMP/up.out")"
touch "$TMP/up.log"
# latchd's room resolver listens on one host-wide address: another test's latchd on this host
# holds it for a while (latchd then exits at once); wait for it, bounded
for _ in $(seq 20); do
	vm_latchd
	sleep 1
	kill -0 "$LATCHD_PID" 2>/dev/null && break
	echo "# latchd exited: $(tail -1 "$TMP/latchd.log"); again in 5 s"
	sleep 5
done
kill -0 "$LATCHD_PID" 2>/dev/null || fail "latchd does not start: $(tail -1 "$TMP/latchd.log")"
export VM_CLAUDE_KEY=$KEY
WS=$TMP/ws
mkdir -p "$WS"
chmod 0755 "$WS"

# left N: what is left of sandbox N (lib_vm.sh)
left() { vm_left "$1"; }
# stamped FILE: stdin's lines into FILE, each after the seconds since the epoch
stamped() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done >"$1"; }

# --- the attack: the registry's bytes are not the pin's; refused before the sandbox exists
rc=0
L agent run --image debian --memory 1G -w "$WS" "$KIT" -- -p "say hi" --model "$MODEL" >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
check_eq "a tarball that does not match its pin refuses the run (125)" "$rc" 125
check_eq "in one line naming the package and the pin" \
	"$(grep -c "^latch: agent run: setup $PKG@$VERSION: the tarball from https://$SRV does not match its pin (expected $PIN, got sha512-" \
		"$TMP/bad.err")" 1
check_not "before the sandbox existed (no 'ready')" grep -q "ready in" "$TMP/bad.err"
check_eq "nothing was created" "$(left "$NAME")" ""
check_eq "nothing was kept in the npm cache" "$(ls -A "$LATCH_ROOT/var/lib/latch/cache/npm" 2>/dev/null | wc -l)" 0

# --- the run: the real tarball, Claude Code answers through the broker; the run makes the
# template with the kit's setup in it (one of an earlier run is removed first)
cp "$TARBALL" "$TGZ"
rm -f "${LATCH_IMAGES:-/var/lib/latch/images}/debian/templates/m1024-c1-tcg-s"*
price() {
	L --json usage --prices | jq -r --arg m "$1" \
		'.prices[] | select(.provider == "anthropic" and .model == $m and .above == 0) | "\(.input) \(.output)"'
}
read -r PI PO <<<"$(price "$MODEL")"
COST=$(((IN * PI + OUT * PO + 999999) / 1000000)) # live_clients.sh's rounding
l0=$(python3 "$HERE/budget_net.py" ledger "$LEDGER" lastid)
t=$SECONDS
rc=0
L agent run --image debian --memory 1G -w "$WS" "$KIT" -- -p "say hi" --model "$MODEL" >"$TMP/run.out" 2> >(stamped "$TMP/run.err") || rc=$?
RUN_S=$((SECONDS - t))
sleep 1 # the stamping reader's last lines
check_eq "latch exits 0, the agent's status" "$rc" 0 || tail -8 "$TMP/run.out" "$TMP/run.err" | sed 's/^/#   /'
check "the answer comes back on latch's stdout (the fake's text)" grep -qF 'Hi! data:' "$TMP/run.out"
ts() { awk -v p="$1" 'index($0, p) { print $1; exit }' "$TMP/run.err"; }
v=$(ts "$PKG@$VERSION verified") r=$(ts "ready in") e=$(ts "removed")
echo "# agent run (the template made, with the setup in it): ${RUN_S} s in all; verified->ready" \
	"$(jq -n "$r - $v | floor" 2>/dev/null) s; the agent and teardown $(jq -n "$e - $r | floor" 2>/dev/null) s"
grep -h "template\|ready in" "$TMP/run.err" | sed 's/^[0-9.]* /# /'
check "the first run made the template, with the kit's setup" \
	grep -q "latch: template m1024-c1-tcg-s[0-9a-f]* of image debian made in" "$TMP/run.err"
check "... and restored its guest from it, whose setup was done" grep -q "setup: in the template" "$TMP/run.err"

# --- again: the template restored, Claude Code already in it, answering at once
t=$(date +%s.%N)
rc=0
L agent run --image debian --memory 1G -w "$WS" "$KIT" -- -p "say hi" --model "$MODEL" > >(stamped "$TMP/run2.out") 2> >(stamped "$TMP/run2.err") || rc=$?
RUN_S=$(jq -n "$(date +%s.%N) - $t | floor")
sleep 1
ts2() { awk -v p="$1" 'index($0, p) { print $1; exit }' "$2"; }
echo "# second agent run, from latch's start: ready $(jq -n "$(ts2 "ready in" "$TMP/run2.err") - $t" 2>/dev/null) s," \
	"the answer $(jq -n "$(ts2 "Hi! data:" "$TMP/run2.out") - $t" 2>/dev/null) s, the whole run with the teardown ${RUN_S} s"
check_eq "a second run: latch exits 0" "$rc" 0 || tail -8 "$TMP/run2.out" "$TMP/run2.err" | sed 's/^/#   /'
check "... the answer comes back" grep -qF 'Hi! data:' "$TMP/run2.out"
check_not "... making no template" grep -q "template .* made in" "$TMP/run2.err"
check "... restored from the one with the setup" grep -q "ready in [0-9]* ms (restored from template m1024-c1-tcg-s" \
	"$TMP/run2.err"
grep -h "ready in" "$TMP/run2.err" | sed 's/^[0-9.]* /# /'
check_eq "the registry was asked for the tarball (once per fetch: the bad one, the good one)" \
	"$(grep -c "^/$PKG/-/" "$TMP/registry.log")" 2
check_cmp "the upstream got its requests" "$(wc -l <"$TMP/up.log")" -ge 1
got=$(jq -r '[.headers[] | select(.[0] | ascii_downcase | . == "x-api-key" or . == "authorization") |
	"\(.[0] | ascii_downcase)=\(.[1])"] | join(";")' "$TMP/up.log" | sort -u)
check_eq "the upstream saw the real key in x-api-key, once a request" "$got" "x-api-key=$KEY"
check_eq "the upstream never saw a placeholder" "$(grep -c latch-placeholder- "$TMP/up.log")" 0
check_eq "every request went to /v1/messages" "$(jq -r .path "$TMP/up.log" | grep -cv '^/v1/messages')" 0
check_eq "the key is in none of latch's output" "$(cat "$TMP/run.out" "$TMP/run.err" "$TMP/run2.out" "$TMP/run2.err" "$TMP/bad.out" "$TMP/bad.err" |
	grep -c "$KEY")" 0
check_eq "latchd's log holds no key" "$(grep -c "$KEY" "$TMP/latchd.log")" 0
# each request's settlement, from the ledger: the fake's usage at the table's prices, to the micro-dollar
want=0 after=$l0
for ((k = 0; k < $(wc -l <"$TMP/up.log"); k++)); do
	j=$(python3 "$HERE/budget_net.py" ledger "$LEDGER" settled "$after" --wait 5)
	after=$(jq -r '.reserve.id // 0' <<<"$j")
	read -r how charged m <<<"$(jq -r '"\(.settle.how) \(.settle.micros) \(.reserve.model)"' <<<"$j")"
	check_eq "request $k settled from its usage, as $MODEL ($IN in, $OUT out), at the table's prices" \
		"$how $m $charged" "usage $MODEL $COST"
	want=$((want + charged))
done
used=$(L --json usage | jq -r '[.caps[] | select(.scope == "host" and .provider == "anthropic") |
	.dollars_per_day.used] | add // 0')
check_eq "latch usage counts the ledger's settlements" "$used" "$want"
check_eq "after the agent exits nothing is left" "$(left "$NAME")" ""
echo "# vm_claude: $((SECONDS - T0)) s in all"
lts_done
