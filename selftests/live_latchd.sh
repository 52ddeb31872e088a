#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_latchd.sh - named policy through latchd, attacked from a guest netns.
#
# Invariants defended (docs/INVARIANTS.md):
#   - the guest's only resolver answers only names its profile allows; any
#     other query is REFUSED and never leaves the host (the upstream's query
#     log proves it), even as a burst of unique subdomains (a DNS tunnel);
#   - an allowed name is answered through its CDN's CNAME chain, its final
#     address is learned under the allowed name's ports only, and the
#     chain's names stay unaskable;
#   - the resolver answers its guest only: the host's own users get no
#     answer and write no audit row; a TCP connection that pipelines past
#     its limit is cut and audited;
#   - a public name may not answer with a private or metadata address;
#   - an answer becomes a learned entry whose TTL the kernel enforces: new
#     flows need a fresh answer, an established flow keeps working;
#   - a profile switch is one swap: under continuous traffic nothing to a
#     destination in both profiles is lost, and nothing to a removed one
#     passes after the command returns;
#   - hand-made changes, switches and learned writes take the policy lock,
#     so none of them undoes another;
#   - enforcement does not depend on latchd: SIGKILL leaves the boundary,
#     and a restarted latchd picks up the stored profile;
#   - SIGHUP swaps in a valid configuration and refuses an invalid one whole;
#   - kernel denies reach the audit log, and `audit verify` catches an edit.
#
# Topology: selftests/lib.sh (G guest, H host with latch and latchd, I the
# fake internet), plus dnsmasq in I on 203.0.113.53 as the upstream, with a
# query log.  Every name and address is a documentation one.
set -u
. "$(dirname "$0")/lib.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}

command -v dnsmasq >/dev/null || lts_skip_all "needs dnsmasq"
command -v kdig >/dev/null || lts_skip_all "needs kdig (knot-dnsutils)"
command -v sqlite3 >/dev/null || lts_skip_all "needs sqlite3"
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
lts_setup

ROOT=$LTS_TMP/root
DNSLOG=$LTS_TMP/dnsmasq.log
LATCHD_PID=
WILD=203.0.113.30  # *.wild.example
BOTH=203.0.113.40  # both.example: in p1 and p2
CDN=203.0.113.42   # edge.cdn.example.net, the end of www.site.example's chain
TTL=2              # dnsmasq's TTL; latch.conf clamps learned entries to 1..3 s

# --- the upstream: dnsmasq in I, authoritative for the test names, logging every query
in_i ip addr add "$WILD/32" dev lo
in_i ip addr add "$BOTH/32" dev lo
in_i ip addr add "$CDN/32" dev lo
lts_bg "$LTS_I" "$LTS_TMP/dnsmasq.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --log-queries --log-facility="$DNSLOG" \
	--local-ttl="$TTL" --pid-file="$LTS_TMP/dnsmasq.pid" \
	--host-record="ok.example,$SRV_A,$SRV6_A" --host-record="both.example,$BOTH" \
	--host-record="other.example,$SRV_B" --host-record="rebind.example,10.0.0.5" \
	--host-record="meta.example,169.254.169.254" --address="/wild.example/$WILD" \
	--host-record="overlay.example,$SRV_C" --host-record="lan.example,10.9.0.7" \
	--address=/exfil.example/203.0.113.99 --cname=alias.example,ok.example --cname=away.example,exfil.example \
	--cname=www.site.example,www.site.example.global.example.net \
	--cname=www.site.example.global.example.net,edge.cdn.example.net --host-record="edge.cdn.example.net,$CDN"
# H (where latchd runs) reaches the upstream through its own main table
in_h ip route add 203.0.113.0/24 via 198.51.100.254 dev hi0

# --- configuration under LATCH_ROOT: latch.conf, profiles (root-owned, 0644)
mkdir -p "$ROOT/etc/latch/profiles"
cat >"$ROOT/etc/latch/latch.conf" <<EOF
dns_upstream = $SRV_DNS
dns_ttl_min = 1
dns_ttl_max = 3
EOF
cat >"$ROOT/etc/latch/profiles/p1.txt" <<'EOF'
# the test's first profile
ok.example:443,9000
both.example:9000,5001
*.wild.example:443,9000
alias.example:443
away.example:443
*.site.example:443
rebind.example:443
meta.example:443
198.51.100.10/32:443
10.9.0.0/24:443
lan.example:8080
EOF
cat >"$ROOT/etc/latch/profiles/p2.txt" <<'EOF'
both.example:9000,5001
other.example:443
EOF
cat >"$ROOT/etc/latch/allowlist.txt" <<'EOF'
# the user's overlay, over whichever profile is active
overlay.example:7000
EOF
cat >"$ROOT/etc/latch/profiles/loop-a.txt" <<'EOF'
# extends: loop-b
EOF
cat >"$ROOT/etc/latch/profiles/loop-b.txt" <<'EOF'
# extends: loop-a
EOF
chmod 0644 "$ROOT"/etc/latch/latch.conf "$ROOT"/etc/latch/allowlist.txt "$ROOT"/etc/latch/profiles/*.txt

start_latchd() { lts_latchd "$ROOT" "$LTS_TMP/latchd.log"; }

# q NAME [TYPE] [+tcp]: the guest asks its resolver; prints the status word and answers
q() {
	in_g kdig @"$HOST4" "$1" "${2:-A}" ${3:-} +retry=0 +timeout=2 +noall +header +answer 2>&1 |
		sed -n 's/.*status: \([A-Z]*\).*/\1/p; /\sIN\s/p' | awk '{print $NF}' | tr '\n' ' '
}
upstream_saw() { grep -c "query\[[A-Z]*\] $1 from" "$DNSLOG" 2>/dev/null || true; }

lts_attach --resolver "$HOST4,$HOST6" --dns-rate 2000 --dns-burst 2000 >/dev/null ||
	{ fail attach "latch attach failed"; lts_done; }
start_latchd || { fail latchd-start "latchd did not come up: $(tail -3 "$LTS_TMP/latchd.log")"; lts_done; }

# --- the socket is root-only
mode=$(stat -c %a "$ROOT/run/latch")
check_eq "socket directory is 0700" "$mode" 700
if setpriv --reuid 65534 --regid 65534 --clear-groups socat -T1 - UNIX-CONNECT:"$ROOT/run/latch/latchd.sock" \
	</dev/null >/dev/null 2>&1; then
	fail "a non-root user cannot reach latchd's socket" "connected"
else
	ok "a non-root user cannot reach latchd's socket"
fi

doctor_says() { latch --json doctor | jq -e --arg r "$1" '.checks[] | select(.check == "latchd") | .result == $r' >/dev/null; }
check "doctor sees latchd answering" doctor_says ok

# --- before any profile: the resolver answers nothing
r=$(q ok.example)
check_eq "without a profile the resolver refuses every name" "$r" "REFUSED "

# --- bad input changes nothing
latch egress "$LTS_NAME" profile ../etc >/dev/null 2>&1
check_eq "a profile name with .. is refused (usage)" "$?" 2
latch egress "$LTS_NAME" profile nosuch >/dev/null 2>&1
check_eq "an unknown profile is refused (usage)" "$?" 2
out=$(latch egress "$LTS_NAME" profile loop-a 2>&1)
check "an extends cycle is refused, naming it" grep -q "loop" <<<"$out"
printf 'ok.example:443\nthis is not an entry\n' >"$ROOT/etc/latch/profiles/bad.txt"
chmod 0644 "$ROOT/etc/latch/profiles/bad.txt"
out=$(latch egress "$LTS_NAME" profile bad 2>&1)
check "a bad line is refused as file:line" grep -q "bad.txt:2:" <<<"$out"
chmod 0666 "$ROOT/etc/latch/profiles/bad.txt"
out=$(latch egress "$LTS_NAME" profile bad 2>&1)
check "a group/world-writable profile is refused" grep -qi "writable" <<<"$out"
check_not "nothing was applied by the refusals" test -e "$ROOT/var/lib/latch/policy/$LTS_NAME.profile"

# --- p1
out=$(latch egress "$LTS_NAME" profile p1 2>&1)
check "switch to p1" grep -q "profile p1 live" <<<"$out"
marks_active() { latch egress "$LTS_NAME" profile | grep -q "^\* $1 "; }
check "the profile list marks p1 active" marks_active p1
applied() { latch --json status "$LTS_NAME" | jq -e --arg p "$1" '.sandboxes[0].profile_applied == $p' >/dev/null; }
check "status reports p1 as applied, as latchd says" applied p1
check "a host name of the profile was resolved by the host" tls_ok "$SRV_A" 443 ok.example
check "a CIDR entry of the profile passes" tcp_ok "$SRV_C" 443
check_not "an address of no entry stays closed" tcp_ok "$SRV_B" 443

r=$(q ok.example)
check "an allowed name resolves" grep -q "NOERROR $SRV_A" <<<"$r"
r=$(q ok.example AAAA)
check "its AAAA resolves too" grep -q "NOERROR $SRV6_A" <<<"$r"
r=$(q ok.example A +tcp)
check "the resolver answers over TCP" grep -q "NOERROR $SRV_A" <<<"$r"
r=$(q alias.example)
check "a CNAME chain inside the allowed set is followed" grep -q "NOERROR.*$SRV_A" <<<"$r"
r=$(q away.example)
check "an allowed name whose CNAME chain leaves the allowed set is answered with it" grep -q "^NOERROR exfil.example. " <<<"$r"

# CDNs: the chain's end is learned under the allowed name's ports, its names stay unaskable
check_not "the CDN's address is closed before any answer" tcp_ok "$CDN" 443
r=$(q www.site.example)
check_eq "www.site.example (under *.site.example:443) is answered through its 2-link chain" "$r" \
	"NOERROR www.site.example.global.example.net. edge.cdn.example.net. $CDN "
check "its answer opened the CDN's address on the name's port (443)" tls_ok "$CDN" 443 www.site.example
check_not "but not on any other port (8080)" tcp_ok "$CDN" 8080
r=$(q edge.cdn.example.net)
check_eq "the chain's end, asked by itself, is REFUSED" "$r" "REFUSED "

# wildcard: learned on answer, not before
check_not "a wildcard's address is closed before any answer" tcp_ok "$WILD" 443
r=$(q x1.wild.example)
check "a name under the wildcard resolves" grep -q "NOERROR $WILD" <<<"$r"
check "its answer opened the address (learned entry)" tls_ok "$WILD" 443 x1.wild.example
r=$(q wild.example)
check_eq "the wildcard's apex is not allowed" "$r" "REFUSED "

# --- the resolver answers its guest only (the host's users write nothing in its audit log)
r=$(in_h kdig @"$HOST4" hostask.example A +retry=0 +timeout=1 2>&1 | grep -c 'status:')
check_eq "a query from the host itself gets no answer" "$r" 0
r=$(q guestask.example)
check_eq "control: the guest's query for an unlisted name is REFUSED" "$r" "REFUSED "
audited() { latch --json audit "$LTS_NAME" --kind dns 2>/dev/null | jq --arg n "$1" '[.entries[] | select(.fields.name == $n)] | length'; }
# the host's query went first: once the guest's is audited, a row of the host's would be too
counter_guestask() { audited guestask.example; }
wait_counter -t 2 guestask -ge 1
check_eq "the host's query left no audit row" "$(audited hostask.example)" 0
check_eq "control: the guest's refusal did" "$(audited guestask.example)" 1

# --- a TCP connection pays per query: pipelined past its limit it is cut, and audited
out=$(in_g "$LTS_PY" - "$HOST4" <<'EOF'
import socket, struct, sys
def q(i):
    m = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"\x02ok\x07example\x00\x00\x01\x00\x01"
    return struct.pack(">H", len(m)) + m
c = socket.create_connection((sys.argv[1], 53), timeout=3)
c.sendall(b"".join(q(i + 1) for i in range(300)))
got, buf = 0, b""
try:
    while True:
        d = c.recv(65536)
        if not d:
            break
        buf += d
        while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(">H", buf[:2])[0]:
            buf = buf[2 + struct.unpack(">H", buf[:2])[0]:]
            got += 1
except OSError:
    pass
print(got)
EOF
)
check_eq "300 queries pipelined on one TCP connection: the first 64 are answered, then it is cut" "$out" 64
counter_tcp_cuts() { latch --json audit "$LTS_NAME" --kind dns 2>/dev/null | jq '[.entries[] | select(.reason == "latchd.dns.tcp-queries")] | length'; }
wait_counter -t 2 tcp_cuts -ge 1
n=$(latch --json audit "$LTS_NAME" --kind dns 2>/dev/null | jq '[.entries[] | select(.reason == "latchd.dns.tcp-queries")] | length')
check_eq "the cut is in the audit log" "$n" 1
r=$(q ok.example A +tcp)
check "control: a new TCP connection is answered" grep -q "NOERROR $SRV_A" <<<"$r"

# refusals never leave the host
before=$(upstream_saw ok.example)
r=$(q exfil.example)
check_eq "an unlisted name is REFUSED" "$r" "REFUSED "
check_eq "the unlisted query never reached the upstream" "$(upstream_saw exfil.example)" 0
check "control: allowed queries do reach the upstream" test "$before" -gt 0
r=$(q ok.example ANY)
check_eq "ANY is refused" "$r" "REFUSED "
r=$(q ok.example TXT)
check_eq "TXT is refused" "$r" "REFUSED "
out=$(in_g "$LTS_PY" "$LTS_NET" dnsburst "$HOST4" exfil.example --count 200 --wait 5)
check_eq "a 200-query tunnel burst is answered REFUSED, every query" "$out" "rcode5=200 unanswered=0"
check_eq "the tunnel burst leaked zero queries upstream" "$(grep -c 'query\[[A-Z]*\] [^ ]*exfil\.example from' "$DNSLOG")" 0

# rebinding
r=$(q rebind.example)
check_eq "a public name answering 10.0.0.5 is refused" "$r" "REFUSED "
r=$(q meta.example)
check_eq "a public name answering the metadata address is refused" "$r" "REFUSED "
# Invariant: a CIDR entry exempts its range from the rebinding filter on its own ports only:
# lan.example:8080 answers 10.9.0.7, inside 10.9.0.0/24:443, and is never installed on 8080.
r=$(q lan.example)
check_eq "a name answering inside a CIDR entry of the profile is answered" "$r" "NOERROR 10.9.0.7 "
shown=$(latch --json egress "$LTS_NAME" show | jq -r '.entries[].entry')
check "control: the CIDR entry is in the kernel on its port ($(grep -c . <<<"$shown") entries)" \
	grep -qx "10.9.0.0/24:443" <<<"$shown"
check_eq "and nothing opens 10.9.0.7 on the name's port 8080" "$(grep -c '^10\.9\.0\.7' <<<"$shown")" 0

# other resolvers stay unreachable, latchd or not
check_not "DNS to the upstream directly is dropped by the kernel" dns_ok "$SRV_DNS"

# --- learned entries expire in the kernel; established flows outlive them
lts_bg "$LTS_I" "$LTS_TMP/serve9000.out" "$LTS_PY" "$LTS_NET" serve --tcp 9000 --udp 5001 --addr "$BOTH" \
	--log "$LTS_TMP/serve9000.log" --lifetime 120
lts_wait_ready "$LTS_TMP/serve9000.out"
q x2.wild.example >/dev/null
in_g "$LTS_PY" "$LTS_NET" stream "$WILD" 9000 --duration 6 --interval 0.2 &
stream_pid=$!
LTS_PIDS+=("$stream_pid")
sleep 5 # TTL 2 s (clamped 1..3): the entry is dead now
t_dead=$(awk '{print $1}' /proc/uptime)
check_not "a new flow after the learned entry's TTL is dropped" tcp_ok "$WILD" 9000
wait "$stream_pid"
late=$(awk -v w="$WILD" '$2 == w { n++ } END { print n + 0 }' "$LTS_TMP/serve9000.log")
check "the flow opened within the TTL kept working after it (>= 25 of 30 lines)" test "$late" -ge 25
r=$(q x3.wild.example)
check "a fresh answer opens it again" tcp_ok "$WILD" 9000

# --- kernel deny events reach the audit log through latchd
tcp_ok 203.0.113.77 443 >/dev/null 2>&1
counter_kernel_denies() { latch --json audit "$LTS_NAME" --kind kernel 2>/dev/null | jq '[.entries[] | select(.reason == "drop_policy")] | length'; }
wait_counter -t 3 kernel_denies -gt 0
n=$(latch --json audit "$LTS_NAME" --kind kernel 2>/dev/null | jq '[.entries[] | select(.reason == "drop_policy")] | length')
check "a kernel deny was written to the audit log" test "${n:-0}" -gt 0
n=$(latch --json audit "$LTS_NAME" --kind dns 2>/dev/null | jq '[.entries[] | select(.reason == "latchd.dns.not-allowed")] | length')
check "resolver refusals are in the audit log (rate-limited)" test "${n:-0}" -gt 0


# --- a hand-made change never interleaves with a switch: both take the policy lock
LOCK=$ROOT/run/latch/$LTS_NAME.policy.lock
# waits_for_lock CMD...: hold the lock for 1 s (marking its release), run CMD meanwhile;
# true when CMD returned only after the release
waits_for_lock() {
	local holder waited=1
	rm -f "$LTS_TMP/released"
	flock "$LOCK" sh -c "sleep 1; touch '$LTS_TMP/released'" &
	holder=$!
	LTS_PIDS+=("$holder")
	wait_until -t 1 -i 0.02 lts_not flock -n "$LOCK" true # until the holder has it
	"$@" >/dev/null
	[ -e "$LTS_TMP/released" ] || waited=0
	wait "$holder"
	[ "$waited" = 1 ]
}
check "egress allow waits while the policy lock is held" waits_for_lock latch egress "$LTS_NAME" allow 203.0.113.78:443
check "a switch waits while the policy lock is held" waits_for_lock latch egress "$LTS_NAME" profile p1
# a learned answer's write reads, merges and writes back the address's rules:
# unlocked, a revoke landing in between would be undone
check "a learned answer waits for the lock before its write" waits_for_lock q lk1.wild.example
check "... and its entry is live once written" tls_ok "$WILD" 443 lk1.wild.example
latch egress "$LTS_NAME" revoke 203.0.113.78:443 >/dev/null

# --- what a switch must keep: a grant, a hand-added entry, the overlay
r=$(q overlay.example)
check "the overlay's name resolves under p1" grep -q "NOERROR $SRV_C" <<<"$r"
latch egress "$LTS_NAME" allow "$SRV_B:7000" --for 300 >/dev/null
latch egress "$LTS_NAME" allow "$SRV_C:8080" >/dev/null
check "control: the grant passes before the switch" tcp_ok "$SRV_B" 7000
check "control: the hand-added entry passes before the switch" tcp_ok "$SRV_C" 8080

# --- the switch under continuous traffic
: >"$LTS_TMP/serve9000.log"
q both.example >/dev/null
in_g "$LTS_PY" "$LTS_NET" udpstream "$BOTH" 5001 --duration 4 --interval 0.005 >"$LTS_TMP/udpstream.out" &
u_pid=$!
in_g "$LTS_PY" "$LTS_NET" stream "$SRV_A" 9000 --duration 4 --interval 0.01 &
a_pid=$!
LTS_PIDS+=("$u_pid" "$a_pid")
# the stream's send times are CLOCK_BOOTTIME to the microsecond; /proc/uptime is truncated to 10 ms,
# which would count a line sent up to 10 ms before the command returned as sent after it: take
# $EPOCHREALTIME (microseconds) the moment latch returns, less realtime's offset from boottime
boot_off=$("$LTS_PY" -c 'import time; print("%.6f" % (time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)))')
sleep 1.5 # the point: the streams flow under p1 before the switch
latch egress "$LTS_NAME" profile p2 >/dev/null 2>&1
rc=$?
t_returned=$EPOCHREALTIME
t_switch=$(awk -v r="$t_returned" -v o="$boot_off" 'BEGIN { printf("%.6f", r - o) }')
check_eq "switch to p2 under traffic" "$rc" 0
wait "$u_pid" "$a_pid"
sent=$(cat "$LTS_TMP/udpstream.out")
got=$(awk '$4 == "udp" { n++ } END { print n + 0 }' "$LTS_TMP/serve9000.log")
check_eq "every datagram to a destination in both profiles arrived ($sent sent)" "$got" "$sent"
after=$(awk -v a="$SRV_A" -v t="$t_switch" '$2 == a && $5 + 0 > t + 0 { n++ } END { print n + 0 }' "$LTS_TMP/serve9000.log")
before_sw=$(awk -v a="$SRV_A" -v t="$t_switch" '$2 == a && $5 + 0 <= t + 0 { n++ } END { print n + 0 }' "$LTS_TMP/serve9000.log")
check "control: the removed destination's stream flowed before the switch" test "$before_sw" -gt 10
echo "# switch returned by $t_switch; lines to $SRV_A sent later that arrived: $(awk -v a="$SRV_A" -v t="$t_switch" '$2 == a && $5 + 0 > t + 0 { printf("%s ", $5) }' "$LTS_TMP/serve9000.log")"
check_eq "nothing sent to the removed destination after the switch returned arrived" "$after" 0
check_not "a new flow to the removed name's address is dropped" tls_ok "$SRV_A" 443 ok.example
r=$(q ok.example)
check_eq "the removed name is now REFUSED" "$r" "REFUSED "
r=$(q other.example)
check "p2's name resolves" grep -q "NOERROR $SRV_B" <<<"$r"
check "p2's host name passes" tls_ok "$SRV_B" 443 other.example
check "the grant survived the switch" tcp_ok "$SRV_B" 7000
check "the hand-added entry survived the switch" tcp_ok "$SRV_C" 8080
check_not "p1's CIDR entry is gone after the switch" tcp_ok "$SRV_C" 443
r=$(q overlay.example)
check "the overlay is layered over p2 too" grep -q "NOERROR $SRV_C" <<<"$r"

# --- SIGHUP: an invalid configuration changes nothing, a valid one is swapped in
printf 'both.example:9000,5001\nother.example:443\n*.wild.example:443\n999.1.1.1/8\n' \
	>"$ROOT/etc/latch/profiles/p2.txt"
kill -HUP "$LATCHD_PID"
wait_until -t 3 grep -q "reload refused.*p2.txt:4" "$LTS_TMP/latchd.log"
check "an invalid profile on SIGHUP is refused and logged" grep -q "reload refused.*p2.txt:4" "$LTS_TMP/latchd.log"
r=$(q x4.wild.example)
check_eq "nothing of the invalid file was applied" "$r" "REFUSED "
# Invariant: `latchd --reload` (latchd.service's ExecReload) fails when latchd keeps its old
# configuration, so `systemctl reload latchd` says so; control: it passes when latchd takes the new one
rc=0
LATCH_ROOT=$ROOT "$LATCHD_BIN" --reload >/dev/null 2>"$LTS_TMP/reload.err" || rc=$?
check_eq "latchd --reload of the invalid profile fails (exit 1)" "$rc" 1
check "  naming the file and line latchd refused" grep -q "^latchd: reload refused, nothing changed: .*p2.txt:4" \
	"$LTS_TMP/reload.err"
printf 'both.example:9000,5001\nother.example:443\n*.wild.example:443\n' >"$ROOT/etc/latch/profiles/p2.txt"
n=$(counter_value "match:reloaded::$LTS_TMP/latchd.log")
kill -HUP "$LATCHD_PID"
wait_counter -t 3 "match:reloaded::$LTS_TMP/latchd.log" -gt "$n"
r=$(q x5.wild.example)
check "a valid profile on SIGHUP is swapped in" grep -q "NOERROR $WILD" <<<"$r"
check_eq "control: latchd --reload of the valid one passes" "$(LATCH_ROOT=$ROOT "$LATCHD_BIN" --reload 2>&1)" \
	"latchd: reloaded"

# --- host names are asked again before their TTL runs out
sleep 4 # past every TTL (<= 3 s)
check "a host name stays open past its TTL while latchd refreshes it" tls_ok "$SRV_B" 443 other.example

# --- SIGKILL: the kernel keeps enforcing; a restart picks up where it was
kill -KILL "$LATCHD_PID"
{ wait "$LATCHD_PID"; } 2>/dev/null # bash reports "Killed" on the shell's stderr: keep it quiet
check_not "after SIGKILL of latchd an unlisted address stays closed" tcp_ok 203.0.113.77 443
check "after SIGKILL of latchd status still verifies the enforcement" latch status "$LTS_NAME"
out=$(latch status "$LTS_NAME" 2>&1)
check "and says the stored profile is not verified without latchd" grep -q "p2 stored; latchd is not running" <<<"$out"
check "doctor warns that latchd is not answering" doctor_says warn
check_not "after SIGKILL DNS to another server is still dropped" dns_ok "$SRV_DNS"
sleep 4 # every TTL (<= 3 s) has run out with nobody to refresh it
check_not "after SIGKILL host-name entries expire in the kernel (fail closed)" tls_ok "$SRV_B" 443 other.example
check "the learned names were kept on disk for the restart" grep -q " x5.wild.example$" "$ROOT/var/lib/latch/policy/$LTS_NAME.learned"
start_latchd || fail latchd-restart "latchd did not come back: $(tail -3 "$LTS_TMP/latchd.log")"
counter_learned() { echo '{"op":"ping"}' | socat -T2 - UNIX-CONNECT:"$ROOT/run/latch/latchd.sock" | jq '.sandboxes[0].learned'; }
wait_counter -t 3 learned -ge 1
learned=$(echo '{"op":"ping"}' | socat -T2 - UNIX-CONNECT:"$ROOT/run/latch/latchd.sock" | jq '.sandboxes[0].learned')
check "restarted latchd knows the names it had learned, before any new query" test "${learned:-0}" -ge 1
r=$(q other.example)
check "restarted latchd serves the stored profile" grep -q "NOERROR $SRV_B" <<<"$r"
check "restarted latchd refreshed the host names" tls_ok "$SRV_B" 443 other.example
r=$(q ok.example)
check_eq "and still refuses what the profile does not allow" "$r" "REFUSED "

# --- the audit chain catches a row edited by hand
check "audit verify passes on the untouched log" latch audit verify
sqlite3 "$ROOT/var/lib/latch/audit.db" "UPDATE entries SET decision = 'allow' WHERE id = (SELECT min(id) FROM entries WHERE kind = 'dns');" 2>"$LTS_TMP/sqlite.err" ||
	fail "edit an audit row" "$(cat "$LTS_TMP/sqlite.err")"
out=$(latch audit verify 2>&1)
rc=$?
check "audit verify fails after a row was edited by hand" test "$rc" -ne 0
check "and names the broken entry" grep -qi "entry\|id" <<<"$out"

kill -TERM "$LATCHD_PID"
wait "$LATCHD_PID" 2>/dev/null
check_eq "latchd shuts down cleanly on SIGTERM" "$?" 0
check_not "and removes its socket" test -e "$ROOT/run/latch/latchd.sock"
lts_done
