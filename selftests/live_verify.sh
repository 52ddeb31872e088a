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
#
# The name rows (latchd's resolver test-runs its own decisions): without
# latchd they are "not tried" and decide nothing, and so is the allowed
# name before any profile (the unlisted one is refused); with a profile,
# a made-up unlisted name is refused (not-allowed) beside an allowed one,
# and every rebinding answer (private, loopback, metadata, benchmark, 6to4,
# ULA, the host's own) is refused beside a public one, and nothing is
# learned, asked upstream, cached or audited for them (a real query beside
# moves those counts); a weakened profile (a CIDR entry that exempts
# 10.0.0.0/8 from the rebinding filter) gives exit 1 with FAIL on exactly
# the 10.0.0.5 row, and the leak is real: the guest gets 10.0.0.5 for
# rebind.example through its resolver; under `open` the unlisted name is
# UNCONTAINED.  The upstream is dnsmasq in I on a documentation address.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
command -v dnsmasq >/dev/null || lts_skip_all "needs dnsmasq"
command -v kdig >/dev/null || lts_skip_all "needs kdig (knot-dnsutils)"
command -v socat >/dev/null || lts_skip_all "needs socat"
lts_setup

DENIED4=203.0.113.251 # verify's denied destination (loader/verify.c)
PORT=9
ROOT=$LTS_TMP/root

# the upstream: dnsmasq in I, with an allowed name and one that rebinds to a private address; its answers
# carry an hour's TTL, as real names' do (dnsmasq's default for them is 0, which latchd clamps to
# dns_ttl_min, 30 s: the profile's names were then asked again upstream every 30 s, and once during the
# check below that verify asks nothing upstream)
lts_bg "$LTS_I" "$LTS_TMP/dnsmasq.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --pid-file="$LTS_TMP/dnsmasq.pid" --local-ttl=3600 \
	--host-record="ok.example,$SRV_A" --host-record="rebind.example,10.0.0.5"
in_h ip route add 203.0.113.0/24 via 198.51.100.254 dev hi0
mkdir -p "$ROOT/etc/latch/profiles"
printf 'dns_upstream = %s\n' "$SRV_DNS" >"$ROOT/etc/latch/latch.conf"
printf 'ok.example:80\nrebind.example:80\n' >"$ROOT/etc/latch/profiles/names.txt"
# weakened: a CIDR entry exempts 10.0.0.0/8 from the rebinding filter on its port
printf 'ok.example:80\nrebind.example:80\n10.0.0.0/8:80\n' >"$ROOT/etc/latch/profiles/weak.txt"
chmod 0644 "$ROOT"/etc/latch/latch.conf "$ROOT"/etc/latch/profiles/*.txt

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
	"$(jq -r '[.cases[] | select(.via == "frame" and .kind == "attack" and (.result != "ok" or .saw != .want))] | length' <<<"$j")" 0
check_eq "as attached: every control passed" \
	"$(jq -r '[.cases[] | select(.via == "frame" and .kind == "control" and .result != "ok")] | length' <<<"$j")" 0
check_eq "without latchd: every name row is not tried, saying latchd is not running" \
	"$(jq -r '[.cases[] | select(.via == "resolver") | "\(.result)/\(.saw)"] | unique | join(",")' <<<"$j")" \
	"not-tried/latchd is not running"
check_cmp "  and there are name rows" "$(jq '.not_tried' <<<"$j")" -ge 3

# latchd and a profile with names: the name rows are tried, through latchd's resolver
lts_latchd || fail latchd "latchd did not come up: $(tail -2 "$LTS_TMP/latchd.log")"
# before any profile the resolver answers no name: nothing to try beside the unlisted one, which is refused
verify_run
check_eq "no profile yet: verify exits 0" "$VRC" 0
name_row() { jq -r --arg c "$1" '.cases[] | select(.case == $c) | "\(.kind)/\(.result)/\(.saw)"' <<<"$j"; }
check_eq "no profile yet: no allowed name to try, and no rebinding answer" \
	"$(name_row "allowed name via the resolver")|$(name_row "rebinding answers")" \
	"control/not-tried/the policy allows no name (profile none): every query is REFUSED|attack/not-tried/no name allowed: every answer is REFUSED before any address"
check "no profile yet: the unlisted name is refused as not-allowed" \
	grep -q '^attack/ok/not-allowed for latch-verify-' <<<"$(name_row "unlisted name via the resolver")"
check "latch egress NAME profile names" latch egress "$LTS_NAME" profile names
check "allow $SRV_A:80/tcp again (the controls' destination)" latch egress "$LTS_NAME" allow "$SRV_A:80/tcp"
ping_learned() { socat -T2 - UNIX-CONNECT:"$ROOT/run/latch/latchd.sock" <<<'{"op":"ping"}' | jq '.sandboxes[0].learned'; }
learned_before=$(ping_learned)
ping_resolver() { socat -T2 - UNIX-CONNECT:"$ROOT/run/latch/latchd.sock" <<<'{"op":"ping"}' | jq -c '.sandboxes[0].resolver'; }
resolver_before=$(ping_resolver)
dns_audited() { latch --json audit "$LTS_NAME" --kind dns 2>/dev/null | jq '.entries | length'; }
audit_before=$(dns_audited)
verify_run
echo "# names: $(results "$j")"
check_eq "names: verify exits 0" "$VRC" 0
check_eq "names: control: an allowed name passes latchd's name check" \
	"$(name_row "allowed name via the resolver")" "control/ok/ok.example allowed (test-run in latchd)"
check "names: a made-up unlisted name is refused as not-allowed" \
	grep -Eq '^attack/ok/not-allowed for latch-verify-[0-9a-f]{12}\.invalid \(test-run in latchd\)$' \
	<<<"$(name_row "unlisted name via the resolver")"
check_eq "names: control: a public answer for ok.example is answered, v4 and v6" \
	"$(name_row "public answer 203.0.113.251")|$(name_row "public answer 2001:db8:ffff::251")" \
	"control/ok/answered for ok.example (test-run in latchd)|control/ok/answered for ok.example (test-run in latchd)"
# 127.0.0.1 is the host's own (lo) before it is loopback: the resolver checks the host's addresses first
for aw in 10.0.0.5=rebinding 169.254.169.254=rebinding 198.18.0.1=rebinding 2002:a00:5::1=rebinding \
	fd00::5=rebinding 127.0.0.1=host-address "$HOST4=host-address" "$HOST6=host-address"; do
	check_eq "names: a rebinding answer ${aw%=*} is refused as ${aw#*=}" \
		"$(name_row "rebinding answer ${aw%=*}")" "attack/ok/${aw#*=} for ok.example (test-run in latchd)"
done
check_eq "names: nothing was learned from the test-run's answers" "$(ping_learned)" "$learned_before"
check_eq "names: the resolver asked nothing upstream, answered nothing, cached nothing" "$(ping_resolver)" "$resolver_before"
check_eq "names: and audited nothing (no dns row)" "$(dns_audited)" "$audit_before"
in_g kdig @"$HOST4" latch-verify-control.invalid A +retry=0 +timeout=2 >/dev/null 2>&1
check_eq "control: the guest's own query for such a name is counted and audited" \
	"$(jq '.refused' <<<"$(ping_resolver)")/$(dns_audited)" \
	"$(($(jq '.refused' <<<"$resolver_before") + 1))/$((audit_before + 1))"
check_not "names: no rule for the public test-run answer $DENIED4 is in the policy" \
	grep -q "$DENIED4" <<<"$(latch egress "$LTS_NAME" show 2>&1)"
check_eq "names: every name row was tried" "$(jq '.not_tried' <<<"$j")" 0

# a weakened profile: 10.0.0.0/8 exempt from the rebinding filter (on port 80)
check "latch egress NAME profile weak" latch egress "$LTS_NAME" profile weak
check "allow $SRV_A:80/tcp again" latch egress "$LTS_NAME" allow "$SRV_A:80/tcp"
verify_run
echo "# weak: $(results "$j")"
check_eq "weak: verify exits 1" "$VRC" 1
check_eq "weak: FAIL on exactly the 10.0.0.5 rebinding row" \
	"$(jq -r '[.cases[] | select(.result == "FAIL") | .case] | join(",")' <<<"$j")" "rebinding answer 10.0.0.5"
check_eq "weak: every other row is as it must be" \
	"$(jq -r '[.cases[] | select(.result != "ok" and .case != "rebinding answer 10.0.0.5")] | length' <<<"$j")" 0
check "weak: and the leak is real: the guest gets 10.0.0.5 for rebind.example through its resolver" \
	grep -qx "10.0.0.5" <<<"$(in_g kdig @"$HOST4" rebind.example A +retry=0 +timeout=2 +short 2>&1)"
check "names again" latch egress "$LTS_NAME" profile names
check "allow $SRV_A:80/tcp again" latch egress "$LTS_NAME" allow "$SRV_A:80/tcp"
check_eq "control: under names the guest's query for rebind.example is REFUSED" \
	"$(in_g kdig @"$HOST4" rebind.example A +retry=0 +timeout=2 +noall +header 2>&1 | sed -n 's/.*status: \([A-Z]*\).*/\1/p')" REFUSED
verify_run
check_eq "names again: verify exits 0" "$VRC" 0
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
check "latch egress NAME profile open" latch egress "$LTS_NAME" profile open
verify_run
echo "# open: $(results "$j")"
check_eq "open: verify exits 1 and says uncontained" "$VRC/$(jq -r .uncontained <<<"$j")" "1/true"
check_eq "open: the denied destinations are UNCONTAINED, not FAIL" \
	"$(jq -r '[.cases[] | select(.result == "UNCONTAINED") | .case] | sort | join(",")' <<<"$j")" \
	"an allowed address on another port,denied IPv4 destination,denied IPv6 destination,unlisted name via the resolver"
check_eq "open: nothing is reported as a leak" "$(jq -r '[.cases[] | select(.result == "FAIL")] | length' <<<"$j")" 0
check_eq "open: spoofing, tags, fragments, the host port and rebinding answers are still stopped" \
	"$(jq -r '[.cases[] | select(.kind == "attack" and .result == "ok")] | length' <<<"$j")" \
	"$(jq -r '[.cases[] | select(.kind == "attack")] | length - 4' <<<"$j")"

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
