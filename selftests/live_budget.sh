#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 400 (about 160 s on an idle machine: three providers end to end, each refusal beside its control)
# live_budget.sh - spend caps end to end: latchd meters a kit's OpenAI,
# Anthropic and Gemini routes (selftests/lib.sh's guest link, `latch attach
# --kit`), against fake HTTPS upstreams of the three providers' shapes
# (selftests/budget_net.py, in I, named by dnsmasq), and the ledger, `latch
# usage` and the audit log are read back.
# Invariants (docs/INVARIANTS.md, "Money is a boundary too"):
#   - a settlement is the usage the upstream reported at the price table's
#     prices, to the micro-dollar, for each provider's format, streamed or not;
#   - every way around it is charged the full reservation: the guest or the
#     upstream cutting a stream, usage omitted or malformed, a method or
#     path spelled so the endpoint is unknown, a query suffix dressed as a
#     free endpoint; a model missing from the table is priced at its
#     provider's highest prices; a lower-case method never leaves;
#   - every output a body asks for is reserved (n, best_of, a list of prompts,
#     candidateCount, in any spelling an upstream reads): an upstream spending
#     all of it is charged within the reservation; a body the meter can't bound
#     (a count as a string, a key twice, a BOM, gzip) is refused before it leaves;
#   - input the body's size doesn't bound (images by URL, documents by URL or
#     inline) is reserved: an upstream billing it is charged within the
#     reservation; text alone is reserved by its size;
#   - a metered route forwards only endpoints the meter can price (a batch, Veo, images: 403, never
#     forwarded), or that the kit prices at a fixed amount (charged that, shown by latch usage), and no
#     request whose tools have the provider fetch a URL (web_fetch, mcp_servers, mcp, url_context) unless
#     the kit's allow_provider_tools names the tool;
#   - 32 requests racing for the last dollar: the caps admit exactly what
#     fits, nothing is over-spent;
#   - the 429 is one `latch:` line naming the cap, where it stands and when
#     it frees, and it is in the audit log;
#   - SIGKILL of latchd mid-stream, then a restart: the day's spend is
#     unchanged or higher, never lower (the open reservation is charged);
#   - one latchd writes the ledger: a second one, or one with a bad price
#     table, refuses to start with one line and leaves the first serving.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_broker.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}
NET="$LTS_DIR/budget_net.py"

[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
for t in openssl dnsmasq; do command -v "$t" >/dev/null || lts_skip_all "needs $t"; done
lts_init
if ! lts_topo_up; then
	fail setup "could not build the test namespaces"
	lts_done
fi
in_h ip route add 203.0.113.0/24 via 198.51.100.254 dev hi0

T=$LTS_TMP
ROOT=$T/root
PORT=8119
LEDGER=$ROOT/var/lib/latch/ledger.db
LATCHD_PID=

# ------------------------------------------------------------ CA, upstreams, names
broker_test_pki "$T" DNS:openai.test.example DNS:anthropic.test.example DNS:gemini.test.example ||
	fail setup "could not make the test CA"
for p in openai anthropic gemini; do printf 'sk-%s-%s-0123456789' "$p" $$ >"$T/key-$p"; done
chmod 600 "$T"/key-*
lts_bg "$LTS_I" "$T/dnsmasq.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --local-ttl=60 \
	--host-record="openai.test.example,$SRV_A" --host-record="anthropic.test.example,$SRV_A" \
	--host-record="gemini.test.example,$SRV_A"
lts_bg "$LTS_I" "$T/up.out" "$LTS_PY" "$NET" serve --addr "$SRV_A" --port 443 --cert "$T/srv.pem" \
	--key "$T/srv.key" --log "$T/up.log" --lifetime 600
lts_wait_ready "$T/up.out" || { fail setup "the fake upstream did not start"; lts_done; }

# ------------------------------------------------------------ latch.conf, kit
mkdir -p "$ROOT/etc/latch/kits"
# conf GEMINI_CAP [LINE]: caps that don't get in the way, but gemini's dollars (the race's); LINE, one more key
conf() {
	cat >"$ROOT/etc/latch/latch.conf" <<EOF
dns_upstream = $SRV_DNS
budget_dollars_per_day = 1000, gemini:$1
budget_requests_per_hour = none
budget_requests_per_day = none
budget_host_dollars_per_day = none
budget_host_requests_per_hour = none
budget_host_requests_per_day = none
${2:-}
EOF
	chmod 0644 "$ROOT/etc/latch/latch.conf"
}
# route NAME PROVIDER HEADER SCHEME EXTRA: one credential of the kit
route() {
	cat <<EOF
  - name: $1
    upstream: https://$2.test.example
    provider: $2
    secret_file: $T/key-$2
    header: $3
    scheme: "$4"
    ca_file: $T/ca.pem
$5
    env:
      ${1^^}_URL: "{{url}}"
      ${1^^}_KEY: "{{placeholder}}"
EOF
}
{
	printf 'name: tb\ndescription: the kit of live_budget.sh\ncredentials:\n'
	route openai openai Authorization "Bearer " "    methods: [GET, POST, PUT]
    paths: [/v1]"
	# the built-in claude kit's route (kit/kits/claude.yaml), on the test's upstream
	route anthropic anthropic x-api-key "" "    methods: [GET, POST]
    paths: [/v1/messages, /v1/models]"
	# the same, with an endpoint the meter can't price allowed at a fixed price, and the web fetch tool
	route anthropicp anthropic x-api-key "" "    methods: [POST]
    paths: [/v1/messages]
    priced_endpoints:
      - {method: POST, path: /v1/messages/batches, dollars_per_request: 2.50}
    allow_provider_tools: [web_fetch]"
	route gemini gemini x-goog-api-key "" "    methods: [POST]
    paths: [/v1beta/models, /v1beta/openai/chat/completions]"
	# every method but TRACE, every path: what only the meter's spelling checks stand in front of
	route loose openai Authorization "Bearer " ""
} >"$ROOT/etc/latch/kits/tb.yaml"
chmod 0644 "$ROOT/etc/latch/kits/tb.yaml"

start_latchd() { lts_latchd "$ROOT" "$T/latchd.log"; }
envof() { latch --json env "$LTS_NAME" | jq -r --arg v "$1" '.env[] | select(.name == $v) | .value'; }

# ------------------------------------------------------------ what a request costs
# the race's request: a 4,000-token answer from gemini-2.5-flash; its reservation is R (worked out below)
RACE_BODY='{"contents":[{"role":"user","parts":[{"text":"race for the last dollar"}]}],"generationConfig":{"maxOutputTokens":4000}}'
RACE_IN=$(((${#RACE_BODY} + 1) / 2))
# price PROVIDER MODEL: "input output cached_input cache_write" in micro-dollars per million tokens
price() {
	latch --json usage --prices | jq -r --arg p "$1" --arg m "$2" \
		'.prices[] | select(.provider == $p and .model == $m and .above == 0) | "\(.input) \(.output) \(.cached_input) \(.cache_write)"'
}
worst() { # the provider's highest price of each kind, and its largest max_output and context
	latch --json usage --prices | jq -r --arg p "$1" '[.prices[] | select(.provider == $p)] |
		"\(map(.input) | max) \(map(.output) | max) \(map(.cached_input) | max) \(map(.cache_write) | max) \(map(.max_output) | max) \(map(.context) | max)"'
}
# cost "PRICES" UNCACHED CACHED CACHE_WRITE CACHE_WRITE_1H OUTPUT: micro-dollars, rounded up once (exact integers)
cost() {
	local pi po pc pw pico
	read -r pi po pc pw _ <<<"$1"
	pico=$(($2 * pi + $3 * pc + $4 * pw + $5 * 2 * pi + $6 * po))
	echo $(((pico + 999999) / 1000000))
}
dollars() { printf '%d.%06d' $(($1 / 1000000)) $(($1 % 1000000)); }
# as budget/ prints an amount: cents, or every decimal it has (never rounded)
shown() {
	local w=$(($1 / 1000000)) f=$(($1 % 1000000)) d=6
	if [ $((f % 10000)) = 0 ]; then printf '$%d.%02d' "$w" $((f / 10000)); return; fi
	while [ $((f % 10)) = 0 ]; do f=$((f / 10)); d=$((d - 1)); done
	printf '$%d.%0*d' "$w" "$d" "$f"
}
audit_has() { latch --json audit "$LTS_NAME" --kind "$1" 2>/dev/null | jq -e "$2" >/dev/null; }

conf 1000
start_latchd || { fail setup "latchd did not come up: $(tail -3 "$T/latchd.log")"; lts_done; }
out=$(lts_attach --resolver "$HOST4" --kit tb 2>&1) || { fail setup "attach --kit failed: $out"; lts_done; }
for r in openai anthropic anthropicp gemini loose; do
	declare "PH_${r^^}=$(envof "${r^^}_KEY")"
done
[ -n "$PH_OPENAI" ] && [ -n "$PH_GEMINI" ] || { fail setup "latch env gave no placeholders"; lts_done; }
R_RACE=$(cost "$(price gemini gemini-2.5-flash)" "$RACE_IN" 0 0 0 4000)
# ten of the race's reservations fit, an eleventh does not
conf "$(dollars $((R_RACE * 21 / 2)))"
kill -HUP "$LATCHD_PID"
wait_until -t 2 grep -q "reloaded:" "$T/latchd.log"

key_of() {
	case $1 in
	openai) echo "Authorization: Bearer $PH_OPENAI" ;;
	loose) echo "Authorization: Bearer $PH_LOOSE" ;;
	anthropic) echo "x-api-key: $PH_ANTHROPIC" ;;
	anthropicp) echo "x-api-key: $PH_ANTHROPICP" ;;
	gemini) echo "x-goog-api-key: $PH_GEMINI" ;;
	esac
}
ledger() { "$LTS_PY" "$NET" ledger "$LEDGER" "$@"; }
# send ROUTE PATH BODY [req options]: one request from the guest; OUT is "STATUS<TAB>first line",
# J the reservation it made and its settlement, once written (RES, SET, HOW: their micros and how)
send() {
	local route=$1 path=$2 body=$3 before
	shift 3
	before=$(ledger lastid)
	OUT=$(in_g "$LTS_PY" "$NET" req "http://$HOST4:$PORT/$route$path" --key "$(key_of "$route")" --body "$body" \
		"$@" 2>&1)
	J=$(ledger settled "$before")
	RES=$(jq -r '.reserve.micros // "none"' <<<"$J")
	SET=$(jq -r '.settle.micros // "none"' <<<"$J")
	HOW=$(jq -r '.settle.how // "none"' <<<"$J")
}
usage_hdr() { echo "X-Fake-Usage: in=$1,out=$2,cached=${3:-0},cw=${4:-0},cw1h=${5:-0},thoughts=${6:-0},search=${7:-0},files=${8:-0},code=${9:-0},images=${10:-0}"; }
# audited_ws: a settlement of this sandbox that counted web searches (its fields' tokens.web_searches)
audited_ws() { wait_until -t 2 has_audited_ws; }
has_audited_ws() {
	latch --json audit "$LTS_NAME" --kind budget 2>/dev/null |
		jq -e 'any(.entries[]; .reason == "budget.settled.usage" and (tostring | test("web_searches")))' >/dev/null
}
# audited KIND REASON: an entry of this sandbox with that reason (waits up to 2 s)
audited() { wait_until -t 2 has_audited "$@"; }
has_audited() {
	latch --json audit "$LTS_NAME" --kind "$1" 2>/dev/null | jq -e --arg r "$2" 'any(.entries[]; .reason == $r)' >/dev/null
}

# ------------------------------------------------------------ 32 requests race for the last dollar
out=$(in_g "$LTS_PY" "$NET" race "http://$HOST4:$PORT/gemini/v1beta/models/gemini-2.5-flash:generateContent" \
	--key "$(key_of gemini)" --body "$RACE_BODY" --n 32 --header "X-Fake-Mode: hold" \
	--header "$(usage_hdr "$RACE_IN" 4000)")
check_eq "32 racers for the last dollar: the 10 that fit are forwarded (cap 10.5 reservations of $(dollars "$R_RACE"))" \
	"$(grep -c '^200' <<<"$out")" 10
check_eq "and the other 22 are refused with 429" "$(grep -c '^429' <<<"$out")" 22
refusal=$(grep -m1 '^429' <<<"$out" | cut -f2)
# counter_race_micros: what the ledger holds for the race (wait_counter)
counter_race_micros() { jq -r '.["'"$LTS_NAME"'/gemini"].micros' <<<"$(ledger sums)"; }
wait_counter -t 3 race_micros -eq $((R_RACE * 10))
sums=$(ledger sums)
check_eq "the ledger holds exactly the 10 reservations" "$(jq -r '.["'"$LTS_NAME"'/gemini"].requests' <<<"$sums")" 10
check_eq "each settled at its usage, together 10 reservations" \
	"$(jq -r '.["'"$LTS_NAME"'/gemini"].micros' <<<"$sums")" $((R_RACE * 10))
check_cmp "nothing is spent past the cap" "$(jq -r '.["'"$LTS_NAME"'/gemini"].micros' <<<"$sums")" -le $((R_RACE * 21 / 2))

# ------------------------------------------------------------ the 429: one line, the cap, where it stands, when it frees
re="^latch: dollars_per_day cap for gemini in sandbox $LTS_NAME is \\\$[0-9.]+; \\\$[0-9.]+ spent and \\\$[0-9.]+ reserved in the last 24 hours, this request needs up to \\\$[0-9.]+; frees at ([0-9T:-]+Z) \\(or raise budget_dollars_per_day\\)$"
check "a racer's 429 names the cap, where it stands and when it frees" grep -qE "$re" <<<"$refusal"
full=$(in_g "$LTS_PY" "$NET" req "http://$HOST4:$PORT/gemini/v1beta/models/gemini-2.5-flash:generateContent" \
	--key "$(key_of gemini)" --body "$RACE_BODY" --full)
check_eq "once the race is settled, the cap still refuses: 429" "$(head -1 <<<"$full")" 429
body=$(tail -n +2 <<<"$full")
check_eq "its body is one line" "$(printf '%s\n' "$body" | wc -l) $(tail -n +2 <<<"$full" | wc -l)" "1 1"
check_eq "the line says what is spent, that nothing is reserved, and what this one needs" \
	"$(grep -o 'is [^;]*; [^,]*, this request needs up to [^;]*' <<<"$body")" \
	"is $(shown $((R_RACE * 21 / 2))); $(shown $((R_RACE * 10))) spent and \$0.00 reserved in the last 24 hours, this request needs up to $(shown "$R_RACE")"
frees=$(sed -nE "s/$re/\\1/p" <<<"$body")
frees_s=$(date -d "$frees" +%s 2>/dev/null || echo 0)
check_cmp "it frees a day after the first racer was reserved (not before)" "$frees_s" -ge $(($(date +%s) + 86400 - 120))
check_cmp "and not much later" "$frees_s" -le $(($(date +%s) + 86400 + 5))
check "the refusal is in the audit log (kind budget, budget.refused.dollars_per_day)" \
	audited budget budget.refused.dollars_per_day
check "with the cap, where it stands and when it frees as fields" audit_has budget \
	'any(.entries[]; .reason == "budget.refused.dollars_per_day" and .fields.cap == "dollars_per_day" and
	.fields.provider == "gemini" and .fields.limit > 0 and .fields.used > 0 and .fields.frees_at != null)'
check "and the broker's refusal too (kind refused)" audited refused latchd.broker.refused-by-the-spend-cap

# SIGHUP raises the cap (latch.conf's caps and the price table are re-read)
conf 1000
kill -HUP "$LATCHD_PID"
wait_counter -t 2 "match:reloaded::$T/latchd.log" -ge 2
send gemini /v1beta/models/gemini-2.5-flash:generateContent "$RACE_BODY" --header "$(usage_hdr 1 1)"
check_eq "after SIGHUP with a higher cap the same request is forwarded" "${OUT%%$'\t'*}" 200

# ------------------------------------------------------------ a body as large as a provider takes
# invariant: a metered route takes a body up to broker_body_max (32 MiB by default, Anthropic's request limit):
# a 12 MB Messages request with a PDF inline, as an agent sends a long document, is reserved, forwarded whole
# and settled.  With broker_body_max = 8 (SIGHUP) the same request is refused 413 from its Content-Length, the
# line naming the key to raise, audited, and nothing reaches the upstream.  Control: back at the default, the
# request is answered again.
reload() { # reload [LINE]: latch.conf again (conf 1000 LINE), and wait for latchd to say so
	local n
	n=$(grep -c "reloaded:" "$T/latchd.log")
	conf 1000 "${1:-}"
	kill -HUP "$LATCHD_PID"
	wait_counter -t 3 "match:reloaded::$T/latchd.log" -gt "$n"
}
PDF='{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"@PAD@"}},{"type":"text","text":"Summarise this."}]}]}'
PDF_LEN=$((${#PDF} - 5 + 12000000))
send anthropic /v1/messages "$PDF" --pad 12000000 --header "$(usage_hdr 61000 700)"
check_eq "a 12 MB Messages request with a PDF inline is forwarded" "${OUT%%$'\t'*}" 200
check_eq "  the upstream got all of it" "$(tail -1 "$T/up.log" | jq .body_len)" "$PDF_LEN"
check_eq "  and it is settled from its usage" "$HOW" usage
reload "broker_body_max = 8"
ups=$(wc -l <"$T/up.log")
send anthropic /v1/messages "$PDF" --pad 12000000
check_eq "with broker_body_max = 8 it is refused 413, the line naming the key" "$OUT" \
	"$(printf '413\tlatch: this metered request'"'"'s body is over the 8 MiB the spend meter reads; send a smaller one, or raise broker_body_max in latch.conf')"
check_eq "  nothing reached the upstream" "$(wc -l <"$T/up.log")" "$ups"
check "  the refusal is audited" audited refused latchd.broker.metered-request-body-too-large
reload
send anthropic /v1/messages "$PDF" --pad 12000000 --header "$(usage_hdr 61000 700)"
check_eq "control: back at the default, it is forwarded again" "${OUT%%$'\t'*}" 200

# ------------------------------------------------------------ settlements match the price table, to the micro-dollar
CHAT='{"model":"gpt-4o","max_tokens":2000,"messages":[{"role":"user","content":"hello"}]}'
CHAT_S='{"model":"gpt-4o","max_tokens":2000,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}'
CHAT_NOUSAGE='{"model":"gpt-4o","max_tokens":2000,"stream":true,"messages":[{"role":"user","content":"hello"}]}'
RESP='{"model":"gpt-4o","max_output_tokens":2000,"input":"hello"}'
RESP_S='{"model":"gpt-4o","max_output_tokens":2000,"stream":true,"input":"hello"}'
MSG='{"model":"claude-sonnet-4-5","max_tokens":3000,"messages":[{"role":"user","content":"hello"}]}'
MSG_S='{"model":"claude-sonnet-4-5","max_tokens":3000,"stream":true,"messages":[{"role":"user","content":"hello"}]}'
GEM='{"contents":[{"role":"user","parts":[{"text":"hello"}]}],"generationConfig":{"maxOutputTokens":3000}}'
P_4O=$(price openai gpt-4o)
P_SON=$(price anthropic claude-sonnet-4-5)
P_FL=$(price gemini gemini-2.5-flash)
# exact ROWNAME WANT: the last send settled from its usage at WANT micro-dollars, below its reservation
exact() {
	if [ "${OUT%%$'\t'*}" != 200 ]; then
		fail "$1" "status ${OUT%%$'\t'*} ($OUT)"
	elif [ "$HOW" != usage ] || [ "$SET" != "$2" ]; then
		fail "$1" "settled $SET micro-dollars by $HOW, want $2 by usage ($J)"
	elif [ "$RES" -le "$SET" ]; then
		fail "$1" "the reservation $RES is not above the charge $SET"
	else
		ok "$1: \$$(dollars "$SET") (reserved \$$(dollars "$RES"))"
	fi
}
# OpenAI: prompt_tokens include the cached ones
send openai /v1/chat/completions "$CHAT" --header "$(usage_hdr 1234 321 200)"
exact "OpenAI chat completion, JSON" "$(cost "$P_4O" 1034 200 0 0 321)"
send openai /v1/chat/completions "$CHAT_S" --header "$(usage_hdr 2001 777 1000)"
exact "OpenAI chat completion, SSE chunks with include_usage" "$(cost "$P_4O" 1001 1000 0 0 777)"
send openai /v1/responses "$RESP" --header "$(usage_hdr 3003 99 3000)"
exact "OpenAI Responses, JSON" "$(cost "$P_4O" 3 3000 0 0 99)"
send openai /v1/responses "$RESP_S" --header "$(usage_hdr 555 444 0)"
exact "OpenAI Responses, SSE ending in response.completed" "$(cost "$P_4O" 555 0 0 0 444)"
# Anthropic: input_tokens exclude cache reads and writes; 1-hour writes cost twice the input price
send anthropic /v1/messages "$MSG" --header "$(usage_hdr 1111 222 3333 444 55)"
exact "Anthropic Messages, JSON, with cache reads and 5-minute and 1-hour writes" \
	"$(cost "$P_SON" 1111 3333 444 55 222)"
send anthropic /v1/messages "$MSG_S" --header "$(usage_hdr 7 1999 12345 0 0)"
exact "Anthropic Messages, SSE (message_start, message_delta)" "$(cost "$P_SON" 7 12345 0 0 1999)"
# Anthropic's server-side web search: each search at the price table's fee, beside the tokens (the
# request is reserved the searches its tool's max_uses allows: 4 more reserve 4 fees more, exactly)
# fee_of PROVIDER: its web_search fee, micro-dollars per 1,000 searches
fee_of() { latch --json usage --prices | jq -r --arg p "$1" --arg t "${2:-web_search}" '.fees[] | select(.provider == $p and .tool == $t) | .micros_per_1000'; }
# more_reserved NAME ROUTE PATH BODY HEADER N FEE: BODY, allowing N searches more than the last send's, reserves N fees more
more_reserved() {
	local before=$RES
	send "$2" "$3" "$4" --header "$5"
	check_eq "$1" $((RES - before)) $(($6 * $7 / 1000))
}
FEE_WS=$(fee_of anthropic)
check_eq "the built-in fee of a web search is \$10 per 1,000" "$FEE_WS" 10000000
WS_TOOL='"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]'
MSG_WS="${MSG%\}},$WS_TOOL}"
MSG_WS_S="${MSG_S%\}},$WS_TOOL}"
send anthropic /v1/messages "$MSG_WS" --header "$(usage_hdr 2222 333 0 0 0 0 3)"
exact "Anthropic Messages with 3 web searches, JSON (usage.server_tool_use)" \
	$(($(cost "$P_SON" 2222 0 0 0 333) + 3 * FEE_WS / 1000))
more_reserved "a web_search tool allowing 9 searches reserves 4 fees more than one allowing 5" \
	anthropic /v1/messages "${MSG_WS/:5\}/:9\}}" "$(usage_hdr 2222 333 0 0 0 0 3)" 4 "$FEE_WS"
send anthropic /v1/messages "$MSG_WS_S" --header "$(usage_hdr 44 555 0 0 0 0 2)"
exact "Anthropic Messages with 2 web searches, SSE (message_delta's cumulative usage)" \
	$(($(cost "$P_SON" 44 0 0 0 555) + 2 * FEE_WS / 1000))
# OpenAI's Responses: each web_search_call item of the output at openai's fee; a web_search tool
# allows max_tool_calls searches
FEE_WS_OAI=$(fee_of openai)
RESP_WS="${RESP%\}},\"tools\":[{\"type\":\"web_search\"}],\"max_tool_calls\":4}"
RESP_WS_S="${RESP_S%\}},\"tools\":[{\"type\":\"web_search\"}],\"max_tool_calls\":4}"
send openai /v1/responses "$RESP_WS" --header "$(usage_hdr 3003 99 3000 0 0 0 4)"
exact "OpenAI Responses with 4 web_search_call items, JSON" $(($(cost "$P_4O" 3 3000 0 0 99) + 4 * FEE_WS_OAI / 1000))
more_reserved "a Responses request allowing 8 tool calls reserves 4 searches more than one allowing 4" \
	openai /v1/responses "${RESP_WS/:4\}/:8\}}" "$(usage_hdr 3003 99 3000 0 0 0 4)" 4 "$FEE_WS_OAI"
send openai /v1/responses "$RESP_WS_S" --header "$(usage_hdr 555 444 0 0 0 0 3)"
exact "OpenAI Responses with 3 web_search_call items, SSE (the output of response.completed)" \
	$(($(cost "$P_4O" 555 0 0 0 444) + 3 * FEE_WS_OAI / 1000))
check "a settlement's web searches are in its audit entry" audited_ws
# OpenAI's Chat Completions search models search before every answer, and their usage does not say
# so: a search each, at openai's fee, beside the tokens (tiny requests cost more in searches than tokens)
CHAT_SM='{"model":"gpt-4o-mini-search-preview","max_tokens":2000,"messages":[{"role":"user","content":"hello"}]}'
send openai /v1/chat/completions "$CHAT_SM" --header "$(usage_hdr 12 5)"
exact "a chat completion of gpt-4o-mini-search-preview, JSON: one search beside its tokens" \
	$(($(cost "$(price openai gpt-4o-mini-search-preview)" 12 0 0 0 5) + FEE_WS_OAI / 1000))
# OpenAI's Responses also bill a file search (each file_search_call item) and a code interpreter
# container (a GB of its memory_limit each, once the output has a code_interpreter_call item)
FEE_FS=$(fee_of openai file_search)
FEE_CI=$(fee_of openai code_interpreter)
check_eq "the built-in fee of a file search is \$2.50 per 1,000" "$FEE_FS" 2500000
check_eq "the built-in fee of a 1 GB container is \$0.03 (\$30 per 1,000)" "$FEE_CI" 30000000
CI_TOOLS='"tools":[{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":{"type":"auto","memory_limit":"4g"}}],"max_tool_calls":5'
RESP_CI="${RESP%\}},$CI_TOOLS}"
RESP_CI_S="${RESP_S%\}},$CI_TOOLS}"
send openai /v1/responses "$RESP_CI" --header "$(usage_hdr 3003 99 3000 0 0 0 0 3 2)"
exact "OpenAI Responses with 3 file searches and code run in a 4 GB container, JSON" \
	$(($(cost "$P_4O" 3 3000 0 0 99) + 3 * FEE_FS / 1000 + 4 * FEE_CI / 1000))
more_reserved "a 16 GB container reserves 12 GB of fees more than a 4 GB one" \
	openai /v1/responses "${RESP_CI/\"4g\"/\"16g\"}" "$(usage_hdr 3003 99 3000 0 0 0 0 3 2)" 12 "$FEE_CI"
send openai /v1/responses "$RESP_CI_S" --header "$(usage_hdr 555 444 0 0 0 0 0 1 0)"
exact "OpenAI Responses with 1 file search and no code run, SSE (the output of response.completed)" \
	$(($(cost "$P_4O" 555 0 0 0 444) + FEE_FS / 1000))
# and an image of its image_generation tool ($0.25 built in), each image_generation_call item
FEE_IMG=$(fee_of openai image_generation)
check_eq "the built-in fee of an image is \$0.25 (\$250 per 1,000)" "$FEE_IMG" 250000000
RESP_IMG="${RESP%\}},\"tools\":[{\"type\":\"image_generation\"}],\"max_tool_calls\":3}"
send openai /v1/responses "$RESP_IMG" --header "$(usage_hdr 3003 99 3000 0 0 0 0 0 0 2)"
exact "OpenAI Responses with 2 images made, JSON" $(($(cost "$P_4O" 3 3000 0 0 99) + 2 * FEE_IMG / 1000))
# Gemini: promptTokenCount includes the cached part; thoughts are output
send gemini /v1beta/models/gemini-2.5-flash:generateContent "$GEM" --header "$(usage_hdr 1001 7 3 0 0 5)"
exact "Gemini generateContent, JSON" "$(cost "$P_FL" 998 3 0 0 12)"
send gemini "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" "$GEM" \
	--header "$(usage_hdr 4096 1024 1024 0 0 100)"
exact "Gemini streamGenerateContent, SSE (the last usageMetadata counts)" "$(cost "$P_FL" 3072 1024 0 0 1124)"
send gemini /v1beta/models/gemini-2.5-flash:streamGenerateContent "$GEM" --header "$(usage_hdr 333 33 0 0 0 0)"
exact "Gemini streamGenerateContent, one JSON array streamed element by element" "$(cost "$P_FL" 333 0 0 0 33)"
check "a settlement below its reservation is in the audit log (budget.settled.usage)" audited budget budget.settled.usage
# Gemini's grounding with Google Search: per query from Gemini 3 on, per grounded prompt before (once
# however many queries); a grounded request is reserved 20 queries (one prompt on 2.x): nothing bounds them
FEE_GQ=$(fee_of gemini google_search)
FEE_GP=$(fee_of gemini grounded_prompt)
check_eq "the built-in fees of Gemini's grounding are \$14 a 1,000 queries and \$35 a 1,000 prompts" \
	"$FEE_GQ $FEE_GP" "14000000 35000000"
GEM_G="${GEM%\}},\"tools\":[{\"google_search\":{}}]}"
send gemini /v1beta/models/gemini-2.5-flash:generateContent "${GEM_G/google_search/google_xearch}" \
	--header "$(usage_hdr 1001 7 3 0 0 5)"
XRES=$RES
send gemini /v1beta/models/gemini-2.5-flash:generateContent "$GEM_G" --header "$(usage_hdr 1001 7 3 0 0 5 4)"
exact "Gemini 2.5 grounded with 4 queries, JSON: one grounded prompt" $(($(cost "$P_FL" 998 3 0 0 12) + FEE_GP / 1000))
check_eq "a grounded Gemini 2.5 request is reserved one grounded prompt more than one with a tool of another name" \
	$((RES - XRES)) $((FEE_GP / 1000))
# Gemini's OpenAI-compatible endpoint answers in Chat Completions' format, which lists no queries: a
# grounded request there is charged what it was reserved (one grounded prompt on 2.5) beside its tokens
COMPAT='{"model":"gemini-2.5-flash","max_tokens":300,"messages":[{"role":"user","content":"hello"}]'
send gemini /v1beta/openai/chat/completions "$COMPAT,\"tools\":[{\"google_xearch\":{}}]}" \
	--header "$(usage_hdr 40 9)"
exact "control: Gemini's OpenAI-compatible endpoint, a tool of another name: its tokens alone" \
	"$(cost "$P_FL" 40 0 0 0 9)"
XRES=$RES
send gemini /v1beta/openai/chat/completions "$COMPAT,\"tools\":[{\"google_search\":{}}]}" \
	--header "$(usage_hdr 40 9)"
exact "Gemini 2.5 grounded through its OpenAI-compatible endpoint: charged one grounded prompt" \
	$(($(cost "$P_FL" 40 0 0 0 9) + FEE_GP / 1000))
check_eq "and reserved one grounded prompt more than the control" $((RES - XRES)) $((FEE_GP / 1000))
send gemini "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse" "$GEM_G" \
	--header "$(usage_hdr 2000 300 0 0 0 100 3)"
exact "Gemini 3 grounded with 3 queries, SSE (given in two chunks, counted once)" \
	$(($(cost "$(price gemini gemini-3-pro-preview)" 2000 0 0 0 400) + 3 * FEE_GQ / 1000))
check_eq "the upstreams were asked for identity bodies" \
	"$(tail -1 "$T/up.log" | jq -r '.headers[] | select(.[0] == "Accept-Encoding") | .[1]')" identity

# unbound ROWNAME STATUS REASON: the last send was refused with STATUS, one latch: line, an audit note,
# no reservation, and the upstream never saw it (UPN: its log's lines before the send)
unbound() {
	if [ "${OUT%%$'\t'*}" != "$2" ] || [[ "${OUT#*$'\t'}" != "latch: "* ]]; then
		fail "$1" "status and line: $OUT"
	elif [ "$RES" != none ] || [ "$(wc -l <"$T/up.log")" != "$UPN" ]; then
		fail "$1" "reserved $RES, the upstream's log $(wc -l <"$T/up.log") lines (was $UPN)"
	elif ! audited "$3" "$4"; then
		fail "$1" "no audit entry $3/$4"
	else
		ok "$1: $2, ${OUT#*$'\t'}"
	fi
}
# ------------------------------------------------------------ every way around it is charged the reservation
# full ROWNAME HOW: the last send's settlement is its whole reservation, by HOW
full() {
	if [ "$RES" = none ] || [ "$SET" != "$RES" ] || [ "$HOW" != "$2" ]; then
		fail "$1" "settled $SET by $HOW, want the reservation $RES by $2 ($OUT; $J)"
	else
		ok "$1: charged its reservation \$$(dollars "$RES") ($HOW)"
	fi
}
send anthropic /v1/messages "$MSG_S" --header "$(usage_hdr 100 100)" --header "X-Fake-Mode: slow" --cut-after 300
full "the guest goes away mid-stream" cut_guest
send openai /v1/chat/completions "$CHAT_S" --header "$(usage_hdr 100 100)" --header "X-Fake-Mode: cut"
full "the upstream cuts the stream" cut_upstream
send gemini "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" "$GEM" \
	--header "$(usage_hdr 100 100)" --header "X-Fake-Mode: cut"
full "the upstream cuts a Gemini stream after usage-bearing events" cut_upstream
send openai /v1/chat/completions "$CHAT_NOUSAGE" --header "$(usage_hdr 100 100)"
full "a stream without include_usage (no usage at all)" no_usage
send anthropic /v1/messages "$MSG" --header "$(usage_hdr 100 100)" --header "X-Fake-Mode: omit"
full "a response with its usage left out" no_usage
send anthropic /v1/messages "$MSG" --header "$(usage_hdr 100 100)" --header "X-Fake-Mode: malformed"
full "usage with a count that is a string" unreadable
send gemini /v1beta/models/gemini-2.5-flash:generateContent "$GEM" --header "$(usage_hdr 100 100)" \
	--header "X-Fake-Mode: malformed"
full "Gemini usageMetadata with a count that is a string" unreadable
send anthropic "/v1/messages?beta=/count_tokens" "$MSG" --header "$(usage_hdr 100 100)" --header "X-Fake-Mode: omit"
full "a query suffix dressed as count_tokens is still Messages" no_usage
send anthropic /v1/messages/count_tokens "$MSG" --header "$(usage_hdr 100 0)"
check_eq "control: count_tokens itself is free" "$SET $HOW" "0 free"
# an endpoint the meter can't price is refused (403), not charged a worst case it does not bound
UPN=$(wc -l <"$T/up.log")
send openai /v1/chat/completions "$CHAT" --method PUT --header "$(usage_hdr 100 100)"
unbound "a method other than POST: an endpoint the meter can't price, refused" 403 budget budget.refused.endpoint
n=$(wc -l <"$T/up.log")
out=$(in_g "$LTS_PY" "$NET" req "http://$HOST4:$PORT/openai/v1/chat/completions" --key "$(key_of openai)" \
	--body "$CHAT" --method post)
check_eq "a lower-case method is refused by the broker" "${out%%$'\t'*}" 400
check_eq "and never reaches the upstream" "$(wc -l <"$T/up.log")" "$n"
UPN=$(wc -l <"$T/up.log")
send loose /V1/chat/completions "$CHAT" --header "$(usage_hdr 100 100)"
unbound "a path in another case, on a route that allows every path, is refused" 403 budget budget.refused.endpoint
send loose /v1/chat/completions/ "$CHAT" --header "$(usage_hdr 100 100)"
unbound "a path with a trailing slash is refused" 403 budget budget.refused.endpoint
send loose /v1/chat/completions "$CHAT" --header "$(usage_hdr 100 100)"
check_eq "control: the same route with the exact path is settled from its usage" "$HOW" usage
MISSING='{"model":"gpt-nonesuch-9","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}'
send openai /v1/chat/completions "$MISSING" --header "$(usage_hdr 1000 500 0)"
check_eq "a model missing from the table is charged at openai's highest prices" "$SET $HOW" \
	"$(cost "$(worst openai)" 1000 0 0 0 500) usage"
check "and named in a warning, in latchd's log" grep -q "model 'gpt-nonesuch-9' of openai is not in the price table" \
	"$T/latchd.log"
check "and in the audit log" audited budget budget.price.missing
send openai /v1/chat/completions "$MISSING" --header "$(usage_hdr 1000 500 0)" --header "X-Fake-Mode: omit"
full "a missing model without usage" no_usage

# ------------------------------------------------------------ every output a request asks for is reserved
# invariant: an upstream that spends all a body allows, read as a lax server reads it (the last of a key
# twice, escapes decoded, "8" or 8.0 for 8, a gzip body inflated: X-Fake-Mode: spend), is charged no more
# than the reservation; a body whose outputs the meter can't bound is refused before it leaves
# within ROWNAME: the last send was forwarded, settled from usage, and its reservation covers it
within() {
	if [ "${OUT%%$'\t'*}" != 200 ] || [ "$HOW" != usage ]; then
		fail "$1" "status ${OUT%%$'\t'*}, settled $SET by $HOW ($OUT; $J)"
	elif [ "$SET" -gt "$RES" ]; then
		fail "$1" "charged \$$(dollars "$SET") on a reservation of \$$(dollars "$RES")"
	else
		ok "$1: charged \$$(dollars "$SET") within its reservation \$$(dollars "$RES")"
	fi
}
SPEND="X-Fake-Mode: spend"
spend() { UPN=$(wc -l <"$T/up.log"); send "$@" --header "$SPEND" --header "$(usage_hdr 10 0)"; }
N8='"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello"}]'
spend openai /v1/chat/completions "{$N8,\"n\":8}"
within "control: n 8 is reserved as 8 outputs"
spend openai /v1/chat/completions "{$N8,\"n\":500}"
within "n 500 (cut at 128 before) is reserved as 500 outputs"
spend openai /v1/chat/completions "{$N8,\"\\u006e\":8}"
within "n spelt \\u006e is read decoded"
spend openai /v1/chat/completions "{$N8,\"n\":8.0}"
within "n 8.0 is 8"
B="{$N8,\"n\":8}"
spend openai /v1/chat/completions "$B" --chunked
within "a chunked upload (two chunks, no length) is read whole"
check_eq "and reaches the upstream whole, under a Content-Length" \
	"$(tail -1 "$T/up.log" | jq -r '[.body_len, (.headers[] | select(.[0] == "Content-Length") | .[1])] | join(" ")')" \
	"${#B} ${#B}"
spend openai /v1/completions '{"model":"gpt-4o","max_tokens":100,"prompt":"hi","best_of":8}'
within "best_of 8: every completion is billed"
spend openai /v1/completions '{"model":"gpt-4o","max_tokens":100,"n":2,"prompt":[[1],[2],[3],[4]]}'
within "a list of 4 prompts, n 2: 8 completions"
spend gemini /v1beta/models/gemini-2.5-flash:generateContent \
	'{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100,"candidate\u0043ount":8}}'
within "Gemini candidateCount spelt with an escape"
spend openai /v1/chat/completions "{$N8,\"n\":\"8\"}"
unbound "n as a string (a lax server takes 8) is refused" 429 budget budget.refused.body
spend openai /v1/chat/completions "{$N8,\"n\":1,\"n\":8}"
unbound "n twice is refused" 429 budget budget.refused.body
spend openai /v1/chat/completions '{"model":"gpt-4o","max_tokens":1,"max_t\u006fkens":4000,"messages":[]}'
unbound "max_tokens twice once decoded is refused" 429 budget budget.refused.body
spend openai /v1/chat/completions "{$N8,\"n\":8}" --bom
unbound "a body after a BOM is refused" 429 budget budget.refused.body
spend openai /v1/chat/completions "{$N8,\"n\":8}" --gzip
unbound "a gzip body is refused by the broker" 415 refused latchd.broker.metered-request-body-is-content-encoded

# input the body's size doesn't bound: images by URL, documents fetched or inline (the upstream bills
# spend_input(): 1,105 tokens an image, 150,000 a document); control: text is reserved by its size
IMG='{"type":"image_url","image_url":{"url":"https://img.example/a.png"}}'
IMGS="$IMG"
for _ in $(seq 9); do IMGS="$IMGS,$IMG"; done
spend openai /v1/chat/completions "{\"model\":\"gpt-4o\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[$IMGS]}]}"
within "ten images by URL (11,060 tokens on a body of 800 bytes)"
spend anthropic /v1/messages '{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://doc.example/a.pdf"}}]}]}'
within "an Anthropic document by URL"
spend openai /v1/responses '{"model":"gpt-5","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}]}]}'
within "a PDF inline on Responses"
spend gemini /v1beta/models/gemini-2.5-flash:generateContent \
	'{"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"application/pdf","data":"JVBERi0xLjQK"}}]}],"generationConfig":{"maxOutputTokens":10}}'
within "a PDF inline on Gemini"
spend openai /v1/chat/completions "$CHAT"
exact "control: text alone settles from its usage" "$(cost "$P_4O" 10 0 0 0 2000)"
check_eq "and is reserved by its size (a token per 2 bytes) and its max_tokens" "$RES" \
	"$(cost "$P_4O" $(((${#CHAT} + 1) / 2)) 0 0 0 2000)"

# ------------------------------------------------------------ endpoints the meter can't price (issue 34)
# invariant: a metered route forwards only endpoints the meter can price: Anthropic's message batches (billed
# later, for up to the whole batch) through the built-in claude kit's route, Gemini's Veo and batch endpoints,
# are refused 403 with one latch: line naming the endpoint and the kit field, audited, never reach the upstream
# and reserve nothing.  Controls: /v1/messages on the same route is forwarded and settled from its usage; a kit
# that prices the batch endpoint forwards it, charged its fixed price, and latch usage counts it.
BATCH='{"requests":[{"custom_id":"a","params":{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hello"}]}}]}'
UPN=$(wc -l <"$T/up.log")
send anthropic /v1/messages/batches "$BATCH"
unbound "a message batch through the claude kit's route is refused" 403 budget budget.refused.endpoint
check_eq "  its line names the endpoint and the kit field that allows it" "${OUT#*$'\t'}" \
	"latch: POST /v1/messages/batches is not an endpoint the spend meter can price for anthropic (a batch, a file, an image, audio or video job is billed apart from any usage it reads), so it is not forwarded; to allow it at a fixed price a request, add {method: POST, path: /v1/messages/batches, dollars_per_request: AMOUNT} to the priced_endpoints of the kit's credential \"anthropic\""
check "  and the broker audits its refusal" audited refused latchd.broker.not-allowed-on-a-metered-route
for ep in "veo-3.0-generate-preview:predictLongRunning" "gemini-2.5-flash:batchGenerateContent" \
	"imagen-4.0-generate-001:predict"; do
	send gemini "/v1beta/models/$ep" '{"instances":[{"prompt":"a cat"}]}'
	unbound "gemini's $ep is refused" 403 budget budget.refused.endpoint
done
send anthropic /v1/messages "$MSG" --header "$(usage_hdr 1111 222)"
exact "control: /v1/messages on the same route is forwarded and settled" "$(cost "$P_SON" 1111 0 0 0 222)"
used() { latch --json usage "$LTS_NAME" | jq -r '.caps[] | select(.scope == "sandbox" and .provider == "anthropic") | .dollars_per_day.used'; }
used_known() { u0=$(used); [ -n "$u0" ]; } # sets u0
wait_until -t 2 used_known
send anthropicp /v1/messages/batches "$BATCH"
check_eq "a kit that prices the batch endpoint forwards it" "${OUT%%$'\t'*}" 200
check_eq "  the upstream got it" "$(tail -1 "$T/up.log" | jq -r .path)" /v1/messages/batches
check_eq "  reserved and charged its fixed price, \$2.50" "$RES $SET $HOW" "2500000 2500000 fixed"
counter_used() { used; }
wait_counter -t 2 used -eq $((u0 + 2500000))
check_eq "  and latch usage counts the \$2.50 against anthropic's day" "$(used)" $((u0 + 2500000))

# ------------------------------------------------------------ tools that have the provider fetch a URL (issue 34)
# invariant: a request whose body has the provider itself fetch from a URL it chooses (Anthropic's web_fetch
# tool and mcp_servers, OpenAI Responses' mcp tool, Gemini's url_context) is refused 403 on a metered route,
# one latch: line naming the tool and the kit option, audited, never reaching the upstream, streamed or not.
# Controls: the same request without the tool is forwarded (above: MSG, MSG_S); with the kit's
# allow_provider_tools naming the tool, it is forwarded and settled.
WF='"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":3}]'
UPN=$(wc -l <"$T/up.log")
send anthropic /v1/messages "${MSG%\}},$WF}" --header "$(usage_hdr 10 10)"
unbound "a Messages request with a web_fetch tool is refused" 403 budget budget.refused.tool
check_eq "  its line names the tool and the kit option" "${OUT#*$'\t'}" \
	"latch: this request asks anthropic to fetch from a URL it chooses itself (a web_fetch tool), which would carry data past the sandbox's profile; it is not forwarded. To allow it, add web_fetch to the allow_provider_tools of the kit's credential \"anthropic\""
send anthropic /v1/messages "${MSG_S%\}},$WF}" --header "$(usage_hdr 10 10)"
unbound "and streamed" 403 budget budget.refused.tool
send anthropic /v1/messages "${MSG%\}},\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://mcp.example.org/sse\",\"name\":\"x\"}]}"
unbound "a Messages request with mcp_servers is refused" 403 budget budget.refused.tool
send openai /v1/responses "${RESP_S%\}},\"tools\":[{\"type\":\"mcp\",\"server_label\":\"x\",\"server_url\":\"https://mcp.example.org/sse\"}]}"
unbound "a Responses request with an mcp tool is refused, streamed" 403 budget budget.refused.tool
send gemini /v1beta/models/gemini-2.5-flash:generateContent "${GEM%\}},\"tools\":[{\"urlContext\":{}}]}"
unbound "a Gemini request with the urlContext tool is refused" 403 budget budget.refused.tool
send gemini "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" "${GEM%\}},\"tools\":[{\"url_context\":{}}]}"
unbound "and url_context, streamed" 403 budget budget.refused.tool
send anthropicp /v1/messages "${MSG%\}},$WF}" --header "$(usage_hdr 2222 333)"
exact "with allow_provider_tools: [web_fetch] the web_fetch request is forwarded and settled" \
	"$(cost "$P_SON" 2222 0 0 0 333)"
send anthropicp /v1/messages "${MSG_S%\}},$WF}" --header "$(usage_hdr 44 555)"
exact "  and streamed" "$(cost "$P_SON" 44 0 0 0 555)"
send anthropicp /v1/messages "${MSG%\}},\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://mcp.example.org/sse\",\"name\":\"x\"}]}"
check_eq "  but not mcp_servers, which it does not name" "${OUT%%$'\t'*}" 403

# ------------------------------------------------------------ latch usage reads what latchd wrote
sums=$(ledger sums)
u=$(latch --json usage "$LTS_NAME")
for p in openai anthropic gemini; do
	row=$(jq -c --arg p "$p" '.caps[] | select(.scope == "sandbox" and .provider == $p)' <<<"$u")
	want=$(jq -r --arg k "$LTS_NAME/$p" '.[$k].micros' <<<"$sums")
	check_eq "latch usage: $p's dollars used in $LTS_NAME are the ledger's settlements" \
		"$(jq -r '.dollars_per_day.used + .dollars_per_day.reserved' <<<"$row")" "$want"
	check_eq "latch usage: $p's requests in the last day" "$(jq -r .requests_per_day.used <<<"$row")" \
		"$(jq -r --arg k "$LTS_NAME/$p" '.[$k].requests' <<<"$sums")"
done
check "latch usage gives each cap's reset time (next_free)" \
	jq -e '[.caps[] | select(.scope == "sandbox") | .requests_per_day.next_free | test("^20[0-9-]+T[0-9:]+Z$")] | all' <<<"$u"
check "latch usage shows the host-wide rows too" jq -e 'any(.caps[]; .scope == "host" and .provider == "openai")' <<<"$u"
check "latch usage as text: one row per cap, per sandbox and provider" \
	grep -qE "^$LTS_NAME +anthropic +dollars_per_day +\\\$1000\\.00 " <<<"$(latch usage "$LTS_NAME")"

# ------------------------------------------------------------ one writer; a bad price table stops latchd, one line
second=$(LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- timeout 10 "$LATCHD_BIN" 2>&1)
check_eq "a second latchd on the same ledger refuses to start" "$?" 1
check "with one line naming the ledger and the fix" grep -qx "latchd: ledger $LEDGER is being written by another process; one latchd per LATCH_ROOT (stop the other one first)" <<<"$second"
check "and the first still has its socket" test -S "$ROOT/run/latch/latchd.sock"
send openai /v1/chat/completions "$CHAT" --header "$(usage_hdr 10 10)"
check_eq "and still meters" "$HOW" usage
printf 'openai gpt-4o 2.50 ten 1.25 - 16384 128000\n' >"$ROOT/etc/latch/prices"
chmod 0644 "$ROOT/etc/latch/prices"
kill -HUP "$LATCHD_PID"
wait_until -t 2 grep -q "price table not reloaded" "$T/latchd.log"
check "SIGHUP with a bad price table keeps the one in force, saying why" \
	grep -q "price table not reloaded, the one in force stays: $ROOT/etc/latch/prices:1: " "$T/latchd.log"
send openai /v1/chat/completions "$CHAT" --header "$(usage_hdr 1234 321 200)"
exact "and requests are still priced by it" "$(cost "$P_4O" 1034 200 0 0 321)"
kill -KILL "$LATCHD_PID"
{ wait "$LATCHD_PID"; } 2>/dev/null
bad=$(LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- timeout 10 "$LATCHD_BIN" 2>&1)
check_eq "latchd with a bad price table refuses to start" "$?" 1
check_eq "with one line naming the file, the line and the field" "$(wc -l <<<"$bad") $(grep -c "^latchd: $ROOT/etc/latch/prices:1: OUTPUT 'ten'" <<<"$bad")" "1 1"
rm -f "$ROOT/etc/latch/prices"
start_latchd || fail latchd-restart "latchd did not come back: $(tail -3 "$T/latchd.log")"

# ------------------------------------------------------------ SIGKILL mid-stream: the day's spend never goes down
spend() { # anthropic's dollars used + reserved, and requests, in the sandbox
	latch --json usage "$LTS_NAME" | jq -r '.caps[] | select(.scope == "sandbox" and .provider == "anthropic") |
		"\(.dollars_per_day.used + .dollars_per_day.reserved) \(.requests_per_day.used)"'
}
before_id=$(ledger lastid)
in_g "$LTS_PY" "$NET" req "http://$HOST4:$PORT/anthropic/v1/messages" --key "$(key_of anthropic)" --body "$MSG_S" \
	--header "$(usage_hdr 100 100)" --header "X-Fake-Mode: slow" >"$T/killed.out" 2>&1 &
streamer=$!
LTS_PIDS+=("$streamer")
counter_ledger_last() { ledger lastid; }
wait_counter -t 2 ledger_last -gt "$before_id"
sleep 0.8 # the point: kill latchd mid-stream, once a few of the slow stream's events are through
read -r spent_before n_before <<<"$(spend)"
kill -KILL "$LATCHD_PID"
{ wait "$LATCHD_PID"; } 2>/dev/null
wait "$streamer" 2>/dev/null
start_latchd || fail latchd-restart "latchd did not come back: $(tail -3 "$T/latchd.log")"
read -r spent_after n_after <<<"$(spend)"
J=$(ledger settled "$before_id" --wait 1)
check_eq "the stream cut by SIGKILL is settled at its full reservation, as lost" \
	"$(jq -r '"\(.settle.micros == .reserve.micros) \(.settle.how)"' <<<"$J")" "true lost"
check_cmp "the day's spend after the restart ($spent_after) is not below the spend before ($spent_before)" \
	"$spent_after" -ge "$spent_before"
check_eq "and its requests are all still counted" "$n_after" "$n_before"
send anthropic /v1/messages "$MSG" --header "$(usage_hdr 1111 222 3333 444 55)"
exact "after the restart the meter settles from usage again" "$(cost "$P_SON" 1111 3333 444 55 222)"

check "audit verify passes" latch audit verify
lts_done
