#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# The README's main job: `latch up` on the built-in default guest image, the
# posture as observed from the kernel (`latch status`), commands run inside
# the guest (`latch exec`) - one allowed destination reached, one denied -
# then the credential broker: a call from the guest with the kit's
# placeholder reaches a fake OpenAI-shaped upstream with the real key, the
# guest never holds the key, and `latch usage` shows the charge at the price
# table's prices; then `latch destroy`.
#
# The sandbox lives under a temp LATCH_ROOT with a pool from a documentation
# /24 the host does not use and no uplink (its routing table ends in
# `unreachable default`), so nothing from the guest can leave the machine.
# The allowed destination is a listener on a documentation address in a
# namespace behind the host (selftests/lib_vm.sh vm_ctrl_net): no guest
# reaches an address of the host's own.
# The fake upstream (selftests/budget_net.py) listens on a documentation
# address in a namespace of the demo's own, at the far end of a veth only
# the host side (latchd) reaches; latchd's DNS upstream is a closed
# loopback port.  The key is the demo's own fake secret.
# The image is built once into /var/lib/latch/images/default and kept.
# Everything else is removed on exit, pass or fail: the sandbox, latchd and
# the upstream (by PID), the namespaces, the veth and latchd's cgroup.
set -euo pipefail
cd "$(dirname "$0")/.."
LATCH=$PWD/build/latch
NAME=demo
ALLOWED=203.0.113.80
PORT=18088
TEST=demo
TABLE=31800
PIDS=()
UPNS=ldemo-up-$$ UP=ldemo-up$$ PEER=ldemo-pe$$
KEY=sk-demo-$(openssl rand -hex 16) # the demo's fake secret: what the upstream must see, and nothing else
export LATCH_CGROUP=latch-demo-$$
. selftests/lib_vm.sh
[ "$(id -u)" = 0 ] || { echo "demo: run as root" >&2; exit 2; }

# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 selftests/free_net.py "$@"
}
# the fake upstream's veth, a documentation /30: the host's end, then the upstream's
UPNET=$(free_pool 203.0.113.228/30 198.51.100.228/30 203.0.113.220/30)
[ -n "$UPNET" ] || { echo "${0##*/}: no free documentation /30 for the fake upstream" >&2; exit 1; }
UPBASE=${UPNET%/*}
UPADDR=${UPBASE%.*}.$((${UPBASE##*.} + 1)) SRV=${UPBASE%.*}.$((${UPBASE##*.} + 2))
POOL=$(free_pool 198.51.100.64/26 198.51.100.0/26 203.0.113.128/26)
[ -n "$POOL" ] || { echo "${0##*/}: no free documentation /26 for the pool on this host" >&2; exit 1; }

TMP=$(mktemp -d /tmp/latch-vmdemo.XXXXXX)
BPFFS=/sys/fs/bpf/latch-demo-vm
cleanup() {
	local p
	set +e
	LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS "$LATCH" destroy "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	vm_ctrl_net_down
	ip link del "$UP" 2>/dev/null
	ip netns del "$UPNS" 2>/dev/null
	vm_cgroups_remove
	rm -rf "$TMP" "$BPFFS"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$TMP"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$BPFFS" "$TMP/root/etc/latch" "$TMP/www"
printf '# the demo: a documentation pool, no uplink\npool = %s\npool6 = 2001:db8:de00::/48\ntable_base = %s\nimages = %s\ndns_upstream = 127.0.0.1:53999\n' "$POOL" "$TABLE" "${LATCH_IMAGES:-/var/lib/latch/images}" \
	> "$TMP/root/etc/latch/latch.conf"
export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
bash scripts/libvirt_up.sh || exit 1

# the fake upstream: OpenAI's Chat Completions with usage, over HTTPS with a CA of the demo's own
ip netns add "$UPNS"
ip -n "$UPNS" link set lo up
ip link add "$UP" type veth peer name "$PEER" netns "$UPNS"
ip addr add "$UPADDR/30" dev "$UP"
ip link set "$UP" up
ip -n "$UPNS" addr add "$SRV/30" dev "$PEER"
ip -n "$UPNS" link set "$PEER" up
. selftests/lib_broker.sh
broker_test_pki "$TMP" "IP:$SRV" || { echo "demo: cannot make the demo's CA" >&2; exit 1; }
ip netns exec "$UPNS" python3 selftests/budget_net.py serve --addr "$SRV" --port 443 --cert "$TMP/srv.pem" \
	--key "$TMP/srv.key" --log "$TMP/upstream.log" --lifetime 900 >"$TMP/upstream.out" 2>&1 &
PIDS+=($!)
# the kit: one brokered credential, its key from the environment of `latch up`
mkdir -p "$LATCH_ROOT/etc/latch/kits"
cat >"$LATCH_ROOT/etc/latch/kits/demo.yaml" <<EOF
name: demo
description: the demo's kit, an OpenAI-shaped fake upstream on a documentation address
credentials:
  - name: openai
    upstream: https://$SRV
    provider: openai
    secret: DEMO_OPENAI_KEY
    header: Authorization
    scheme: "Bearer "
    methods: [POST]
    paths: [/v1/chat/completions]
    ca_file: $TMP/ca.pem
    env:
      OPENAI_BASE_URL: "{{url}}/v1"
      OPENAI_API_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LATCH_ROOT/etc/latch/kits/demo.yaml"
build/latchd >"$TMP/latchd.log" 2>&1 &
LATCHD_PID=$!
PIDS+=($LATCHD_PID)
# latchd is one a host (its resolver has a fixed loopback address): a second one refuses to start
latchd_up() {
	kill -0 "$LATCHD_PID" 2>/dev/null ||
		{ echo "demo: latchd is not running (another latchd on this host?): $(tail -2 "$TMP/latchd.log")" >&2; exit 1; }
}
wait_until -t 10 test -S "$LATCH_ROOT/run/latch/latchd.sock" || true
latchd_up
wait_until -t 10 grep -qs '^ready' "$TMP/upstream.out" || { echo "demo: the fake upstream did not start" >&2; exit 1; }

run() { echo "\$ $*"; "$@"; }
run "$LATCH" image build
echo "\$ DEMO_OPENAI_KEY=sk-demo-... $LATCH up $NAME --kit demo"
DEMO_OPENAI_KEY=$KEY "$LATCH" up "$NAME" --kit demo
run "$LATCH" status "$NAME"
run "$LATCH" exec "$NAME" -- uname -sr

# the allowed destination, behind the host; the host forwards from the tap as with an uplink
vm_ctrl_net "$POOL" "$ALLOWED" && vm_ctrl_http "$ALLOWED" "$PORT" || { echo "demo: no control namespace" >&2; exit 1; }
vm_ctrl_forward "lt-$NAME"
run "$LATCH" egress "$NAME" allow "$ALLOWED:$PORT"
run "$LATCH" exec "$NAME" -- sh -c "echo 'GET /' | nc -w 3 $ALLOWED $PORT"
echo "\$ $LATCH exec $NAME -- ping -c 1 -W 2 203.0.113.10      # not allowed"
if "$LATCH" exec "$NAME" -- ping -c 1 -W 2 203.0.113.10; then
	echo "demo: the denied destination answered" >&2
	exit 1
fi
echo "(refused by the host kernel, as it must be)"

# --- the broker: the guest has a placeholder and a URL on the host; latchd puts the key on the call
echo
echo "== the credential broker: the guest calls the API with a placeholder, latchd adds the real key"
latchd_up
run "$LATCH" env "$NAME"
MODEL=gpt-5 IN=1000 OUT=200
echo "\$ $LATCH exec $NAME -- wget --header \"Authorization: Bearer \$OPENAI_API_KEY\" --post-data ... \$OPENAI_BASE_URL/chat/completions"
"$LATCH" exec "$NAME" -- sh -c 'wget -q -O - -Y off --header "Authorization: Bearer $OPENAI_API_KEY" \
	--header "Content-Type: application/json" --header "X-Fake-Usage: in=$1,out=$2" \
	--post-data "{\"model\":\"$3\",\"max_completion_tokens\":400,\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" \
	"$OPENAI_BASE_URL/chat/completions"' sh "$IN" "$OUT" "$MODEL" >"$TMP/answer" 2>&1 || true
head -c 240 "$TMP/answer"
echo " ..."
demo_fail() { echo "demo: FAIL: $*" >&2; exit 1; }
jq -e '.choices[0].message.content' "$TMP/answer" >/dev/null 2>&1 || demo_fail "the guest's call got no answer"
echo "the guest got the upstream's answer, usage $(jq -c .usage "$TMP/answer")"
seen=$(tail -1 "$TMP/upstream.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')
[ "$seen" = "Bearer $KEY" ] || demo_fail "the upstream saw '$seen', not the demo's key"
echo "the fake upstream saw the real key: Bearer ${KEY:0:12}... (the demo's fake secret)"
"$LATCH" exec "$NAME" -- sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; env' >"$TMP/guest-env" 2>/dev/null || true
PH=$("$LATCH" --json env "$NAME" | jq -r '.env[] | select(.name == "OPENAI_API_KEY") | .value')
# control: the look finds the placeholder, so it would find the key too
grep -qa "$PH" "$TMP/guest-env" || demo_fail "the guest's environment has no placeholder: the look below proves nothing"
! grep -qa "$KEY" "$TMP/guest-env" "$TMP/answer" || demo_fail "the key is in the guest"
echo "the guest never held it: its processes' environments have only the placeholder ${PH:0:22}..., the answer no key"
# the charge: the usage the upstream reported at the table's prices (micro-dollars per million tokens), rounded up
read -r PIN POUT < <("$LATCH" --json usage --prices | jq -r --arg m "$MODEL" \
	'.prices[] | select(.provider == "openai" and .model == $m and .above == 0) | "\(.input) \(.output)"')
WANT=$(((IN * PIN + OUT * POUT + 999999) / 1000000))
used() {
	"$LATCH" --json usage "$NAME" |
		jq -r '.caps[] | select(.scope == "sandbox" and .provider == "openai") | .dollars_per_day.used'
}
wait_until -t 10 test "$(used)" = "$WANT" || true
run "$LATCH" usage "$NAME"
[ "$(used)" = "$WANT" ] ||
	demo_fail "latch usage shows $(used); the table's price of $IN input and $OUT output tokens of $MODEL is $WANT"
awk -v w="$WANT" -v i="$IN" -v pi="$PIN" -v o="$OUT" -v po="$POUT" -v m="$MODEL" 'BEGIN {
	printf "latch usage shows the charge: $%.5f, the %d input and %d output tokens the upstream reported at %s'"'"'s $%.2f and $%.2f a million (the price table)\n", w / 1e6, i, o, m, pi / 1e6, po / 1e6 }'
run "$LATCH" status "$NAME"
run "$LATCH" destroy "$NAME"
