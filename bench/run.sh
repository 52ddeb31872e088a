#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# bench/run.sh - latch's benchmarks, printed as one table beside no filter
# and nftables, with the targets.  Run through `make bench` (root).
#
# Topology: pairs of private network namespaces made here and nowhere else,
# one pair per configuration of the in-place and throughput parts (pair 0,
# no filter, also serves the control-path part), all alike but for the
# filter on lbn-hv:
#
#   lbn-gI-PID: lbn-gv 198.18.128.2/24  <-veth->  lbn-hI-PID: lbn-hv 198.18.128.1/24
#
# "Guest egress" is guest -> host traffic: it arrives on lbn-hv's ingress,
# where latch (a TCX link on kernels with TCX, `latch attach`; `latchcls`
# rows: the same in clsact mode) or nftables (an inet table on the device's
# ingress hook) decides.  latch is told 198.18.128.1 is the host address and
# 5201 a host port: since issue 15 no entry reaches an address of the host's
# own, so iperf3's flow passes as a host service; the N entries are loaded
# all the same, and 198.18.128.1:5201 is one of them (test-run decides it by
# the policy, in a namespace of its own where that address is not local).  Fill entries are distinct /32 addresses with one port each from
# 198.18.0.0/15 (RFC 2544, minus 198.18.128.0/24), 198.51.100.0/24 and
# 203.0.113.0/24 -- the shape of host-resolved names.  Nothing here touches
# the root namespace, eth0 or ip_forward; every run removes its namespaces,
# bpffs pins ($LATCH_BPFFS=/sys/fs/bpf/latch-bench-PID) and processes (by
# PID), pass or fail.
#
# Parts (repetitions interleaved: round 1 of every configuration, then round
# 2..., in an order rotated each round; every configuration keeps its own
# namespaces, so nothing is re-attached between runs)
#   testrun  BPF_PROG_TEST_RUN ns/packet of latch_from_guest on a private
#            skeleton, 16 / 1,024 / 65,536 entries: hit with the flow cached,
#            hit through the policy lookup (first packet of a flow), port
#            miss, address miss (bench/testrun.c explains the method)
#   inplace  XDP live frames injected into lbn-hv's receive path (bench/inject.c,
#            one process going round every pair), ns/packet with no filter,
#            latch and nftables at each size, and an empty tc program on each
#            hook: as a clsact filter (tcnull) and as a TCX program
#            (tcxnull, attached with selftests' tcx_tool), the cost of each
#            hook itself; latch in clsact mode at $BENCH_TPUT_N (latchcls);
#            overhead = median over rounds of (filter - none) in the same round
#   tput     iperf3 guest -> host, TCP Gbit/s and UDP 64-byte kpps (sent, and
#            delivered to the server), no filter / latch (TCX and clsact) /
#            nftables at $BENCH_TPUT_N entries and the two empty programs; the
#            ratio to none is the median over rounds of (filter / none) in
#            the same round
#   ctl      65,536 entries loaded (latch_policy_replace / nft -f) and one entry
#            added (latch_policy_allow / nft add element); CLI wall clocks too,
#            and the map primitives latch_policy_replace is built of (ctl diag)
#   match    bench/match: latch_profile_match of a host name, a name under a
#            wildcard and a name nothing matches, against a profile of
#            $BIG names, through the profile's name index and by scanning
#            every entry (the same profile without its index: the reference)
#   latchd   bench/latchd.sh, in namespaces of its own (see its header):
#            latchd's resolver beside dnsmasq forwarding (queries/s with a
#            client that saturates the server, bench/dnsload, and with
#            dnsperf; latency, lost, server CPU per query), and a 65,536-entry
#            profile switch (`latch egress NAME profile B`) beside one nft -f
#            replacing a 65,536-element set, with latchd's steps timed one by
#            one (bench/profswitch).  BENCH_LATCHD=0 skips it.
#   vm       `latch up` on the default guest image, BENCH_VM_REPS (3) times:
#            ms to enforcement verified on the tap and ms to the guest agent
#            answering (as `latch --json up` reports them), with the
#            accelerator in use; enforcement must come first.  Skipped with a
#            line when libvirt is unreachable or BENCH_VM=0.  Its sandbox
#            lives under a temp LATCH_ROOT, on a documentation /24 the host
#            does not use, with no uplink, and is destroyed after each rep.
#
# Environment: BENCH_REPS (3, ctl), BENCH_TESTRUN_REPS (9), BENCH_SIZES
# ("16 1024 65536"), BENCH_INJECT_ROUNDS (30) of BENCH_INJECT_PKTS (200000)
# frames per config, BENCH_TPUT_N (1024), BENCH_TPUT_ROUNDS (8) of one TCP
# and one UDP iperf3 run of BENCH_SECS (2) seconds per config,
# BENCH_REPEAT (1000000), BENCH_PAIRS (20000), BENCH_ADDS (1000),
# BENCH_OUT (results dir, default $BUILD/bench/results-TIME); bench/latchd.sh
# reads BENCH_LATCHD_PARTS, BENCH_DNS_* and BENCH_SWITCH_REPS (its header).
# A target that is missed prints MISS; the exit status is 0 all the same
# (machines are noisy), non-zero only when the benchmark itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(cd "${BUILD:-build}" && pwd)
LATCH=$BUILD/latch
INJECT=$BUILD/bench/inject
TESTRUN=$BUILD/bench/testrun
CTL=$BUILD/bench/ctl
MATCH=$BUILD/bench/match
TCX_TOOL=$BUILD/selftests/tcx_tool

REPS=${BENCH_REPS:-3}
SIZES=${BENCH_SIZES:-16 1024 65536}
TPUT_N=${BENCH_TPUT_N:-1024}
INJECT_PKTS=${BENCH_INJECT_PKTS:-200000}
INJECT_ROUNDS=${BENCH_INJECT_ROUNDS:-30}
TPUT_ROUNDS=${BENCH_TPUT_ROUNDS:-8}
TESTRUN_REPS=${BENCH_TESTRUN_REPS:-9}
REPEAT=${BENCH_REPEAT:-1000000}
PAIRS=${BENCH_PAIRS:-20000}
SECS=${BENCH_SECS:-2}
ADDS=${BENCH_ADDS:-1000}
OUT=${BENCH_OUT:-$BUILD/bench/results-$(date +%Y%m%d-%H%M%S)}
BIG=$(printf '%s\n' $SIZES | sort -n | tail -1)
SMALL=$(printf '%s\n' $SIZES | sort -n | head -1)

GIF=lbn-gv
HIF=lbn-hv
GUEST_IP=198.18.128.2
HOST_IP=198.18.128.1
LATCH_HOST_IP=$HOST_IP # latch's host address; PORT is its host port
PORT=5201
SB=lbn
NFT_TABLE=lbn_bench
export LATCH_BPFFS=/sys/fs/bpf/latch-bench-$$

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# Pair I is lbn-gI-$$ (guest) / lbn-hI-$$ (host).  nsenter keeps our mount
# namespace, so /sys/fs/bpf and $LATCH_BPFFS stay visible to latch.
Gp() { local i=$1; shift; ip netns exec "lbn-g$i-$$" "$@"; }	# Gp I CMD: in pair I's guest
Hp() { local i=$1; shift; nsenter --net="/run/netns/lbn-h$i-$$" "$@"; }
H() { Hp 0 "$@"; }	# pair 0's host: the control-path part
now_ns() { date +%s%N; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF, nftables)"
for x in "$LATCH" "$INJECT" "$TESTRUN" "$CTL" "$MATCH" "$TCX_TOOL"; do [ -x "$x" ] || die "$x missing; run \`make bench\`"; done

# Packages: iperf3, nftables, jq (Debian names), installed when missing.
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v nft >/dev/null || need+=(nftables)
command -v jq >/dev/null || need+=(jq)
if [ "${BENCH_LATCHD:-1}" = 1 ]; then	# bench/latchd.sh
	command -v dnsperf >/dev/null || need+=(dnsperf)
	command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
	command -v socat >/dev/null || need+=(socat)
fi
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2; } ||
		die "cannot install ${need[*]}"
fi

IPERF_PIDS=()
NPAIRS=0
MOUNTED_BPFFS=0
VM_ROOT=""
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [ -n "$VM_ROOT" ]; then
		LATCH_ROOT=$VM_ROOT/root "$LATCH" destroy lbn-vm >/dev/null 2>&1
		rm -rf "$VM_ROOT"
	fi
	for p in "${IPERF_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "${MATCH_DIR:-}" ] && rm -rf "$MATCH_DIR"
	for ((i = 0; i < NPAIRS; i++)); do
		[ -d "$LATCH_BPFFS/$SB$i" ] && Hp "$i" "$LATCH" detach "$SB$i" >/dev/null 2>&1
	done
	rm -rf "$LATCH_BPFFS"
	[ "$MOUNTED_BPFFS" = 1 ] && [ -z "$(ls -A /sys/fs/bpf 2>/dev/null)" ] && umount /sys/fs/bpf
	for ((i = 0; i < NPAIRS; i++)); do	# each takes its veth pair, qdiscs and nft table with it
		ip netns del "lbn-g$i-$$" 2>/dev/null
		ip netns del "lbn-h$i-$$" 2>/dev/null
	done
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$OUT/raw.csv
echo "part,metric,impl,n,rep,value" > "$RAW"
rec() { echo "$1,$2,$3,$4,$5,$6" >> "$RAW"; }

# ---------------------------------------------------------------- setup
# $LATCH_BPFFS must sit on a bpffs; a fresh machine has none at /sys/fs/bpf.
if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]; then
	mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs at /sys/fs/bpf"
	MOUNTED_BPFFS=1
fi
mkdir -p "$LATCH_BPFFS"

# Configurations of the in-place and throughput parts, one pair each; pair 0
# is the unfiltered one.
CONFIGS=(none qdisc tcnull)
# TCX: the empty program as a TCX program, and latch in clsact mode beside latch's default (TCX)
HAVE_TCX=0
"$TCX_TOOL" list lo ingress >/dev/null 2>&1 && HAVE_TCX=1
[ "$HAVE_TCX" = 1 ] && CONFIGS+=(tcxnull "latchcls:$TPUT_N")
for n in $SIZES; do CONFIGS+=("latch:$n"); done
for n in $SIZES; do CONFIGS+=("nft:$n"); done
for c in "latch:$TPUT_N" "nft:$TPUT_N"; do
	[[ " ${CONFIGS[*]} " == *" $c "* ]] || CONFIGS+=("$c")
done
declare -a GMACS HMACS
pair_add() {	# pair_add I: guest and host namespaces, veth, addresses, static neighbours
	local g=lbn-g$1-$$ h=lbn-h$1-$$
	ip netns add "$g"
	ip netns add "$h"
	NPAIRS=$(($1 + 1))
	ip link add "$GIF" netns "$g" type veth peer name "$HIF" netns "$h"
	for ns in "$g" "$h"; do
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
		ip -n "$ns" link set lo up
	done
	ip -n "$g" addr add "$GUEST_IP/24" dev "$GIF"
	ip -n "$h" addr add "$HOST_IP/24" dev "$HIF"
	ip -n "$g" link set "$GIF" up
	ip -n "$h" link set "$HIF" up
	GMACS[$1]=$(ip -n "$g" -br link show "$GIF" | awk '{ print $3 }')
	HMACS[$1]=$(ip -n "$h" -br link show "$HIF" | awk '{ print $3 }')
	# static neighbours: no ARP during the measurements (nor through the filters)
	ip -n "$g" neigh replace "$HOST_IP" lladdr "${HMACS[$1]}" dev "$GIF" nud permanent
	ip -n "$h" neigh replace "$GUEST_IP" lladdr "${GMACS[$1]}" dev "$HIF" nud permanent
}
for i in "${!CONFIGS[@]}"; do pair_add "$i"; done

# Allowlists: N distinct addresses, one port each, HOST_IP PORT among them.
genlist() {	# genlist N SEED FILE
	awk -v n="$1" -v seed="$2" -v real="$HOST_IP" -v rport="$PORT" 'BEGIN {
		srand(seed); at = int(rand() * n); got = 0
		while (got < n) {
			if (got == at) { print real, rport; got++; continue }
			r = rand()
			if (r < 0.004)      a = "198.51.100." int(rand() * 256)
			else if (r < 0.008) a = "203.0.113." int(rand() * 256)
			else {
				b = 18 + int(rand() * 2); c = int(rand() * 256)
				if (b == 18 && c == 128) continue	# the link subnet
				a = "198." b "." c "." int(rand() * 256)
			}
			if (a in seen) continue
			seen[a] = 1; print a, 1024 + int(rand() * 64512); got++
		}
	}' > "$3"
}
for n in $(printf '%s\n' $SIZES $TPUT_N | sort -nu); do genlist "$n" 42 "$OUT/allow-$n.txt"; done
genlist "$BIG" 4242 "$OUT/allow-b-$BIG.txt"	# a second list for replace
MISS=""
for i in $(seq 1 254); do	# an address inside the filled range, in no list
	grep -q "^198\.19\.7\.$i " "$OUT"/allow-*.txt || { MISS=198.19.7.$i; break; }
done
[ -n "$MISS" ] || die "no miss address"

# nftables: inet table, set of ipv4_addr . inet_service, ingress hook of HIF, default drop
nft_ruleset() {	# nft_ruleset LIST
	echo "table inet $NFT_TABLE {"
	echo "	set allow4 {"
	echo "		type ipv4_addr . inet_service"
	printf '		elements = { '
	awk 'NR > 1 { printf(", ") } { printf("%s . %s", $1, $2) }' "$1"
	echo " }"
	echo "	}"
	echo "	chain guest_egress {"
	echo "		type filter hook ingress device \"$HIF\" priority filter; policy drop;"
	echo "		meta l4proto { tcp, udp } ip daddr . th dport @allow4 accept"
	echo "		meta l4proto icmp accept"
	echo "	}"
	echo "}"
}
for n in $(printf '%s\n' $SIZES $TPUT_N | sort -nu); do nft_ruleset "$OUT/allow-$n.txt" > "$OUT/nft-$n.nft"; done

nft_off() { H nft delete table inet "$NFT_TABLE" 2>/dev/null || true; }

config_on() {	# config_on I CONFIG: CONFIG (none | tcnull | latch:N | nft:N) on pair I, for good
	case $2 in
	none) ;;
	qdisc) Hp "$1" tc qdisc add dev "$HIF" clsact || die "tc qdisc (qdisc)" ;;	# the qdisc, no filter
	tcnull)	# the empty tc program on the same hook: what the hook itself costs
		Hp "$1" tc qdisc add dev "$HIF" clsact &&
			Hp "$1" tc filter add dev "$HIF" ingress pref 1 handle 1 bpf direct-action \
				obj "$BUILD/bench/bench_progs.bpf.o" sec tc || die "tc filter (tcnull)" ;;
	tcxnull)	# the same (r0 = TC_ACT_OK; exit) as a TCX program: what the TCX hook costs
		Hp "$1" "$TCX_TOOL" add "$HIF" ingress first >/dev/null || die "tcx_tool add (tcxnull)" ;;
	latch:* | latchcls:*)
		Hp "$1" env LATCH_TC_MODE="$([ "${2%%:*}" = latchcls ] && echo clsact || echo auto)" \
			"$LATCH" attach "$SB$1" --dev "$HIF" --guest-mac "${GMACS[$1]}" --guest-ip "$GUEST_IP" \
			--host-ip "$LATCH_HOST_IP" --host-port "$PORT" >/dev/null || die "latch attach ($2)"
		Hp "$1" "$CTL" "$SB$1" load "$OUT/allow-${2#*:}.txt" >/dev/null || die "latch policy load ($2)" ;;
	nft:*) Hp "$1" nft -f "$OUT/nft-${2#*:}.nft" || die "nft -f ($2)" ;;
	*) die "unknown config $2" ;;
	esac
}

# PORT must pass; with a filter PORT+1 must be dropped.
check() {	# check I CONFIG
	local rc=0
	Gp "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$HOST_IP/$((PORT + 1))" 2>/dev/null || rc=$?
	if [ "$2" = none ] || [ "$2" = qdisc ] || [ "$2" = tcnull ] || [ "$2" = tcxnull ]; then
		[ "$rc" != 124 ] || die "$2: port $((PORT + 1)) blocked without a filter"
	else
		[ "$rc" = 124 ] || die "$2: port $((PORT + 1)) NOT blocked (rc=$rc)"
	fi
	Gp "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$HOST_IP/$PORT" || die "$2: port $PORT blocked"
}

latch_passed() {	# latch_passed I: packets pair I's latch passed from the guest (any pass reason)
	Hp "$1" "$LATCH" --json status "$SB$1" |
		jq '[.. | objects | select(has("reason") and has("direction")) |
		     select(.direction == "from-guest" and (.reason | startswith("pass"))) | .packets] | add // 0'
}

for i in "${!CONFIGS[@]}"; do
	config_on "$i" "${CONFIGS[$i]}"
	Hp "$i" iperf3 -s -B "$HOST_IP" -p "$PORT" -D --pidfile "$OUT/iperf3-$i.pid"
done
for i in "${!CONFIGS[@]}"; do
	for _ in $(seq 50); do [ -s "$OUT/iperf3-$i.pid" ] && break; sleep 0.1; done
	p=$(tr -d '\0' < "$OUT/iperf3-$i.pid")
	[ -n "$p" ] || die "iperf3 server $i did not start"
	IPERF_PIDS+=("$p")
done
sleep 0.3
for i in "${!CONFIGS[@]}"; do check "$i" "${CONFIGS[$i]}"; done
log "results go to $OUT (reps $REPS, sizes $SIZES, ${#CONFIGS[@]} pairs: ${CONFIGS[*]})"

# ---------------------------------------------------------------- testrun
log "testrun: BPF_PROG_TEST_RUN, $TESTRUN_REPS reps, $REPEAT packets per run, $PAIRS pairs for the policy path"
args=()
for n in $SIZES; do args+=("$OUT/allow-$n.txt"); done
taskset -c 1 "$TESTRUN" -d "$HOST_IP" -p "$PORT" -m "$MISS" -r "$TESTRUN_REPS" -n "$REPEAT" -s "$PAIRS" "${args[@]}" |
	sed -n 's/^n=\([0-9]*\) case=\([a-z_0-9]*\) rep=\([0-9]*\) ns=\([0-9.-]*\)$/testrun,\2,latch,\1,\3,\4/p' >> "$RAW"
[ "${PIPESTATUS[0]}" = 0 ] || die "testrun"

# ---------------------------------------------------------------- inplace
log "inplace: $INJECT_ROUNDS rounds of $INJECT_PKTS frames into each of ${#CONFIGS[@]} pairs"
targets=()
declare -A passed0=()
for i in "${!CONFIGS[@]}"; do
	targets+=("${CONFIGS[$i]}=/run/netns/lbn-h$i-$$,$HIF,${HMACS[$i]},${GMACS[$i]}")
	case ${CONFIGS[$i]} in latch:* | latchcls:*) passed0[$i]=$(latch_passed "$i") ;; esac
done
taskset -c 1 "$INJECT" "$GUEST_IP" "$HOST_IP" "$PORT" "$INJECT_PKTS" "$INJECT_ROUNDS" "${targets[@]}" |
	sed -n 's/^label=\([a-z]*\):*\([0-9]*\) round=\([0-9]*\) kernel_ns_per_pkt=\([0-9]*\)$/inplace,rx_ns,\1,\2,\3,\4/p' |
	sed 's/^inplace,rx_ns,\(none\|qdisc\|tcnull\|tcxnull\),,/inplace,rx_ns,\1,0,/' >> "$RAW"
[ "${PIPESTATUS[0]}" = 0 ] || die "inject"
for i in "${!passed0[@]}"; do	# the frames really went through latch, and passed
	p=$(( $(latch_passed "$i") - passed0[$i] ))
	[ "$p" -ge $((INJECT_PKTS * INJECT_ROUNDS)) ] ||
		die "${CONFIGS[$i]}: latch passed $p of $((INJECT_PKTS * INJECT_ROUNDS)) injected frames"
done

# ---------------------------------------------------------------- tput
tput_pairs=()
for i in "${!CONFIGS[@]}"; do
	case ${CONFIGS[$i]} in none|qdisc|tcnull|tcxnull|"latch:$TPUT_N"|"latchcls:$TPUT_N"|"nft:$TPUT_N") tput_pairs+=("$i") ;; esac
done
log "tput: $TPUT_ROUNDS rounds of iperf3 TCP and UDP, $SECS s each, in ${#tput_pairs[@]} pairs"
np=${#tput_pairs[@]}
for ((r = 1; r <= TPUT_ROUNDS; r++)); do
	for ((j = 0; j < np; j++)); do
		i=${tput_pairs[$(((j + r - 1) % np))]}	# rotated: no config always runs first
		c=${CONFIGS[$i]}; impl=${c%%:*}
		j1=$(Gp "$i" timeout $((SECS + 15)) iperf3 -c "$HOST_IP" -p "$PORT" -t "$SECS" -A 0,1 -J) ||
			die "iperf3 tcp ($c)"
		j2=$(Gp "$i" timeout $((SECS + 15)) iperf3 -c "$HOST_IP" -p "$PORT" -u -b 0 -l 64 -t "$SECS" -A 0,1 -J) ||
			die "iperf3 udp ($c)"
		rec tput tcp_gbps "$impl" "$TPUT_N" "$r" "$(jq '.end.sum_received.bits_per_second / 1e9' <<<"$j1")"
		# sent: the sender's rate, whose CPU also runs the veth receive path and
		# the filter; delivered: read by the server (the rest overflowed its socket)
		rec tput udp_tx_kpps "$impl" "$TPUT_N" "$r" "$(jq '.end.sum_sent.packets / .end.sum_sent.seconds / 1e3' <<<"$j2")"
		rec tput udp_rx_kpps "$impl" "$TPUT_N" "$r" \
			"$(jq '(.end.sum_received.packets - .end.sum_received.lost_packets) / .end.sum_received.seconds / 1e3' <<<"$j2")"
	done
done

# ---------------------------------------------------------------- ctl
log "ctl: latch API and CLI, $BIG entries"
CTL_SB=${SB}0	# the control path runs on pair 0, unfiltered until now
config_on 0 "latch:$SMALL"
H "$CTL" "$CTL_SB" bench "$OUT/allow-$BIG.txt" "$OUT/allow-b-$BIG.txt" "$REPS" "$ADDS" |
	sed -n 's/^op=\([a-z]*\) n=\([0-9]*\) rep=\([0-9]*\) us=\([0-9.]*\)$/ctl,\1,latch,\2,\3,\4/p' >> "$RAW"
[ "${PIPESTATUS[0]}" = 0 ] || die "ctl bench"
for ((r = 1; r <= REPS; r++)); do
	# a process of its own per load: its memory and the kernel's are not warm from the last rep
	for list in "allow-$BIG" "allow-b-$BIG"; do
		v=$(H "$CTL" "$CTL_SB" load "$OUT/$list.txt" | sed -n 's/^op=load n=[0-9]* us=\([0-9.]*\)$/\1/p')
		[ -n "$v" ] || die "ctl load ($list)"
		rec ctl load_fresh latch "$BIG" "$r" "$v"
	done
	for k in 1 2 3 4; do
		t0=$(now_ns); H "$LATCH" egress "$CTL_SB" allow 198.18.128.200:443 >/dev/null; t1=$(now_ns)
		rec ctl cli_add latch "$BIG" "$r" $(((t1 - t0) / 1000))
		H "$LATCH" egress "$CTL_SB" revoke 198.18.128.200:443 >/dev/null
	done
done
H "$LATCH" detach "$CTL_SB" >/dev/null || die "latch detach"
"$CTL" - diag "$OUT/allow-$BIG.txt" "$REPS" |
	sed -n 's/^op=\([a-z_0-9]*\) n=\([0-9]*\) rep=\([0-9]*\) us=\([0-9.]*\)$/ctl,\1,latch,\2,\3,\4/p' >> "$RAW"
[ "${PIPESTATUS[0]}" = 0 ] || die "ctl diag"

log "ctl: nftables, $BIG entries"
{
	echo "flush set inet $NFT_TABLE allow4"
	printf 'add element inet %s allow4 { ' "$NFT_TABLE"
	awk 'NR > 1 { printf(", ") } { printf("%s . %s", $1, $2) }' "$OUT/allow-b-$BIG.txt"
	echo " }"
} > "$OUT/nft-replace-$BIG.nft"
for ((r = 1; r <= REPS; r++)); do
	nft_off
	t0=$(now_ns); H nft -f "$OUT/nft-$BIG.nft"; t1=$(now_ns)
	rec ctl load nft "$BIG" "$r" $(((t1 - t0) / 1000))
	t0=$(now_ns); H nft -f "$OUT/nft-replace-$BIG.nft"; t1=$(now_ns)
	rec ctl replace nft "$BIG" "$r" $(((t1 - t0) / 1000))
	for k in 1 2 3 4; do
		t0=$(now_ns); H nft add element inet "$NFT_TABLE" allow4 "{ 198.18.128.200 . 443 }"; t1=$(now_ns)
		rec ctl cli_add nft "$BIG" "$r" $(((t1 - t0) / 1000))
		H nft delete element inet "$NFT_TABLE" allow4 "{ 198.18.128.200 . 443 }"
	done
done
nft_off

# ---------------------------------------------------------------- match
log "match: a queried name against a profile of $BIG names (bench/match)"
MATCH_DIR=$(mktemp -d /tmp/latch-bench-match.XXXXXX)
"$MATCH" "$MATCH_DIR" "$BIG" "$REPS" |
	sed -n 's/^op=\(match_[a-z]*\) impl=\([a-z]*\) n=\([0-9]*\) rep=\([0-9]*\) ns=\([0-9.]*\)$/match,\1,\2,\3,\4,\5/p' >> "$RAW"
rc=${PIPESTATUS[0]}
rm -rf "$MATCH_DIR"
[ "$rc" = 0 ] || die "bench/match"

# ---------------------------------------------------------------- latchd
# bench/latchd.sh: its own namespaces, latchd, dnsmasq and pins, removed by its own trap
LATCHD_NOTE=""
if [ "${BENCH_LATCHD:-1}" = 0 ]; then
	LATCHD_NOTE="latchd rows: skipped (BENCH_LATCHD=0)"
else
	log "latchd: resolver beside dnsmasq, profile switch beside nftables (bench/latchd.sh)"
	if ! BUILD=$BUILD bash "$ROOT/bench/latchd.sh" "$OUT/latchd" > "$OUT/latchd.csv"; then
		LATCHD_NOTE="latchd rows: bench/latchd.sh failed (its lines above); the rows it finished are shown"
		log "$LATCHD_NOTE"
	fi
	cat "$OUT/latchd.csv" >> "$RAW"
fi

# ---------------------------------------------------------------- vm
# free_pool CIDR...: the first candidate that overlaps no route and no address on this host
free_pool() {
	python3 "$ROOT/selftests/free_net.py" "$@"
}
VM_NOTE=""
vm_part() {
	local pool="" r j
	if [ "${BENCH_VM:-1}" = 0 ]; then VM_NOTE="vm: skipped (BENCH_VM=0)"; return 0; fi
	if ! virsh -q -c qemu:///system version >/dev/null 2>&1; then
		VM_NOTE="vm: skipped, libvirt unreachable at qemu:///system (start it: virtlogd -d; libvirtd -d)"
		return 0
	fi
	pool=$(free_pool 198.51.100.64/26 198.51.100.0/26 203.0.113.128/26)
	if [ -z "$pool" ]; then VM_NOTE="vm: skipped, no free documentation /26 for the pool"; return 0; fi
	make -C "$ROOT" --no-print-directory image >/dev/null 2>&1 || log "make image failed; latch up builds it"
	VM_ROOT=$(mktemp -d /tmp/latch-vmbench.XXXXXX)
	chmod 0755 "$VM_ROOT"
	mkdir -p "$VM_ROOT/root/etc/latch"
	printf 'pool = %s\ntable_base = 31600\nimages = %s\n' "$pool" "${LATCH_IMAGES:-/var/lib/latch/images}" \
		> "$VM_ROOT/root/etc/latch/latch.conf"
	for r in $(seq "${BENCH_VM_REPS:-3}"); do
		log "vm rep $r: latch up"
		# up prints its steps on stderr; stdout is the JSON
		j=$(LATCH_ROOT=$VM_ROOT/root "$LATCH" --json up lbn-vm 2>"$VM_ROOT/up.err") ||
			{ log "latch up failed: $j $(tail -n 3 "$VM_ROOT/up.err")"; VM_NOTE="vm: latch up failed"; break; }
		rec vm enforced "$(jq -r .accelerator <<<"$j")" 0 "$r" "$(jq -r .ms_to_enforced <<<"$j")"
		rec vm domain "$(jq -r .accelerator <<<"$j")" 0 "$r" "$(jq -r .ms_to_domain_started <<<"$j")"
		rec vm agent "$(jq -r .accelerator <<<"$j")" 0 "$r" "$(jq -r .ms_to_agent <<<"$j")"
		LATCH_ROOT=$VM_ROOT/root "$LATCH" destroy lbn-vm >/dev/null || die "latch destroy"
	done
	rm -rf "$VM_ROOT"
	VM_ROOT=""
}
vm_part

{
	uname -r | sed 's/^/kernel: /'
	echo "cpus: $(nproc)"
	iperf3 --version | head -1
	nft --version
	dnsperf -h 2>&1 | sed -n 's/^Version/dnsperf/p'
	dnsmasq --version 2>/dev/null | head -1
	echo "load average: start $LOAD_START, end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "reps: $REPS  sizes: $SIZES  inject: $INJECT_PKTS  repeat: $REPEAT  pairs: $PAIRS  secs: $SECS"
	echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo -)"
} > "$OUT/env.txt"

# med PART METRIC IMPL N: median over reps, "" when nothing was recorded
med() {
	awk -F, -v p="$1" -v m="$2" -v i="$3" -v n="$4" '$1 == p && $2 == m && $3 == i && $4 == n { print $6 }' "$RAW" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
rng() {	# rng PART METRIC IMPL N FMT [DIVISOR]: "[min..max]" over reps
	awk -F, -v p="$1" -v m="$2" -v i="$3" -v n="$4" -v f="$5" -v d="${6:-1}" '$1 == p && $2 == m && $3 == i && $4 == n {
		if (!c++ || $6 < lo) lo = $6; if (c == 1 || $6 > hi) hi = $6 }
		END { if (c) printf("[" f ".." f "]", lo / d, hi / d) }' "$RAW"
}
calc() { awk "BEGIN { printf(\"$1\", $2) }"; }
# paired PART METRIC IMPL N BASE_N OP: per round, IMPL's figure minus (OP -) or
# over (OP /) no filter's figure of the same round; prints "median q1 q3"
paired() {	# paired PART METRIC IMPL N BASE_N OP [BASE_IMPL]: IMPL OP BASE_IMPL (none) per round: median, q1, q3
	awk -F, -v p="$1" -v m="$2" -v i="$3" -v n="$4" -v bn="$5" -v op="$6" -v bi="${7:-none}" '
		$1 == p && $2 == m && $3 == bi && $4 == bn { b[$5] = $6 }
		$1 == p && $2 == m && $3 == i && $4 == n { v[$5] = $6 }
		END { for (r in v) if ((r in b) && b[r] != 0) print (op == "/" ? v[r] / b[r] : v[r] - b[r]) }' "$RAW" |
		sort -g | awk '{ x[NR] = $1 }
		END { if (!NR) { print "0 0 0"; exit }
		      med = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
		      print med, x[int((NR - 1) * 0.25) + 1], x[int((NR - 1) * 0.75 + 0.5) + 1] }'
}
pct() { calc %+.1f%% "100 * ($1 - 1)"; }	# a ratio to none, as a change
have() { awk -F, -v p="$1" -v m="$2" -v i="$3" '$1 == p && $2 == m && $3 == i { f = 1 } END { exit !f }' "$RAW"; }
tot() {	# tot PART METRIC IMPL: the sum over reps
	awk -F, -v p="$1" -v m="$2" -v i="$3" '$1 == p && $2 == m && $3 == i { s += $6 } END { print s + 0 }' "$RAW"
}
ok() { awk "BEGIN { exit !($1) }" && echo PASS || echo MISS; }
thou() { echo "$1" | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta'; }

FMT='%-40s %8s  %-19s  %-24s  %-24s  %-28s %s\n'
row() { printf "$FMT" "$@"; }
{
	row "measurement" "entries" "none" "latch" "nftables (or ref.)" "target (latch)" "result"
	row "----------------------------------------" "--------" "-------------------" "------------------------" "------------------------" "----------------------------" "------"
	declare -A base=()
	for cse in hit_cached hit_policy port_miss addr_miss addr_miss_noevents dns_cached tc_pass; do
		case $cse in
		hit_cached) label="test-run hit (flow cached), ns/pkt" ;;
		hit_policy) label="test-run hit (policy lookup), ns/pkt" ;;
		port_miss) label="test-run port miss, ns/pkt" ;;
		addr_miss) label="test-run address miss, ns/pkt" ;;
		addr_miss_noevents) label="test-run addr miss, events off, ns/pkt" ;;
		dns_cached) label="test-run DNS query on its flow, ns/pkt" ;;
		tc_pass) label="test-run floor (empty tc prog), ns/pkt" ;;
		esac
		for n in $SIZES; do
			v=$(med testrun "$cse" latch "$n")
			tgt="" res=""
			case $cse in tc_pass|addr_miss_noevents|dns_cached) tgt="(information)" ;; esac
			if [ -z "$tgt" ] && [ "$n" = "$BIG" ] && [ "$BIG" != "$SMALL" ]; then
				b=$(med testrun "$cse" latch "$SMALL")
				tgt="<= 1.2 x $(calc %.0f "$b") = $(calc %.0f "1.2 * $b")"
				res=$(ok "$v <= 1.2 * $b")
			fi
			row "$label" "$(thou "$n")" "-" "$(calc %.0f "$v")" "-" "$tgt" "$res"
		done
	done
	none=$(med inplace rx_ns none 0)
	for c in qdisc tcnull tcxnull; do
		have inplace rx_ns "$c" || continue
		case $c in
		qdisc) label="in-place rx path, clsact, no filter" ;;
		tcnull) label="in-place rx path, empty prog, clsact" ;;
		tcxnull) label="in-place rx path, empty prog, TCX" ;;
		esac
		read -r t tlo thi <<<"$(paired inplace rx_ns "$c" 0 0 -)"
		row "$label" "-" "$(calc %.0f "$none") $(rng inplace rx_ns none 0 %d)" \
			"$(calc %.0f "$(med inplace rx_ns "$c" 0)") ($(calc %+.0f "$t") [$(calc %+.0f "$tlo")..$(calc %+.0f "$thi")])" \
			"-" "(information: hook floor)" ""
	done
	# latch's own hook: TCX where the kernel has it (latch:N), clsact for latchcls
	read -r hx _ _ <<<"$(paired inplace rx_ns tcxnull 0 0 -)"
	read -r hc _ _ <<<"$(paired inplace rx_ns tcnull 0 0 -)"
	[ "$HAVE_TCX" = 1 ] || hx=$hc
	# "within +15 ns of the empty program on the same hook": latch - empty program in the same round
	# (the two medians against none each carry the round's noise; their difference moved by 40 ns run to run)
	hook=tcxnull
	[ "$HAVE_TCX" = 1 ] || hook=tcnull
	for n in $SIZES; do
		read -r lo llo lhi <<<"$(paired inplace rx_ns latch "$n" 0 -)"
		read -r fo flo fhi <<<"$(paired inplace rx_ns nft "$n" 0 -)"
		read -r eo elo ehi <<<"$(paired inplace rx_ns latch "$n" 0 - "$hook")"
		row "in-place rx path, ns/pkt (overhead)" "$(thou "$n")" "$(calc %.0f "$none")" \
			"$(calc %.0f "$(med inplace rx_ns latch "$n")") ($(calc %+.0f "$lo") [$(calc %+.0f "$llo")..$(calc %+.0f "$lhi")])" \
			"$(calc %.0f "$(med inplace rx_ns nft "$n")") ($(calc %+.0f "$fo") [$(calc %+.0f "$flo")..$(calc %+.0f "$fhi")])" \
			"<= 0.35 x nft = $(calc %+.1f "0.35 * $fo")" "$(ok "$lo <= 0.35 * $fo")"
		row "  latch - empty prog, same hook, by round" "$(thou "$n")" "-" \
			"$(calc %+.0f "$eo") [$(calc %+.0f "$elo")..$(calc %+.0f "$ehi")]" "(empty $(calc %+.0f "$hx") vs none)" \
			"<= +15" "$(ok "$eo <= 15")"
	done
	if have inplace rx_ns latchcls; then
		read -r lo llo lhi <<<"$(paired inplace rx_ns latchcls "$TPUT_N" 0 -)"
		read -r fo _ _ <<<"$(paired inplace rx_ns nft "$TPUT_N" 0 -)"
		read -r eo _ _ <<<"$(paired inplace rx_ns latchcls "$TPUT_N" 0 - tcnull)"
		row "  the same, latch in clsact mode" "$(thou "$TPUT_N")" "-" \
			"$(calc %.0f "$(med inplace rx_ns latchcls "$TPUT_N")") ($(calc %+.0f "$lo") [$(calc %+.0f "$llo")..$(calc %+.0f "$lhi")])" "-" \
			"<= 0.35 x nft = $(calc %+.1f "0.35 * $fo"), - empty clsact prog by round $(calc %+.0f "$eo") <= +15" \
			"$(ok "$lo <= 0.35 * $fo && $eo <= 15")"
	fi
	for m in tcp_gbps udp_tx_kpps udp_rx_kpps; do
		case $m in
		tcp_gbps) label="veth iperf3 TCP, Gbit/s"; f1=%.2f ;;
		udp_tx_kpps) label="veth iperf3 UDP 64 B, kpps sent"; f1=%.0f ;;
		udp_rx_kpps) label="veth iperf3 UDP 64 B, kpps delivered"; f1=%.0f ;;
		esac
		z=$(med tput "$m" none "$TPUT_N")
		read -r l llo lhi <<<"$(paired tput "$m" latch "$TPUT_N" "$TPUT_N" /)"
		read -r f flo fhi <<<"$(paired tput "$m" nft "$TPUT_N" "$TPUT_N" /)"
		row "$label" "$(thou "$TPUT_N")" "$(calc "$f1" "$z") $(rng tput "$m" none "$TPUT_N" "$f1")" \
			"$(calc "$f1" "$(med tput "$m" latch "$TPUT_N")") ($(pct "$l") [$(pct "$llo")..$(pct "$lhi")])" \
			"$(calc "$f1" "$(med tput "$m" nft "$TPUT_N")") ($(pct "$f") [$(pct "$flo")..$(pct "$fhi")])" \
			">= 95% of none" "$(ok "$l >= 0.95")"
		for c in latchcls qdisc tcnull tcxnull; do
			have tput "$m" "$c" || continue
			case $c in
			latchcls) label="  the same, latch in clsact mode" ;;
			qdisc) label="  the same, clsact qdisc, no filter" ;;
			tcnull) label="  the same, empty prog on clsact" ;;
			tcxnull) label="  the same, empty prog on TCX" ;;
			esac
			read -r t tlo thi <<<"$(paired tput "$m" "$c" "$TPUT_N" "$TPUT_N" /)"
			row "$label" "-" "-" \
				"$(calc "$f1" "$(med tput "$m" "$c" "$TPUT_N")") ($(pct "$t") [$(pct "$tlo")..$(pct "$thi")])" "-" \
				"(information)" ""
		done
	done
	l=$(med ctl load latch "$BIG"); f=$(med ctl load nft "$BIG")
	row "load $(thou "$BIG") entries, ms" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000") (API)" \
		"$(calc %.1f "$f / 1000") (nft -f)" "< 100 ms" "$(ok "$l < 100000")"
	l=$(med ctl load_fresh latch "$BIG")
	row "  a new process per load, over the other list, ms" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000") $(rng ctl load_fresh latch "$BIG" %.0f 1000)" "-" \
		"(information: cold memory)" ""
	l=$(med ctl loadgc latch "$BIG")
	row "  then the idle generation collected, ms" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000") (API)" "-" \
		"(information: after the switch)" ""
	l=$(med ctl replace latch "$BIG"); f=$(med ctl replace nft "$BIG")
	row "replace $(thou "$BIG") by $(thou "$BIG") others, ms" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000") (API)" \
		"$(calc %.1f "$f / 1000") (nft -f)" "(information)" ""
	l=$(med ctl replacegc latch "$BIG")
	row "  then the old generation collected, ms" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000") (API)" "-" \
		"(information: after the switch)" ""
	l=$(med ctl add latch "$BIG")
	row "add one entry, us" "$(thou "$BIG")" "-" "$(calc %.1f "$l") (API)" "-" "< 50 us" "$(ok "$l < 50")"
	l=$(med ctl cli_add latch "$BIG"); f=$(med ctl cli_add nft "$BIG")
	row "add one entry with the CLI, us" "$(thou "$BIG")" "-" "$(calc %.0f "$l") (latch)" \
		"$(calc %.0f "$f") (nft add)" "(information: process)" ""
	for op in prim_batch_insert prim_walk prim_walk_2n prim_elem_delete prim_lookup_batch_2n prim_batch_delete; do
		case $op in
		prim_batch_insert) label="  map: update_batch of N, ms" ;;
		prim_walk) label="  map: get_next_key walk of N, ms" ;;
		prim_walk_2n) label="  map: get_next_key walk of 2N, ms" ;;
		prim_elem_delete) label="  map: N x delete_elem, ms" ;;
		prim_lookup_batch_2n) label="  map: lookup_batch of 2N, ms" ;;
		prim_batch_delete) label="  map: delete_batch of N, ms" ;;
		esac
		l=$(med ctl "$op" latch "$BIG")
		row "$label" "$(thou "$BIG")" "-" "$(calc %.1f "$l / 1000")" "-" "(information: exact4-shaped)" ""
	done
	for cse in host wildcard miss; do
		l=$(med match "match_$cse" index "$BIG"); f=$(med match "match_$cse" scan "$BIG")
		row "profile match, $cse name, ns/query" "$(thou "$BIG")" "-" "$(calc %.0f "$l") (name index)" \
			"$(calc %.0f "$f") (scan of entries)" "(information)" ""
	done
	# bench/latchd.sh: the resolver beside dnsmasq (each client behind a veth, both servers on CPU 1)
	if have dns qps latch && have dns qps dnsmasq; then
		dn=$(awk -F, '$1 == "dns" { print $4; exit }' "$RAW")
		dq() { thou "$(calc "${3:-%.0f}" "$(med dns "$1" "$2" "$dn")") $(rng dns "$1" "$2" "$dn" "${3:-%.0f}")"; }
		dlost() { echo "lost $(tot dns lost "$1"), upstream $(tot dns upstream "$1")"; }
		# issue 15's target: at least dnsmasq's rate, on the medians of the saturated runs (bench/dnsload:
		# the server sets the pace, on a CPU ~100 % of the run); the ratio of each rep's pair beside it
		if have dns sat_qps latch && have dns sat_qps dnsmasq; then
			ql=$(med dns sat_qps latch "$dn"); qd=$(med dns sat_qps dnsmasq "$dn")
			read -r qr qlo qhi <<<"$(paired dns sat_qps latch "$dn" "$dn" / dnsmasq)"
			row "resolver q/s, cached A, saturated" "$(thou "$dn")" "-" "$(dq sat_qps latch)" \
				"$(dq sat_qps dnsmasq)" ">= dnsmasq ($(calc %.2f "$ql / $qd")x)" "$(ok "$ql >= $qd")"
			row "  the same, latch / dnsmasq paired by rep" "$(thou "$dn")" "-" \
				"$(calc %.2f "$qr") [$(calc %.2f "$qlo")..$(calc %.2f "$qhi")]" "-" "(information: median [quartiles])" ""
			dsat() { echo "$(calc %.1f "$(med dns sat_cpu_us "$1" "$dn")") / $(calc %.0f "$(med dns sat_busy_pct "$1" "$dn")") / $(calc %.0f "$(med dns sat_wait_pct "$1" "$dn")")"; }
			row "  the same, server us/q, on CPU/waiting %" "$(thou "$dn")" "-" "$(dsat latch)" "$(dsat dnsmasq)" \
				"(information: ~100 / 0: the server set the pace)" ""
			row "  the same, answers per server sleep" "$(thou "$dn")" "-" "$(dq sat_answers_per_sleep latch)" \
				"$(dq sat_answers_per_sleep dnsmasq)" "(information)" ""
			row "  the same, latency us; lost" "$(thou "$dn")" "-" \
				"$(dq sat_lat_us latch); lost $(tot dns sat_lost latch)" "$(dq sat_lat_us dnsmasq); lost $(tot dns sat_lost dnsmasq)" \
				"(information)" ""
		fi
		# dnsperf's runs: the client (busy 100 % on CPU 0) sets their pace, so they read the client, not the servers
		ql=$(med dns qps latch "$dn"); qd=$(med dns qps dnsmasq "$dn")
		read -r qr qlo qhi <<<"$(paired dns qps latch "$dn" "$dn" / dnsmasq)"
		row "resolver q/s, cached A, dnsperf" "$(thou "$dn")" "-" "$(dq qps latch)" "$(dq qps dnsmasq)" \
			"(information: $(calc %.2f "$ql / $qd")x; client-bound)" ""
		row "  the same, latch / dnsmasq paired by rep" "$(thou "$dn")" "-" \
			"$(calc %.2f "$qr") [$(calc %.2f "$qlo")..$(calc %.2f "$qhi")]" "-" "(information: median [quartiles])" ""
		row "  the same, average latency, us" "$(thou "$dn")" "-" "$(dq lat_us latch)" "$(dq lat_us dnsmasq)" \
			"(information: at that load)" ""
		row "  the same, queries lost, sent upstream" "$(thou "$dn")" "-" "$(dlost latch)" "$(dlost dnsmasq)" \
			"(information: all reps)" ""
		row "  the same, server CPU per query, us" "$(thou "$dn")" "-" "$(dq cpu_us latch %.1f)" "$(dq cpu_us dnsmasq %.1f)" \
			"(information)" ""
		dcpu() { echo "$(calc %.0f "$(med dns busy_pct "$1" "$dn")") / $(calc %.0f "$(med dns wait_pct "$1" "$dn")")"; }
		row "  the same, server on a CPU / waiting, %" "$(thou "$dn")" "-" "$(dcpu latch)" "$(dcpu dnsmasq)" \
			"(information: of the run)" ""
		if have dns client_cpu_us latch && have dns client_cpu_us dnsmasq; then
			# CPU 0's side: dnsperf and its sends' softirq work (latch's: the guest's tc filter and
			# bucket, and the ingress hooks on latchd's cgroup); a busy CPU 0 means the client set the pace
			dc0() { echo "$(calc %.1f "$(med dns client_cpu_us "$1" "$dn")") / $(calc %.0f "$(med dns cpu0_busy_pct "$1" "$dn")")"; }
			row "  the same, client us/query, CPU 0 busy%" "$(thou "$dn")" "-" "$(dc0 latch)" \
				"$(dc0 dnsmasq)" "(information)" ""
			row "  the same, answers per server sleep" "$(thou "$dn")" "-" "$(dq answers_per_sleep latch)" \
				"$(dq answers_per_sleep dnsmasq)" "(information)" ""
		fi
		if have dns lat1_us latch && have dns lat1_us dnsmasq; then
			row "  latency at 1 query outstanding, us" "$(thou "$dn")" "-" "$(dq lat1_us latch)" "$(dq lat1_us dnsmasq)" \
				"(information)" ""
		fi
		if have dns qps latch_refused; then
			row "resolver q/s, REFUSED (name not allowed)" "$(thou "$dn")" "-" "$(dq qps latch_refused)" "-" \
				"($(dlost latch_refused))" ""
		fi
	fi
	# bench/latchd.sh: a 65,536-entry profile switch beside one nft -f transaction
	if have switch cli latch && have switch nft_f nft; then
		sn=$(awk -F, '$1 == "switch" { print $4; exit }' "$RAW")
		sw() { printf '%s %s' "$(calc %.0f "$(med switch "$1" "$2" "$sn") / 1000")" "$(rng switch "$1" "$2" "$sn" %.0f 1000)"; }
		# issue 15's target: at most half of nft -f's time, on the medians
		cl=$(med switch cli latch "$sn"); nf=$(med switch nft_f nft "$sn")
		row "profile switch $(thou "$sn") -> $(thou "$sn"), ms" "$(thou "$sn")" "-" "$(sw cli latch) (CLI)" \
			"$(sw nft_f nft) (nft -f)" "<= 0.5 x nft -f = $(calc %.0f "$nf / 2000")" "$(ok "$cl <= 0.5 * $nf")"
		for op in parse walk compose switch gc; do
			have switch "$op" latch || continue
			case $op in
			parse) label="  latchd: load the profile" ;;
			walk) label="  latchd: walk the live policy (carry)" ;;
			compose) label="  latchd: compose the union (fold)" ;;
			switch) label="  latchd: latch_policy_switch (kernel)" ;;
			gc) label="  latchd: delete the old generation" ;;
			esac
			row "$label" "$(thou "$sn")" "-" "$(sw "$op" latch)" "-" "(information: profswitch)" ""
		done
	fi
} > "$OUT/table.txt"

echo
echo "latch benchmarks: medians of reps ($TESTRUN_REPS test-run, $REPS control path) [min..max]; in-place and throughput: medians of rounds, and the"
echo "  change from none as the median of per-round differences (ratios) [quartiles]; raw figures in $OUT/raw.csv"
echo "$(uname -r), $(nproc) CPUs, load average at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$OUT/table.txt"
echo
echo "test-run: BPF_PROG_TEST_RUN repeat $REPEAT, guest TCP SYN, a fresh copy per rep; the policy-lookup hit is the first"
echo "  packet of a flow (cold caches), measured as floor + median(repeat=1 policy run - repeat=1 empty-program run)"
echo "  over $PAIRS pairs."
echo "in-place: XDP live frames (UDP, 64 B payload) into $HIF's receive path, $INJECT_ROUNDS rounds of $INJECT_PKTS frames per"
echo "  pair, one process going round all pairs; overhead = median over rounds of (filter - none) of the same round."
echo "  Throughput: $TPUT_ROUNDS rounds of one iperf3 -t $SECS TCP and one UDP run per pair, client CPU 0, server CPU 1."
echo "load/replace: until the new policy is live (staged under the idle generation, then one config update);"
echo "  the old generation is deleted after that by latch_policy_gc (lookup_batch + delete_batch), shown below it."
echo "map: primitives timed on a private hash map shaped like exact4 (bench/ctl.c diag), for reference."
echo "address miss: $MISS; nftables: inet table, ipv4_addr . inet_service set, ingress hook of $HIF, policy drop."
if have dns qps latch; then
	echo "resolver (bench/latchd.sh): two clients on CPU 0 in turn, each -c ${BENCH_DNS_CLIENTS:-4} -q ${BENCH_DNS_QUEUE:-64}, ${BENCH_DNS_SECS:-10} s a run:"
	echo "  dnsperf (two threads that wake each other, ~8 us of CPU a query: it sets the pace, so information only)"
	echo "  and bench/dnsload (one thread, sendmmsg/recvmmsg: the server never waits for a query, the judged row);"
	echo "  ${BENCH_DNS_REPS:-2} reps; the same warm A queries to latchd's resolver (from its guest's netns, through latch's"
	echo "  tc filter: the resolver answers its guest only) and to dnsmasq --server=UPSTREAM --cache-size=1024 (from a"
	echo "  netns behind a veth of its own, no filter), each server on CPU 1, one upstream."
	echo "  CPU per query: the server's run time (schedstat) / answers; on a CPU + waiting near 100 %: the server set the pace."
fi
if have switch cli latch; then
	echo "profile switch: wall clock of \`latch egress NAME profile B\` (then A, B, ...) between two profiles of $(thou "$sn")"
	echo "  addresses :443, and of \`nft -f\` (flush set + add element) on an inet set of the same; the latchd rows are"
	echo "  its steps timed one by one by bench/profswitch on the same files."
fi
if [ -n "$LATCHD_NOTE" ]; then
	echo "$LATCHD_NOTE"
fi
echo
if [ -n "$VM_NOTE" ]; then
	echo "$VM_NOTE"
fi
accel=$(awk -F, '$1 == "vm" { print $3; exit }' "$RAW")
if [ -n "$accel" ]; then
	e=$(med vm enforced "$accel" 0); d=$(med vm domain "$accel" 0); a=$(med vm agent "$accel" 0)
	n=$(awk -F, '$1 == "vm" && $2 == "agent"' "$RAW" | wc -l)
	echo "VM sandbox, \`latch up\` on the default image, accelerator $accel: medians of $n [min..max]"
	printf '  %-46s %8s ms %s\n' "up -> enforcement verified on the tap" "$e" "$(rng vm enforced "$accel" 0 %d)"
	printf '  %-46s %8s ms %s\n' "up -> domain started" "$d" "$(rng vm domain "$accel" 0 %d)"
	printf '  %-46s %8s ms %s\n' "up -> guest agent answering" "$a" "$(rng vm agent "$accel" 0 %d)"
	first=$(awk -F, '$1 == "vm" { v[$5 "," $2] = $6; r[$5] = 1 } END { for (k in r) if (!(v[k ",enforced"] < v[k ",agent"])) { print "MISS"; exit } print "PASS" }' "$RAW")
	printf '  %-46s %11s %s\n' "enforcement before the agent, every rep" "" "$first"
fi
exit 0
