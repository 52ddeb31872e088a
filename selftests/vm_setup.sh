#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_setup.sh - a kit's setup installed into a real guest (TCG here):
# `latch kit NAME setup` fetches every installer from a fake npm registry
# over TLS on the host, verifies each against its sha512 pin, and only then
# streams each tarball into the guest over the agent's stdin.
#
# Invariant defended (docs/INVARIANTS.md): nothing runs in the guest before
# every installer of the kit verified.  The attack: a kit whose first
# package is good and whose second is served with other bytes than its pin;
# setup is refused in one line naming the second, and the guest has nothing
# of the first either (no /opt/latch/npm, no bin).  The control: the same
# kit without the bad package installs, and its bin runs in the guest.
#
# Test traffic never leaves the machine: the registry is on a documentation
# address in a namespace of this test's own, at the far end of a veth only
# the host's side reaches; the sandbox is sealed.  The EXIT trap destroys
# the sandbox, removes the namespace, veth, processes (by PID) and temp dirs.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-setup
TABLE=31900
NS=lts-npm-$$
UP=ltsn-up$$
PEER=ltsn-pe$$

TEST=vm_setup
. "$HERE/lib_vm.sh"
. "$HERE/lib_broker.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd openssl tar; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done
UPNET=$(python3 "$HERE/free_net.py" 203.0.113.236/30 198.51.100.236/30 203.0.113.212/30 198.51.100.212/30)
[ -n "$UPNET" ] || skip_all "no free documentation /30 for the registry's veth"
UPBASE=${UPNET%/*}
UPADDR=${UPBASE%.*}.$((${UPBASE##*.} + 1))
SRV=${UPBASE%.*}.$((${UPBASE##*.} + 2))

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

vm_scratch setup
vm_tree_image # the guest's agent must be this tree's (it takes stdin)
ip netns add "$NS"
ip -n "$NS" link set lo up
ip link add "$UP" type veth peer name "$PEER" netns "$NS"
ip addr add "$UPADDR/30" dev "$UP"
ip link set "$UP" up
ip -n "$NS" addr add "$SRV/30" dev "$PEER"
ip -n "$NS" link set "$PEER" up
POOL=$(python3 "$HERE/free_net.py" ${LATCH_SETUP_POOLS:-203.0.113.128/26 198.51.100.128/26 203.0.113.64/26})
[ -n "$POOL" ] || skip_all "no free documentation /26 for the pool on this host"
broker_test_pki "$TMP" "IP:$SRV" || fail "could not make the test CA"
vm_root "documentation addresses only, and no uplink" pool=$POOL dns_upstream=127.0.0.1:53999 \
	npm_registry=https://$SRV npm_ca_file=$TMP/ca.pem

# pkg NAME VERSION TEXT: an npm tarball in REG whose bin prints TEXT; its integrity on stdout
REG=$TMP/registry
pkg() {
	local d=$TMP/pkg-$1-$2
	mkdir -p "$d/package/bin" "$REG/$1/-"
	printf '{"name": "%s", "version": "%s", "bin": {"%s": "bin/run.sh"}}\n' "$1" "$2" "$1" >"$d/package/package.json"
	printf '#!/bin/sh\necho "%s"\n' "$3" >"$d/package/bin/run.sh"
	chmod 0755 "$d/package/bin/run.sh"
	tar -C "$d" -czf "$REG/$1/-/$1-$2.tgz" package
	printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$REG/$1/-/$1-$2.tgz" | base64 -w0)"
}
GOOD=$(pkg hello-agent 1.0.0 "hello from the package")
BAD_PIN=$(pkg evil-agent 1.0.0 honest)
pkg evil-agent 1.0.0 "swapped by the registry" >/dev/null
entry() { printf '  - npm: %s\n    version: "1.0.0"\n    integrity: "%s"\n' "$1" "$2"; }
KIT=$LATCH_ROOT/etc/latch/kits/vs.yaml
mkdir -p "${KIT%/*}"
{ printf 'name: vs\ncommand: [hello-agent]\nsetup:\n'; entry hello-agent "$GOOD"; entry evil-agent "$BAD_PIN"; } >"$KIT"
chmod 0644 "$KIT"

ip netns exec "$NS" python3 "$HERE/npm_registry.py" --addr "$SRV" --root "$REG" --cert "$TMP/srv.pem" \
	--key "$TMP/srv.key" --log "$TMP/registry.log" --lifetime 900 >"$TMP/reg.out" 2>&1 &
PIDS+=($!)
wait_until -t 5 grep -qs '^ready' "$TMP/reg.out" || fail "the registry did not start: $(cat "$TMP/reg.out")"
vm_latchd

if ! L up "$NAME" --kit vs --profile sealed >"$TMP/up.out" 2>&1; then
	fail "up --kit vs: $(tail -5 "$TMP/up.out")"
	lts_done
fi
ok "up $NAME --kit vs"
check "control: the guest cannot reach the registry itself" \
	lts_not L exec "$NAME" --timeout 20s -- sh -c "nc -w 3 $SRV 443 </dev/null"

# --- the attack: the second installer's bytes are not its pin
rc=0
L kit "$NAME" setup >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
check_eq "setup with an installer that does not verify fails" "$rc" 1
check_eq "in one line" "$(grep -c '^latch: setup evil-agent@1.0.0: the tarball from' "$TMP/bad.err")" 1
check "naming the expected hash" grep -qF "expected $BAD_PIN, got sha512-" "$TMP/bad.err"
check "the good one was verified first" grep -q "hello-agent@1.0.0 verified" "$TMP/bad.err"
check_eq "nothing of either ran in the guest: no /opt/latch/npm, no bin" \
	"$(L exec "$NAME" -- sh -c 'ls -A /opt/latch/npm /usr/local/bin/hello-agent 2>/dev/null; echo end')" end

# --- the control: the same kit without the bad installer
{ printf 'name: vs\ncommand: [hello-agent]\nsetup:\n'; entry hello-agent "$GOOD"; } >"$KIT"
rc=0
L kit "$NAME" setup >"$TMP/good.out" 2>"$TMP/good.err" || rc=$?
check_eq "setup of verified installers succeeds" "$rc" 0 || cat "$TMP/good.err" >&2
check "it says where the bin went" grep -q "hello-agent@1.0.0 installed: /usr/local/bin/hello-agent" "$TMP/good.err"
check_eq "the package's bin runs in the guest" "$(L exec "$NAME" -- /usr/local/bin/hello-agent)" "hello from the package"
check_eq "unpacked under /opt/latch/npm/NAME@VERSION" \
	"$(L exec "$NAME" -- cat /opt/latch/npm/hello-agent@1.0.0/package.json | jq -r .version)" 1.0.0
check_eq "the registry was asked once for it (the second setup took the cache)" \
	"$(grep -c '^/hello-agent/-/' "$TMP/registry.log")" 1

# --- a verified package whose bin is a link out of it: refused in the guest, nothing chmod-ed through it
d=$TMP/pkg-link-agent-1.0.0
mkdir -p "$d/package/bin" "$REG/link-agent/-"
printf '{"name": "link-agent", "version": "1.0.0", "bin": {"link-agent": "bin/run.sh"}}\n' >"$d/package/package.json"
ln -s /root/latch-target "$d/package/bin/run.sh"
tar -C "$d" -czf "$REG/link-agent/-/link-agent-1.0.0.tgz" package
LINK=$(printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$REG/link-agent/-/link-agent-1.0.0.tgz" | base64 -w0)")
L exec "$NAME" -- sh -c 'echo private >/root/latch-target && chmod 0600 /root/latch-target' ||
	fail "could not make the guest's file"
{ printf 'name: vs\ncommand: [hello-agent]\nsetup:\n'; entry link-agent "$LINK"; } >"$KIT"
rc=0
L kit "$NAME" setup >"$TMP/link.out" 2>"$TMP/link.err" || rc=$?
check_eq "a bin that is a link out of its package is refused" "$rc" 1
check "in the guest's words" grep -q "installing into $NAME's guest failed (exit 1): latch: bin bin/run.sh leaves the package" \
	"$TMP/link.err"
check_eq "the link's target kept its mode" "$(L exec "$NAME" -- stat -c %a /root/latch-target)" 600
check_eq "and no command was linked for it" "$(L exec "$NAME" -- sh -c 'ls /usr/local/bin/link-agent 2>/dev/null; echo end')" end

L destroy --purge "$NAME" >/dev/null 2>&1 || fail "destroy"
lts_done
