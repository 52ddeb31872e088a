#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# broker.sh - the credential broker beside direct HTTPS and nginx, in one run.
#
# The method of ../shared/bench-anchors/http_bench.sh: everything on
# 127.0.0.1 in a private network namespace; one nginx worker as the HTTPS
# upstream (:8443, bench/broker-upstream.conf), one nginx worker as the
# credential-adding reverse proxy (:8080, bench/broker-nginx-proxy.conf), and
# latch's broker two ways, one thread each, one route to the same upstream,
# TLS verified against a CA made here: the engine alone (latch:
# build/selftests/broker_drv on 127.0.0.1:8119), and latchd serving a
# sandbox given a kit by `latch attach --kit` (latchd: its host address
# 127.0.0.2:8119, its guest 127.0.0.1; the sandbox's link is a veth pair
# in the namespace that carries none of this traffic), with its audit log.
# latchd twice: its credential `api` has no AI provider (no meter: latchd),
# its credential `metered` is provider openai to the same upstream, so
# every request is reserved, written to the spend ledger, read and settled
# (latchd-budget: the spend caps on).  Every target gets the same request,
# POST /v1/chat/completions with a 244-byte body, answered by a 561-byte
# chat completion with its usage.
# For each target and C in CONNS: wrk -d SECS --latency (1 thread at C=1, 2
# otherwise) -> rps, p50/p99, errors and the proxy's CPU per request (up to
# when it is idle again: latchd folds a metered run's ledger rows after the
# run, and the next run waits for that); the repetitions are interleaved.  Then SSE time-to-first-byte (curl, 10 events
# 100 ms apart; SSE_N samples a target, interleaved, their median: 5 x REPS,
# since one sample moves by 0.3 ms here where the targets differ by less)
# and memory per idle keep-alive connection (RSS growth over
# IDLE_CONNS connections that each made one request), without the metered
# route.
#
#   bash bench/broker.sh [REPS]      (default 3; SECS=10 CONNS="1 16" IDLE_CONNS=1000 SSE_N=5xREPS
#                                     LATCHD_IDLE_CONNS=200: latchd's engine keeps 256 a sandbox;
#                                     TARGETS="latchd latchd-budget": only those rows)
# Needs nginx-light, libnginx-mod-http-echo, wrk, curl, openssl (.ci/deps.sh).
# Prints the table and the targets' verdicts (on the medians), each with its
# figures paired rep by rep (the median and range of target/nginx or
# target - nginx in the same rep: a range on both sides of parity is a
# difference the run can't tell from noise); raw numbers in $OUT/raw.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REPS=${1:-${BENCH_REPS:-3}}
SECS=${SECS:-10}
CONNS=${CONNS:-1 16}
IDLE_CONNS=${IDLE_CONNS:-1000}
SSE_N=${SSE_N:-$((5 * REPS))}
NS=latch-bench-broker-$$
D=$(mktemp -d /tmp/latch-bench-broker.XXXXXX)
OUT=${OUT:-$D}
DRV=$BUILD/selftests/broker_drv
LATCHD_IDLE_CONNS=${LATCHD_IDLE_CONNS:-200}
LROOT=$D/root
LBPFFS=/sys/fs/bpf/latch-bench-broker-$$
TOKEN="Bearer sk-bench-0123456789abcdef0123456789abcdef"
PH=latch-placeholder-$(openssl rand -hex 16)
PIDS=()
# latchd confines itself in a cgroup of its own here, not the host's latch/latchd (as bench/latchd.sh)
export LATCH_CGROUP=latch-bench-broker-$$

for t in nginx wrk curl openssl; do
	command -v "$t" >/dev/null || { echo "bench/broker.sh: needs $t (bash .ci/deps.sh)" >&2; exit 1; }
done
[ -x "$DRV" ] || { echo "bench/broker.sh: no $DRV; run make" >&2; exit 1; }
[ -x "$BUILD/latchd" ] || { echo "bench/broker.sh: no $BUILD/latchd; run make" >&2; exit 1; }
grep -qs " /sys/fs/bpf bpf " /proc/mounts || mount -t bpf bpf /sys/fs/bpf

cleanup() {
	set +e
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	ip netns del "$NS" 2>/dev/null
	# latchd's cgroup (its process is gone by now), in each hierarchy
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" { print $2 }' /proc/mounts); do
		[ -d "$root/$LATCH_CGROUP" ] || continue
		rmdir "$root/$LATCH_CGROUP"/rooms/* "$root/$LATCH_CGROUP"/rooms "$root/$LATCH_CGROUP"/latchd \
			"$root/$LATCH_CGROUP"/warm "$root/$LATCH_CGROUP" 2>/dev/null
	done
	rm -rf "$LBPFFS"
	[ "$OUT" = "$D" ] || rm -rf "$D"
}
trap cleanup EXIT INT TERM
X() { ip netns exec "$NS" "$@"; }
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

ip netns add "$NS"
ip -n "$NS" link set lo up
mkdir -p "$D/tmp"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$D/key.pem" -out "$D/cert.pem" 2>/dev/null
printf '%s' "${TOKEN#Bearer }" >"$D/secret"
chmod 600 "$D/secret"
stream=""
for i in $(seq 1 10); do stream+="echo 'data: {\"chunk\": $i}'; echo_flush; echo_sleep 0.1; "; done
# the request every target gets, and wrk's script for it (the auth header comes with -H)
BODY='{"model":"gpt-4o-mini","max_tokens":256,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Say ok, and nothing else, in reply to this benchmark request of about two hundred and forty bytes."}]}'
printf 'wrk.method = "POST"\nwrk.body = [[%s]]\nwrk.headers["Content-Type"] = "application/json"\n' "$BODY" \
	>"$D/post.lua"
for c in upstream nginx-proxy; do
	sed -e "s|@DIR@|$D|g" -e "s|@TOKEN@|$TOKEN|g" -e "s|@STREAM@|$stream|" "bench/broker-$c.conf" >"$D/$c.conf"
done
cat >"$D/broker.json" <<EOF
{"hosts": {"localhost": ["127.0.0.1"]},
 "sandboxes": [{"name": "bench", "listen": "127.0.0.1", "port": 8119, "guests": ["127.0.0.1"],
   "routes": [{"name": "api", "placeholder": "$PH", "methods": ["GET", "POST"], "paths": ["/v1"],
     "upstreams": [{"url": "https://localhost:8443", "secret_file": "$D/secret", "header": "Authorization",
                    "scheme": "Bearer ", "ca_file": "$D/cert.pem"}]}]}]}
EOF

# started without a shell function in between, so $! is the server's own PID (ip netns exec execs it)
ip netns exec "$NS" nginx -c "$D/upstream.conf" -g 'daemon off;' &
PIDS+=($!)
ip netns exec "$NS" nginx -c "$D/nginx-proxy.conf" -g 'daemon off;' &
PIDS+=($!)
NGX_PID=$!
# BROKER_QUIET: audit lines are counted, not printed (latchd's audit keeps 120 a minute and counts the rest)
ip netns exec "$NS" env BROKER_QUIET=1 BROKER_CONNS_MAX=$((IDLE_CONNS + 64)) "$DRV" "$D/broker.json" </dev/null \
	>"$D/drv.out" 2>"$D/drv.err" &
PIDS+=($!)
LATCH_PID=$!

# latchd: a sandbox on a veth pair of the namespace (guest 127.0.0.1, host 127.0.0.2) given the kit bench
LX() { LATCH_ROOT=$LROOT LATCH_BPFFS=$LBPFFS nsenter --net="/run/netns/$NS" -- "$@"; }
mkdir -p "$LROOT/etc/latch/kits" "$LBPFFS"
# caps far above what the runs spend, so that every metered request is checked against them and none refused
cat >"$LROOT/etc/latch/latch.conf" <<EOF
dns_upstream = 127.0.0.1:53999
budget_requests_per_hour = 1000000000
budget_requests_per_day = 1000000000
budget_dollars_per_day = 1000000
budget_host_requests_per_hour = 1000000000
budget_host_requests_per_day = 1000000000
budget_host_dollars_per_day = 1000000
EOF
cat >"$LROOT/etc/latch/kits/bench.yaml" <<EOF
name: bench
credentials:
  - name: api
    upstream: https://127.0.0.1:8443
    secret_file: $D/secret
    header: Authorization
    scheme: "Bearer "
    methods: [GET, POST]
    paths: [/v1]
    ca_file: $D/cert.pem
    env:
      BENCH_KEY: "{{placeholder}}"
  - name: metered
    upstream: https://127.0.0.1:8443
    provider: openai
    secret_file: $D/secret
    header: Authorization
    scheme: "Bearer "
    methods: [POST]
    paths: [/v1/chat/completions]
    ca_file: $D/cert.pem
    env:
      BENCH_METERED_KEY: "{{placeholder}}"
EOF
chmod 0644 "$LROOT/etc/latch/latch.conf" "$LROOT/etc/latch/kits/bench.yaml"
ip -n "$NS" link add lb0 type veth peer name lb1
ip -n "$NS" link set lb0 up
ip -n "$NS" link set lb1 up
# nsenter, not ip netns exec (whose private /sys hides the pins); no function in between, and nsenter
# execs, so $! is latchd's PID
LATCH_ROOT=$LROOT LATCH_BPFFS=$LBPFFS nsenter --net="/run/netns/$NS" -- "$BUILD/latchd" --dns-port 5353 ${LATCHD_ARGS:-} \
	>"$D/latchd.log" 2>&1 &
PIDS+=($!)
LATCHD_PID=$!
for _ in $(seq 50); do [ -S "$LROOT/run/latch/latchd.sock" ] && break; sleep 0.1; done
LX "$BUILD/latch" attach bench --dev lb0 --guest-mac 02:00:00:00:00:0b --guest-ip 127.0.0.1 --host-ip 127.0.0.2 \
	--kit bench >"$D/attach.out" 2>&1 || { log "latch attach --kit failed: $(cat "$D/attach.out")"; exit 1; }
LPH=$(LX "$BUILD/latch" --json env bench | jq -r '.env[] | select(.name == "BENCH_KEY") | .value')
LPH_METERED=$(LX "$BUILD/latch" --json env bench | jq -r '.env[] | select(.name == "BENCH_METERED_KEY") | .value')
sleep 1.5

url() { # url TARGET PATH
	case $1 in
	direct) echo "https://127.0.0.1:8443$2" ;;
	nginx) echo "http://127.0.0.1:8080$2" ;;
	latch) echo "http://127.0.0.1:8119/api$2" ;;
	latchd) echo "http://127.0.0.2:8119/api$2" ;;
	latchd-budget) echo "http://127.0.0.2:8119/metered$2" ;;
	esac
}
auth() { # the header each target's client sends
	case $1 in
	direct) echo "Authorization: $TOKEN" ;;
	nginx) echo "X-None: 1" ;;
	latch) echo "Authorization: Bearer $PH" ;;
	latchd) echo "Authorization: Bearer $LPH" ;;
	latchd-budget) echo "Authorization: Bearer $LPH_METERED" ;;
	esac
}
pids_of() { # the proxy's processes, for CPU and memory
	case $1 in
	nginx) echo "$NGX_PID" $(cat /proc/"$NGX_PID"/task/*/children 2>/dev/null) ;;
	latch) echo "$LATCH_PID" ;;
	latchd | latchd-budget) echo "$LATCHD_PID" ;;
	esac
}
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' /proc/"$p"/stat))); done; echo $t; }
# settle PIDS: until they are idle (at most one CPU tick in 0.5 s; 20 s at most).  latchd folds a
# metered run's ledger rows and checkpoints them after wrk stops: that work is the metered run's
# (its CPU a request counts it), and the next target's run must not pay for it.
settle() {
	local a b
	for _ in $(seq 40); do
		a=$(cpu_ticks "$@")
		sleep 0.5
		b=$(cpu_ticks "$@")
		[ $((b - a)) -le 1 ] && return 0
	done
	log "the proxy was still busy 20 s after its run"
}
rss_kb() { local t=0 p; for p in "$@"; do t=$((t + $(awk '/^VmRSS/ { print $2 }' /proc/"$p"/status))); done; echo $t; }
to_us() { awk '{ v = $1; u = $1; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
	if (u == "us") v *= 1; else if (u == "ms") v *= 1000; else if (u == "s") v *= 1e6; print v }'; }
rec() { echo "$1,$2,$3,$4,$5" >>"$OUT/raw.csv"; }

log "sanity: the upstream must see the key through both proxies"
# (latch scrubs the key from what comes back, so its echo is the key's length in stars)
stars=$(printf '%*s' $((${#TOKEN} - 7)) '' | tr ' ' '*')
for t in nginx latch latchd; do
	want=$TOKEN
	[ "$t" != nginx ] && want="Bearer $stars"
	got=$(X curl -sS --max-time 5 -H "$(auth $t)" "$(url $t /v1/auth)")
	[ "$got" = "$want" ] || { log "$t did not add the key (got '$got')"; exit 1; }
done

# the metered route must really be metered: one request, then the ledger through `latch usage`
metered_requests() {
	LX "$BUILD/latch" --json usage bench | jq -r '[.caps[] | select(.scope == "sandbox" and .provider == "openai") |
		.requests_per_day.used] | add // 0'
}
got=$(X curl -sS --max-time 5 -H "$(auth latchd-budget)" -H "Content-Type: application/json" -d "$BODY" \
	"$(url latchd-budget /v1/chat/completions)")
[ "$(jq -r .usage.prompt_tokens <<<"$got" 2>/dev/null)" = 57 ] || { log "the metered route answered '$got'"; exit 1; }
[ "$(metered_requests)" = 1 ] || { log "the metered request is not in the spend ledger"; exit 1; }
X curl -sS --max-time 5 -H "$(auth latchd)" -H "Content-Type: application/json" -d "$BODY" \
	"$(url latchd /v1/chat/completions)" >/dev/null
[ "$(metered_requests)" = 1 ] || { log "the unmetered route was metered"; exit 1; }

echo "target,conns,rep,metric,value" >"$OUT/raw.csv"
targets=(${TARGETS:-direct nginx latch latchd latchd-budget})
for ((r = 1; r <= REPS; r++)); do
	for c in $CONNS; do
		th=2
		[ "$c" = 1 ] && th=1
		for ((i = 0; i < ${#targets[@]}; i++)); do
			t=${targets[$(((i + r - 1) % ${#targets[@]}))]}
			log "rep $r c=$c $t"
			pp=$(pids_of "$t")
			c0=0
			[ -n "$pp" ] && c0=$(cpu_ticks $pp)
			X timeout $((SECS + 30)) wrk -t"$th" -c"$c" -d"${SECS}s" --latency -s "$D/post.lua" \
				-H "$(auth "$t")" "$(url "$t" /v1/chat/completions)" >"$D/wrk.txt"
			c1=0
			[ -n "$pp" ] && settle $pp && c1=$(cpu_ticks $pp)
			reqs=$(awk '/requests in/ { print $1 }' "$D/wrk.txt")
			rec "$t" "$c" "$r" rps "$(awk '/^Requests\/sec/ { print $2 }' "$D/wrk.txt")"
			rec "$t" "$c" "$r" p50_us "$(awk '$1 == "50%" { print $2 }' "$D/wrk.txt" | to_us)"
			rec "$t" "$c" "$r" p99_us "$(awk '$1 == "99%" { print $2 }' "$D/wrk.txt" | to_us)"
			rec "$t" "$c" "$r" errors "$(awk '/Non-2xx|Socket errors/ { s = 1 } END { print s + 0 }' "$D/wrk.txt")"
			[ -n "$pp" ] && rec "$t" "$c" "$r" cpu_us_per_req \
				"$(awk -v d=$((c1 - c0)) -v n="$reqs" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf("%.1f", d * 1e6 / hz / n) }')"
		done
	done
done

log "streaming /v1/stream (10 events x 100 ms), $SSE_N times a target"
for ((r = 1; r <= SSE_N; r++)); do
	for t in direct nginx latch latchd; do
		read -r ttfb total code <<<"$(X curl -sS -o /dev/null --cacert "$D/cert.pem" -H "$(auth "$t")" \
			-w '%{time_starttransfer} %{time_total} %{http_code}\n' "$(url "$t" /v1/stream)")"
		# a stream that was not a 200 is said: its "first byte" was an error, not an event
		[ "$code" = 200 ] || echo "# SSE through $t, rep $r: HTTP $code after ${total}s" >&2
		rec "$t" 1 "$r" sse_ttfb_ms "$(awk -v v="$ttfb" 'BEGIN { print v * 1000 }')"
		rec "$t" 1 "$r" sse_total_ms "$(awk -v v="$total" 'BEGIN { print v * 1000 }')"
	done
done

log "memory per idle keep-alive connection ($IDLE_CONNS connections, one request each; latchd $LATCHD_IDLE_CONNS)"
for t in nginx latch latchd; do
	pp=$(pids_of "$t")
	n=$IDLE_CONNS
	[ "$t" = latchd ] && n=$LATCHD_IDLE_CONNS
	before=$(rss_kb $pp)
	X python3 - "$t" "$n" "$(url "$t" /v1/json)" "$(auth "$t")" "$D/idle.ready" <<'EOF' &
import socket, sys, time
t, n, url, auth, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
hostport, _, path = url[len("http://"):].partition("/")
host, _, port = hostport.partition(":")
socks = []
for i in range(n):
    s = socket.create_connection((host, int(port)))
    s.sendall(("GET /%s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n" % (path, auth)).encode())
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"\n"):
        data += s.recv(4096)
    socks.append(s)
open(ready, "w").write("ready")
time.sleep(8)
EOF
	ipid=$!
	for _ in $(seq 100); do [ -e "$D/idle.ready" ] && break; sleep 0.1; done
	sleep 0.5
	after=$(rss_kb $pp)
	rec "$t" idle 1 idle_conn_bytes "$(awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN { printf("%.0f", (a - b) * 1024 / n) }')"
	wait "$ipid" 2>/dev/null || true
	rm -f "$D/idle.ready"
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
get() { # get TARGET CONNS METRIC -> median
	awk -F, -v t="$1" -v c="$2" -v m="$3" '$1 == t && $2 == c && $4 == m { print $5 }' "$OUT/raw.csv" | median
}
# pair TARGET REF CONNS METRIC OP -> "median min max" over the reps (or SSE samples) of TARGET's figure
# divided by (OP /) or minus (OP -) REF's in the same rep: drift over the run cancels out of each pair
pair() {
	awk -F, -v t="$1" -v r="$2" -v c="$3" -v m="$4" -v op="$5" '
		$2 == c && $4 == m && $1 == t { a[$3] = $5 }
		$2 == c && $4 == m && $1 == r { b[$3] = $5 }
		END { for (k in a) if ((k in b) && (op == "-" || b[k] != 0)) print (op == "/" ? a[k] / b[k] : a[k] - b[k]) }' \
		"$OUT/raw.csv" | sort -g | awk '{ x[NR] = $1 }
		END { if (!NR) { print "- - -"; exit }
		      printf("%.3g %.3g %.3g\n", (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2, x[1], x[NR]) }'
}
# paired LABEL TARGET REF CONNS METRIC OP UNIT: one line, the pairs' median and range
paired() {
	local m lo hi
	read -r m lo hi <<<"$(pair "$2" "$3" "$4" "$5" "$6")"
	echo "  paired, $1: median $m$7 (range $lo..$hi$7)"
}
{
	echo "# broker benchmark: $REPS reps x ${SECS}s, medians; $(nproc) CPUs; $(nginx -v 2>&1 | sed 's/.*: //')"
	printf '%-13s %14s %10s %10s %14s %10s %10s %12s %12s %14s\n' target "rps@1" "p50@1_us" "p99@1_us" "rps@16" \
		"p50@16_us" "p99@16_us" "cpu_us/req16" "sse_ttfb_ms" "idle_conn_B"
	for t in "${targets[@]}"; do
		printf '%-13s %14s %10s %10s %14s %10s %10s %12s %12s %14s\n' "$t" "$(get "$t" 1 rps)" "$(get "$t" 1 p50_us)" \
			"$(get "$t" 1 p99_us)" "$(get "$t" 16 rps)" "$(get "$t" 16 p50_us)" "$(get "$t" 16 p99_us)" \
			"$(get "$t" 16 cpu_us_per_req)" "$(get "$t" 1 sse_ttfb_ms)" "$(get "$t" idle idle_conn_bytes)"
	done
	d50=$(get direct 1 p50_us)
	mreq=$(metered_requests)
	verdict() { if awk "BEGIN { exit !($2) }"; then echo "target met: $1"; else echo "TARGET MISSED: $1"; fi; }
	ran() { for x in "$@"; do [[ " ${targets[*]} " == *" $x "* ]] || return 1; done; } # TARGETS may name fewer
	for t in latch latchd; do
		ran direct nginx "$t" || continue
		verdict "$t rps@16 $(get $t 16 rps) >= nginx $(get nginx 16 rps)" "$(get $t 16 rps) >= $(get nginx 16 rps)"
		verdict "$t added p50@1 $(awk "BEGIN { print $(get $t 1 p50_us) - $d50 }") us <= nginx's $(awk "BEGIN { print $(get nginx 1 p50_us) - $d50 }") us" \
			"$(get $t 1 p50_us) <= $(get nginx 1 p50_us)"
		verdict "$t SSE TTFB $(get $t 1 sse_ttfb_ms) ms <= nginx $(get nginx 1 sse_ttfb_ms) ms" \
			"$(get $t 1 sse_ttfb_ms) <= $(get nginx 1 sse_ttfb_ms)"
		# rep by rep: a range that holds both sides of parity is a difference this run can't tell from noise
		paired "$t / nginx rps@16" "$t" nginx 16 rps / ""
		paired "$t - nginx p50@1" "$t" nginx 1 p50_us - " us"
		paired "$t - nginx SSE TTFB" "$t" nginx 1 sse_ttfb_ms - " ms"
	done
	echo "memory per idle connection: latch $(get latch idle idle_conn_bytes) B, latchd $(get latchd idle idle_conn_bytes) B, nginx $(get nginx idle idle_conn_bytes) B"
	# the spend meter: latchd's metered route against its unmetered one, same request, same run
	for c in $CONNS; do
		ran latchd latchd-budget || break
		on=$(get latchd-budget "$c" rps)
		off=$(get latchd "$c" rps)
		verdict "budget costs $(awk "BEGIN { printf(\"%.1f\", (1 - $on / $off) * 100) }")% of latchd's rps@$c ($on against $off) <= 5%" \
			"$on >= 0.95 * $off"
		on=$(get latchd-budget "$c" p50_us)
		off=$(get latchd "$c" p50_us)
		verdict "budget adds $(awk "BEGIN { print $on - $off }") us to latchd's p50@$c ($on against $off) <= 10 us" \
			"$on - $off <= 10"
		paired "latchd-budget / latchd rps@$c" latchd-budget latchd "$c" rps / ""
		paired "latchd-budget - latchd p50@$c" latchd-budget latchd "$c" p50_us - " us"
	done
	! ran latchd latchd-budget || echo "the meter's CPU per request @16: $(awk "BEGIN { print $(get latchd-budget 16 cpu_us_per_req) - $(get latchd 16 cpu_us_per_req) }") us (latchd-budget $(get latchd-budget 16 cpu_us_per_req), latchd $(get latchd 16 cpu_us_per_req)); requests in the spend ledger: $mreq"
} | tee "$OUT/summary.txt"
