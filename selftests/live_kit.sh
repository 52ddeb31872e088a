#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_kit.sh - `latch kits` and `latch kit check FILE`, as a user runs them:
# exit codes, the one-line errors, --json, a file kit over a built-in, and
# secrets that are reported "set" or "missing" and never printed.  No
# network, no root: everything lives in a temp LATCH_ROOT.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"

[ -x "$LATCH_BIN" ] || lts_skip_all "no $LATCH_BIN; run make"
command -v jq >/dev/null || lts_skip_all "needs jq"
T=$(mktemp -d /tmp/latch-kit.XXXXXX)
trap 'rm -rf "$T"' EXIT
export LATCH_ROOT=$T/root
KITS=$LATCH_ROOT/etc/latch/kits
mkdir -p "$KITS"
# a value no output may ever hold
SENTINEL=sk-live-kit-$$-do-not-print
unset ANTHROPIC_API_KEY OPENAI_API_KEY GEMINI_API_KEY WEATHER_API_KEY

# the seed's weather.yaml (shared/seeds/003), unchanged
cat >"$T/weather.yaml" <<'EOF'
# weather.yaml
name: weather
description: A shell that can call a weather API without holding its key
image: alpine:latest
command: [sh]
egress_allow:
  - docs.example.com
credentials:
  - name: weather
    upstream: https://api.example.com
    secret: WEATHER_API_KEY
    header: Authorization
    scheme: "Bearer "
    methods: [GET]
    paths: [/v1/forecast]
    env:
      WEATHER_API_URL: "{{url}}"
      WEATHER_API_KEY: "{{placeholder}}"
EOF

# run NAME WANT_RC CMD...: exit WANT_RC; leaves $OUT (stdout) and $ERR (stderr)
run() {
	local name=$1 want=$2 rc
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
	if [ "$rc" = "$want" ]; then ok "$name (exit $rc)"; else fail "$name" "exit $rc, want $want: $ERR"; fi
}

# never NAME: the sentinel is in neither stream of the last run
never() {
	if grep -qF "$SENTINEL" "$T/out" "$T/err"; then fail "$1" "the secret was printed"; else ok "$1"; fi
}

# ---- latch kits

run "kits lists the built-ins" 0 "$LATCH_BIN" kits
for k in claude codex gemini shell; do
	check "kits has $k" grep -qE "^$k +" "$T/out"
done
check_eq "claude is brokered, its key missing" "$(awk '$1 == "claude" { print $3, $4 }' <<<"$OUT")" "brokered missing"
check_eq "shell has no keys and no network" "$(awk '$1 == "shell" { print $2, $3 }' <<<"$OUT")" "none none"
check "the footnote says where the key stays" grep -q "^brokered: the key stays on this machine" "$T/out"
check "the footnote names the kits directory" grep -qF "kits in $KITS override built-ins" "$T/out"

ANTHROPIC_API_KEY=$SENTINEL run "kits with the key in the environment" 0 "$LATCH_BIN" kits
check_eq "claude's key is set" "$(awk '$1 == "claude" { print $4 }' <<<"$OUT")" "set"
never "kits never prints the key"
ANTHROPIC_API_KEY=$SENTINEL run "kits --json" 0 "$LATCH_BIN" --json kits
check_eq "--json: four kits" "$(jq '.kits | length' <<<"$OUT")" 4
check_eq "--json: claude's secret state" \
	"$(jq -r '.kits[] | select(.name == "claude") | .credentials[0].secret_state' <<<"$OUT")" set
check_eq "--json: codex's base URL keeps its suffix" \
	"$(jq -r '.kits[] | select(.name == "codex") | .credentials[0].env[0].template' <<<"$OUT")" "{{url}}/v1"
never "kits --json never prints the key"

# a file kit takes the built-in's place
sed 's/^name: weather/name: claude/' "$T/weather.yaml" >"$KITS/claude.yaml"
chmod 0644 "$KITS/claude.yaml"
run "kits with a file kit" 0 "$LATCH_BIN" --json kits
check_eq "the file kit is listed once" "$(jq '[.kits[] | select(.name == "claude")] | length' <<<"$OUT")" 1
check_eq "the file replaces the built-in" \
	"$(jq -r '.kits[] | select(.name == "claude") | "\(.source) \(.shadows_builtin) \(.credentials[0].name)"' \
		<<<"$OUT")" "$KITS/claude.yaml true weather"

# Invariant: a kit file others may write is refused, and the built-in does not stand in for it.
chmod 0666 "$KITS/claude.yaml"
run "kits with an unsafe file kit fails" 1 "$LATCH_BIN" kits
check "its row says INVALID" grep -qE "^claude +- .*INVALID" "$T/out"
check_eq "one error line names the fix" "$(grep -c 'run chmod go-w' <<<"$ERR")" 1
rm -f "$KITS/claude.yaml"
run "control: without it, kits is whole again" 0 "$LATCH_BIN" kits

# Invariant: one reader, one verdict: `kits` and `kit check` say the same of one file,
# in the same words (kits once called a misnamed file INVALID and kit check called it valid).
sed 's/^name: weather/name: other/' "$T/weather.yaml" >"$KITS/misnamed.yaml"
chmod 0644 "$KITS/misnamed.yaml"
run "kits with a file whose name is not its file's" 1 "$LATCH_BIN" kits
check "its row says INVALID and sends you to kit check" \
	grep -qF "INVALID: see \`latch kit check $KITS/misnamed.yaml\`" "$T/out"
KITS_ERR=$ERR
run "kit check of that file fails too" 2 "$LATCH_BIN" kit check "$KITS/misnamed.yaml"
check_eq "... with the line kits gave" "$ERR" "$KITS_ERR"
check_eq "... which names the fix" "$ERR" \
	"latch: $KITS/misnamed.yaml: name \"other\" is not the file's name; write name: misnamed, or rename the file to other.yaml"
# Invariant: every failed --json document carries its error (docs/json.md).
run "--json kits with it: exit 1" 1 "$LATCH_BIN" --json kits
check_eq "--json kits: the error at the top names the file and the fix" "$(jq -r '.error' <<<"$OUT")" \
	"1 kit would be refused: ${KITS_ERR#latch: }"
check_eq "--json kits: the kit's own error too" "$(jq -r '.kits[] | select(.name == "misnamed") | .error' <<<"$OUT")" \
	"${KITS_ERR#latch: }"
# the same for a secret_file latchd would refuse: kit check refused it, kits listed it as valid
printf 'k-%s\n' "$SENTINEL" >"$T/other.key"
chmod 0644 "$T/other.key"
sed -e 's/^name: weather/name: misnamed/' -e "s|secret: WEATHER_API_KEY|secret_file: $T/other.key|" \
	"$T/weather.yaml" >"$KITS/misnamed.yaml"
run "kits with an unsafe secret_file" 1 "$LATCH_BIN" kits
KITS_ERR=$ERR
run "kit check of the same file" 2 "$LATCH_BIN" kit check "$KITS/misnamed.yaml"
check_eq "... the same line from both" "$ERR" "$KITS_ERR"
never "neither prints the key"
# control: the file named right, with its secret at 0600, is valid to both
chmod 0600 "$T/other.key"
run "control: kits with the file named right" 0 "$LATCH_BIN" kits
check "control: its row is no INVALID" bash -c "grep -E '^misnamed ' '$T/out' | grep -qv INVALID"
run "control: kit check of it" 0 "$LATCH_BIN" kit check "$KITS/misnamed.yaml"
run "control: --json kits has no error" 0 "$LATCH_BIN" --json kits
check_eq "control: --json kits: error is absent" "$(jq -r 'has("error")' <<<"$OUT")" false
# a draft outside the kits directory keeps its own name (up never reads it there)
cp "$T/weather.yaml" "$T/draft.yaml"
run "control: a draft elsewhere named other than its file" 0 "$LATCH_BIN" kit check "$T/draft.yaml"
rm -f "$KITS/misnamed.yaml"

# ---- latch kit check FILE

run "check the seed's weather.yaml" 0 "$LATCH_BIN" kit check "$T/weather.yaml"
check_eq "one warning names the field latch does not read" "$ERR" \
	"latch: warning: kit file $T/weather.yaml: latch does not read image (ignored; docs/kits.md lists the fields it reads)"
check "it says what it brokers" grep -qF "latch: brokering WEATHER_API_KEY -> api.example.com" "$T/out"
check "it names the route" grep -qF "latch:   route /weather: GET under /v1/forecast" "$T/out"
check "it says the key is missing" grep -qF "WEATHER_API_KEY is missing" "$T/out"
check "it names the env" grep -qF "WEATHER_API_URL={{url}} WEATHER_API_KEY={{placeholder}}" "$T/out"
WEATHER_API_KEY=$SENTINEL run "check with the key set" 0 "$LATCH_BIN" kit check "$T/weather.yaml"
check "it says the key is set" grep -qF "WEATHER_API_KEY is set" "$T/out"
never "kit check never prints the key"
WEATHER_API_KEY=$SENTINEL run "check --json" 0 "$LATCH_BIN" --json kit check "$T/weather.yaml"
check_eq "--json: ok, the route and its state" \
	"$(jq -r '"\(.ok) \(.kit.credentials[0].upstream) \(.kit.credentials[0].secret_state)"' <<<"$OUT")" \
	"true https://api.example.com set"
check_eq "--json: the sandbox's env names" "$(jq -r '.kit.env | join(",")' <<<"$OUT")" \
	"WEATHER_API_URL,WEATHER_API_KEY,HTTPS_PROXY,HTTP_PROXY,https_proxy,http_proxy,NO_PROXY,no_proxy"
never "kit check --json never prints the key"

# refuses BAD_NAME FILE LINE: exit 2, nothing on stdout, exactly LINE on stderr
refuses() {
	run "$1" 2 "$LATCH_BIN" kit check "$2"
	check_eq "$1: one line" "$ERR" "$3"
	check_eq "$1: nothing on stdout" "$OUT" ""
}

sed 's/"{{placeholder}}"/"fixed"/' "$T/weather.yaml" >"$T/noph.yaml"
refuses "env without a placeholder" "$T/noph.yaml" \
	"latch: $T/noph.yaml: credential \"weather\": env must give the sandbox {{placeholder}} in some variable"
sed 's|https://api.example.com|https://api.example.com/v1|' "$T/weather.yaml" >"$T/path.yaml"
refuses "an upstream with a path" "$T/path.yaml" \
	"latch: $T/path.yaml: credential \"weather\": upstream \"https://api.example.com/v1\" must be https://host with no path"
sed 's/  - name: weather/  - name: Weather_API/' "$T/weather.yaml" >"$T/name.yaml"
refuses "a credential name in capitals" "$T/name.yaml" \
	"latch: $T/name.yaml: credential name \"Weather_API\" must be 1-32 characters of a-z, 0-9 and '-'"
run "--json: a bad kit" 2 "$LATCH_BIN" --json kit check "$T/noph.yaml"
check_eq "--json: the error and its exit" "$(jq -r '"\(.exit) \(.error)"' <<<"$OUT")" \
	"2 $T/noph.yaml: credential \"weather\": env must give the sandbox {{placeholder}} in some variable"
refuses "no such file" "$T/none.yaml" "latch: $T/none.yaml: no such file"
ln -s "$T/weather.yaml" "$T/link.yaml"
refuses "a link" "$T/link.yaml" \
	"latch: $T/link.yaml: is a symbolic link; a kit must be a regular file: replace the link with the file"

# Invariant: a secret_file latchd would refuse makes kit check fail now.
printf 'k-%s\n' "$SENTINEL" >"$T/weather.key"
chmod 0644 "$T/weather.key"
sed "s|secret: WEATHER_API_KEY|secret_file: $T/weather.key|" "$T/weather.yaml" >"$T/file.yaml"
run "a secret file others may read" 2 "$LATCH_BIN" kit check "$T/file.yaml"
check "the line names the fix" grep -qF "a secret readable by group or others (mode 0644); run chmod 600 $T/weather.key" "$T/err"
never "the refusal never prints the key"
chmod 0600 "$T/weather.key"
run "control: the same file at 0600" 0 "$LATCH_BIN" kit check "$T/file.yaml"
check "it says the file is set" grep -qF "secret_file $T/weather.key is set" "$T/out"
never "kit check never prints a file's key"

run "kit without check is a usage error" 2 "$LATCH_BIN" kit
run "kits takes no argument" 2 "$LATCH_BIN" kits extra

lts_done
