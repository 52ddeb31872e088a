# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0-only
# lib.sh - shared by the live network-namespace selftests (selftests/live_*.sh).
#
# Source it and call lts_setup (lts_init, lts_topo_up, lts_servers).  It
# builds three namespaces that exist only for this test run (names carry the
# script's PID, so runs never collide):
#
#   G "guest"  g0  192.0.2.2/30  2001:db8:1::2/64  MAC 02:00:00:00:00:02
#        |  veth
#   H "host"   hg0 192.0.2.1/30  2001:db8:1::1/64   <- latch attaches here
#              hi0 198.51.100.253/30 2001:db8:fe::1/64
#        |  veth
#   I "internet" ih0 198.51.100.254/30 2001:db8:fe::2/64, fake servers on lo:
#              203.0.113.10 .20 .53, 198.51.100.10, 2001:db8:ff::10 ::20 ::30 ::53
#
# H forwards (inside H only).  Sandbox sources use routing table 100, which
# knows only the guest link, the fake internet and `unreachable default`.
# The root namespace's routing, forwarding and eth0 are never touched, and
# every packet stays among these namespaces.
#
# It is also the one results library of every selftest script (lib_room.sh,
# lib_broker.sh and lib_vm.sh build on it): output is KTAP, the kernel's
# format (Documentation/dev-tools/ktap.rst), which selftests/run.sh reads.
# The exit status is 1 if anything failed, 77 if the whole script was skipped.
#
# Everything created (namespaces, bpffs pins, processes, temp files) is
# removed by an EXIT trap, pass or fail; processes are killed by PID only.
# latch runs in H through `nsenter --net` (so /sys/fs/bpf stays visible)
# with LATCH_BPFFS=/sys/fs/bpf/latch-selftest-PID.  If bpffs is not mounted
# at /sys/fs/bpf at all, lts_init mounts it there (as latch itself would) and
# leaves that mount in place.
#
# Probes wait LTS_T seconds (default 2) for an answer they expect and
# LTS_T_DENY (default 0.5) for one they expect never to come.

set -u

LTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LTS_TOP=$(cd "$LTS_DIR/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$LTS_TOP/build/latch}
if [ -x /usr/bin/python3 ]; then LTS_PY=/usr/bin/python3; else LTS_PY=python3; fi
LTS_NET="$LTS_DIR/lts_net.py"

LTS_G=lts-g-$$
LTS_H=lts-h-$$
LTS_I=lts-i-$$
LTS_NAME=lts-$$ # sandbox name
LTS_BPFFS=/sys/fs/bpf/latch-selftest-$$
# latch's cgroup directories (rooms, and latchd's own: it confines itself there)
export LATCH_CGROUP=latch-selftest-$$
LTS_PINS=$LTS_BPFFS/latch/$LTS_NAME
LTS_TMP=
LTS_PIDS=()
LTS_NS_MADE=()
LTS_PASSED=0
LTS_FAILED=0
LTS_SKIPPED=0

GUEST_MAC=02:00:00:00:00:02
GUEST4=192.0.2.2
HOST4=192.0.2.1
GUEST6=2001:db8:1::2
HOST6=2001:db8:1::1
SRV_A=203.0.113.10  # servers in I
SRV_B=203.0.113.20
SRV_DNS=203.0.113.53
SRV_C=198.51.100.10
SRV6_A=2001:db8:ff::10
SRV6_B=2001:db8:ff::20
SRV6_DNS=2001:db8:ff::53
SRV6_C=2001:db8:ff::30
# ports the echo servers in I listen on
SRV_TCP_PORTS=(80 443 7000 8080)
SRV_UDP_PORTS=(443 5000)

# ------------------------------------------------------------ results (KTAP)
#
#   KTAP version 1            when this file is sourced
#   # ...                     diagnostics (why a check failed, what a test does)
#   ok 1 NAME                 ok, check, check_not, check_cmp, check_eq
#   not ok 2 NAME             fail NAME WHY (WHY as a diagnostic line before it)
#   ok 3 NAME # SKIP WHY      skip NAME WHY
#   1..3                      lts_done: the plan comes last, as a script
#   # Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0     learns its
#                             checks as it goes; then exit 0 or 1
#   1..0 # SKIP WHY           lts_skip_all: nothing here can run; exit 77
#
# Names are the test's words; a '#' in one is written as 'no.' so that no
# name reads as a KTAP directive.

LTS_NUM=0
echo "KTAP version 1"

# lts_name VAR NAME: VAR=NAME made safe for a result line (no fork: a check runs it)
lts_name() {
	local n=${2//$'\n'/ }
	printf -v "$1" %s "${n//#/no.}"
}

ok() {
	LTS_PASSED=$((LTS_PASSED + 1))
	LTS_NUM=$((LTS_NUM + 1))
	lts_name _lts_shown "$*"
	echo "ok $LTS_NUM $_lts_shown"
}

# fail NAME [WHY...]: a NAME of several lines (a quoted error) is named by its first
fail() {
	local name=$1
	shift
	if [[ $name == *$'\n'* ]]; then
		set -- "${name#*$'\n'}" "$@"
		name=${name%%$'\n'*}
	fi
	LTS_FAILED=$((LTS_FAILED + 1))
	LTS_NUM=$((LTS_NUM + 1))
	# every line of WHY a diagnostic (a quoted error may run over several)
	[ $# -gt 0 ] && printf '%s\n' "$name: $*" | sed 's/^/# /'
	lts_name _lts_shown "$name"
	echo "not ok $LTS_NUM $_lts_shown"
	return 0
}

# skip NAME [WHY...]: one check that cannot run here
skip() {
	local name=$1
	shift
	LTS_SKIPPED=$((LTS_SKIPPED + 1))
	LTS_NUM=$((LTS_NUM + 1))
	lts_name _lts_shown "$name"
	echo "ok $LTS_NUM $_lts_shown # SKIP $*"
}

# lts_errfile VAR: VAR=where check keeps a command's output, to show it when it fails
lts_errfile() {
	local d=${LTS_TMP:-${TMP:-}}
	if [ -n "$d" ] && [ -d "$d" ] && [ -w "$d" ]; then d=$d/check.out; else d=/dev/null; fi
	printf -v "$1" %s "$d"
}

# lts_show FILE: its last lines as diagnostics (those already "# ..." kept as they are)
lts_show() {
	[ -s "$1" ] || return 0
	tail -n "${LTS_SHOW_LINES:-8}" "$1" | sed -e '/^#/!s/^/#   /'
}

# check NAME CMD...: ok when CMD exits 0.  CMD runs in this shell (it may set
# variables); its output is shown only when it fails.
check() {
	local _lts_name=$1 _lts_out
	shift
	lts_errfile _lts_out
	if "$@" >"$_lts_out" 2>&1; then
		ok "$_lts_name"
	else
		lts_show "$_lts_out"
		fail "$_lts_name" "\`$*\` failed"
	fi
	return 0
}

# check_not NAME CMD...: ok when CMD exits non-zero (probes wait LTS_T_DENY)
check_not() {
	local _lts_name=$1
	shift
	if LTS_T=$LTS_T_DENY "$@" >/dev/null 2>&1; then fail "$_lts_name" "\`$*\` succeeded"; else ok "$_lts_name"; fi
	return 0
}

# check_cmp NAME A OP B: numeric test, e.g. check_cmp "x grew" "$after" -gt "$before"
check_cmp() {
	local name=$1 a=$2 op=$3 b=$4
	if test "$a" "$op" "$b" 2>/dev/null; then ok "$name"; else fail "$name" "expected $a $op $b"; fi
	return 0
}

# check_eq NAME GOT WANT
check_eq() {
	if [ "$2" == "$3" ]; then ok "$1"; else fail "$1" "got '$2', want '$3'"; fi
	return 0
}

# lts_done: the plan and the totals; exit 1 if anything failed, else 0
lts_done() {
	echo "1..$LTS_NUM"
	echo "# Totals: pass:$LTS_PASSED fail:$LTS_FAILED xfail:0 xpass:0 skip:$LTS_SKIPPED error:0"
	[ "$LTS_FAILED" -eq 0 ] && exit 0
	exit 1
}

# lts_skip_all WHY: the whole script cannot run here (exit 77)
lts_skip_all() {
	echo "1..0 # SKIP ${0##*/}: $*"
	exit 77
}

# ------------------------------------------------------------ waiting
#
# A test waits for what it is about to read, never a guessed time: as the
# kernel's net/lib.sh (slowwait, busywait), poll until the condition holds,
# bounded in time.  A sleep that is itself the test (a grant running out, a
# rate-limit window refilling) stays a sleep, with a comment saying so.

LTS_WAIT=${LTS_WAIT:-10} # seconds wait_until and wait_counter wait by default

# lts_ms VAR SECS: VAR=SECS (like 2, 0.5, 1.25) in milliseconds, without a fork
lts_ms() {
	local i=${2%%.*} f=000
	[[ $2 == *.* ]] && f=${2#*.}000
	printf -v "$1" %d $((10#${i:-0} * 1000 + 10#${f:0:3}))
}

# lts_now_ms VAR: VAR=milliseconds on a clock that never steps back (/proc/uptime), no fork
lts_now_ms() {
	local up
	read -r up _ </proc/uptime
	up=${up/./}
	printf -v "$1" %d $((10#$up * 10))
}

# wait_until [-t SECS] [-i EVERY] CMD...: run CMD (output hidden) every EVERY
# seconds (default 0.1) until it exits 0; 0 once it does.  It gives up (1,
# with a "# wait_until: ..." line on stderr naming CMD) once SECS (default
# LTS_WAIT) have passed and CMD has had SECS/EVERY tries: on a loaded machine,
# where a try itself takes time, it is as patient as a loop of that many tries
# would be, and never waits past what those tries take.  Use it as a check's
# command (check NAME wait_until ...) or before a read.
wait_until() {
	local _lts_secs=$LTS_WAIT _lts_every=0.1 _lts_secs_ms _lts_every_ms _lts_tries _lts_start _lts_end _lts_now _lts_n=0
	while [ "${1:-}" = -t ] || [ "${1:-}" = -i ]; do
		if [ "$1" = -t ]; then _lts_secs=$2; else _lts_every=$2; fi
		shift 2
	done
	lts_ms _lts_secs_ms "$_lts_secs"
	lts_ms _lts_every_ms "$_lts_every"
	_lts_tries=$(((_lts_secs_ms + _lts_every_ms / 2) / (_lts_every_ms > 0 ? _lts_every_ms : 1)))
	[ "$_lts_tries" -ge 1 ] || _lts_tries=1
	lts_now_ms _lts_start
	_lts_end=$((_lts_start + _lts_secs_ms))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		_lts_n=$((_lts_n + 1))
		lts_now_ms _lts_now
		if [ "$_lts_n" -ge "$_lts_tries" ] && [ "$_lts_now" -ge "$_lts_end" ]; then
			_lts_now=$((_lts_now - _lts_start))
			echo "# wait_until: \`$*\` still fails after $_lts_n tries in $((_lts_now / 1000)).$((_lts_now % 1000 / 100)) s" \
				"(limit ${_lts_secs} s)" >&2
			return 1
		fi
		sleep "$_lts_every"
	done
}

# lts_not CMD...: CMD fails (for wait_until: wait until something is gone)
lts_not() { ! "$@"; }

# Counters wait_counter can wait on, each read by counter_value NAME:
#   REASON[/DIRECTION]   a packet counter of latch's BPF programs, as
#                        `latch --json status` reports it (lib.sh's counter;
#                        DIRECTION defaults to from-guest), e.g. drop_policy
#   lines:FILE           the number of lines in FILE (0 when it is missing)
#   match:REGEX:FILE     the number of lines of FILE that match REGEX (grep -E)
# A suite may define counter_NAME (a function printing a number) for a
# counter of its own: wait_counter NAME reads it first.
counter_value() {
	local _lts_name=$1 _lts_f _lts_re
	if declare -F "counter_$_lts_name" >/dev/null; then
		"counter_$_lts_name"
		return
	fi
	case $_lts_name in
	lines:*)
		_lts_f=${_lts_name#lines:}
		if [ -e "$_lts_f" ]; then wc -l <"$_lts_f"; else echo 0; fi
		;;
	match:*)
		_lts_re=${_lts_name#match:}
		_lts_f=${_lts_re##*:}
		_lts_re=${_lts_re%:*}
		grep -cE -- "$_lts_re" "$_lts_f" 2>/dev/null || true
		;;
	*/*) counter "${_lts_name%%/*}" "${_lts_name#*/}" ;;
	*) counter "$_lts_name" ;;
	esac
}

# lts_counter_is NAME OP N: counter NAME compares OP (-eq, -ge, -gt, ...) to N
lts_counter_is() {
	local _lts_v
	_lts_v=$(counter_value "$1")
	test "${_lts_v:-0}" "$2" "$3" 2>/dev/null
}

# wait_counter [-t SECS] NAME OP N: wait_until counter NAME OP N holds; on a
# timeout the "# wait_counter: ..." line gives the counter's last value
wait_counter() {
	local _lts_t=()
	if [ "${1:-}" = -t ]; then
		_lts_t=(-t "$2")
		shift 2
	fi
	wait_until "${_lts_t[@]}" lts_counter_is "$1" "$2" "$3" 2>/dev/null && return 0
	echo "# wait_counter: $1 is $(counter_value "$1"), never $2 $3 in ${_lts_t[1]:-$LTS_WAIT}s" >&2
	return 1
}

# ------------------------------------------------------------ setup, cleanup

lts_cleanup() {
	local pid ns root
	trap - EXIT INT TERM HUP
	for pid in "${LTS_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${LTS_PIDS[@]}"; do
		wait_until -t 0.5 lts_not kill -0 "$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	# anything still running inside our namespaces was started by this test;
	# deleting the namespaces removes the veths, so latch's qdiscs and filters too
	for ns in "${LTS_NS_MADE[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
	# latchd's cgroup (its process is gone by now) and the rest of latch's, in each hierarchy
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		[ -d "$root/$LATCH_CGROUP" ] || continue
		rmdir "$root/$LATCH_CGROUP"/rooms/* "$root/$LATCH_CGROUP"/rooms "$root/$LATCH_CGROUP"/latchd \
			"$root/$LATCH_CGROUP"/warm "$root/$LATCH_CGROUP" 2>/dev/null
	done
	[ -n "$LTS_BPFFS" ] && [ -d "$LTS_BPFFS" ] && rm -rf "$LTS_BPFFS"
	[ -n "$LTS_TMP" ] && rm -rf "$LTS_TMP"
}

lts_init() {
	local t
	[ "$(id -u)" = 0 ] || lts_skip_all "needs root"
	[ -x "$LATCH_BIN" ] || lts_skip_all "no $LATCH_BIN; run make"
	for t in ip tc nsenter jq bpftool setpriv timeout "$LTS_PY"; do
		command -v "$t" >/dev/null || lts_skip_all "needs $t"
	done
	grep -qs " /sys/fs/bpf bpf " /proc/mounts || mount -t bpf bpf /sys/fs/bpf ||
		lts_skip_all "no bpffs at /sys/fs/bpf"
	trap lts_cleanup EXIT
	trap 'exit 130' INT TERM HUP
	LTS_TMP=$(mktemp -d /tmp/latch-selftest.XXXXXX)
	mkdir -p "$LTS_BPFFS"
}

# latch ARGS...: run latch in H (nsenter keeps /sys/fs/bpf, `ip netns exec` would not)
latch() {
	# LATCH_ROOT keeps the audit log (and any state) of a test in its temp dir
	LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- "$LATCH_BIN" "$@"
}

in_g() { ip netns exec "$LTS_G" "$@"; }
in_h() { ip netns exec "$LTS_H" "$@"; }
in_i() { ip netns exec "$LTS_I" "$@"; }

# lts_bg NS OUTFILE CMD...: start CMD in namespace NS, remember its PID
lts_bg() {
	local ns=$1 out=$2
	shift 2
	ip netns exec "$ns" "$@" >"$out" 2>&1 &
	LTS_PIDS+=($!)
}

# lts_wait_ready FILE: wait up to 5 s for a server to print "ready"
lts_wait_ready() {
	wait_until -t 5 grep -qs '^ready' "$1" && return 0
	echo "server did not start: $(cat "$1")" >&2
	return 1
}

lts_ns_add() {
	ip netns add "$1" || return 1
	LTS_NS_MADE+=("$1")
	ip -n "$1" link set lo up
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
		net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 >/dev/null
}

# _x CMD...: run one topology step, remember a failure
_x() {
	"$@" && return 0
	echo "topology: \`$*\` failed" >&2
	LTS_TOPO_ERR=1
}

lts_topo_up() {
	local ns a
	for ns in "$LTS_G" "$LTS_H" "$LTS_I"; do
		[ -e "/run/netns/$ns" ] && { echo "namespace $ns exists already" >&2; return 1; }
		lts_ns_add "$ns" || return 1
	done
	LTS_TOPO_ERR=0
	# G <-> H
	_x ip -n "$LTS_G" link add g0 address "$GUEST_MAC" type veth peer name hg0 address 02:00:00:00:00:01 \
		netns "$LTS_H"
	_x ip -n "$LTS_G" addr add "$GUEST4/30" dev g0
	_x ip -n "$LTS_G" addr add "$GUEST6/64" dev g0 nodad
	_x ip -n "$LTS_G" link set g0 up
	_x ip -n "$LTS_G" route add default via "$HOST4"
	_x ip -n "$LTS_G" -6 route add default via "$HOST6"
	_x ip -n "$LTS_H" addr add "$HOST4/30" dev hg0
	_x ip -n "$LTS_H" addr add "$HOST6/64" dev hg0 nodad
	_x ip -n "$LTS_H" link set hg0 up
	# H <-> I
	_x ip -n "$LTS_H" link add hi0 type veth peer name ih0 netns "$LTS_I"
	_x ip -n "$LTS_H" addr add 198.51.100.253/30 dev hi0
	_x ip -n "$LTS_H" addr add 2001:db8:fe::1/64 dev hi0 nodad
	_x ip -n "$LTS_H" link set hi0 up
	_x ip -n "$LTS_I" addr add 198.51.100.254/30 dev ih0
	_x ip -n "$LTS_I" addr add 2001:db8:fe::2/64 dev ih0 nodad
	_x ip -n "$LTS_I" link set ih0 up
	for a in "$SRV_A" "$SRV_B" "$SRV_DNS" "$SRV_C"; do
		_x ip -n "$LTS_I" addr add "$a/32" dev lo
	done
	for a in "$SRV6_A" "$SRV6_B" "$SRV6_C" "$SRV6_DNS"; do
		_x ip -n "$LTS_I" addr add "$a/128" dev lo nodad
	done
	_x ip -n "$LTS_I" route add 192.0.2.0/24 via 198.51.100.253
	_x ip -n "$LTS_I" -6 route add 2001:db8:1::/48 via 2001:db8:fe::1
	# H routes the sandbox through a table of its own: fake internet only
	_x ip netns exec "$LTS_H" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 >/dev/null
	_x ip -n "$LTS_H" rule add from 192.0.2.0/24 lookup 100 pref 100
	_x ip -n "$LTS_H" -6 rule add from 2001:db8:1::/48 lookup 100 pref 100
	_x ip -n "$LTS_H" route add 192.0.2.0/24 dev hg0 table 100
	_x ip -n "$LTS_H" route add 198.51.100.252/30 dev hi0 table 100
	_x ip -n "$LTS_H" route add 203.0.113.0/24 via 198.51.100.254 dev hi0 table 100
	_x ip -n "$LTS_H" route add 198.51.100.0/24 via 198.51.100.254 dev hi0 table 100
	_x ip -n "$LTS_H" route add unreachable default table 100
	_x ip -n "$LTS_H" -6 route add 2001:db8:1::/48 dev hg0 table 100
	_x ip -n "$LTS_H" -6 route add 2001:db8:fe::/64 dev hi0 table 100
	_x ip -n "$LTS_H" -6 route add 2001:db8:ff::/48 via 2001:db8:fe::2 dev hi0 table 100
	_x ip -n "$LTS_H" -6 route add unreachable default table 100
	# replies to a spoofed guest source (192.0.2.6) find the guest link too
	_x ip -n "$LTS_H" route add 192.0.2.0/24 dev hg0
	return $LTS_TOPO_ERR
}

# lts_servers: echo servers in I on SRV_TCP_PORTS / SRV_UDP_PORTS
lts_servers() {
	local args=() p
	for p in "${SRV_TCP_PORTS[@]}"; do args+=(--tcp "$p"); done
	for p in "${SRV_UDP_PORTS[@]}"; do args+=(--udp "$p"); done
	for p in "$SRV_A" "$SRV_B" "$SRV_C" "$SRV_DNS" "$SRV6_A" "$SRV6_B" "$SRV6_C" "$SRV6_DNS"; do
		args+=(--addr "$p")
	done
	lts_bg "$LTS_I" "$LTS_TMP/serve-i.out" "$LTS_PY" "$LTS_NET" serve "${args[@]}" --lifetime 300
	lts_wait_ready "$LTS_TMP/serve-i.out"
}

# lts_attach [OPTIONS...]: the standard attach of the guest link
lts_attach() {
	latch attach "$LTS_NAME" --dev hg0 --guest-mac "$GUEST_MAC" --guest-ip "$GUEST4,$GUEST6" \
		--host-ip "$HOST4,$HOST6" "$@"
}

# lts_latchd [ROOT [LOG]]: start LATCHD_BIN in H under LATCH_ROOT=ROOT (default $LTS_TMP/root, where
# `latch` runs; LATCHD_PID, killed at cleanup), its output appended to LOG (default $LTS_TMP/latchd.log);
# waits up to 5 s for its socket and its "listening" line
lts_latchd() {
	local root=${1:-$LTS_TMP/root} log=${2:-$LTS_TMP/latchd.log}
	LATCH_ROOT=$root LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- \
		"${LATCHD_BIN:-$LTS_TOP/build/latchd}" >>"$log" 2>&1 &
	LATCHD_PID=$!
	LTS_PIDS+=("$LATCHD_PID")
	wait_until -t 5 lts_latchd_up "$root" "$log"
}

# lts_latchd_up ROOT LOG: latchd's socket is there and its log says "listening"
lts_latchd_up() { [ -S "$1/run/latch/latchd.sock" ] && grep -q "listening" "$2"; }

# ------------------------------------------------------------ probes from the guest

# seconds a probe waits for its answer: when it is expected (a slow answer is
# still an answer), and when it is not (in these namespaces an answer takes
# milliseconds; the baselines before attach show it)
LTS_T=${LTS_T:-2}
LTS_T_DENY=${LTS_T_DENY:-0.5}

tcp_ok() { in_g "$LTS_PY" "$LTS_NET" tcp "$@" --timeout "$LTS_T"; }      # HOST PORT [--bind SRC]
# tls_ok HOST PORT NAME: a TLS ClientHello naming NAME ('': none), then the line, echoed (name-checked ports)
tls_ok() { in_g "$LTS_PY" "$LTS_NET" tcp "$1" "$2" --sni "$3" --timeout "$LTS_T"; }
udp_ok() { in_g "$LTS_PY" "$LTS_NET" udp "$@" --timeout "$LTS_T"; }      # HOST PORT [--bind SRC]
ping_ok() { in_g "$LTS_PY" "$LTS_NET" ping "$@" --timeout "$LTS_T"; }    # HOST [--bind SRC]
# dns_answered HOST [--count N] [--tcp]: prints how many queries were answered
dns_answered() { in_g "$LTS_PY" "$LTS_NET" dns "$@" --wait "$LTS_T"; }
dns_ok() { [ "$(dns_answered "$@")" -gt 0 ] 2>/dev/null; }

# ------------------------------------------------------------ reading latch back

# status_json: `latch --json status NAME` (exit status ignored)
status_json() { latch --json status "$LTS_NAME" 2>/dev/null; }

# counter REASON [DIRECTION]: packets counted under a reason (default from-guest)
counter() {
	local n
	n=$(status_json | jq -r --arg r "$1" --arg d "${2:-from-guest}" \
		'[.sandboxes[0].counters[] | select(.reason == $r and .direction == $d) | .packets] | add // 0')
	echo "${n:-0}"
}

# pins_snapshot: everything latch keeps, in a comparable text form
pins_snapshot() {
	local f
	(cd "$LTS_BPFFS" 2>/dev/null && find . | sort)
	[ -d "$LTS_PINS" ] || return 0
	for f in settings exact4 exact6 prefix4 prefix6 timed4 timed6; do
		echo "map dump pinned $LTS_PINS/$f"
	done | bpftool -j batch file - 2>&1
	echo
	latch --json egress "$LTS_NAME" show 2>&1 | jq -c '.entries | map(del(.seconds_left))'
}

# map_id MAP: the kernel id of a pinned map
map_id() { bpftool -j map show pinned "$LTS_PINS/$1" | jq -r .id; }

# own_latch_pids: latch processes started by this test (found by their LATCH_BPFFS)
own_latch_pids() {
	local pid
	for pid in $(pgrep -x latch); do
		# a zombie's environ is unreadable; it runs nothing any more
		{ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "LATCH_BPFFS=$LTS_BPFFS" && echo "$pid"
	done
}

# lts_setup: init, topology and the servers in I; a failure here fails the script
lts_setup() {
	lts_init
	if ! lts_topo_up; then
		fail setup "could not build the test namespaces"
		lts_done
	fi
	if ! lts_servers; then
		fail setup "the fake servers in I did not start"
		lts_done
	fi
}
