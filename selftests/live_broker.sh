#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 300 (about 115 s on an idle machine)
# live_broker.sh - the credential broker's engine over real sockets and real TLS.
#
# The engine (broker) runs in H under selftests/broker_drv.c, listening
# on the sandbox's host address 192.0.2.1:8119 for guest 192.0.2.2 (G).  A
# fake HTTPS upstream (selftests/broker_net.py, a test CA made here by
# openssl) runs in I on 203.0.113.10:443 (and :8443, the alternative) and
# writes down every header it got.  Names resolve through the driver's
# static table (the resolve callback latchd will fill from its resolver):
#   api.test.example      203.0.113.10   the credentials' upstream
#   allowed.test.example  203.0.113.20   a CONNECT name the policy allows
#   other.test.example    203.0.113.20   the same address, not allowed
#   lan.test.example      127.0.0.1      allowed, but only a loopback answer
#   multi, dead, slow, silent.test.example   several addresses each, some of
#                         them unroutable, refusing or silent (in turn)
# Invariants: the upstream sees the real key and the guest never does (every
# response and the audit stream are grepped); every refusal of the table
# answers with its status, a `latch:` line and its audit reason, in the
# order of the checks; SSE events arrive within 20 ms of their send time;
# CONNECT is name-exact; git works with the placeholder as its password;
# a removed route leaves no copy of its secret in the process.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_broker.sh"

DRV=$LTS_TOP/build/selftests/broker_drv
NET="$LTS_DIR/broker_net.py"
[ -x "$DRV" ] || lts_skip_all "no $DRV; run make selftest-bins"
for t in openssl git curl; do command -v "$t" >/dev/null || lts_skip_all "needs $t"; done
lts_init
if ! lts_topo_up; then
	fail setup "could not build the test namespaces"
	lts_done
fi
# latch's own sockets in H (the broker's upstream side) use H's main table
ip -n "$LTS_H" route add 203.0.113.0/24 via 198.51.100.254 dev hi0

T=$LTS_TMP
PORT=8119
BROKER=$HOST4
SECRET=sk-live-real-secret-$$-0123456789abcdef
ALT_SECRET=sk-alt-real-secret-$$-fedcba9876543210
GIT_SECRET=$(printf 'git:git-real-secret-%s' $$ | base64 -w0)
PH=latch-placeholder-$(openssl rand -hex 16)
PH_GIT=latch-placeholder-$(openssl rand -hex 16)
PH_METER=latch-placeholder-$(openssl rand -hex 16)
PH_NOKEY=latch-placeholder-$(openssl rand -hex 16)
PH_OTHER=latch-placeholder-$(openssl rand -hex 16)
PH_WRONG=latch-placeholder-$(openssl rand -hex 16)
PH_BADTLS=latch-placeholder-badtls-0123456789
PH_DOWN=latch-placeholder-down-0123456789ab

# Two addresses routed to I that I does not have: I does not forward, so it drops what is sent to them
# without a word (no RST, no ICMP), as a dead CDN address or a firewall does
SILENT1=203.0.113.98
SILENT2=203.0.113.99
CONNECT_MS=3000 # the engine's connect_ms here (its default is 10 s)

# ------------------------------------------------------------ the test CA and the upstream
broker_test_pki "$T" DNS:api.test.example DNS:allowed.test.example DNS:other.test.example DNS:multi.test.example \
	DNS:dead.test.example DNS:slow.test.example DNS:silent.test.example ||
	fail setup "could not make the test CA"
printf '%s' "$SECRET" >"$T/secret"
printf '%s' "$ALT_SECRET" >"$T/alt-secret"
printf '%s' "$GIT_SECRET" >"$T/git-secret"
chmod 600 "$T"/*secret

broker_test_git "$T" || fail setup "could not make the git repository"

broker_test_upstreams "$T" 140 || { fail setup "upstream did not start"; lts_done; }

# ------------------------------------------------------------ the broker
up() { # up NAME URL SECRET_FILE HEADER SCHEME [CA]
	printf '{"name":"%s","url":"%s","secret_file":"%s","header":"%s","scheme":"%s","ca_file":"%s"}' \
		"$1" "$2" "$3" "$4" "$5" "${6-$T/ca.pem}"
}
ECHO_PATHS='["/v1/echo","/v1/sse","/v1/chunked","/v1/close","/v1/reflect","/v1/big","/v1/gzip","/v1/splithead","/v1/bytehead","/v1/interim","/v1/early","/v1/hintbody","/v1/continuebody","/v1/upgrade","/v1/tegzip","/v1/reason","/v1/nocontent","/v1/drip","/v1/noread","/v1/teprefix"]'
cat >"$T/broker.json" <<EOF
{"hosts": {"api.test.example": ["$SRV_A"], "allowed.test.example": ["$SRV_B"],
           "other.test.example": ["$SRV_B"], "lan.test.example": ["127.0.0.1"],
           "multi.test.example": ["$SRV6_A", "$SRV_DNS", "$SRV_A"], "dead.test.example": ["$SRV6_A", "$SRV_DNS"],
           "slow.test.example": ["$SILENT1", "$SILENT2", "$SRV_A"], "silent.test.example": ["$SILENT1", "$SILENT2"]},
 "sandboxes": [
  {"name": "sb1", "listen": "$BROKER", "port": $PORT, "guests": ["$GUEST4"], "local": true,
   "allow": ["allowed.test.example", "lan.test.example", "slow.test.example"],
   "routes": [
    {"name": "echo", "placeholder": "$PH", "methods": ["GET", "POST", "HEAD"], "paths": $ECHO_PATHS,
     "upstreams": [$(up "" https://api.test.example "$T/secret" Authorization "Bearer "),
                   $(up alt https://api.test.example:8443 "$T/alt-secret" Authorization "Bearer ")]},
    {"name": "git", "placeholder": "$PH_GIT", "methods": ["GET", "POST"], "paths": ["/git"],
     "upstreams": [$(up "" https://api.test.example "$T/git-secret" Authorization "Basic ")]},
    {"name": "meter", "placeholder": "$PH_METER", "methods": ["POST"], "paths": ["/v1/echo", "/v1/sse", "/v1/big", "/v1/chunked", "/v1/batches"], "meter": true,
     "upstreams": [$(up "" https://api.test.example "$T/secret" x-api-key "")]},
    {"name": "nokey", "placeholder": "$PH_NOKEY", "methods": ["GET"], "paths": ["/v1/echo"],
     "upstreams": [{"url": "https://api.test.example", "secret_var": "NOKEY_API_KEY", "header": "Authorization",
                    "scheme": "Bearer ", "ca_file": "$T/ca.pem"}]},
    {"name": "badtls", "placeholder": "latch-placeholder-badtls-0123456789", "methods": ["GET"], "paths": ["/v1"],
     "upstreams": [$(up "" https://api.test.example "$T/secret" Authorization "Bearer " "")]},
    {"name": "down", "placeholder": "latch-placeholder-down-0123456789ab", "methods": ["GET"], "paths": ["/v1"],
     "upstreams": [$(up "" https://api.test.example:9 "$T/secret" Authorization "Bearer ")]},
    {"name": "multi", "placeholder": "$PH", "methods": ["GET"], "paths": ["/v1/echo"],
     "upstreams": [$(up "" https://multi.test.example "$T/secret" Authorization "Bearer ")]},
    {"name": "dead", "placeholder": "$PH", "methods": ["GET"], "paths": ["/v1/echo"],
     "upstreams": [$(up "" https://dead.test.example "$T/secret" Authorization "Bearer ")]},
    {"name": "slow", "placeholder": "$PH", "methods": ["GET"], "paths": ["/v1/echo"],
     "upstreams": [$(up "" https://slow.test.example "$T/secret" Authorization "Bearer ")]},
    {"name": "silent", "placeholder": "$PH", "methods": ["GET"], "paths": ["/v1/echo"],
     "upstreams": [$(up "" https://silent.test.example "$T/secret" Authorization "Bearer ")]}]},
  {"name": "sb2", "listen": "$HOST6", "port": $PORT, "guests": ["$GUEST6"], "allow": [],
   "routes": [{"name": "echo", "placeholder": "$PH_OTHER", "methods": ["GET"], "paths": ["/v1/echo"],
               "upstreams": [$(up "" https://api.test.example "$T/secret" Authorization "Bearer ")]}]}]}
EOF
sed -i 's/"ca_file":""/"ca_file":null/' "$T/broker.json"
mkfifo "$T/cmd"
# the idle timeout in seconds (the engine's default is a minute), for its checks below
ip netns exec "$LTS_H" env BROKER_GUEST_IDLE_MS=1500 BROKER_METERED_HOLD_MAX=8388608 BROKER_CONNECT_MS=$CONNECT_MS "$DRV" "$T/broker.json" <"$T/cmd" >"$T/drv.out" 2>"$T/drv.err" &
LTS_PIDS+=($!)
DRV_PID=$!
exec 7>"$T/cmd"
lts_wait_ready "$T/drv.out" || { fail setup "broker_drv did not start: $(cat "$T/drv.err")"; lts_done; }

URL=http://$BROKER:$PORT
AUTH="Authorization: Bearer $PH"
RESP=$T/responses # every byte the guest side received, grepped for the key at the end

gcurl() { in_g curl -sS -m 5 "$@" 2>&1 | tee -a "$RESP"; }
graw() { in_g "$LTS_PY" "$NET" raw "$BROKER" "$PORT" "$@" 2>&1 | tee -a "$RESP"; }
# connect NAME SNI [ARGS]: CONNECT NAME:443 through the broker, then TLS with SNI (broker_net.py connect)
connect() { in_g "$LTS_PY" "$NET" connect "$BROKER" "$PORT" "$1" "$2" --cafile "$T/ca.pem" "${@:3}" 2>&1 | tee -a "$RESP"; }
audit_n() { grep -c '"event":"audit"' "$T/drv.out"; }
# counters of the driver's output (wait_counter NAME): its audit, answer, local, local-gone and meter-end lines
counter_audits() { audit_n; }
counter_answers() { grep -c '^ok\|^error' "$T/drv.out"; }
counter_locals() { grep -c '"event":"local"' "$T/drv.out"; }
counter_gone() { grep -c '"event":"local-gone"' "$T/drv.out"; }
counter_meter_ends() { grep -c '"event":"meter-end"' "$T/drv.out"; }
# last_audit N: the first audit line after line count N (waits up to 2 s)
last_audit() {
	wait_counter -t 2 audits -gt "$1"
	grep '"event":"audit"' "$T/drv.out" | sed -n "$(($1 + 1))p"
}
cmd() { # cmd LINE: a driver command, its answer
	local n
	n=$(counter_answers)
	echo "$1" >&7
	wait_counter -t 2 answers -gt "$n"
	grep '^ok\|^error' "$T/drv.out" | tail -1
}

# ------------------------------------------------------------ the key crosses to the upstream only
# invariant: the upstream gets the real key in the configured header; the guest gets what it asked for
out=$(gcurl -H "$AUTH" "$URL/echo/v1/echo?q=1")
check_eq "a request with the placeholder is forwarded" "$(jq -r .path <<<"$out")" "/v1/echo?q=1"
got=$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')
check_eq "the upstream got the real key" "$got" "Bearer $SECRET"
check_eq "the upstream got one Authorization header" \
	"$(tail -1 "$T/up.log" | jq '[.headers[] | select(.[0] | ascii_downcase == "authorization")] | length')" 1
check_eq "the upstream's Host is the upstream's name" \
	"$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Host") | .[1]')" "api.test.example"
a=$(grep '"event":"audit"' "$T/drv.out" | tail -1)
check_eq "the audit entry is a route entry without the query" "$(jq -r '[.kind, .route, .path, .status] | @tsv' <<<"$a")" \
	"$(printf 'route\techo\t/v1/echo\t200')"
# the echo reflects the Authorization header the upstream got: the scrubber must hide it
check "the reflected key reaches the guest as stars" grep -q 'Bearer \*\*\*\*' <<<"$out"
# a client that sends {{url}} through HTTP_PROXY (the broker) as well sends it in absolute form: served as
# the same request (RFC 9112 3.2.2); the rows of lib_broker.sh refuse every other authority
v=$(in_g curl -sS -m 5 -v -o "$T/abs" -x "$URL" -H "$AUTH" "$URL/echo/v1/echo?q=2" 2>&1)
check "control: curl sent it in absolute form" grep -qF "> GET $URL/echo/v1/echo?q=2 HTTP/1.1" <<<"$v"
check_eq "the broker's own URL in absolute form is forwarded as its path" "$(jq -r .path "$T/abs")" "/v1/echo?q=2"
check_eq "the upstream got the real key for it" \
	"$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')" "Bearer $SECRET"
# the key cut a byte a chunk (each chunk with an extension, its own TLS record) and in a trailer; the same
# a byte a record under a Content-Length
for q in "" "?cl=1"; do
	out=$(gcurl -H "$AUTH" "$URL/echo/v1/drip$q")
	check_eq "a key reflected a byte a record${q:+ under a Content-Length} reaches the guest as stars" \
		"$(grep -cF "$SECRET" <<<"$out")/$(grep -c "you sent: Bearer \*\{${#SECRET}\}$" <<<"$out")" "0/1"
done
check_eq "  the trailer that held it does not reach the guest" \
	"$(graw "$(get /echo/v1/drip)" --full --timeout 1.5 | grep -c -e "$SECRET" -e 'X-Key')" 0
out=$(gcurl -H "$AUTH" -D - "$URL/echo/v1/reflect")
check "a key reflected across two chunks is scrubbed" grep -q "you sent: Bearer \*\{${#SECRET}\}" <<<"$out"
# a response header's value as long as the key or longer goes through the scrubber, a shorter one as it is
check_eq "  and in a response header" "$(grep -i '^X-Reflect:' <<<"$out" | tr -d '\r')" \
	"X-Reflect: Bearer $(printf '%*s' ${#SECRET} '' | tr ' ' '*')"
check_eq "  a shorter value passes as it is" "$(grep -i '^Content-Type:' <<<"$out" | tr -d '\r')" "Content-Type: text/plain"
# the guest's own auth headers never reach the upstream
gcurl -H "$AUTH" -H "Proxy-Authorization: Basic Zm9vOmJhcg==" "$URL/echo/v1/echo" >/dev/null
check_eq "Proxy-Authorization is removed" \
	"$(tail -1 "$T/up.log" | jq '[.headers[] | select(.[0] | ascii_downcase == "proxy-authorization")] | length')" 0
gcurl -H "$AUTH" -H "Connection: close, X-Hop" -H "X-Hop: 1" -H "X-Keep: 2" "$URL/echo/v1/echo" >/dev/null
check_eq "headers named by Connection are hop-by-hop" \
	"$(tail -1 "$T/up.log" | jq -c '[.headers[] | .[0] | select(. == "X-Hop" or . == "X-Keep" or . == "Connection")]')" '["X-Keep"]'

# control for the path's rule against percent-encoded non-ASCII (lib_broker.sh's rows): the query is not held to it
out=$(gcurl -H "$AUTH" "$URL/echo/v1/echo?q=%c3%a9%ef%bc%8e")
check_eq "control: percent-encoded UTF-8 in the query is forwarded" "$(jq -r .path <<<"$out")" "/v1/echo?q=%c3%a9%ef%bc%8e"

# ------------------------------------------------------------ bodies and connections
head -c 200000 /dev/urandom | base64 -w 100 >"$T/body"
size=$(stat -c %s "$T/body")
out=$(gcurl -H "$AUTH" --data-binary @"$T/body" "$URL/echo/v1/echo")
check_eq "a Content-Length body (Expect: 100-continue) reaches the upstream whole" "$(jq -r .body_len <<<"$out")" "$size"
out=$(gcurl -H "$AUTH" -H "Transfer-Encoding: chunked" --data-binary @"$T/body" "$URL/echo/v1/echo")
check_eq "a chunked body reaches the upstream whole" "$(jq -r .body_len <<<"$out")" "$size"
# invariant: a body faster than the upstream takes it pauses the guest's reading (buffer_max, 64 KB) and
# resumes it when the upstream has taken the queue, without losing or repeating a byte
head -c 3000000 /dev/urandom | base64 -w 100 >"$T/big-body"
out=$(in_g curl -sS -m 20 -H "$AUTH" --data-binary @"$T/big-body" "$URL/echo/v1/echo" 2>&1 | tee -a "$RESP")
check_eq "a 4 MB body reaches the upstream whole (reading the guest pauses and resumes)" \
	"$(jq -r '[.body_len, .body_sha256] | @tsv' <<<"$out")" \
	"$(printf '%s\t%s' "$(stat -c %s "$T/big-body")" "$(sha256sum <"$T/big-body" | cut -d' ' -f1)")"
# invariant: a side that stops taking bytes costs the broker buffer_max (64 KB) a direction, not what the
# other side sends meanwhile: 64 MB towards an upstream that reads nothing for 3 s, and 64 MB from an upstream
# to a guest that reads nothing for 1 s (under the guest idle timeout here), leave broker_drv's RSS, read
# after 1 s, within 8 MB of where it was.  Without the pauses it holds the 64 MB: with buffer_max at 256 MB the
# upload grew it by 60 MB, with the upstream never paused the download by 65 MB.  So must 64 MB pipelined
# behind a request whose upstream answers after 3 s (64 MB before reading in flight was bounded).  Beside
# each: once the stalled side reads, every byte arrives.
stall() { in_g "$LTS_PY" "$NET" stall "$BROKER" "$PORT" "$@" --pid "$DRV_PID" --secs 1 --header "$AUTH"; }
stall /echo/v1/big?n=65536 >/dev/null # the code paths of a stall, paged in once
out=$(stall "/echo/v1/echo?pause=3" --upload 67108864)
check_cmp "an upload to a stalled upstream: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 8192
check_eq "control: then the upstream reads the upload, all 64 MB, SHA-256 matching" \
	"$(jq -r '[.body_len, .sha_ok] | @tsv' <<<"$out")" "$(printf '67108864\ttrue')"
out=$(stall /echo/v1/echo --behind "/echo/v1/echo?pause=3" --upload 67108864)
check_cmp "an upload pipelined behind a request whose answer waits: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 8192
check_eq "control: the first request is answered, then the upload reaches the upstream, all 64 MB, SHA-256 matching" \
	"$(jq -r '[.behind_status, .body_len, .sha_ok] | @tsv' <<<"$out")" "$(printf '200\t67108864\ttrue')"
out=$(stall "/echo/v1/big?n=67108864")
check_cmp "a download to a stalled guest: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 8192
check_eq "control: then the guest reads the download, all 64 MB" "$(jq -r .received <<<"$out")" 67108864
# invariant: a name's addresses are tried in turn, as a client would: one the broker has no route to (IPv6:
# H has none) and one that refuses (nothing on 443 there), then the one that answers; a TLS failure is the
# name's and is never tried at another address (the refusal table's certificate row has one address).
# Control: a name none of whose addresses can be reached is a 502 naming it
n=$(audit_n)
check_eq "an upstream whose first two addresses can't be reached answers from its third" \
	"$(graw "$(get /multi/v1/echo)" | cut -f1)" 200
check_eq "  and again" "$(graw "$(get /multi/v1/echo)" | cut -f1)" 200
out=$(graw "$(get /dead/v1/echo)")
check_eq "control: an upstream none of whose addresses can be reached" \
	"${out%%$'\t'*} $(jq -r .reason <<<"$(last_audit "$(($(audit_n) - 1))")")" "502 upstream unreachable"
check "  its answer names the upstream" grep -q "^latch: cannot reach upstream dead.test.example port 443 (Connection refused)" <<<"${out#*$'\t'}"
# invariant: connect_ms bounds a connect whatever a name's addresses do.  An address that drops every packet
# gets half of what is left while others remain (curl's rule), so a name whose first two addresses are silent
# answers from its third within connect_ms, and one with only silent addresses is refused when connect_ms is
# spent, not connect_ms an address (6 s here).  The same for CONNECT.  Control: the silent addresses were
# waited for (their time is there), and refusing addresses (multi, above) cost none.
timed() { # timed CMD...: its output in $out, the milliseconds it took in $ms
	local t0
	t0=$(date +%s%N)
	out=$("$@")
	ms=$((($(date +%s%N) - t0) / 1000000))
}
timed graw "$(get /slow/v1/echo)" --timeout 10
check_eq "an upstream whose first two addresses are silent answers from its third" "${out%%$'\t'*}" 200
check_cmp "  within connect_ms ($CONNECT_MS ms): $ms ms" "$ms" -lt "$CONNECT_MS"
check_cmp "  control: the silent addresses were waited for (half, then a quarter, of it)" "$ms" -ge $((CONNECT_MS * 3 / 4 - 100))
timed graw "$(get /silent/v1/echo)" --timeout 10
check_eq "an upstream whose addresses are all silent is a 504" "$out" \
	"$(printf '504\tlatch: upstream silent.test.example did not answer in time')"
check_cmp "  once connect_ms is spent ($CONNECT_MS ms): $ms ms" "$ms" -lt $((CONNECT_MS + 1000))
check_cmp "  control: not before it" "$ms" -ge $((CONNECT_MS - 100))
timed connect slow.test.example slow.test.example --timeout 10
check_eq "CONNECT to a name whose first two addresses are silent reaches its third" "$out" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-ok')"
check_cmp "  within connect_ms ($CONNECT_MS ms): $ms ms" "$ms" -lt "$CONNECT_MS"
# invariant: a refusal from a request's head, its body unread, reaches a guest that sends the whole body
# before it reads a byte (as simple clients do): the broker shuts its side after the answer and reads and
# drops what comes, where a close with the body unread would reset the connection and could throw the answer
# away.  8 MB against the meter's body_max (1 MiB here), and to a route that does not exist.  Control: the connection
# is over after the answer (Connection: close).
big_head() { echo "POST $1 HTTP/1.1${R}Host: x${R}x-api-key: $PH_METER${R}Content-Type: application/json${R}Content-Length: 8000000${R}${R}"; }
out=$(graw "$(big_head /meter/v1/echo)" --body-bytes 8000000 --timeout 10)
check_eq "a 413 from the head reaches a guest that sent all 8 MB of its body first" "${out%%$'\t'*}" 413
out=$(graw "$(big_head /nosuchroute/v1/echo)" --body-bytes 8000000 --timeout 10 --full)
check "  and a 403 from the head (no route of that name)" grep -q "^HTTP/1.1 403" <<<"$out"
check "  control: the connection ends after it" grep -qi "^Connection: close" <<<"$out"
# invariant: a metered body is held whole until the meter has seen it, so what one sandbox's metered requests
# hold at once is bounded (metered_hold_max, 8 MiB here): 24 connections that each send 1 MB of a 1 MB + 1
# body and wait would hold 24 MB; past the bound each is refused 503 before its body is read, audited.  A
# chunked body is counted as it grows: 20 of 0.9 MB leave at most 9 held.  Control: once they are gone, a
# metered request is answered.
held_reason="metered bodies in flight over the sandbox's limit"
held_n() { grep '"event":"audit"' "$T/drv.out" | tail -n +$(($1 + 1)) | grep -c "\"reason\":\"$held_reason\""; }
hold() { in_g "$LTS_PY" "$NET" hold "$BROKER" "$PORT" /meter/v1/echo --pid "$DRV_PID" --header "x-api-key: $PH_METER" "$@"; }
n=$(audit_n)
out=$(hold --count 24 --size 1000000)
check_cmp "24 metered bodies of 1 MB that never end: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 16384
check_eq "  8 of them held (8 MB), 16 refused and audited" "$(jq -r .waiting <<<"$out") $(held_n "$n")" "8 16"
check "  a refusal that was read is a 503 naming the bound" \
	grep -q "^latch: this sandbox's metered requests in flight hold 8 MiB of request bodies, the most latch keeps at once is 8 MiB" \
	<<<"$(jq -r '.line // ""' <<<"$out")"
n=$(audit_n)
out=$(hold --count 20 --size 900000 --chunked)
check_cmp "20 chunked metered bodies of 0.9 MB that never end: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 16384
check "  at most 9 of them held, the others refused as they grew past the bound and audited" \
	test "$(jq -r .waiting <<<"$out")" -le 9 -a "$(($(jq -r .waiting <<<"$out") + $(held_n "$n")))" = 20
check_eq "control: then a metered request is answered" \
	"$(graw "POST /meter/v1/echo HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Length: 31${R}${R}{\"model\":\"m1\",\"max_tokens\":100}" | cut -f1)" 200
# invariant: a request's body is never read as a request: an upstream that answers before the body is all
# read (a 401, a 413) ends the connection after its answer; the rest of the body, here a whole request
# with the placeholder, was read as the next request and forwarded
late_req=$(get /echo/v1/echo)
late_n=$(printf "$late_req" | wc -c)
late() { in_g "$LTS_PY" "$NET" late "$BROKER" "$PORT" "$1" "$late_req" 2>&1 | tee -a "$RESP"; }
check_eq "a body sent after an early answer is not read as a request" \
	"$(late "POST /echo/v1/noread HTTP/1.1${R}Host: x${R}${AUTH}${R}Content-Length: $late_n${R}${R}")" 401
check_eq "  control: after a whole body, the next request is answered" \
	"$(late "POST /echo/v1/echo HTTP/1.1${R}Host: x${R}${AUTH}${R}Content-Length: 3${R}${R}abc")" "200 200"
# the connection lingers after such an answer too: a guest that sends all 8 MB of its body before it reads
out=$(graw "POST /echo/v1/noread HTTP/1.1${R}Host: x${R}${AUTH}${R}Content-Length: 8000000${R}${R}" --body-bytes 8000000 --timeout 10)
check_eq "an upstream's early answer reaches a guest that sent all 8 MB of its body first" "${out%%$'\t'*}" 401
check_eq "a chunked response arrives whole" "$(gcurl -H "$AUTH" "$URL/echo/v1/chunked" | wc -l)" 5
check_eq "a response delimited by the upstream's close arrives" "$(gcurl -H "$AUTH" "$URL/echo/v1/close")" "until the end"
# the broker reads a response head where it lies; one spread over three records is read when whole
out=$(gcurl -D "$T/split.head" -H "$AUTH" "$URL/echo/v1/splithead")
check_eq "a response head that came in three pieces arrives whole" "$out/$(grep -c '^X-Line-' "$T/split.head")" "split/80"
# invariant: a head whose records came in one TCP read is read whole; OpenSSL holds the records it read
# ahead, and no event says so: the broker waited for the upstream's idle timeout (5 minutes)
out=$(graw "$(get /echo/v1/bytehead)" --full --timeout 2)
check_eq "a response head of one-byte TLS records arrives whole, at once" \
	"$(grep -c '^X-Byte-' <<<"$out")/$(tail -1 <<<"$out")" "10/bytes"
out=$(gcurl -D "$T/interim.head" -H "$AUTH" "$URL/echo/v1/interim")
check_eq "an interim 100 is skipped and the response follows with its head" \
	"$out/$(grep -c '^X-After: 1' "$T/interim.head")" "after the interim/1"
# invariant: interim responses are skipped whole, however they are cut; one has no body whatever its head
# says (RFC 9112 6.3): a 103's Content-Length body went to the guest ahead of the real head (the rows
# "a 103 with a body", "a 100 with a chunked body": 502, none of their bytes)
out=$(graw "$(get /echo/v1/early)" --full --timeout 1.5)
check_eq "two 103s and a 100, cut at CR, LF and colon, are skipped: the guest gets the one response" \
	"$(grep -c '^HTTP/1.1 ' <<<"$out")/$(grep -c '^Link' <<<"$out")/$(grep -c '^X-After: 1' <<<"$out")/$(tail -1 <<<"$out")" \
	"1/0/1/after the hints"
check_eq "  and the connection serves the next request" \
	"$(graw "$(get /echo/v1/early)$(get /echo/v1/echo)" --full --timeout 1.5 | grep -c '^HTTP/1.1 200')" 2
for p in hintbody continuebody; do
	check_eq "  a 1xx's body ($p) never reaches the guest" "$(graw "$(get /echo/v1/$p)" --full --timeout 1 | grep -c EVIL)" 0
done
# invariant: the key is scrubbed wherever the upstream puts it in a head, the reason phrase and names too
out=$(graw "$(get /echo/v1/reason)" --full --timeout 1)
check_eq "a key in the reason phrase, a header name and a value reaches the guest as stars" \
	"$(grep -cF "$SECRET" <<<"$out")/$(grep -c "^HTTP/1.1 401 invalid key \*\{${#SECRET}\}" <<<"$out")/$(grep -c "^\*\{${#SECRET}\}: 1" <<<"$out")/$(grep -c "^X-Why: the key \*\{${#SECRET}\} was" <<<"$out")" \
	"0/1/1/1"
out=$(graw "$(get /echo/v1/nocontent)" --full --timeout 1)
check_eq "a 204's Content-Length does not reach the guest (RFC 9110 8.6)" \
	"$(grep -c '^HTTP/1.1 204' <<<"$out")/$(grep -ci '^Content-Length' <<<"$out")/$(grep -c '^X-Nc: 1' <<<"$out")" "1/0/1"
check_eq "  control: HEAD keeps the length a GET would get" \
	"$(in_g curl -sS -m 5 -I -H "$AUTH" "$URL/echo/v1/big?n=777" | grep -i '^Content-Length' | tr -d '\r')" "Content-Length: 777"
check_eq "a 3 MB response arrives whole" "$(in_g curl -sS -m 10 -H "$AUTH" "$URL/echo/v1/big?n=3000000" | wc -c)" 3000000
check_eq "HEAD gets the head only" "$(in_g curl -sS -m 5 -I -H "$AUTH" "$URL/echo/v1/echo" | head -1 | tr -d '\r')" \
	"HTTP/1.1 200 OK"
n=$(in_g curl -sS -m 5 -H "$AUTH" -o /dev/null -o /dev/null -o /dev/null -w '%{num_connects}\n' \
	"$URL/echo/v1/echo" "$URL/echo/v1/echo" "$URL/echo/v1/echo" | paste -sd+ | bc)
check_eq "three requests share one guest connection (keep-alive)" "$n" 1
# invariant: a guest connection with nothing to do is closed after guest_idle_ms (1.5 s here), counted
# from its last answer; one that asks again within it stays
idle_req=$(get /echo/v1/echo)
read -r n end after < <(in_g "$LTS_PY" "$NET" idle "$BROKER" "$PORT" "$idle_req")
check_eq "an idle guest connection is closed" "$n $end" "0 closed"
check "  after the idle timeout (${after} s, 1.5 s set)" awk -v t="$after" 'BEGIN { exit !(t >= 1.3 && t <= 4) }'
read -r n end after < <(in_g "$LTS_PY" "$NET" idle "$BROKER" "$PORT" "$idle_req" --count 3 --gap 0.9)
check_eq "control: one that asks every 0.9 s is answered each time" "$n" 3
check "  and closed the idle timeout after its last answer (${after} s)" \
	awk -v t="$after" -v e="$end" 'BEGIN { exit !(e == "closed" && t >= 1.3 && t <= 4) }'
# invariant: a guest that stops in the middle of a request head or body, or of a tunnel's ClientHello, is
# closed after request_idle_ms or hello_ms (2.5 s here, set as latchd's reload sets them, beside
# guest_idle_ms's 1.5 s); it held its connection (and a metered body, or an upstream connection) for good.
# Controls: one that sends the rest a byte every 0.2 or 0.5 s, 3 s in all, is served (each byte starts the
# wait again)
check "the waits set to 2.5 s" grep -q '^ok' <<<"$(cmd 'timeouts 2500 2500')"
body_req="POST /echo/v1/echo HTTP/1.1${R}Host: x${R}${AUTH}${R}Content-Length: 10${R}${R}0123456789"
trickle() { in_g "$LTS_PY" "$NET" trickle "$BROKER" "$PORT" "$body_req" "$@"; }
read -r st end after < <(trickle --first 30 --stop)
check_eq "a guest that stops in the middle of a head is closed" "$st $end" "- closed"
check "  after request_idle_ms (${after} s, 2.5 s set)" awk -v t="$after" 'BEGIN { exit !(t >= 2.3 && t <= 5) }'
read -r st end after < <(trickle --first -6 --stop)
check_eq "a guest that stops in the middle of a body is closed" "$st $end" "- closed"
check "  after request_idle_ms (${after} s, 2.5 s set)" awk -v t="$after" 'BEGIN { exit !(t >= 2.3 && t <= 5) }'
read -r st end after < <(trickle --first -16 --gap 0.2)
check_eq "control: a guest that sends the end of its head and its body a byte every 0.2 s (3 s) is answered" "$st" 200
out=$(connect allowed.test.example allowed.test.example --hello-part 20 --timeout 8)
check_eq "a tunnel whose ClientHello stops after 20 bytes is closed" "$(cut -f1,2 <<<"$out")" \
	"$(printf 'HTTP/1.1 200 Connection established\tclosed')"
check "  after hello_ms ($(cut -f3 <<<"$out") s, 2.5 s set)" \
	awk -v t="$(cut -f3 <<<"$out")" 'BEGIN { exit !(t >= 2.3 && t <= 5) }'
check_eq "control: one whose ClientHello ends a byte every 0.5 s (3 s) gets the ServerHello" \
	"$(connect allowed.test.example allowed.test.example --hello-part -6 --hello-gap 0.5 | cut -f1,2)" \
	"$(printf 'HTTP/1.1 200 Connection established\tserver-hello')"
cmd 'timeouts 0 0' >/dev/null
# invariant: an exchange a connection reuses (exchange_new) starts clean: each request is scrubbed and audited as its own
long=/v1/reflect/$(printf 'a%.0s' $(seq 120)) # longer than the exchange's inline copy of the path
na=$(audit_n)
n=$(in_g curl -sS -m 5 -H "$AUTH" -o "$T/ka1" -o "$T/ka2" -o "$T/ka3" -w '%{num_connects}\n' \
	"$URL/echo$long" "$URL/echo/v1/reflect?q=1" "$URL/echo/v1/reflect" | paste -sd+ | bc)
check_eq "  three reflecting requests on one guest connection" "$n" 1
check_eq "  each reaches the guest with the key as stars" \
	"$(cat "$T/ka1" "$T/ka2" "$T/ka3" | grep -c "you sent: Bearer \*\{${#SECRET}\}$")" 3
check_eq "  and none with the key" "$(cat "$T/ka1" "$T/ka2" "$T/ka3" | grep -cF "$SECRET")" 0
last_audit $((na + 2)) >/dev/null
check_eq "  each audited with its own path" \
	"$(grep '"event":"audit"' "$T/drv.out" | tail -n +$((na + 1)) | jq -r .path | paste -sd' ')" \
	"$long /v1/reflect /v1/reflect"
reused=$(cmd stats | sed -E 's/.*reused=([0-9]+).*/\1/')
check_cmp "upstream TLS connections are reused across requests" "$reused" -gt 5

# ------------------------------------------------------------ streaming
# invariant: an SSE event reaches the guest when it leaves the upstream (never buffered)
in_g "$LTS_PY" "$NET" sse "$URL/echo/v1/sse" --header "$AUTH" >"$T/sse.out" 2>&1
check_eq "all 10 SSE events arrive" "$(wc -l <"$T/sse.out")" 10
worst=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$T/sse.out")
late=$(awk '$2 > 20' "$T/sse.out" | wc -l)
check_eq "every SSE event arrives within 20 ms of its send time (worst ${worst} ms)" "$late" 0

# ------------------------------------------------------------ the refusal table, in the order of the checks
# row NAME STATUS REASON REQUEST [--bind ADDR]: the status, a `latch:` line, the audit reason
row() {
	local name=$1 status=$2 reason=$3 req=$4 n out got_status line a
	shift 4
	n=$(audit_n)
	out=$(graw "$req" "$@")
	got_status=${out%%$'\t'*}
	line=${out#*$'\t'}
	a=$(last_audit "$n")
	if [ "$got_status" != "$status" ]; then
		fail "$name" "status $got_status, want $status ($out)"
	elif [[ "$line" != "latch: "* ]]; then
		fail "$name" "body line '$line' does not start with 'latch: '"
	elif [ "$(jq -r .reason <<<"$a")" != "$reason" ]; then
		fail "$name" "audit reason '$(jq -r .reason <<<"$a")', want '$reason'"
	elif [ "$(jq -r .kind <<<"$a")" != refused ]; then
		fail "$name" "audit kind $(jq -r .kind <<<"$a"), want refused"
	else
		ok "$name: $status, $reason"
	fi
}
# the table (selftests/lib_broker.sh), and the meter's row: latchd has no meter yet
broker_refusal_rows
row "the meter refuses" 429 "refused by the spend cap" \
	"POST /meter/v1/echo HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Length: 36${R}${R}{\"model\":\"m1\",\"max_tokens\":99999999}"
# invariant: what the meter never allows (LATCH_HTTP_METER_FORBID: an endpoint it can't price) is a 403, not a
# 429 that clients retry (control: the row above, a 429)
row "the meter forbids" 403 "not allowed on a metered route" \
	"POST /meter/v1/batches HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Length: 31${R}${R}{\"model\":\"m1\",\"max_tokens\":100}"
# a Content-Length over the meter's body_max (1 MiB here) is refused from the head, before the body is sent
row "a metered body over body_max, from its Content-Length" 413 "metered request body too large" \
	"POST /meter/v1/echo HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Length: 2000000${R}${R}"
# invariant: a metered body is read as the upstream reads it: a Content-Encoding (any line of it) would have the
# upstream inflate what the meter read compressed (controls: identity, and an unmetered route, below)
row "a metered body that is content-encoded" 415 "metered request body is content-encoded" \
	"POST /meter/v1/echo HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Encoding: gzip${R}Content-Length: 31${R}${R}{\"model\":\"m1\",\"max_tokens\":100}"
row "a second Content-Encoding line after identity" 415 "metered request body is content-encoded" \
	"POST /meter/v1/echo HTTP/1.1${R}x-api-key: $PH_METER${R}Content-Encoding: identity${R}Content-Encoding: gzip${R}Content-Length: 31${R}${R}{\"model\":\"m1\",\"max_tokens\":100}"
n=$(audit_n)
out=$(ip netns exec "$LTS_H" "$LTS_PY" "$NET" raw "$BROKER" "$PORT" "$(get /echo/v1/echo)")
a=$(last_audit "$n")
check_eq "a source that is not the guest is refused" "${out%%$'\t'*} $(jq -r .reason <<<"$a")" \
	"403 source is not the sandbox's guest"
# a refusal of a request without a body keeps the connection: two requests, two answers
out=$(graw "$(get /echo/v1/echo/../x)$(get /echo/v1/echo)" --full --timeout 1 | grep -c '^HTTP/1.1 ')
check_eq "a refusal keeps the connection for the next request" "$out" 2

# ------------------------------------------------------------ local endpoints (/latch/...)
# invariant: a /latch/ request is never a credential route: checked for its spelling, then handed
# whole to the sandbox's local callback and held until it answers; a listener without one says 404
row "a dotted /latch path" 403 "path has a . or .. segment" "$(get /latch/../echo/v1/echo)"
row "a local body over its limit" 413 "local request body too large" \
	"POST /latch/grant HTTP/1.1${R}Host: x${R}Content-Length: 20000${R}${R}$(head -c 20000 /dev/zero | tr '\0' a)"
n=$(audit_n)
out=$(in_g "$LTS_PY" "$NET" raw "$HOST6" "$PORT" "$(get /latch/grant)")
check_eq "/latch on a listener without local endpoints is 404" "${out%%$'\t'*} $(jq -r .reason <<<"$(last_audit "$n")")" \
	"404 no local endpoint on this listener"
local_n() { grep -c '"event":"local"' "$T/drv.out"; }
n=$(local_n)
gcurl -X POST -H 'Content-Type: application/json' -d '{"hosts":["docs.example"]}' \
	-w ' %{http_code}' "$URL/latch/grant?x=1" >"$T/local1.out" &
lc=$!
wait_counter -t 2 locals -gt "$n"
ev=$(grep '"event":"local"' "$T/drv.out" | tail -1)
check "a /latch/ request is handed over whole (method, path, query, body, peer)" jq -e --arg g "$GUEST4" \
	'.method == "POST" and .path == "/latch/grant" and .query == "x=1" and .body == "{\"hosts\":[\"docs.example\"]}" and .peer == $g' \
	<<<"$ev"
sleep 1 # the point: nothing comes back while nobody answers
check_eq "  and held while nobody answers (1 s)" "$(wc -c <"$T/local1.out")" 0
check "  the local callback answers when it likes" grep -q "^ok answered" <<<"$(cmd "answer $(jq .n <<<"$ev") 200 {\"decision\":\"approved\"}")"
wait "$lc"
check_eq "  and the guest gets that answer (one JSON line)" "$(tr -d '\n' <"$T/local1.out")" '{"decision":"approved"} 200'
check_eq "  nothing of it was audited as a route" "$(grep -c '"path":"/latch/grant","reason":"no credential route' "$T/drv.out")" 0
n=$(grep -c '"event":"local-gone"' "$T/drv.out")
in_g curl -s -m 1 -d x "$URL/latch/grant" >/dev/null 2>&1
wait_counter -t 2 gone -gt "$n"
check_cmp "a guest that leaves before the answer is reported gone" "$(grep -c '"event":"local-gone"' "$T/drv.out")" -gt "$n"

# ------------------------------------------------------------ the meter seam
n=$(grep -c '"event":"meter-end"' "$T/drv.out")
out=$(gcurl -H "x-api-key: $PH_METER" -d '{"model":"m1","max_tokens":100}' "$URL/meter/v1/echo")
check_eq "a metered request the meter allows is forwarded" "$(jq -r .body_len <<<"$out")" 31
check_eq "the meter read the model" "$(grep '"event":"meter-request"' "$T/drv.out" | tail -1 | jq -r .model)" m1
wait_counter -t 2 meter_ends -gt "$n"
check_eq "the meter heard the end of the exchange" \
	"$(grep '"event":"meter-end"' "$T/drv.out" | tail -1 | jq -r .how)" complete
# invariant: the meter sees every byte of the response the guest gets, in order, the head first, all before
# end() (it reads them just after the guest's write: docs/broker.md): a JSON body, an SSE stream of 10 events
# 100 ms apart, a chunked body, and 2 MB with a Content-Length to a guest that stalls for a second with a 4 KiB
# receive buffer (the engine's 64 KiB buffer_max fills and reading the upstream pauses).  The echo is the one
# body that differs byte for byte: it holds the key the upstream got, which the meter reads as sent and the
# guest gets scrubbed to as many `*`.
mget() { # mget PATH: the guest's POST on the metered route, its body to $T/mbody
	in_g curl -sS -m 8 -o "$T/mbody" -H "x-api-key: $PH_METER" -d '{"model":"m1","max_tokens":100}' "$URL/meter$1"
}
mstall() { # mstall PATH: the same, read by a guest that stalls
	in_g "$LTS_PY" "$NET" stall "$BROKER" "$PORT" "/meter$1" --pid "$DRV_PID" --secs 1 --header "x-api-key: $PH_METER" \
		--post '{"model":"m1","max_tokens":100}' --rcvbuf 4096 --out "$T/mbody" >/dev/null
}
meter_saw() { # meter_saw WHAT SECRET COMMAND...: the body COMMAND left in $T/mbody against the meter-end after it
	local m n what=$1 secret=$2
	shift 2
	n=$(grep -c '"event":"meter-end"' "$T/drv.out")
	rm -f "$T/mbody"
	"$@"
	wait_counter -t 2 meter_ends -gt "$n"
	m=$(grep '"event":"meter-end"' "$T/drv.out" | tail -1)
	check_eq "the meter saw, in order, all the guest got of $what" \
		"$(jq -r '[.how, .response_bytes, .response_fnv, .head_first] | @tsv' <<<"$m")" \
		"$(printf 'complete\t%s\t%s\ttrue' "$(stat -c %s "$T/mbody")" "$(python3 -c '
import sys
data = open(sys.argv[1], "rb").read()
if sys.argv[2]:  # the guest got the key scrubbed; the meter read it as the upstream sent it
    data = data.replace(b"*" * len(sys.argv[2]), sys.argv[2].encode())
h = 0xcbf29ce484222325
for b in data:
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)' "$T/mbody" "$secret")")"
}
meter_saw "a JSON body" "$SECRET" mget /v1/echo
check_eq "control: that body is the upstream's echo of the request" "$(jq -r .body_len "$T/mbody")" 31
meter_saw "an SSE stream" "" mget /v1/sse
check_eq "control: that stream held its 10 events" "$(grep -c '^data: ' "$T/mbody")" 10
meter_saw "a chunked body" "" mget /v1/chunked
check_eq "control: that body held its 5 pieces" "$(grep -c '^piece ' "$T/mbody")" 5
meter_saw "2 MB, read by a guest that stalls" "" mstall "/v1/big?n=2097152"
check_eq "control: those were 2 MB" "$(stat -c %s "$T/mbody")" 2097152
check_eq "the upstream got the key in x-api-key" \
	"$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "x-api-key") | .[1]')" "$SECRET"
# invariant: an Authorization the guest sent is removed even where the key goes in another header
gcurl -H "x-api-key: $PH_METER" -H "Authorization: Bearer guest-own-token" -d '{"model":"m1"}' "$URL/meter/v1/echo" \
	>/dev/null
check_eq "the guest's Authorization never reaches an x-api-key upstream" \
	"$(tail -1 "$T/up.log" | jq '[.headers[] | select(.[0] | ascii_downcase == "authorization")] | length')" 0
out=$(gcurl -H "x-api-key: $PH_METER" -H "Content-Encoding: identity" -d '{"model":"m1","max_tokens":100}' \
	"$URL/meter/v1/echo")
check_eq "control: Content-Encoding identity on a metered route is forwarded" "$(jq -r .body_len <<<"$out")" 31
out=$(gcurl -H "$AUTH" -H "Content-Encoding: gzip" -d 'not really gzip' "$URL/echo/v1/echo")
check_eq "control: a content-encoded body on an unmetered route is forwarded as it is" \
	"$(jq -r .body_len <<<"$out") $(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Content-Encoding") | .[1]')" "15 gzip"

# ------------------------------------------------------------ Basic auth: git over smart HTTP
# invariant: git (which asks only after a 401) works with the placeholder as its password
out=$(in_g env GIT_TERMINAL_PROMPT=0 git -c http.proxy= ls-remote "http://x:$PH_GIT@$BROKER:$PORT/git/git/repo.git" 2>&1 |
	tee -a "$RESP")
check "git ls-remote with the placeholder as password lists the branch" grep -q "refs/heads/main" <<<"$out"
out=$(in_g env GIT_TERMINAL_PROMPT=0 git -c http.proxy= ls-remote "http://x:$PH_WRONG@$BROKER:$PORT/git/git/repo.git" 2>&1 |
	tee -a "$RESP")
check_not "git ls-remote with a wrong password fails" grep -q "refs/heads/main" <<<"$out"

# ------------------------------------------------------------ CONNECT, name-exact
check_eq "CONNECT to an allowed name carries TLS to it" "$(connect allowed.test.example allowed.test.example)" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-ok')"
a=$(grep '"event":"audit"' "$T/drv.out" | tail -1)
check_eq "the tunnel is audited as other" "$(jq -r '[.kind, .host, .method] | @tsv' <<<"$a")" \
	"$(printf 'other\tallowed.test.example\tCONNECT')"
out=$(connect other.test.example other.test.example)
check "CONNECT to an unlisted name on the same address is refused" grep -q "^HTTP/1.1 403.*latch: other.test.example port 443 is not in" <<<"$out"
out=$(connect allowed.test.example other.test.example)
check_eq "a tunnel to an allowed name whose TLS names another site is cut" "$out" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-cut')"
check_eq "the cut is audited" "$(grep '"event":"audit"' "$T/drv.out" | tail -1 | jq -r .reason)" \
	"TLS server name differs from the CONNECT name"
# a client that does not wait for the 200: its ClientHello came with the CONNECT, and is checked the same
check_eq "a ClientHello sent with the CONNECT, before the 200, is carried" \
	"$(connect allowed.test.example allowed.test.example --early)" "$(printf 'HTTP/1.1 200 Connection established\ttls-ok')"
check_eq "  and cut when it names another site" "$(connect allowed.test.example other.test.example --early)" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-cut')"
# invariant: a ClientHello that offers encrypted_client_hello (0xfe0d) is cut before a byte of it goes upstream:
# the server would answer for the inner name, hidden from the broker, while the outer one is the name it
# checked.  Controls: the same hello without it, and with a GREASE extension in its place, reach the upstream
check_eq "control: a ClientHello as the client made it gets the upstream's ServerHello" \
	"$(connect allowed.test.example allowed.test.example --hello-ext none)" \
	"$(printf 'HTTP/1.1 200 Connection established\tserver-hello')"
check_eq "control: and with a GREASE extension put in" \
	"$(connect allowed.test.example allowed.test.example --hello-ext 0x0a0a)" \
	"$(printf 'HTTP/1.1 200 Connection established\tserver-hello')"
check_eq "a ClientHello with an encrypted_client_hello extension is cut" \
	"$(connect allowed.test.example allowed.test.example --hello-ext 0xfe0d)" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-cut')"
check_eq "  the cut is audited" "$(grep '"event":"audit"' "$T/drv.out" | tail -1 | jq -r .reason)" \
	"TLS ClientHello offers encrypted_client_hello"
# invariant: a tunnel pauses as a route does: 64 MB through it towards an upstream that reads nothing for 3 s,
# and 64 MB from it to a guest that reads nothing for 1 s, grow the broker by less than 8 MB; controls:
# then every byte arrives, the upload's SHA-256 matching
out=$(connect allowed.test.example allowed.test.example --pid "$DRV_PID" --stall-upload 67108864)
check_cmp "an upload through a tunnel to a stalled upstream: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 8192
check_eq "control: then the upstream reads it through the tunnel, all 64 MB, SHA-256 matching" \
	"$(jq -r '[.body_len, .sha_ok] | @tsv' <<<"$out")" "$(printf '67108864\ttrue')"
out=$(connect allowed.test.example allowed.test.example --pid "$DRV_PID" --stall-download 67108864)
check_cmp "a download through a tunnel to a stalled guest: the broker grew by $(jq '.rss_during - .rss_before' <<<"$out") kB" \
	"$(jq '.rss_during - .rss_before' <<<"$out")" -lt 8192
check_eq "control: then the guest reads it through the tunnel, all 64 MB" "$(jq -r .received <<<"$out")" 67108864
out=$(connect "$SRV_B" allowed.test.example)
check "CONNECT to an address literal is refused" grep -q "^HTTP/1.1 403.*latch: CONNECT takes a host name" <<<"$out"
out=$(connect 0x7f.1 allowed.test.example)
check "CONNECT to an address in another spelling is refused" grep -q "^HTTP/1.1 403" <<<"$out"
out=$(connect lan.test.example lan.test.example)
check "CONNECT to an allowed name that resolves to loopback is refused" \
	grep -q "^HTTP/1.1 403.*non-public addresses" <<<"$out"
# invariant: the policy is asked again while a tunnel is open: a name it no longer allows (a grant past its
# deadline) is cut at the tunnel's next byte, as the kernel cuts a connection through a grant at its next
# packet; the tunnel stayed open for as long as the guest kept it
again() { # again [CMD]: a tunnel's first request, then CMD to the driver, then a second request on it
	rm -f "$T/again"
	in_g "$LTS_PY" "$NET" connect "$BROKER" "$PORT" allowed.test.example allowed.test.example \
		--cafile "$T/ca.pem" --again "$T/again" >"$T/again.out" 2>&1 &
	local c=$!
	wait_until -t 3 grep -q tls-ok "$T/again.out"
	[ -z "${1-}" ] || cmd "$1" >/dev/null
	touch "$T/again"
	wait "$c"
	tee -a "$RESP" <"$T/again.out"
}
check_eq "control: a tunnel the policy still allows carries a second request" "$(again)" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-ok\ttls-ok')"
check_eq "a tunnel whose name the policy stops allowing is cut at its next byte" \
	"$(again 'disallow sb1 allowed.test.example')" "$(printf 'HTTP/1.1 200 Connection established\ttls-ok\ttls-cut')"
check_eq "  the cut is audited" "$(grep '"event":"audit"' "$T/drv.out" | tail -1 | jq -r .reason)" \
	"name no longer allowed by the sandbox's policy"
check "  a new CONNECT to the name is refused" grep -q "^HTTP/1.1 403" <<<"$(connect allowed.test.example allowed.test.example)"
cmd 'allow sb1 allowed.test.example' >/dev/null
check_eq "  allowed again, a tunnel carries both requests" "$(again)" \
	"$(printf 'HTTP/1.1 200 Connection established\ttls-ok\ttls-ok')"
out=$(graw "CONNECT allowed.test.example:8443 HTTP/1.1${R}Host: x${R}${R}")
check "CONNECT to another port is refused" grep -q "^403.latch: CONNECT goes only to port 443" <<<"$out"

# ------------------------------------------------------------ switching the upstream
check "switch to the alternative upstream" grep -q '^ok' <<<"$(cmd 'switch sb1 echo alt')"
gcurl -H "$AUTH" "$URL/echo/v1/echo" >/dev/null
check_eq "after the switch the alternative gets its own key, same URL and placeholder" \
	"$(tail -1 "$T/up-alt.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')" "Bearer $ALT_SECRET"
check_eq "the audit names the alternative" "$(grep '"event":"audit"' "$T/drv.out" | tail -1 | jq -r .upstream)" alt
cmd 'switch sb1 echo -' >/dev/null
gcurl -H "$AUTH" "$URL/echo/v1/echo" >/dev/null
check_eq "switching back" "$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Authorization") | .[1]')" \
	"Bearer $SECRET"

# ------------------------------------------------------------ the key never crossed to the guest side
check_eq "no response the guest got holds the key" "$(grep -c -e "$SECRET" -e "$ALT_SECRET" -e "$GIT_SECRET" "$RESP")" 0
check_eq "no audit or meter line holds the key" "$(grep -c -e "$SECRET" -e "$GIT_SECRET" "$T/drv.out")" 0
check_eq "no response holds the git key decoded" "$(grep -c "git-real-secret" "$RESP")" 0

# ------------------------------------------------------------ a removed route leaves no copy of its secret
memcount() { "$LTS_PY" "$LTS_DIR/memcount.py" "$DRV_PID" "$1"; }
check_cmp "control: the driver holds the git secret while its route exists" "$(memcount "$GIT_SECRET")" -ge 1
check "remove the git route" grep -q '^ok' <<<"$(cmd 'remove sb1 git')"
check_eq "no copy of the git secret is left in the process" "$(memcount "$GIT_SECRET")" 0

lts_done
