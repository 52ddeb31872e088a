#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_room_latchd.sh - latchd serving rooms, and latchd confined.
#
# Topology: lib_room.sh (H is the host: latch, latchd and the rooms run
# there; I is the fake internet), plus in I dnsmasq on 203.0.113.53 (the
# upstream of latchd, with every test name) and fake HTTPS upstreams
# (broker_net.py, a test CA made here):
#   api.test.example   203.0.113.10:8443    a kit's upstream (allowed)
#   meta.test.example  169.254.169.254:8443 in I, routed from H: a metadata address
#   lan.test.example   198.51.100.254:8443  I's address on H's link: H's LAN
#   self.test.example  198.51.100.253:8443  H's own address, a listener in H: the host's services
# Each SSRF target answers from H without latch (the control), and latchd,
# confined, reaches api.test.example through the same broker; an --unconfined
# latchd reaching the metadata listener shows that the kernel is what stops it.
# shellcheck source=selftests/lib_room.sh
. "$(dirname "$0")/lib_room.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}
NET="$LTS_DIR/broker_net.py"
for t in dnsmasq kdig openssl curl; do command -v "$t" >/dev/null || lts_skip_all "needs $t"; done
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
lts_room_setup

T=$LTS_TMP
ROOT=$T/root
R=$T/r.json
META=169.254.169.254
LAN=198.51.100.254
SELF=$H4
SECRET=sk-room-real-secret-$$-0123456789abcdef
LATCHD_PID=
in_h() { nsenter --net="/run/netns/$LTS_H" -- "$@"; }

# ------------------------------------------------------------ upstreams
in_i ip addr add "$META/32" dev lo
in_h ip route add "$META/32" via 198.51.100.254
lts_bg "$LTS_I" "$T/dns.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --local-ttl=30 --pid-file="$T/dnsmasq.pid" \
	--host-record="ok.example,$SRV_A" --host-record="other.example,$SRV_B" \
	--host-record="api.test.example,$SRV_A" --host-record="meta.test.example,$META" \
	--host-record="lan.test.example,$LAN" --host-record="self.test.example,$SELF"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=latch-test-ca \
	-keyout "$T/ca.key" -out "$T/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=api.test.example \
	-keyout "$T/srv.key" -out "$T/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.test.example,DNS:meta.test.example,DNS:lan.test.example,DNS:self.test.example\n' \
	>"$T/ext.cnf"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
	-extfile "$T/ext.cnf" -out "$T/srv.pem" 2>/dev/null
chmod 644 "$T/ca.pem"
for up in "api $LTS_I $SRV_A" "meta $LTS_I $META" "lan $LTS_I $LAN" "self $LTS_H $SELF"; do
	set -- $up
	lts_bg "$2" "$T/up-$1.out" "$LTS_PY" "$NET" serve --addr "$3" --port 8443 --cert "$T/srv.pem" --key "$T/srv.key" \
		--log "$T/up-$1.log" --lifetime 280
	lts_wait_ready "$T/up-$1.out" || fail setup "upstream $1 did not start"
	touch "$T/up-$1.log"
done

# ------------------------------------------------------------ configuration
mkdir -p "$ROOT/etc/latch/profiles" "$ROOT/etc/latch/kits"
printf 'dns_upstream = %s\n' "$SRV_DNS" >"$ROOT/etc/latch/latch.conf"
room_profile names "# names, served by latchd" "ok.example:80"
room_profile addrs "# addresses only: no latchd needed" "$SRV_A:80"
kit() { # kit NAME CRED:HOST... : one credential per upstream, each under /v1
	local name=$1 c
	shift
	{
		echo "name: $name"
		echo "credentials:"
		for c in "$@"; do
			cat <<EOF
  - name: ${c%%:*}
    upstream: https://${c#*:}
    secret: ROOM_TEST_KEY
    header: Authorization
    scheme: "Bearer "
    ca_file: $T/ca.pem
    paths: [/v1]
    env:
      $(echo "${c%%:*}" | tr a-z A-Z)_URL: "{{url}}"
      $(echo "${c%%:*}" | tr a-z A-Z)_KEY: "{{placeholder}}"
EOF
		done
	} >"$ROOT/etc/latch/kits/$name.yaml"
}
kit good api:api.test.example:8443
kit ssrf meta:meta.test.example:8443 lan:lan.test.example:8443 self:self.test.example:8443
# a kit whose key is a secret_file outside /etc/latch, where a room could see it (/opt)
KEYFILE=/opt/lts-room-key-$$
trap 'rm -f "$KEYFILE"; lts_room_cleanup' EXIT
(umask 077 && echo "$SECRET" >"$KEYFILE")
sed "s|name: good|name: filekey|; s|secret: ROOM_TEST_KEY|secret_file: $KEYFILE|" "$ROOT/etc/latch/kits/good.yaml" \
	>"$ROOT/etc/latch/kits/filekey.yaml"
chmod 644 "$ROOT"/etc/latch/latch.conf "$ROOT"/etc/latch/kits/*.yaml
cat >"$WS/call.sh" <<'EOF'
#!/bin/sh
# call.sh NAME: GET $NAME_URL/v1/echo with the placeholder; prints the HTTP status
url=$(printenv "$1_URL") key=$(printenv "$1_KEY")
exec curl -s -o /workspace/out-$1 -w '%{http_code}' -H "Authorization: Bearer $key" --max-time 5 "$url/v1/echo"
EOF
chmod 755 "$WS/call.sh"
chown -R "$ROOM_UID:$ROOM_UID" "$WS"
chmod 777 "$WS"

start_latchd() {
	local from
	echo "--- start $*" >>"$T/latchd.log"
	from=$(wc -l <"$T/latchd.log")
	LATCH_ROOT=$ROOT LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_H" -- "$LATCHD_BIN" "$@" \
		>>"$T/latchd.log" 2>&1 &
	LATCHD_PID=$!
	LTS_PIDS+=("$LATCHD_PID")
	wait_until -t 5 listening_since "$from"
}
# listening_since LINE: latchd's log says "listening" at or after LINE
listening_since() { tail -n +"$1" "$T/latchd.log" | grep -q "listening"; }
stop_latchd() { kill "$LATCHD_PID" 2>/dev/null; wait "$LATCHD_PID" 2>/dev/null; }
audit_has() { run_room --json audit --kind "$1" | jq -e --arg r "$2" '[.entries[]? // .[]? | select(.reason == $r)] | length > 0' >/dev/null 2>&1; }
status_json() { run_room --json status 2>/dev/null; }
refused() { status_json | jq -r '.latchd.refused // 0'; }

# ------------------------------------------------------------ without latchd
# Invariant: a room's names are latchd's to serve: without it the run is refused, naming the fix.
run_room run --profile names -- /bin/true >/dev/null 2>"$T/err"
rc=$?
check_eq "no latchd: a profile with names is refused (125)" "$rc" 125
if grep -q "latchd" "$T/err" && grep -q "start" "$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ]; then
	ok "no latchd: one line naming latchd and how to start it"
else fail "no latchd: one line naming latchd and how to start it" "$(cat "$T/err")"; fi
ROOM_TEST_KEY=$SECRET run_room run --kit good -- /bin/true >/dev/null 2>"$T/err"
check_eq "no latchd: --kit is refused (125)" "$?" 125
run_room run --profile addrs -- /bin/true >/dev/null 2>&1
check_eq "control: an address-only profile runs without latchd" "$?" 0
if audit_has room latch.room.run; then ok "a run without latchd is audited by latch (kind room)"
else fail "a run without latchd is audited by latch (kind room)" "no entry"; fi

# ------------------------------------------------------------ latchd serves rooms
start_latchd || { fail latchd "did not start: $(tail -3 "$T/latchd.log")"; lts_done; }
# Invariant: names the profile allows resolve through latchd's resolver and connect; others don't.
in_room "$R" --profile names -- tcp ok.example 80
check_eq "served: ok.example resolves through latchd and tcp :80 answers" "$(jget "$R" .exit_code)" 0
check_cmp "served: the learned answer passes (pass_learned)" "$(rcount "$R" pass_learned sockaddr)" -ge 1
in_room "$R" --profile names -- tcp other.example 80 --timeout "$LTS_T_DENY"
check_cmp "served: other.example (not in the profile) does not resolve" "$(jget "$R" .exit_code)" -ne 0
in_room "$R" --profile names -- tcp "$SRV_B" 80 --timeout "$LTS_T_DENY"
check_cmp "served: $SRV_B by address is refused" "$(rcount "$R" drop_policy sockaddr)" -ge 1
if run_room --json audit --kind dns | grep -q other.example; then ok "served: the refused name is audited (kind dns)"
else fail "served: the refused name is audited (kind dns)" "no entry"; fi
n=$(run_room --json audit --kind room | jq '[.entries[]? // .[]? | select(.reason == "latch.room.run")] | length')
check_cmp "served: every run is audited, by latchd while it runs (kind room)" "${n:-0}" -ge 4
# Invariant: nobody but the room reaches a room service address (the gate on latchd's cgroup).
g0=$(status_json | jq -r '.latchd.gate_dropped // 0')
in_h kdig @127.76.0.0 ok.example +retry=0 +timeout=1 >/dev/null 2>&1
g1=$(status_json | jq -r '.latchd.gate_dropped // 0')
check_cmp "gate: a query from outside any room to 127.76.0.0 is dropped in the kernel" "$g1" -gt "$g0"

# Invariant: a kit's key reaches the upstream through the room's broker; the room holds a placeholder.
ROOM_TEST_KEY=$SECRET room_json "$R" --kit good --workspace "$WS:rw" -- /workspace/call.sh API
check_eq "kit: the room calls the upstream through its broker (200)" "$(jget "$R" .output)" 200
if grep -q "Bearer $SECRET" "$T/up-api.log"; then ok "kit: the upstream got the real key"
else fail "kit: the upstream got the real key" "$(tail -1 "$T/up-api.log")"; fi
if grep -rq "$SECRET" "$R" "$WS" 2>/dev/null; then fail "kit: the room never sees the key" "found in its output"
else ok "kit: the room never sees the key"; fi
# Invariant: a kit's secret_file is hidden from its room, root room or not: an empty mode-000
# file covers it.  (A secret_file is root's 0600, which no room's uid owns: a root room's is
# host uid 2147483646; the cover is the wall that holds whatever the file's mode.)
room_json "$R" --kit filekey --user root --workspace "$WS:rw" -- sh -c "/workspace/call.sh API; echo; cat $KEYFILE 2>/dev/null; echo rc=\$?; stat -c '%s %a' $KEYFILE"
check_eq "kit secret_file: the room calls through its broker (200), cannot read the file as root, sees it empty, mode 000" \
	"$(jget "$R" '.output | split("\n")[0:3] | join(",")')" "200,rc=1,0 0"
if grep -rq "$SECRET" "$R" "$WS" 2>/dev/null; then fail "kit secret_file: its key is nowhere in the room's output" "found"
else ok "kit secret_file: its key is nowhere in the room's output"; fi
room_json "$R" --user root -- sh -c "stat -c '%s %a' $KEYFILE; cat $KEYFILE 2>/dev/null; echo rc=\$?"
check_eq "control: a root room without that kit sees the file itself (latch covers what it knows is secret), and cannot read it (its root owns nothing)" \
	"$(jget "$R" .output)" "$(printf '%s 600\nrc=1' "$(stat -c %s "$KEYFILE")")"

# ------------------------------------------------------------ latchd confined
st=$(status_json)
check_eq "confined: latch status reads latchd's confinement from the kernel" "$(jq -r .latchd.confined <<<"$st")" true
check_eq "confined: latchd's pid is in its cgroup" "$(jq -r .latchd.pid_in_cgroup <<<"$st")" true
cg=$(jq -r .latchd.cgroup <<<"$st")
if bpftool cgroup show "$cg" 2>/dev/null | grep -q latch_room_connect4 && grep -qx "$LATCHD_PID" "$cg/cgroup.procs"; then
	ok "confined: bpftool shows the room programs on latchd's cgroup, and its pid in it"
else fail "confined: bpftool shows the room programs on latchd's cgroup, and its pid in it" "$cg"; fi
run_room doctor >"$T/doctor" 2>&1
if grep -q "^ok    latchd confined" "$T/doctor" && grep -q "^ok    rooms" "$T/doctor"; then
	ok "doctor: latchd confined and rooms lines are ok"
else fail "doctor: latchd confined and rooms lines are ok" "$(grep -E 'latchd|rooms' "$T/doctor")"; fi

# Invariant: a broker talked into SSRF reaches no metadata address, LAN or host service: the kernel refuses
# latchd's connect (its cgroup's counters), and the refusal is audited.  Controls: each answers from H.
for t in "meta $META" "lan $LAN" "self $SELF"; do
	set -- $t
	code=$(in_h curl -s -o /dev/null -w '%{http_code}' --cacert "$T/ca.pem" --max-time 3 \
		--resolve "$1.test.example:8443:$2" "https://$1.test.example:8443/v1/echo")
	check_eq "control: $1.test.example ($2) answers from H without latch" "$code" 200
	: >"$T/up-$1.log"
done
r0=$(refused)
for c in META LAN SELF; do
	ROOM_TEST_KEY=$SECRET room_json "$R" --kit ssrf --workspace "$WS:rw" -- /workspace/call.sh "$c"
	check_eq "ssrf: the broker's upstream ${c,,}.test.example fails (502)" "$(jget "$R" .output)" 502
	[ -s "$T/up-${c,,}.log" ] && fail "ssrf: ${c,,}.test.example never got a request" "it did" ||
		ok "ssrf: ${c,,}.test.example never got a request"
done
r1=$(refused)
check_cmp "ssrf: latchd's cgroup counted the refused connects" "$r1" -ge $((r0 + 3))
for why in metadata lan host; do
	if audit_has confine "latchd.confine.$why"; then ok "ssrf: audited latchd.confine.$why"
	else fail "ssrf: audited latchd.confine.$why" "no entry"; fi
done
wait_until -t 3 audit_has confine latchd.confine.kernel # the tick audits the kernel's count
if audit_has confine latchd.confine.kernel; then ok "ssrf: the kernel's refusals are audited (latchd.confine.kernel)"
else fail "ssrf: the kernel's refusals are audited" "no entry"; fi
ROOM_TEST_KEY=$SECRET room_json "$R" --kit good --workspace "$WS:rw" -- /workspace/call.sh API
check_eq "control: the same confined latchd still reaches the allowed upstream (200)" "$(jget "$R" .output)" 200

# A latchd killed with SIGKILL leaves its cgroup, programs and slot; the next one confines itself again.
kill -KILL "$LATCHD_PID"
wait "$LATCHD_PID" 2>/dev/null
start_latchd || fail latchd "did not start again after SIGKILL: $(tail -2 "$T/latchd.log")"
check_eq "restart: a latchd started after SIGKILL is confined again" "$(status_json | jq -r .latchd.confined)" true

# The kernel is what stops it: unconfined, the same SSRF reaches the metadata listener.
stop_latchd
start_latchd --unconfined || { fail latchd "did not start unconfined"; lts_done; }
st=$(status_json)
check_eq "unconfined: latch status says latchd is not confined" "$(jq -r .latchd.confined <<<"$st")" false
run_room status >/dev/null 2>&1
check_eq "unconfined: latch status exits 3 (posture not verified)" "$?" 3
ROOM_TEST_KEY=$SECRET room_json "$R" --kit ssrf --workspace "$WS:rw" -- /workspace/call.sh META
if [ -s "$T/up-meta.log" ]; then ok "unconfined: the same SSRF reaches the metadata listener"
else fail "unconfined: the same SSRF reaches the metadata listener" "status $(jget "$R" .output)"; fi
stop_latchd
lts_done
