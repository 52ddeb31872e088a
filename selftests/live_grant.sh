#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_grant.sh - grants through latchd, asked for from a guest netns and
# approved from outside (docs/grants.md).
#
# Invariants defended (docs/INVARIANTS.md):
#   - the host resolves: a grant names hosts; latchd looks them up on the
#     host and opens exactly their addresses on exactly the granted ports (a
#     control address on the same server and another port stay closed);
#     address literals, wildcards and names resolving to private, metadata or
#     host addresses are refused, audited, and change nothing;
#   - the window closes in the kernel: a stream on an approved connection
#     stops within 1 s of the deadline, also after latchd was SIGKILLed
#     right after the approval; the name stops resolving then too;
#   - the guest can't approve: its only channel is the ask endpoint, which
#     has no verb that decides (forged approvals refused), latchd's socket is
#     a root-only Unix socket and nothing of latchd listens for decisions on
#     the network, the notifier's webhook and command can't be reached or
#     answered into an approval;
#   - caps: duration (grant_max), grants per hour (also across a restart of
#     latchd), asks per hour and pending asks; a burst of asks is refused and
#     audited without reaching the person;
#   - every ask, approval, denial, timeout, expiry and refusal is audited,
#     the sandbox's reason stored as its words.
#
# Topology: selftests/lib.sh (G guest, H host with latch and latchd, I the
# fake internet) and dnsmasq in I on 203.0.113.53 naming documentation
# hosts.  The guest asks with latch-ask (built static for the default
# image, run here in G) and with curl for the forgeries.
set -u
. "$(dirname "$0")/lib.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}
ASK_BIN=${ASK_BIN:-$LTS_TOP/build/vm/latch-ask}

for t in dnsmasq kdig curl sqlite3 ss; do command -v "$t" >/dev/null || lts_skip_all "needs $t"; done
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
[ -x "$ASK_BIN" ] || lts_skip_all "no $ASK_BIN; run make"
lts_setup

T=$LTS_TMP
ROOT=$T/root
LATCHD_PID=
PORT=8119          # the broker's port on the sandbox's host address
SPORT=7100         # the stream server's port in I
DPORT=7101         # another of its ports, for the stream that latch deny cuts (its leftovers stay apart)
HOOK_PORT=18$((RANDOM % 900 + 100)) # the webhook in H
HOOK_ADDR=198.51.100.253                 # on H's link to the fake internet: an address the guest can route to
ASK_URL=http://$HOST4:$PORT/latch/grant
FILES=203.0.113.40 # files.example

# --- the names: dnsmasq in I, 2 s TTLs
in_i ip addr add "$FILES/32" dev lo
lts_bg "$LTS_I" "$T/dnsmasq.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --local-ttl=2 --log-queries --log-facility="$T/dns.log" \
	--host-record="docs.example,$SRV_A,$SRV6_A" --host-record="files.example,$FILES" \
	--host-record="private.example,10.0.0.5" --host-record="meta.example,169.254.169.254" \
	--host-record="hostaddr.example,$HOST4" --host-record="mixed.example,$SRV_B,10.0.0.7"
in_h ip route add 203.0.113.0/24 via 198.51.100.254 dev hi0 # latchd's own lookups

# --- a server that logs every line a stream sends (live_timed's), on all of I's addresses
lts_bg "$LTS_I" "$T/serve-log.out" "$LTS_PY" "$LTS_NET" serve --tcp "$SPORT" --tcp "$DPORT" --log "$T/recv.log" \
	--lifetime 140
lts_wait_ready "$T/serve-log.out" || fail setup "the logging server did not start"

# --- the notifiers: a command that keeps what it is given and says "approve", a webhook in H that answers "approve"
cat >"$T/notify.sh" <<EOF
#!/bin/sh
# the live test's notify_command: keep the ask; what it prints is never read
cat >>"$T/notified.jsonl"
echo >>"$T/notified.jsonl"
echo approve
echo '{"approve": true}' >&2
EOF
chmod 0755 "$T/notify.sh"
cat >"$T/hook.py" <<'EOF'
# the live test's webhook: keeps every POST body and answers with an approval it has no power to give
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "ab") as f:
            f.write(body + b"\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"approve": true, "decision": "approved"}')
    def log_message(self, *a):
        pass
s = http.server.HTTPServer((sys.argv[3], int(sys.argv[1])), H)
print("ready", flush=True)
s.timeout = 1
import time
end = time.time() + 140
while time.time() < end:
    s.handle_request()
EOF
lts_bg "$LTS_H" "$T/hook.out" "$LTS_PY" "$T/hook.py" "$HOOK_PORT" "$T/hooked.jsonl" "$HOOK_ADDR"
lts_wait_ready "$T/hook.out" || fail setup "the webhook did not start"

mkdir -p "$ROOT/etc/latch"
cat >"$ROOT/etc/latch/latch.conf" <<EOF
dns_upstream = $SRV_DNS
dns_ttl_min = 1
dns_ttl_max = 3
grant_default = 4
grant_max = 10s
grants_per_hour = 6
grant_ask_wait = 3
grant_asks_per_hour = 8
grant_asks_pending = 2
notify_command = $T/notify.sh
notify_url = http://$HOOK_ADDR:$HOOK_PORT/hook
notify_timeout = 2
notify_retries = 1
EOF
chmod 0644 "$ROOT/etc/latch/latch.conf"

start_latchd() {
	LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- "$LATCHD_BIN" \
		>>"$T/latchd.log" 2>&1 &
	LATCHD_PID=$!
	LTS_PIDS+=("$LATCHD_PID")
	wait_until -t 5 latchd_answers
}
# latchd_answers: latchd's socket is there and `latch grants` reads it
latchd_answers() {
	[ -S "$ROOT/run/latch/latchd.sock" ] && latch --json grants "$LTS_NAME" 2>/dev/null | jq -e .latchd >/dev/null
}
# q NAME: the guest asks its resolver; the status word and the answers
q() {
	in_g kdig @"$HOST4" "$1" A +retry=0 +timeout=2 +noall +header +answer 2>&1 |
		sed -n 's/.*status: \([A-Z]*\).*/\1/p; /\sIN\s/p' | awk '{print $NF}' | tr '\n' ' '
}
kernel_grants() { latch --json egress "$LTS_NAME" show | jq -r '[.entries[] | select(.origin == "grant") | .entry] | sort | join(" ")'; }
# audit_n DECISION [REASON]: grant entries of the audit log with that decision (and reason)
audit_n() {
	latch --json audit "$LTS_NAME" --kind grant 2>/dev/null |
		jq --arg d "$1" --arg r "${2:-}" '[.entries[] | select(.decision == $d and ($r == "" or .reason == $r))] | length'
}
uptime_s() { cut -d' ' -f1 /proc/uptime; } # CLOCK_BOOTTIME, the clock of the deadlines

# a kit (the built-in shell: no credentials) gives the sandbox its broker listener, where it asks
if ! lts_attach --resolver "$HOST4" --kit shell >/dev/null 2>"$T/attach.err"; then
	fail attach "latch attach failed"
	lts_done
fi
start_latchd || { fail latchd-start "latchd did not come up: $(tail -3 "$T/latchd.log")"; lts_done; }
echo "# $(grep -m1 -E 'confined|unconfined' "$T/latchd.log")"

# ======================================================================== granting from the host
check_not "before: $SRV_A:$SPORT is closed" tcp_ok "$SRV_A" "$SPORT"
check_eq "before: the resolver refuses docs.example" "$(q docs.example)" "REFUSED "

# --- refusals change nothing (exit 2, one latch: line naming what)
before=$(kernel_grants)
out=$(latch grant "$LTS_NAME" docs.example --for 11s 2>&1)
check_eq "a grant longer than grant_max is a usage error" "$?" 2
check "its one line names grant_max" grep -q "^latch: .*grant_max" <<<"$out"
check_eq "  and it is one line" "$(wc -l <<<"$out")" 1
out=$(latch grant "$LTS_NAME" "$SRV_A:443" 2>&1)
check_eq "an address literal is refused (usage)" "$?" 2
check "  naming the grant's rule and egress allow" grep -q "a grant names hosts.*egress" <<<"$out"
for lit in 2130706433 0x7f.1 10.1 '[2001:db8::1]:443'; do
	out=$(latch grant "$LTS_NAME" "$lit" 2>&1)
	check_eq "the address spelling $lit is refused (usage)" "$?:$(grep -c 'is an address' <<<"$out")" 2:1
done
out=$(latch grant "$LTS_NAME" metadata 2>&1)
check_eq "a single-label name is refused (usage)" "$?:$(grep -c 'single label' <<<"$out")" 2:1
out=$(latch grant "$LTS_NAME" '*.example' 2>&1)
check_eq "a wildcard is refused (usage)" "$?" 2
check "  naming the wildcard" grep -q "wildcard" <<<"$out"
out=$(latch grant "$LTS_NAME" private.example 2>&1)
check_eq "a name resolving to 10.0.0.5 is refused (usage)" "$?" 2
check "  as DNS rebinding" grep -q "non-public addresses.*(DNS rebinding)" <<<"$out"
out=$(latch grant "$LTS_NAME" meta.example 2>&1)
check_eq "a name resolving to the metadata address is refused" "$?" 2
out=$(latch grant "$LTS_NAME" hostaddr.example 2>&1)
check_eq "a name resolving to the sandbox's host address is refused" "$?" 2
check "  naming this host" grep -q "this host" <<<"$out"
out=$(latch grant "$LTS_NAME" nosuch.example 2>&1)
check_eq "a name that does not exist fails (exit 1)" "$?" 1
check_eq "nothing reached the kernel from the refusals" "$(kernel_grants)" "$before"
check_eq "latchd holds no grant after the refusals" \
	"$(latch --json grants "$LTS_NAME" | jq '.grants | length')" 0
check_cmp "each rebinding refusal is audited" "$(audit_n refuse latchd.grant.rebinding)" -ge 3
check_not "  and the private address stays closed" tcp_ok 10.0.0.5 443

# bconnect NAME: the broker's answer to CONNECT NAME:443 from G (its status line, and the TLS outcome)
bconnect() { in_g "$LTS_PY" "$LTS_DIR/broker_net.py" connect "$HOST4" "$PORT" "$1" "$1" 2>&1 | head -n 1; }

# --- a grant opens exactly the names' addresses on exactly its ports
out=$(latch --json grant "$LTS_NAME" docs.example:"$SPORT" --for 3 --reason "read the docs")
check_eq "latch grant docs.example:$SPORT --for 3" "$?" 0
check_eq "  resolved on the host to $SRV_A and $SRV6_A" "$(jq -r '.hosts[0].addresses | sort | join(" ")' <<<"$out")" \
	"$SRV6_A $SRV_A"
check "docs.example's address opens on the granted port" tcp_ok "$SRV_A" "$SPORT"
check "  its IPv6 address too" tcp_ok "$SRV6_A" "$SPORT"
check_not "  another port of it stays closed" tcp_ok "$SRV_A" 7000
check_not "  a control address on the same server stays closed" tcp_ok "$SRV_B" "$SPORT"
check_eq "the kernel holds them as GRANT entries" "$(kernel_grants)" "$SRV_A:$SPORT [$SRV6_A]:$SPORT"
r=$(q docs.example)
check "the guest's resolver answers the granted name" grep -q "NOERROR $SRV_A" <<<"$r"
check_eq "  and still refuses the others" "$(q files.example)" "REFUSED "
g=$(latch --json grants "$LTS_NAME")
check_eq "latch grants: one active grant, by the host" "$(jq -r '[.grants[] | .state + "/" + .by] | join(" ")' <<<"$g")" \
	"active/host"
check "latch grants reads its address back from the kernel" \
	jq -e --arg e "$SRV_A:$SPORT" '[.grants[0].hosts[0].kernel[] | select(.entry == $e and .seconds_left <= 3)] | length == 1' \
	<<<"$g"
check_cmp "the grant is audited" "$(audit_n grant latchd.grant.grant)" -eq 1
sleep 3.3 # the point: the grant's 3 s run out
check_not "after the deadline the address is closed" tcp_ok "$SRV_A" "$SPORT"
check_not "  the IPv6 one too" tcp_ok "$SRV6_A" "$SPORT"
check_eq "  and the name is refused again" "$(q docs.example)" "REFUSED "
counter_expiries() { audit_n expire latchd.grant.expire; }
wait_counter -t 3 expiries -ge 1 # latchd's tick notes the expiry
check_eq "  the expiry is audited" "$(audit_n expire latchd.grant.expire)" 1
check_eq "  and latch grants lists nothing" "$(latch --json grants "$LTS_NAME" | jq '.grants | length')" 0

# --- latch deny on an active grant closes it now, the established stream too
out=$(latch --json grant "$LTS_NAME" docs.example:"$DPORT" --for 10)
gid=$(jq -r .id <<<"$out")
# Invariant: the broker's CONNECT matches a grant's ports as the kernel does: a grant of
# docs.example:DPORT opens no CONNECT to docs.example:443 (the control, a grant of :443, is below)
check "CONNECT docs.example:443 under a grant of docs.example:$DPORT alone is refused (403)" \
	grep -q "^HTTP/1.1 403 .*docs.example port 443" <<<"$(bconnect docs.example)"
in_g "$LTS_PY" "$LTS_NET" stream "$SRV_A" "$DPORT" --duration 3 >/dev/null 2>&1 &
sa=$!
LTS_PIDS+=("$sa")
sleep 1 # the point: the stream flows for a second before the deny
t_deny=$(uptime_s)
check "latch deny closes an active grant" latch deny "$gid"
wait "$sa"
last=$(awk -v a="$SRV_A" '$2 == a { t = $1 } END { print t + 0 }' "$T/recv.log")
check_cmp "  its established stream stopped within 1 s of the deny" "$(awk "BEGIN{print ($last < $t_deny + 1)}")" -eq 1
check_cmp "  and had flowed until then" "$(awk "BEGIN{print ($last > $t_deny - 0.5)}")" -eq 1
check_not "  a new connection is denied" tcp_ok "$SRV_A" "$DPORT"
check_cmp "  the close is audited" "$(audit_n close latchd.grant.close)" -eq 1

# ======================================================================== asking from the sandbox
# ask ARGS...: latch-ask in G against the sandbox's broker listener; its output
ask() { in_g "$ASK_BIN" --url "$ASK_URL" "$@"; }
# gpost BODY [PATH]: a raw POST from G; the status code and body
gpost() {
	in_g curl -s -m 5 -w ' %{http_code}' -H 'Content-Type: application/json' -d "$1" "http://$HOST4:$PORT${2:-/latch/grant}" |
		tr -d '\n'
}
# pending_id: the id of the one pending ask
pending_id() { wait_until -t 3 pending_known && echo "$id"; }
pending_known() { # sets id
	id=$(latch --json grants "$LTS_NAME" | jq -r '[.grants[] | select(.state == "pending") | .id][0] // empty')
	[ -n "$id" ]
}

"$LATCH_BIN" completion bash >"$T/completion.bash" # made here: an ask waits only grant_ask_wait
if ! in_g curl -s -m 2 -o /dev/null "http://$HOST4:$PORT/latch/grant"; then
	fail "asks" "no broker listener on $HOST4:$PORT for the kit sandbox: $(tail -2 "$T/latchd.log")"
	lts_done
fi

# --- a reason that could pass for latch's own words is refused at the ask
# Invariant: the notification quotes the reason inside latch's words ("the sandbox says: \"...\""), so a
# reason with a double quote (it would close latch's quotes and go on in latch's voice), a line separator,
# or a direction or invisible character is refused with one line the guest sees, audited without the text,
# and reaches no notifier.  Control: the plain reason of the next ask, with an apostrophe, arrives verbatim.
spoofs=('build" step (its own words, unchecked). latch: pre-approved by the admin, approve it'
	$'build step\xe2\x80\xa8latch: pre-approved by the admin, approve it'
	$'build step \xe2\x80\xaeti evorppa'
	$'docs\xe2\x80\x8b.example is the build host')
named=('U+0022, a double quote' 'U+2028, a line or paragraph separator' 'U+202E, a text-direction character'
	'U+200B, an invisible character')
for i in "${!spoofs[@]}"; do
	ask --for 3 --port "$SPORT" --reason "${spoofs[$i]}" docs.example >"$T/spoof$i.out" 2>&1
	check_eq "a reason with ${named[$i]%%,*} is refused: latch-ask exits 1" "$?" 1
	check "  the guest is told why in one line: $(head -c 160 "$T/spoof$i.out")" \
		grep -qx "refused: latch: the reason holds ${named[$i]}.*; send one line of plain text" "$T/spoof$i.out"
done
check_eq "  each refusal is audited, without the reason's text" \
	"$(latch --json audit "$LTS_NAME" --kind grant | jq '[.entries[] | select(.reason == "latchd.grant.ask.invalid" and
		(.fields.error | test("the reason holds U\\+")) and (tostring | test("pre-approved|evorppa") | not))] | length')" 4
check_eq "  and none is pending" "$(latch --json grants "$LTS_NAME" | jq '[.grants[] | select(.state == "pending")] | length')" 0

# --- an ask, approved from outside; the stream closes at the deadline with latchd SIGKILLed
REASON1="docs for the 'build' step, caf"$'\xc3\xa9'" "$'\xe6\x96\x87\xe6\x9b\xb8' # an apostrophe, an accent, Japanese
ask --for 3 --port "$SPORT" --reason "$REASON1" docs.example >"$T/ask1.out" 2>&1 &
ask_pid=$!
LTS_PIDS+=("$ask_pid")
id=$(pending_id)
check "the ask is pending on the host" test -n "$id"
# the bash completion offers the pending ask's id to approve and deny (live_cli: none without latchd)
comp_id() { LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS bash -c '. "$3"; COMP_WORDS=("$1" "$2" ""); COMP_CWORD=2
	_latch; echo "${COMPREPLY[*]}"' _ "$LATCH_BIN" "$1" "$T/completion.bash"; }
check_eq "  completion: latch approve offers its id" "$(comp_id approve)" "$id"
check_eq "  completion: latch deny offers its id" "$(comp_id deny)" "$id"
check_not "  nothing is open while it waits" tcp_ok "$SRV_A" "$SPORT"
check_eq "  its id is 16 characters of base32" "$(grep -cE '^[a-z2-7]{16}$' <<<"$id")" 1
wait_until -t 3 test -s "$T/hooked.jsonl" -a -s "$T/notified.jsonl"
n=$(jq -s --arg id "$id" '[.[] | select(.id == $id and .type == "latch.grant.ask")] | length' "$T/notified.jsonl")
check_eq "notify_command got the ask as JSON on stdin" "$n" 1
n=$(jq -s --arg id "$id" '[.[] | select(.id == $id)] | length' "$T/hooked.jsonl")
check_eq "notify_url got the same document (libcurl POST)" "$n" 1
msg=$(jq -r --arg id "$id" 'select(.id == $id) | .message' "$T/hooked.jsonl")
check "the message names the sandbox" grep -q "sandbox $LTS_NAME " <<<"$msg"
check "  the host and port" grep -q "docs.example:$SPORT" <<<"$msg"
check "  the duration" grep -q "for 3 s" <<<"$msg"
check "  and the reason as the sandbox's words, verbatim (an apostrophe, cafe with its accent, Japanese)" \
	grep -qF "the sandbox says: \"$REASON1\" (its own words, unchecked)" <<<"$msg"
check "the document carries the reason under sandbox_says, verbatim" \
	jq -e --arg id "$id" --arg r "$REASON1" 'select(.id == $id) | .sandbox_says == $r' "$T/hooked.jsonl"
check_eq "  and no refused ask before it reached a notifier" \
	"$(jq -s '[.[] | select(.type == "latch.grant.ask")] | length' "$T/notified.jsonl") $(jq -s '[.[] | select(.type == "latch.grant.ask")] | length' "$T/hooked.jsonl")" "1 1"
counter_notifies() { audit_n notify; }
wait_counter -t 3 notifies -ge 2
check_eq "both deliveries are audited (notify: the command's exit, the webhook's status)" \
	"$(latch --json audit "$LTS_NAME" --kind grant | jq -r --arg id "$id" '[.entries[] | select(.decision == "notify" and .fields.id == $id) | .reason] | sort | join(" ")')" \
	"latchd.grant.notify.command latchd.grant.notify.url"
check_eq "the notifiers' \"approve\" answers approved nothing" \
	"$(latch --json grants "$LTS_NAME" | jq -r '.grants[0].state')" pending

t0=$(uptime_s)
out=$(latch --json approve "$id")
check_eq "latch approve ID" "$?" 0
t1=$(uptime_s)
wait "$ask_pid"
check_eq "the guest's latch-ask returns approved (exit 0)" "$?" 0
check "  naming the addresses and the window" grep -q "approved: docs.example:$SPORT ($SRV_A $SRV6_A) open for" "$T/ask1.out"
deadline_max=$(awk "BEGIN{print $t1 + 3}")
deadline_min=$(awk "BEGIN{print $t0 + 3}")
in_g "$LTS_PY" "$LTS_NET" stream "$SRV_A" "$SPORT" --duration 5 >/dev/null 2>&1 &
sa=$!
LTS_PIDS+=("$sa")
check_not "  a control address on the same server stays closed" tcp_ok "$SRV_B" "$SPORT"
check_not "  another port stays closed" tcp_ok "$SRV_A" 7000
{
	kill -KILL "$LATCHD_PID"
	wait "$LATCHD_PID"
} 2>/dev/null
echo "# SIGKILLed latchd $(awk "BEGIN{print $(uptime_s) - $t1}") s after the approval"
wait "$sa"
check_eq "the stream on the approved connection was established" "$?" 0
last=$(awk -v a="$SRV_A" '$2 == a { t = $1 } END { print t + 0 }' "$T/recv.log")
echo "# deadline in [$deadline_min, $deadline_max]; the stream's last line at $last"
check_cmp "the stream stopped within 1 s of the deadline (latchd dead)" "$(awk "BEGIN{print ($last < $deadline_max + 1)}")" -eq 1
check_cmp "  and it flowed until the deadline came" "$(awk "BEGIN{print ($last > $deadline_min - 0.5)}")" -eq 1
check_not "  a new connection after the deadline is denied" tcp_ok "$SRV_A" "$SPORT"
start_latchd || { fail latchd-restart "latchd did not come back"; lts_done; }
check_cmp "the approval is audited, the reason as the sandbox's words" "$(latch --json audit "$LTS_NAME" --kind grant |
	jq --arg id "$id" '[.entries[] | select(.decision == "approve" and .fields.id == $id and
		.fields.sandbox_says == $r)] | length' --arg r "$REASON1")" -eq 1

# --- denial and timeout
ask files.example >"$T/ask2.out" 2>&1 &
ask_pid=$!
id=$(pending_id)
check "latch deny ID" latch deny "$id"
wait "$ask_pid"
check_eq "the guest's latch-ask returns denied (exit 1)" "$?" 1
check "  saying so" grep -q "^denied: latch: a person denied" "$T/ask2.out"
check_not "  and files.example stays closed" tcp_ok "$FILES" 443
check_cmp "the denial is audited" "$(audit_n deny latchd.grant.deny)" -eq 1
s0=$SECONDS
ask files.example >"$T/ask3.out" 2>&1
check_eq "an ask nobody decides returns after grant_ask_wait (exit 1)" "$?" 1
check "  as timed out" grep -q "^timeout: " "$T/ask3.out"
check_cmp "  within its wait (3 s) and the tick" "$((SECONDS - s0))" -le 5
check_cmp "the timeout is audited" "$(audit_n timeout latchd.grant.timeout)" -eq 1
check_not "  nothing opened" tcp_ok "$FILES" 443

# --- what an ask may name
r=$(gpost "{\"hosts\":[\"$SRV_B\"]}")
check "an address literal in an ask is refused (400)" grep -q '"decision":"refused".*is an address.* 400$' <<<"$r"
r=$(gpost '{"hosts":["[2001:db8::1]"]}')
check "an IPv6 literal is refused (400)" grep -q 'is an address.* 400$' <<<"$r"
r=$(gpost '{"hosts":["*.example"]}')
check "a wildcard is refused (400)" grep -q 'wildcard.* 400$' <<<"$r"
r=$(gpost '{"hosts":["docs.example:1-65535"]}')
check "a port range is refused (400)" grep -q 'single ports.* 400$' <<<"$r"
check_cmp "each refused ask is audited" "$(audit_n refuse latchd.grant.ask.invalid)" -ge 3
ask private.example >"$T/ask4.out" 2>&1 &
ask_pid=$!
id=$(pending_id)
out=$(latch approve "$id" 2>&1)
check_eq "approving an ask whose name resolves to 10.0.0.5 fails (usage)" "$?" 2
check "  as DNS rebinding" grep -q "DNS rebinding" <<<"$out"
wait "$ask_pid"
check_eq "  the guest hears refused (exit 1)" "$?" 1
check_not "  and 10.0.0.5 stays closed" tcp_ok 10.0.0.5 443

# ======================================================================== the guest can't approve
ask --reason 'please approve me' files.example >"$T/ask5.out" 2>&1 &
ask_pid=$!
id=$(pending_id)
r=$(gpost "{\"id\":\"$id\",\"decision\":\"approve\"}")
check "an ask body carrying its id and a decision is refused (400)" grep -q 'unknown field.* 400$' <<<"$r"
r=$(gpost "{\"hosts\":[\"files.example\"],\"approve\":\"$id\"}")
check "an ask with an approve field is refused (400)" grep -q "unknown field 'approve'.* 400$" <<<"$r"
r=$(gpost "{\"id\":\"$id\"}" "/latch/approve")
check "POST /latch/approve does not exist (404)" grep -q ' 404$' <<<"$r"
r=$(in_g curl -s -m 5 -w ' %{http_code}' "http://$HOST4:$PORT/latch/grant?approve=$id" | tr -d '\n')
check "GET /latch/grant?approve=ID is refused (405)" grep -q ' 405$' <<<"$r"
r=$(in_g curl -s -m 5 --path-as-is -w ' %{http_code}' -d "{\"id\":\"$id\"}" "http://$HOST4:$PORT/latch/../latch/approve" |
	tr -d '\n')
check "a dotted path is refused before anything else (403)" grep -q ' 403$' <<<"$r"
check_not "the guest can't reach the notifier's webhook" tcp_ok "$HOOK_ADDR" "$HOOK_PORT"
check "  control: the host reaches it" in_h curl -s -m 2 -o /dev/null -d '{}' "http://$HOOK_ADDR:$HOOK_PORT/probe"
ports=$(in_h ss -Hlntup | grep "pid=$LATCHD_PID," | awk '{print $5}' | sed 's/.*://' | sort -un | tr '\n' ' ')
check_eq "latchd listens on the network for DNS and the broker only" "$ports" "53 $PORT "
if setpriv --reuid 65534 --regid 65534 --clear-groups "$LTS_PY" -c "
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(2)
s.connect(sys.argv[1]); s.sendall(b'{\"op\":\"approve\",\"id\":\"' + sys.argv[2].encode() + b'\"}\n')
sys.exit(0 if b'\"ok\":true' in s.recv(4096) else 1)" "$ROOT/run/latch/latchd.sock" "$id" 2>/dev/null; then
	fail "a non-root process can't approve over latchd's socket" "it did"
else
	ok "a non-root process can't approve over latchd's socket"
fi
check_eq "after every forgery the ask is still pending" \
	"$(latch --json grants "$LTS_NAME" | jq -r --arg id "$id" '.grants[] | select(.id == $id) | .state')" pending
check_eq "  and the kernel holds no grant" "$(kernel_grants)" ""
check "control: the person's latch deny decides it" latch deny "$id"
wait "$ask_pid"

# ======================================================================== caps
# pending: two asks wait, the third is refused at once and never reaches the person
ask files.example >/dev/null 2>&1 &
p1=$!
ask files.example >/dev/null 2>&1 &
p2=$!
LTS_PIDS+=("$p1" "$p2")
counter_pending() { latch --json grants "$LTS_NAME" | jq '[.grants[] | select(.state == "pending")] | length'; }
wait_counter -t 3 pending -eq 2
notified=$(wc -l <"$T/hooked.jsonl")
r=$(gpost '{"hosts":["files.example"]}')
check "a third pending ask is refused (429) naming grant_asks_pending" grep -q 'grant_asks_pending.* 429$' <<<"$r"
for _ in $(seq 20); do gpost '{"hosts":["files.example"]}' >/dev/null; done
sleep 0.5 # the point: time for a notification that must not come
check_eq "a burst of 20 asks reached the person not once" "$(wc -l <"$T/hooked.jsonl")" "$notified"
check_cmp "  and was audited (refusals counted past 10 a minute)" \
	"$(latch --json audit "$LTS_NAME" --kind grant | jq '[.entries[] | select(.reason == "latchd.grant.ask.cap")] | length')" -ge 1
wait "$p1" "$p2"
# per hour: asks so far: 1 approved, 1 denied, 1 timed out, 1 private, 1 forged-at, 2 pending = 7; the 8th is the cap
r=$(gpost '{"hosts":["files.example"]}')
check "the 8th ask of the hour waits and times out (403)" grep -q '"decision":"timeout".* 403$' <<<"$r"
r=$(gpost '{"hosts":["files.example"]}')
check "the 9th ask of the hour is refused (429) naming grant_asks_per_hour" grep -q 'grant_asks_per_hour.* 429$' <<<"$r"
# control for CONNECT's ports: under a grant of docs.example:443 the broker connects (200)
latch grant "$LTS_NAME" docs.example:443 --for 2 >/dev/null
check "control: CONNECT docs.example:443 under a grant of docs.example:443 is carried (200)" \
	grep -q "^HTTP/1.1 200 " <<<"$(bconnect docs.example)"
# grants per hour: 4 so far (two of the host's, the approved ask, the one above); two more reach grants_per_hour = 6
for i in 1 2; do latch grant "$LTS_NAME" files.example --for 1 >/dev/null || fail "grant $i" "refused early"; done
out=$(latch grant "$LTS_NAME" files.example --for 1 2>&1)
check_eq "the 7th grant of the hour is refused (usage)" "$?" 2
check "  in one line naming grants_per_hour" grep -q "^latch: .*grants_per_hour" <<<"$out"
{
	kill -KILL "$LATCHD_PID"
	wait "$LATCHD_PID"
} 2>/dev/null
start_latchd || { fail latchd-restart "latchd did not come back"; lts_done; }
latch grant "$LTS_NAME" files.example --for 1 >/dev/null 2>&1
check_eq "  and after a SIGKILL and restart of latchd still refused" "$?" 2
check_cmp "the cap refusals are audited" "$(audit_n refuse latchd.grant.cap)" -ge 2

check "the audit chain is whole" latch audit verify
lts_done
