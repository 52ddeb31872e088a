#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_verify.sh - `latch verify NAME --offline` cries wolf never, and misses no wolf.
#
# Invariant: verify exits 0 only when every attack of its battery was
# stopped and every control passed, and every FAIL it prints is a real
# leak.  Checked on a sandbox attached to the test topology's guest link:
# verified as attached (exit 0, each attack stopped under its reason); then
# with a deliberately weakened policy (an entry that allows verify's denied
# destination): exit 1, FAIL on exactly that attack, and the guest really
# reaches that address through it (the leak is real); under `open`, the
# policy-bound attacks are reported UNCONTAINED, the rest still stopped;
# with the enforcement gone, verify refuses with exit 3 before attacking.
# Also: without a guest, verify (online) says to use --offline.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
lts_setup

DENIED4=203.0.113.251 # verify's denied destination (loader/verify.c)
PORT=9

# verify_run: `latch --json verify NAME --offline`; its output in j, its exit status in VRC
verify_run() {
	latch --json verify "$LTS_NAME" --offline >"$LTS_TMP/verify.json" 2>/dev/null
	VRC=$?
	j=$(cat "$LTS_TMP/verify.json")
}
# results J: "case=result" for every case, one line
results() { jq -r '[.cases[] | "\(.case)=\(.result)"] | join("; ")' <<<"$1"; }

if ! lts_attach --host-port 8080 >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
check "allow $SRV_A:80/tcp (an allowed destination for the controls)" latch egress "$LTS_NAME" allow "$SRV_A:80/tcp"

out=$(latch verify "$LTS_NAME" 2>&1)
rc=$?
check_eq "online verify without a guest: exit 2, one line naming --offline" \
	"$rc/$(grep -c -- '--offline' <<<"$out")/$(wc -l <<<"$out")" "2/1/1"

verify_run
echo "# as attached: $(results "$j")"
check_eq "as attached: verify exits 0" "$VRC" 0
check_eq "as attached: --json says verified" "$(jq -r .verified <<<"$j")" true
check_cmp "as attached: at least 12 attacks were run" "$(jq '[.cases[] | select(.kind == "attack")] | length' <<<"$j")" -ge 12
check_eq "as attached: every attack was stopped under the reason it names" \
	"$(jq -r '[.cases[] | select(.kind == "attack" and (.result != "ok" or .saw != .want))] | length' <<<"$j")" 0
check_eq "as attached: every control passed" \
	"$(jq -r '[.cases[] | select(.kind == "control" and .result != "ok")] | length' <<<"$j")" 0
check_not "control: the guest does not reach $DENIED4 (nothing answers there anyway)" tcp_ok "$DENIED4" "$PORT"

# A deliberately weakened policy: the denied destination allowed.  Make it answer, to show the leak is real.
in_i ip addr add "$DENIED4/32" dev lo
lts_bg "$LTS_I" "$LTS_TMP/serve-denied.out" "$LTS_PY" "$LTS_NET" serve --tcp "$PORT" --lifetime 120
lts_wait_ready "$LTS_TMP/serve-denied.out" || fail setup "server on $DENIED4 did not start"
check "weaken: allow $DENIED4 (every port)" latch egress "$LTS_NAME" allow "$DENIED4"
verify_run
echo "# weakened: $(results "$j")"
check_eq "weakened: verify exits 1" "$VRC" 1
check_eq "weakened: --json says not verified" "$(jq -r .verified <<<"$j")" false
check_eq "weakened: FAIL on exactly the denied-destination attack" \
	"$(jq -r '[.cases[] | select(.result == "FAIL") | .case] | join(",")' <<<"$j")" "denied IPv4 destination"
check "weakened: and the leak is real: the guest reaches $DENIED4:$PORT" tcp_ok "$DENIED4" "$PORT"
check_eq "weakened: the other attacks are still stopped" \
	"$(jq -r '[.cases[] | select(.kind == "attack" and .case != "denied IPv4 destination" and .result != "ok")] | length' <<<"$j")" 0
check "revoke it" latch egress "$LTS_NAME" revoke "$DENIED4"
verify_run
check_eq "revoked: verify exits 0 again" "$VRC" 0

# open: what only the policy stops is uncontained, the rest is still stopped
lts_latchd || fail latchd "latchd did not come up: $(tail -2 "$LTS_TMP/latchd.log")"
check "latch egress NAME profile open" latch egress "$LTS_NAME" profile open
verify_run
echo "# open: $(results "$j")"
check_eq "open: verify exits 1 and says uncontained" "$VRC/$(jq -r .uncontained <<<"$j")" "1/true"
check_eq "open: the denied destinations are UNCONTAINED, not FAIL" \
	"$(jq -r '[.cases[] | select(.result == "UNCONTAINED") | .case] | sort | join(",")' <<<"$j")" \
	"an allowed address on another port,denied IPv4 destination,denied IPv6 destination"
check_eq "open: nothing is reported as a leak" "$(jq -r '[.cases[] | select(.result == "FAIL")] | length' <<<"$j")" 0
check_eq "open: spoofing, tags, fragments and the host port are still stopped" \
	"$(jq -r '[.cases[] | select(.kind == "attack" and .result == "ok")] | length' <<<"$j")" \
	"$(jq -r '[.cases[] | select(.kind == "attack")] | length - 3' <<<"$j")"

# Enforcement gone: nothing to attack, and no verdict pretends otherwise.
latch status "$LTS_NAME" >/dev/null 2>&1
ip netns exec "$LTS_H" "$LTS_TOP/build/selftests/tcx_tool" detach-link \
	"$(status_json | jq -r '.sandboxes[0].hooks["from-guest"].link_id')" 2>/dev/null ||
	ip netns exec "$LTS_H" tc qdisc del dev hg0 clsact
out=$(latch verify "$LTS_NAME" --offline 2>&1)
rc=$?
check_eq "enforcement removed: verify exits 3 with one line saying NOT ENFORCED" \
	"$rc/$(grep -c 'NOT ENFORCED' <<<"$out")/$(wc -l <<<"$out")" "3/1/1"

lts_done
