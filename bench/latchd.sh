#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# bench/latchd.sh - the benchmarks that go through latchd, each beside a
# reference measured in the same run.  bench/run.sh calls it and puts the
# rows in its table; run directly (root) it prints the raw records and a
# short summary.
#
#   bash bench/latchd.sh [OUTDIR]
#
# Prints records "part,metric,impl,n,rep,value" (run.sh's raw.csv) on
# stdout, progress on stderr.  Parts ($BENCH_LATCHD_PARTS, default both):
#
#   dns     resolver queries/s.  One client (dnsperf, one thread on CPU 0),
#           one query list (BENCH_DNS_NAMES A queries nK.bench.example), one
#           upstream (dnsmasq in I, authoritative for those names, TTL 3600),
#           and on CPU 1 either
#             latch     latchd's resolver for a sandbox whose profile allows
#                       *.bench.example (cache 1,024 answers; latch.conf
#                       clamps TTLs to 3600 s, so nothing expires in the run)
#             dnsmasq   dnsmasq forwarding to the same upstream (--no-resolv
#                       --server=UPSTREAM --cache-size=1024) on another
#                       address of the same namespace
#           Both are warmed first (the list asked once), then dnsperf runs
#           BENCH_DNS_SECS seconds with BENCH_DNS_CLIENTS sockets and at most
#           BENCH_DNS_QUEUE queries outstanding, and then build/bench/dnsload
#           with the same list, sockets and window (the "sat_" figures).
#           dnsperf spends ~8 us of CPU 0 a query, more than either
#           server, and is busy all its run: its rate is its own (the
#           servers sleep every 30-70 answers for want of a query).  Under
#           dnsload, one thread that sends and reads 64 at a time, the
#           servers are on their CPU ~99 % of the run and sleep once in
#           tens of thousands of answers: their rate is their own.
#           latch's resolver answers
#           only its guest on its link, so its client runs in the guest netns
#           G, through latch's tc filter and DNS token bucket (attached with
#           --dns-rate/--dns-burst 1000000); dnsmasq's runs in a netns R of
#           its own behind a veth of the same kind, with no filter.  One more
#           latch run: names the profile does not allow (answered REFUSED,
#           never sent upstream); and, for both servers, the latency with one
#           query outstanding.  Per run: queries/s,
#           average latency, queries lost (dnsperf), the server's CPU time
#           per query and its share of the run on a CPU and waiting for one
#           (/proc/PID/task/*/schedstat), and the queries the upstream
#           answered meanwhile (0: the run was served from the cache).
#   switch  a 65,536-entry profile switch.  Profiles A (198.18.0.0/16) and B
#           (198.19.0.0/16): every /32 with :443, each as two files of 32,768
#           (the second `# extends:` the first).
#           The sandbox live on A, `latch egress NAME profile B` (then A,
#           then B ... BENCH_SWITCH_REPS times) is timed end to end: the CLI
#           asks latchd, which parses the profile, builds
#           the policy, swaps it in with one config update, deletes the old
#           generation and replies.  Beside it, nftables: an `inet` table
#           whose ipv4_addr . inet_service set holds the same 65,536, replaced
#           by the other 65,536 in one `nft -f` transaction (flush set + add
#           element).  Then, latchd stopped, bench/profswitch times latchd's
#           steps one by one on the same files (parse, walk, switch = the
#           kernel part, gc).
#
# Environment (defaults): BENCH_LATCHD_PARTS ("dns switch"), BENCH_DNS_NAMES
# (1000; latchd's cache holds 1,024), BENCH_DNS_SECS (10 per run),
# BENCH_DNS_REPS (2: every run repeated, in rotated order),
# BENCH_DNS_CLIENTS (4, dnsperf -c), BENCH_DNS_QUEUE (64, dnsperf -q),
# BENCH_DNS_LAT_SECS (3, the unloaded latency runs: -c 1 -q 1),
# BENCH_SWITCH_REPS (3), BENCH_DNS_PERF (empty; set, each server is
# profiled with perf's cpu-clock during its first run, and CPU 0, the
# client's, beside it).  Every dnsperf run stops by itself (-l, and a
# timeout around it); every wait below is bounded.
#
# Topology, made here and removed on exit, pass or fail (trap): three netns
#   G lbd-g-PID: g0 198.51.100.2/28                      (the guest)
#   R lbd-r-PID: r0 198.51.100.34/28                     (the reference's client)
#   H lbd-h-PID: hg0 198.51.100.1/28 (latch, resolver), hr0 198.51.100.33/28
#                (the reference dnsmasq), hi0 198.51.100.17/30
#   I lbd-i-PID: ih0 198.51.100.18/30, lo 203.0.113.53 (the upstream)
# No forwarding, no route anywhere else; the root namespace and eth0 are
# never touched.  latch and latchd run in H with LATCH_ROOT in a temp dir and
# LATCH_BPFFS=/sys/fs/bpf/latch-benchd-PID, latchd confined in the cgroup
# LATCH_CGROUP=latch-benchd-PID; processes are killed by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${BUILD:-build}" && pwd)
LATCH=$BUILD/latch
LATCHD=$BUILD/latchd
PROFSW=$BUILD/bench/profswitch

PARTS=${BENCH_LATCHD_PARTS:-dns switch}
DNS_SECS=${BENCH_DNS_SECS:-10}
DNS_REPS=${BENCH_DNS_REPS:-2}
DNS_NAMES=${BENCH_DNS_NAMES:-1000}
DNS_CLIENTS=${BENCH_DNS_CLIENTS:-4}
DNS_QUEUE=${BENCH_DNS_QUEUE:-64}
DNS_LAT_SECS=${BENCH_DNS_LAT_SECS:-3}
SW_REPS=${BENCH_SWITCH_REPS:-3}
DNS_PERF=${BENCH_DNS_PERF:-} # non-empty: perf-record each server during its first run (OUTDIR/perf-IMPL.txt)
SW_N=65536

GNS=lbd-g-$$
RNS=lbd-r-$$
HNS=lbd-h-$$
INS=lbd-i-$$
GUEST_IP=198.51.100.2
HOST_IP=198.51.100.1 # the sandbox's host address and its resolver
REF_IP=198.51.100.33 # the reference dnsmasq
REF_CLIENT_IP=198.51.100.34
UP_IP=203.0.113.53   # the upstream
SB=lbd
NFT_TABLE=lbd_sw
BPFFS=/sys/fs/bpf/latch-benchd-$$
# latchd confines itself in a cgroup of its own here, not the host's latch/latchd (another
# latchd's hooks there would be replaced, and it would share this one's)
export LATCH_CGROUP=latch-benchd-$$

log() { printf '[latchd-bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
G() { ip netns exec "$GNS" "$@"; }
R() { ip netns exec "$RNS" "$@"; }
H() { nsenter --net="/run/netns/$HNS" -- "$@"; }
L() { LATCH_ROOT=$LROOT LATCH_BPFFS=$BPFFS H "$LATCH" "$@"; }
now_ns() { date +%s%N; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF, nftables)"
for x in "$LATCH" "$LATCHD" "$PROFSW" "$BUILD/bench/dnsload"; do [ -x "$x" ] || die "$x missing; run \`make bench\`"; done
for x in dnsperf dnsmasq nft socat jq taskset; do command -v "$x" >/dev/null || die "needs $x"; done

TMP=""
LROOT=""
PIDS=()
NS_MADE=()
LATCHD_PID=""
UP_PID=""
REF_PID=""
ATTACHED=0
MOUNTED_BPFFS=0
cleanup() {
	local rc=$? pid ns
	set +e
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	[ "$ATTACHED" = 1 ] && L detach "$SB" >/dev/null 2>&1
	for ns in "${NS_MADE[@]}"; do
		# whatever still runs in these namespaces was started here
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null # takes the veths, qdiscs and the nft table
	done
	# latchd's cgroup (its process is gone by now), in each hierarchy
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" { print $2 }' /proc/mounts); do
		[ -d "$root/$LATCH_CGROUP" ] || continue
		rmdir "$root/$LATCH_CGROUP"/rooms/* "$root/$LATCH_CGROUP"/rooms "$root/$LATCH_CGROUP"/latchd \
			"$root/$LATCH_CGROUP"/warm "$root/$LATCH_CGROUP" 2>/dev/null
	done
	rm -rf "$BPFFS"
	[ "$MOUNTED_BPFFS" = 1 ] && [ -z "$(ls -A /sys/fs/bpf 2>/dev/null)" ] && umount /sys/fs/bpf
	[ -n "$TMP" ] && rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TMP=$(mktemp -d /tmp/latch-benchd.XXXXXX)
LROOT=$TMP/root
OUT=${1:-$TMP}
mkdir -p "$OUT"

rec() { echo "$1,$2,$3,$4,$5,$6"; }
calc() { awk "BEGIN { printf(\"$1\", $2) }"; }

# ---------------------------------------------------------------- topology
if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]; then
	mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs at /sys/fs/bpf"
	MOUNTED_BPFFS=1
fi
mkdir -p "$BPFFS"
for ns in "$GNS" "$RNS" "$HNS" "$INS"; do
	[ -e "/run/netns/$ns" ] && die "namespace $ns exists already"
	ip netns add "$ns"
	NS_MADE+=("$ns")
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$ns" link set lo up
done
ip link add g0 netns "$GNS" type veth peer name hg0 netns "$HNS"
ip link add r0 netns "$RNS" type veth peer name hr0 netns "$HNS"
ip link add hi0 netns "$HNS" type veth peer name ih0 netns "$INS"
ip -n "$GNS" addr add "$GUEST_IP/28" dev g0
ip -n "$HNS" addr add "$HOST_IP/28" dev hg0
ip -n "$RNS" addr add "$REF_CLIENT_IP/28" dev r0
ip -n "$HNS" addr add "$REF_IP/28" dev hr0
ip -n "$HNS" addr add 198.51.100.17/30 dev hi0
ip -n "$INS" addr add 198.51.100.18/30 dev ih0
ip -n "$INS" addr add "$UP_IP/32" dev lo
for l in "$GNS g0" "$RNS r0" "$HNS hg0" "$HNS hr0" "$HNS hi0" "$INS ih0"; do ip -n "${l% *}" link set "${l#* }" up; done
ip -n "$HNS" route add "$UP_IP/32" via 198.51.100.18 dev hi0
GMAC=$(ip -n "$GNS" -br link show g0 | awk '{ print $3 }')

# ---------------------------------------------------------------- upstream, latchd, reference
names=$TMP/hosts
# public (documentation) addresses: 198.18.0.0/15 is a range the rebinding filter refuses,
# and 198.51.100.0/24 holds H's own addresses, which it refuses too
awk -v n="$DNS_NAMES" 'BEGIN { for (k = 0; k < n; k++)
	printf("%s.%d n%d.bench.example\n", int(k / 250) % 2 ? "203.0.113" : "192.0.2", k % 250 + 1, k) }' > "$names"
awk -v n="$DNS_NAMES" 'BEGIN { for (k = 0; k < n; k++) printf("n%d.bench.example A\n", k) }' > "$TMP/q-allowed"
awk -v n="$DNS_NAMES" 'BEGIN { for (k = 0; k < n; k++) printf("n%d.denied.example A\n", k) }' > "$TMP/q-refused"

ip netns exec "$INS" taskset -c 0 dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$UP_IP" --bind-interfaces --port=53 --local-ttl=3600 --addn-hosts="$names" \
	--pid-file="$TMP/up.pid" --log-facility="$TMP/up.log" 2>"$TMP/up.err" &
UP_PID=$!
PIDS+=("$UP_PID")

mkdir -p "$LROOT/etc/latch/profiles"
printf 'dns_upstream = %s\ndns_ttl_min = 3600\ndns_ttl_max = 3600\n' "$UP_IP" > "$LROOT/etc/latch/latch.conf"
echo '*.bench.example:443' > "$LROOT/etc/latch/profiles/bench-dns.txt"
chmod 0644 "$LROOT/etc/latch/latch.conf" "$LROOT/etc/latch/profiles/bench-dns.txt"

L attach "$SB" --dev hg0 --guest-mac "$GMAC" --guest-ip "$GUEST_IP" --host-ip "$HOST_IP" \
	--resolver "$HOST_IP" --dns-rate 1000000 --dns-burst 1000000 >/dev/null || die "latch attach"
ATTACHED=1
# started directly, not through H(): $! must be the server itself (nsenter and taskset exec it)
LATCH_ROOT=$LROOT LATCH_BPFFS=$BPFFS nsenter --net="/run/netns/$HNS" -- taskset -c 1 "$LATCHD" \
	>>"$TMP/latchd.log" 2>&1 &
LATCHD_PID=$!
PIDS+=("$LATCHD_PID")
for _ in $(seq 50); do
	[ -S "$LROOT/run/latch/latchd.sock" ] && grep -q listening "$TMP/latchd.log" && break
	sleep 0.1
done
grep -q listening "$TMP/latchd.log" || die "latchd did not start: $(tail -3 "$TMP/latchd.log")"
[ "$(cat "/proc/$LATCHD_PID/comm")" = latchd ] || die "pid $LATCHD_PID is not latchd"

nsenter --net="/run/netns/$HNS" -- taskset -c 1 dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$REF_IP" --bind-interfaces --port=53 --server="$UP_IP" --cache-size=1024 \
	--pid-file="$TMP/ref.pid" --log-facility="$TMP/ref.log" 2>"$TMP/ref.err" &
REF_PID=$!
PIDS+=("$REF_PID")

# latchd's own view of the resolver: "queries answered refused upstream_sent cache_hits failed"
resolver_stats() {
	echo '{"op":"ping"}' | socat -T5 - UNIX-CONNECT:"$LROOT/run/latch/latchd.sock" |
		jq -r --arg s "$SB" '.sandboxes[] | select(.name == $s) | .resolver |
			"\(.queries) \(.answered) \(.refused) \(.upstream_sent) \(.cache_hits) \(.failed)"'
}
# queries the upstream answered so far (dnsmasq writes its counters on SIGUSR1)
upstream_count() {
	local before after
	before=$(grep -c 'queries forwarded' "$TMP/up.log" 2>/dev/null || true)
	kill -USR1 "$UP_PID"
	for _ in $(seq 50); do
		after=$(grep -c 'queries forwarded' "$TMP/up.log" 2>/dev/null || true)
		[ "${after:-0}" -gt "${before:-0}" ] && break
		sleep 0.05
	done
	grep 'queries forwarded' "$TMP/up.log" | tail -1 | sed -n 's/.*queries answered locally \([0-9]*\).*/\1/p'
}
# sched PID: "ns on a CPU, ns waiting for one" of all its threads (/proc/PID/task/*/schedstat)
sched() { cat /proc/"$1"/task/*/schedstat | awk '{ r += $1; w += $2 } END { printf("%.0f %.0f\n", r, w) }'; }
# vcsw PID: voluntary context switches of all its threads (each one a sleep: the server found no work)
vcsw() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'; }
# cpustat: "busy softirq steal total" ticks of CPU 0 and of CPU 1 (/proc/stat), 8 numbers
cpustat() {
	awk '$1 == "cpu0" || $1 == "cpu1" { t = 0; for (i = 2; i <= 11; i++) t += $i
		printf("%d %d %d %d ", t - $5 - $6, $8, $9, t) } END { print "" }' /proc/stat
}
# udp_drops NETNS: "RcvbufErrors InErrors" of that namespace's UDP (the replies' or the queries' socket was full)
udp_drops() {
	nsenter --net="/run/netns/$1" -- awk '$1 == "Udp:" && !h { for (i = 2; i <= NF; i++) c[$i] = i; h = 1; next }
		$1 == "Udp:" { print $c["RcvbufErrors"], $c["InErrors"] }' /proc/net/snmp
}

# wait_udp NETNS ADDR: until something listens on ADDR:53 (before any SIGUSR1, which kills a dnsmasq still starting)
wait_udp() {
	for _ in $(seq 50); do
		[ -n "$(ip netns exec "$1" ss -Hlun "src $2 and sport = :53")" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_udp "$INS" "$UP_IP" && [ -n "$(upstream_count)" ] || die "upstream dnsmasq did not start: $(cat "$TMP/up.err")"
wait_udp "$HNS" "$REF_IP" && [ "$(cat "/proc/$REF_PID/comm" 2>/dev/null)" = dnsmasq ] ||
	die "reference dnsmasq did not start: $(cat "$TMP/ref.err")"
wait_udp "$HNS" "$HOST_IP" || die "latchd's resolver does not listen on $HOST_IP:53"

# dnsperf_run IMPL[:lat1|:sat] REP: one timed run; records its figures.  IMPL:
# latch, dnsmasq, latch_refused; ":lat1" is the unloaded run
# (one socket, one query outstanding), which records only its latency;
# ":sat" is the same load as dnsperf's from build/bench/dnsload, the
# client cheap enough that the server sets the pace (its figures are
# recorded as sat_METRIC).
dnsperf_run() {
	local impl=${1%:*} rep=$2 ns=G server=$HOST_IP file=$TMP/q-allowed want=NOERROR pid=$LATCHD_PID
	local secs=$DNS_SECS clients=$DNS_CLIENTS queue=$DNS_QUEUE tag=$1 kind="" m=""
	local out u0 u1 r0 r1 w0 w1 t0 t1 qps lat lost ndone codes
	case $impl in
	dnsmasq) server=$REF_IP pid=$REF_PID ns=R ;;
	latch_refused) file=$TMP/q-refused want=REFUSED ;;
	esac
	[ "$tag" = "$impl" ] || kind=${tag#*:}
	[ "$kind" = lat1 ] && { secs=$DNS_LAT_SECS clients=1 queue=1; }
	[ "$kind" = sat ] && m=sat_
	local cs0 cs1 v0 v1 dh0 dh1 dc0 dc1 cns rb0 rb1 ie0 ie1 cu cs
	local b00 s00 t00 n00 b10 s10 t10 n10 b01 s01 t01 n01 b11 s11 t11 n11
	cns=$([ "$ns" = G ] && echo "$GNS" || echo "$RNS")
	u0=$(upstream_count); v0=$(vcsw "$pid"); dh0=$(udp_drops "$HNS"); dc0=$(udp_drops "$cns")
	cs0=$(cpustat); read -r r0 w0 <<<"$(sched "$pid")"; t0=$(now_ns)
	local perf_pid=""
	if [ -n "$DNS_PERF" ] && [ "$rep" = 1 ] && [ "$tag" = "$impl" ]; then
		# where the server's time goes (user space; perf's cpu-clock works where hardware counters don't)
		perf record -q -e cpu-clock -F 2000 -p "$pid" -o "$OUT/perf-$impl.data" -- sleep "$secs" \
			>/dev/null 2>&1 &
		perf_pid=$!
		# and the client's CPU: dnsperf and the softirq work of its sends (the guest's tc filter)
		perf record -q -e cpu-clock -F 2000 -a -C 0 -o "$OUT/perf-$impl-cpu0.data" -- sleep "$secs" \
			>/dev/null 2>&1 &
		perf_pid="$perf_pid $!"
	fi
	# bash's time: the client's CPU (user, system: with the softirq work its sends ran in its context)
	local client=(dnsperf -s "$server" -d "$file" -l "$secs" -c "$clients" -q "$queue" -T 1 -t 2)
	[ "$kind" = sat ] && client=("$BUILD/bench/dnsload" -s "$server" -d "$file" -l "$secs" -c "$clients" -q "$queue" -t 2)
	out=$(TIMEFORMAT='client_cpu_s %U %S'
		{ time $ns taskset -c 0 timeout $((secs + 30)) "${client[@]}" 2>&1; } 2>&1) || die "${client[0]##*/} ($tag): $out"
	t1=$(now_ns); read -r r1 w1 <<<"$(sched "$pid")"; cs1=$(cpustat)
	v1=$(vcsw "$pid"); dh1=$(udp_drops "$HNS"); dc1=$(udp_drops "$cns"); u1=$(upstream_count)
	if [ -n "$perf_pid" ]; then
		wait $perf_pid
		perf report -i "$OUT/perf-$impl.data" --stdio --no-children --sort symbol 2>/dev/null |
			awk '/^ +[0-9.]+%/ && n++ < 40' > "$OUT/perf-$impl.txt" # reads it all: no SIGPIPE under pipefail
		perf report -i "$OUT/perf-$impl-cpu0.data" --stdio --no-children --sort comm,symbol 2>/dev/null |
			awk '/^ +[0-9.]+%/ && n++ < 60' > "$OUT/perf-$impl-cpu0.txt"
		log "dns: perf profile of $impl in $OUT/perf-$impl.txt"
	fi
	echo "$out" > "$OUT/dnsperf-${tag/:/-}-$rep.txt"
	qps=$(sed -n 's/^ *Queries per second: *\([0-9.]*\).*/\1/p' <<<"$out")
	lat=$(sed -n 's/^ *Average Latency (s): *\([0-9.]*\).*/\1/p' <<<"$out")
	lost=$(sed -n 's/^ *Queries lost: *\([0-9]*\).*/\1/p' <<<"$out")
	ndone=$(sed -n 's/^ *Queries completed: *\([0-9]*\).*/\1/p' <<<"$out")
	codes=$(sed -n 's/^ *Response codes: *//p' <<<"$out")
	[ -n "$qps" ] && [ -n "$lat" ] && [ -n "$ndone" ] || die "${client[0]##*/} ($tag): no figures: $out"
	[[ "$codes" == "$want $ndone (100.00%)" ]] || log "warning: $tag rep $rep: response codes $codes (want all $want)"
	if [ "$kind" = lat1 ]; then
		rec dns lat1_us "$impl" "$DNS_NAMES" "$rep" "$(calc %.1f "$lat * 1e6")"
		log "dns rep $rep $tag: avg $lat s at one query outstanding ($qps q/s), lost $lost"
		return 0
	fi
	rec dns "${m}qps" "$impl" "$DNS_NAMES" "$rep" "$qps"
	rec dns "${m}lat_us" "$impl" "$DNS_NAMES" "$rep" "$(calc %.1f "$lat * 1e6")"
	rec dns "${m}lost" "$impl" "$DNS_NAMES" "$rep" "$lost"
	# the server's CPU time per answer, and its share of the run on a CPU and waiting for one:
	# on + waiting near 100 % means it always had work, so the server set the pace, not the client
	rec dns "${m}cpu_us" "$impl" "$DNS_NAMES" "$rep" "$(calc %.2f "$((r1 - r0)) / 1000 / $ndone")"
	rec dns "${m}busy_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * $((r1 - r0)) / $((t1 - t0))")"
	rec dns "${m}wait_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * $((w1 - w0)) / $((t1 - t0))")"
	rec dns "${m}upstream" "$impl" "$DNS_NAMES" "$rep" $((u1 - u0))
	# who set the pace: each CPU's busy share (CPU 0: the client and the softirq work of its sends,
	# the guest's tc filter included; CPU 1: the server), and how often the server slept
	read -r b00 s00 t00 n00 b10 s10 t10 n10 <<<"$cs0"
	read -r b01 s01 t01 n01 b11 s11 t11 n11 <<<"$cs1"
	rec dns "${m}cpu0_busy_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * ($b01 - $b00) / ($n01 - $n00)")"
	rec dns "${m}cpu0_softirq_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * ($s01 - $s00) / ($n01 - $n00)")"
	rec dns "${m}cpu1_busy_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * ($b11 - $b10) / ($n11 - $n10)")"
	rec dns "${m}cpu1_softirq_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * ($s11 - $s10) / ($n11 - $n10)")"
	rec dns "${m}steal_pct" "$impl" "$DNS_NAMES" "$rep" "$(calc %.0f "100 * ($t01 - $t00 + $t11 - $t10) / ($n01 - $n00 + $n11 - $n10)")"
	read -r cu cs <<<"$(sed -n 's/^client_cpu_s //p' <<<"$out")"
	rec dns "${m}client_cpu_us" "$impl" "$DNS_NAMES" "$rep" "$(calc %.2f "($cu + $cs) * 1e6 / $ndone")"
	rec dns "${m}answers_per_sleep" "$impl" "$DNS_NAMES" "$rep" "$(calc %.1f "$ndone / ($((v1 - v0)) + 1)")"
	read -r rb0 ie0 <<<"$dh0"; read -r rb1 ie1 <<<"$dh1"
	rec dns "${m}server_rcvbuf_drops" "$impl" "$DNS_NAMES" "$rep" $((rb1 - rb0))
	read -r rb0 ie0 <<<"$dc0"; read -r rb1 ie1 <<<"$dc1"
	rec dns "${m}client_rcvbuf_drops" "$impl" "$DNS_NAMES" "$rep" $((rb1 - rb0))
	log "dns rep $rep $tag: $qps q/s, avg $lat s, lost $lost, upstream $((u1 - u0)), $codes"
}

# ---------------------------------------------------------------- dns
dns_part() {
	local out impls r i nc s0 s1
	out=$(L egress "$SB" profile bench-dns 2>&1) || die "switch to bench-dns: $out"
	# warm: every name asked once, through each server; the refused list needs no warming
	for srv in "G $HOST_IP" "R $REF_IP"; do
		out=$(${srv% *} taskset -c 0 timeout 60 dnsperf -s "${srv#* }" -d "$TMP/q-allowed" -n 1 -c "$DNS_CLIENTS" \
			-q "$DNS_QUEUE" -T 1 -t 2 2>&1) || die "dnsperf warm-up ($srv): $out"
		grep -q "Response codes: *NOERROR $DNS_NAMES (100.00%)" <<<"$out" ||
			die "warm-up through $srv: not every name resolved: $(grep -E 'Queries lost|Response codes' <<<"$out")"
	done
	s0=$(resolver_stats)
	log "dns: warm; latchd resolver (queries answered refused upstream_sent cache_hits failed): $s0"
	impls=(latch dnsmasq latch:sat dnsmasq:sat latch_refused latch:lat1 dnsmasq:lat1)
	nc=${#impls[@]}
	for ((r = 1; r <= DNS_REPS; r++)); do
		for ((i = 0; i < nc; i++)); do
			dnsperf_run "${impls[$(((i + r - 1) % nc))]}" "$r"	# rotate: no server always runs first
		done
	done
	s1=$(resolver_stats)
	log "dns: done; latchd resolver: $s1"
	# the cache served the allowed runs: upstream_sent did not move
	read -r _ _ _ up0 _ _ <<<"$s0"
	read -r _ _ _ up1 _ _ <<<"$s1"
	rec dns latch_upstream_sent latch "$DNS_NAMES" 0 $((up1 - up0))
}

# ---------------------------------------------------------------- switch
gen_profile() {	# gen_profile NAME SECOND_OCTET: NAME0 (x.0-127.*) and NAME (x.128-255.*, extends NAME0)
	local d=$LROOT/etc/latch/profiles
	awk -v b="$2" 'BEGIN { print "# bench: first half"
		for (c = 0; c < 128; c++) for (d = 0; d < 256; d++) printf("198.%d.%d.%d:443\n", b, c, d) }' > "$d/${1}0.txt"
	awk -v b="$2" -v base="${1}0" 'BEGIN { print "# extends: " base
		for (c = 128; c < 256; c++) for (d = 0; d < 256; d++) printf("198.%d.%d.%d:443\n", b, c, d) }' > "$d/$1.txt"
	chmod 0644 "$d/${1}0.txt" "$d/$1.txt"
	awk -v b="$2" 'BEGIN { for (c = 0; c < 256; c++) for (d = 0; d < 256; d++) printf("198.%d.%d.%d\n", b, c, d) }' \
		> "$TMP/$1.addrs"
}
nft_elems() { awk 'NR > 1 { printf(", ") } { printf("%s . 443", $1) }' "$1"; }

switch_part() {
	local r t0 t1 to out pd=$LROOT/etc/latch/profiles
	gen_profile bench-sw-a 18
	gen_profile bench-sw-b 19
	{
		echo "table inet $NFT_TABLE {"
		echo "	set allow4 {"
		echo "		type ipv4_addr . inet_service"
		printf '		elements = { '; nft_elems "$TMP/bench-sw-a.addrs"; echo " }"
		echo "	}"
		echo "	chain forward_check {"
		echo "		type filter hook forward priority filter; policy accept;"
		echo "		meta l4proto tcp ip daddr . th dport @allow4 accept"
		echo "	}"
		echo "}"
	} > "$TMP/nft-load.nft"
	for to in a b; do
		{
			echo "flush set inet $NFT_TABLE allow4"
			printf 'add element inet %s allow4 { ' "$NFT_TABLE"; nft_elems "$TMP/bench-sw-$to.addrs"; echo " }"
		} > "$TMP/nft-to-$to.nft"
	done
	out=$(L egress "$SB" profile bench-sw-a 2>&1) || die "switch to bench-sw-a: $out"
	grep -q "($SW_N entries" <<<"$out" || die "switch to bench-sw-a: $out"
	H nft -f "$TMP/nft-load.nft" || die "nft -f (load)"
	log "switch: live on A ($SW_N entries), nftables set holds A; $SW_REPS switches each"
	for ((r = 1; r <= SW_REPS; r++)); do
		to=$([ $((r % 2)) = 1 ] && echo b || echo a)
		t0=$(now_ns); out=$(L egress "$SB" profile "bench-sw-$to" 2>&1) || die "switch to $to: $out"; t1=$(now_ns)
		grep -q "profile bench-sw-$to live ($SW_N entries" <<<"$out" || die "switch to $to: $out"
		rec switch cli latch "$SW_N" "$r" $(((t1 - t0) / 1000))
		t0=$(now_ns); H nft -f "$TMP/nft-to-$to.nft" || die "nft -f (to $to)"; t1=$(now_ns)
		rec switch nft_f nft "$SW_N" "$r" $(((t1 - t0) / 1000))
		log "switch rep $r: to $to"
	done
	[ "$(H nft list set inet "$NFT_TABLE" allow4 | grep -o ' \. 443' | wc -l)" = "$SW_N" ] ||
		die "the nftables set does not hold $SW_N elements"
	# latchd's steps one by one, latchd stopped so nothing else writes the maps
	kill -TERM "$LATCHD_PID"
	wait "$LATCHD_PID" 2>/dev/null || true
	LATCHD_PID=""
	out=$(LATCH_BPFFS=$BPFFS H "$PROFSW" "$SB" "$pd" bench-sw-a bench-sw-b "$SW_REPS") || die "profswitch: $out"
	sed -n 's/^op=\([a-z]*\) n=\([0-9]*\) rep=\([0-9]*\) us=\([0-9.]*\)$/switch,\1,latch,'"$SW_N"',\3,\4/p' <<<"$out"
	grep -q "^op=walk n=$SW_N " <<<"$out" || die "profswitch did not find $SW_N live entries: $out"
}

for p in $PARTS; do
	case $p in
	dns) log "dns: $DNS_NAMES names, $DNS_REPS x $DNS_SECS s per server, dnsperf -c $DNS_CLIENTS -q $DNS_QUEUE"; dns_part ;;
	switch) switch_part ;;
	*) die "unknown part $p (dns, switch)" ;;
	esac
done
