#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_kit.sh - a VM sandbox with a kit: `latch up --kit` on the default image
# (TCG here), a credential whose key comes from the environment of `latch
# up`, and a fake HTTPS upstream that writes down every header it gets.
#
# Invariants defended (docs/INVARIANTS.md, "keys never cross the desk"):
#   - inside the guest the environment has the placeholder and the URL, in
#     every `latch exec` and in what a login shell reads;
#   - a request from the guest through the broker reaches the upstream with
#     the real key, and the guest gets the answer with the key scrubbed;
#   - the key is nowhere in the guest: not in the environment of any of its
#     processes, not in /etc, /run, /tmp, /root or /var, not in a response;
#   - the guest can't reach the upstream itself (sealed, and no route);
#   - `down` wipes the key from latchd; `up` without the key refuses
#     naming the variable; `up` of the running sandbox with it hands it again.
#   - a kit whose agent needs node (gemini) on an image without it (the
#     default) is refused before anything exists, naming the image to build.
#
# Test traffic never leaves the machine: the pool is a documentation /26
# the host does not use, with no uplink (`unreachable default`); the
# upstream is on a documentation address in a namespace of this test's own,
# the far end of a veth that only the host's side reaches (latchd's
# connection); latchd's DNS upstream is a closed loopback port.  The EXIT trap
# destroys the sandbox and removes the namespace, veth, processes (by PID)
# and temp dirs, pass or fail.  Prints ok/FAIL lines and "N passed, M
# failed"; exit 1 on a failure, 77 when it can't run here.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-kit
TABLE=31800
NS=ltk-net-$$
UP=ltk-up$$   # root-namespace end, routes latchd to the upstream
PEER=ltk-pe$$ # namespace end
KEY=sk-vm-kit-$$-$(openssl rand -hex 12)

TEST=vm_kit
. "$HERE/lib_vm.sh"
. "$HERE/lib_broker.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd openssl socat; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
UPNET=$(python3 "$HERE/free_net.py" 203.0.113.228/30 198.51.100.228/30 203.0.113.220/30 198.51.100.220/30)
[ -n "$UPNET" ] || skip_all "no free documentation /30 for the upstream's veth"
UPBASE=${UPNET%/*}
UPADDR=${UPBASE%.*}.$((${UPBASE##*.} + 1))
SRV=${UPBASE%.*}.$((${UPBASE##*.} + 2)) # the namespace's end: the upstream, on the veth's /30

TMP=
BPFFS=
PIDS=()
cleanup() {
	set +e
	vm_sandbox_down
	ip link del "$UP" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	vm_scratch_down
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch kit
vm_tree_image # the guest's agent must be this tree's (it takes the kit's environment)
# --- the upstream: a namespace of its own, on the far end of a veth only the host's side reaches
ip netns add "$NS"
ip -n "$NS" link set lo up
ip link add "$UP" type veth peer name "$PEER" netns "$NS"
ip addr add "$UPADDR/30" dev "$UP"
ip link set "$UP" up
ip -n "$NS" addr add "$SRV/30" dev "$PEER"
ip -n "$NS" link set "$PEER" up
# the pool is picked with the veth in place, so the two never overlap
POOL=$(python3 "$HERE/free_net.py" ${LATCH_KIT_POOLS:-203.0.113.192/26 198.51.100.192/26 203.0.113.64/26 \
	203.0.113.0/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=127.0.0.1:53999
broker_test_pki "$TMP" "IP:$SRV" || fail "could not make the test CA"

# --- a kit whose agent needs node, on an image that has none (the default): refused before anything
# exists, in one line naming the image to build (a sandbox whose agent can't run is never started)
rc=0
refuse=$(L up t-kitnode --kit gemini 2>&1) || rc=$?
check_eq "up --kit gemini on the default image exits 2" "$rc" 2
check_eq "in one line that names the image to build" "$refuse" \
	"latch: up t-kitnode: kit gemini needs node >= 20 and image default has no node: build the Debian image: latch image build --image debian, then up with --image debian"
check "and creates nothing" bash -c "! ip link show lt-t-kitnode >/dev/null 2>&1 && \
	! '$LATCH_BIN' --json ls | jq -e '.sandboxes[] | select(.sandbox == \"t-kitnode\")' >/dev/null"
# control: an image whose manifest carries node 22 passes the check (and fails later: it has no kernel)
mkdir -p "$TMP/nodeimg/debian"
printf 'node 22.23.5 sha512-AAAA npm 10.9.9 sha512-AAAA\n' >"$TMP/nodeimg/debian/manifest.txt"
cp "$CONF" "$TMP/conf.saved"
sed -i "s|^images = .*|images = $TMP/nodeimg|" "$CONF"
out=$(L up t-kitnode --kit gemini --image debian 2>&1) || true
check "control: it refuses an image without node only ($out)" grep -q 'debian' <<<"$out"
check_not "control: an image with node 22 passes it" grep -q 'needs node' <<<"$out"
cp "$TMP/conf.saved" "$CONF"
ip netns exec "$NS" python3 "$HERE/broker_net.py" serve --addr "$SRV" --port 443 --cert "$TMP/srv.pem" \
	--key "$TMP/srv.key" --log "$TMP/up.log" --lifetime 400 >"$TMP/up.out" 2>&1 &
PIDS+=($!)

# --- the kit: one credential, its key from the environment of `latch up`
mkdir -p "$LATCH_ROOT/etc/latch/kits"
cat >"$LATCH_ROOT/etc/latch/kits/vk.yaml" <<EOF
name: vk
description: the kit of vm_kit.sh
credentials:
  - name: echo
    upstream: https://$SRV
    secret: VM_KIT_KEY
    header: Authorization
    scheme: "Bearer "
    methods: [GET]
    paths: [/v1/echo]
    ca_file: $TMP/ca.pem
    env:
      ECHO_URL: "{{url}}"
      ECHO_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LATCH_ROOT/etc/latch/kits/vk.yaml"
vm_latchd
wait_until -t 5 grep -qs '^ready' "$TMP/up.out" || true

if ! VM_KIT_KEY=$KEY L up "$NAME" --kit vk --profile sealed >"$TMP/up1.out" 2>&1; then
	fail "up --kit: $(tail -5 "$TMP/up1.out")"
	lts_done
fi
ok "up $NAME --kit vk"
check "up says what it brokers" grep -q "brokering VM_KIT_KEY -> $SRV" "$TMP/up1.out"
HOST4=$(L --json env "$NAME" | jq -r '.env[] | select(.name == "NO_PROXY") | .value')
PH=$(L --json env "$NAME" | jq -r '.env[] | select(.name == "ECHO_KEY") | .value')
check_eq "latch env gives the URL on the sandbox's host address" \
	"$(L --json env "$NAME" | jq -r '.env[] | select(.name == "ECHO_URL") | .value')" "http://$HOST4:8119/echo"
check "latch env gives a placeholder" grep -qE '^latch-placeholder-[0-9a-f]{32}$' <<<"$PH"

# --- inside the guest: the environment of exec, and of a login shell
check_eq "latch exec runs with the placeholder" "$(L exec "$NAME" -- sh -c 'echo "$ECHO_KEY"')" "$PH"
check_eq "latch exec runs with the URL" "$(L exec "$NAME" -- sh -c 'echo "$ECHO_URL"')" "http://$HOST4:8119/echo"
check_eq "a login shell reads it from /etc/profile.d/latch.sh" \
	"$(L exec "$NAME" -- env -i /bin/sh -lc 'echo "$ECHO_KEY $HTTPS_PROXY"')" "$PH http://$HOST4:8119"

# --- a request from the guest, through the broker
RESP=$TMP/responses
# gget PATH: from the guest, GET $ECHO_URL/PATH with the env's placeholder (busybox nc: the whole
# answer, a refusal's body too; its stdin stays open until the broker closes, as busybox nc stops
# at the end of its input); prints the status line and the body's last line
gget() {
	L exec "$NAME" -- sh -c 'h=${ECHO_URL#http://}; r=/${h#*/}; h=${h%%/*}
		{ printf "GET %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" \
			"$r" "$1" "$h" "$ECHO_KEY"; sleep 8; } | nc -w 10 "${h%:*}" "${h##*:}"' sh "$1" 2>&1 | tee -a "$RESP" |
		tr -d '\r' | sed -n '1p; $p'
}
out=$(gget /v1/echo)
check "the guest's request is answered 200" grep -q '^HTTP/1.1 200' <<<"$out"
check_eq "the guest's request reaches the upstream" "$(tail -1 <<<"$out" | jq -r .path 2>/dev/null)" /v1/echo
check_eq "the upstream got the real key" \
	"$(tail -1 "$TMP/up.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')" "Bearer $KEY"
check "the guest got the upstream's echo of it as stars" grep -q 'Bearer \*\*\*\*\*\*\*\*' <<<"$out"
out=$(L exec "$NAME" -- sh -c "nc -w 3 $SRV 443 </dev/null >/dev/null 2>&1; echo rc=\$?")
check "the guest can't reach the upstream itself (where the broker's port answered it)" grep -q 'rc=[1-9]' <<<"$out"

# --- the key is nowhere in the guest (looked for on the host, so the guest is never told it)
L exec "$NAME" -- sh -c 'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null' \
	>"$TMP/guest-procs" || true
L exec "$NAME" -- sh -c 'find /etc /run /tmp /root /var /workspace -type f 2>/dev/null | while read -r f; do
	echo "== $f"; cat "$f"; done' >"$TMP/guest-files" || true
check "control: the guest's process environments hold the placeholder" grep -qa "$PH" "$TMP/guest-procs"
check "control: the guest's files hold the placeholder (profile.d)" grep -qa "$PH" "$TMP/guest-files"
check_eq "no guest process environment or command line holds the key" "$(grep -ca "$KEY" "$TMP/guest-procs")" 0
check_eq "no file in the guest holds the key" "$(grep -ca "$KEY" "$TMP/guest-files")" 0
check_eq "no response the guest got holds the key" "$(grep -ca "$KEY" "$RESP")" 0
check_eq "no file under latch's root holds the key" "$(grep -rla "$KEY" "$LATCH_ROOT" | wc -l)" 0

# --- down wipes it; up without it refuses naming the variable; up of the running sandbox hands it
check "control: latchd holds the key while the sandbox runs" \
	test "$(python3 "$HERE/memcount.py" "$LATCHD_PID" "$KEY")" -ge 1
L down "$NAME" >/dev/null 2>&1 || fail "down"
ping_broker() { echo '{"op":"ping"}' | socat -T2 - UNIX-CONNECT:"$LATCH_ROOT/run/latch/latchd.sock" |
	jq -c --arg n "$NAME" '.sandboxes[] | select(.name == $n) | .broker | [.stopped, .listening]'; }
check_eq "after down latchd keeps no broker for it" "$(ping_broker)" "[true,false]"
check_eq "after down no copy of the key is left in latchd" "$(python3 "$HERE/memcount.py" "$LATCHD_PID" "$KEY")" 0
env -u VM_KIT_KEY "$LATCH_BIN" up "$NAME" >"$TMP/up2.out" 2>&1 || fail "up again: $(tail -3 "$TMP/up2.out")"
check "up without the key warns, naming the variable" \
	grep -q "warning: VM_KIT_KEY is not set on the host; the agent may fail to authenticate" "$TMP/up2.out"
check_eq "the guest keeps its placeholder across down and up" \
	"$(L --json env "$NAME" | jq -r '.env[] | select(.name == "ECHO_KEY") | .value')" "$PH"
check_eq "and the rebuilt guest has it again" "$(L exec "$NAME" -- sh -c 'echo "$ECHO_KEY"')" "$PH"
out=$(gget /v1/echo)
check "a request then gets a 403" grep -q '^HTTP/1.1 403' <<<"$out"
check "whose line names the variable" grep -q "^latch: .*VM_KIT_KEY" <<<"$out"
VM_KIT_KEY=$KEY L up "$NAME" >"$TMP/up3.out" 2>&1 || fail "up of the running sandbox: $(tail -3 "$TMP/up3.out")"
check "up of the running sandbox hands the key again" grep -q "keys handed to latchd again" "$TMP/up3.out"
out=$(gget /v1/echo)
check_eq "and the guest's request carries the key again" \
	"$(tail -1 "$TMP/up.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')" "Bearer $KEY"

L destroy --purge "$NAME" >/dev/null 2>&1 || fail "destroy"
check "destroy removes the kit state" test ! -e "$LATCH_ROOT/var/lib/latch/policy/$NAME.kit"
lts_done
