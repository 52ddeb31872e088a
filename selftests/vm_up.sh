#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vm_up.sh - a real guest under libvirt (TCG here) behind latch: `latch up`,
# its steps and the observed posture, `latch exec`, attacks from inside the
# guest beside a control that must succeed, then `down` and `destroy`, and
# proof that the tap, pins, rule, routes and domain are gone.  Before that,
# guests that fail to boot (images in the test's cache whose /init dies or
# never starts an agent): the error names the slow step and quotes the
# serial console, and --keep-on-failure keeps the guest, still filtered.
#
# Invariant defended: the boundary arrives first and holds - a guest sees
# only what the kernel filter on its tap lets through, and everything latch
# made for a sandbox goes away with it.
#
# Test traffic never leaves the machine: the sandbox pool is a documentation
# range the host does not use, there is NO uplink (the sandbox's table has
# `unreachable default`), and the one allowed destination is a listener on a
# documentation address in a namespace behind the host (selftests/lib_vm.sh,
# vm_ctrl_net: a guest never reaches the host's own addresses).  State lives under a temp
# LATCH_ROOT, pins under $LATCH_BPFFS; everything is removed by the EXIT trap,
# pass or fail, and only processes this script started are killed, by PID.
# libvirtd and virtlogd are started when they are not running, and left
# running (other guest tests use them).
#
# Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".  Exit 1 on
# any failure, 77 when it can't run here.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
LATCH_BIN=${LATCH_BIN:-$TOP/build/latch}
NAME=t-vm
TAP=lt-$NAME
TABLE=31300
CTRL_ADDR=203.0.113.77	# a documentation address, behind the host (vm_ctrl_net), for the allowed control
CTRL_PORT=18080
HOSTSVC_PORT=18081	# listened on at the sandbox's host address; not a host service
OTHER_PORT=18082	# listened on at CTRL_ADDR too, never allowed
DENIED=203.0.113.10

TEST=vm_up
. "$HERE/lib_vm.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root"
[ -x "$LATCH_BIN" ] || skip_all "no $LATCH_BIN; run make"
for t in ip jq python3 timeout libvirtd virtlogd; do
	command -v "$t" >/dev/null || skip_all "needs $t"
done

# A /24 of documentation space this host does not use (this testbed's eth0 may sit in 192.0.2.0/24).
POOL=
for cand in ${LATCH_VM_POOLS:-192.0.2 198.51.100}; do
	if ! ip -o addr show | grep -q " inet $cand\." && ! ip route show table all | grep -q "^$cand\."; then
		POOL=$cand
		break
	fi
done
[ -n "$POOL" ] || skip_all "both 192.0.2.0/24 and 198.51.100.0/24 are in use on this host"
HOST4=$POOL.1
GUEST4=$POOL.2

TMP=
PIDS=()
ADDED_CTRL=0
cleanup() {
	local p
	[ -n "$TMP" ] && LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS "$LATCH_BIN" destroy "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	vm_cgroups_remove
	vm_ctrl_net_down
	[ -n "${BPFFS:-}" ] && rm -rf "$BPFFS" 2>/dev/null
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

vm_scratch up
vm_images
vm_test_image broken 'echo broken-init-marker; poweroff -f'
vm_test_image hang 'echo hang-init-marker; while :; do sleep 60; done'
vm_root "documentation addresses only, and no uplink" pool=$POOL.0/24
CONSOLE=$LATCH_ROOT/var/log/latch/$NAME.console.log


# --- bad input first: one line, exit 2, nothing created ----------------------
out=$(L up "$NAME" --image no-such-image 2>&1); rc=$?
check "up_unknown_image_exits_2_and_creates_nothing" \
	test "$rc" = 2 -a "$(echo "$out" | wc -l)" = 1 -a ! -e "/sys/class/net/$TAP" -a ! -e "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME"
out=$(L up averyveryverylongname 2>&1); rc=$?
check "up_name_too_long_for_tap_exits_2" test "$rc" = 2
out=$(L up "$NAME" --profile no-such-profile 2>&1); rc=$?
check "up_unknown_profile_exits_2_and_creates_nothing" \
	test "$rc" = 2 -a "$(echo "$out" | wc -l)" = 1 -a ! -e "/sys/class/net/$TAP" -a ! -e "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME"

chmod 0666 "$CONF"
out=$(L up "$NAME" 2>&1); rc=$?
chmod 0644 "$CONF"
check "config_writable_by_others_refused" test "$rc" = 2 -a -n "$(echo "$out" | grep 'latch.conf: writable by group or others')"
cp "$CONF" "$TMP/conf.good"
echo "pool = 10.0.0.0/8" >> "$CONF"
out=$(L up "$NAME" 2>&1); rc=$?
cp "$TMP/conf.good" "$CONF"
check "config_error_names_file_and_line" test "$rc" = 2 -a -n "$(echo "$out" | grep "latch.conf:5: 'pool' given twice")"

# A guest that can't answer in time: everything made so far is rolled back.
rolled_back() { # [RC]: exit status 1 (when given), and nothing of the sandbox left but the console log
	{ [ $# = 0 ] || [ "$1" = 1 ]; } && [ ! -e "/sys/class/net/$TAP" ] && [ ! -e "$BPFFS/latch/$NAME" ] &&
		! ip rule show | grep -q "lookup $TABLE" && [ -z "$(ip route show table $TABLE 2>/dev/null)" ] &&
		[ ! -e "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME" ] &&
		! virsh -q -c qemu:///system dominfo "latch-$NAME" >/dev/null 2>&1
}
says() { echo "$out" | grep -q -- "$1"; } # the last command's output has this
out=$(L up "$NAME" --timeout 1 2>&1); rc=$?
check "up_failure_rolls_back_tap_pins_rule_domain_state" rolled_back $rc

# A guest that dies while booting: the error says so and quotes the serial console, whose log outlives the rollback.
out=$(L up "$NAME" --image broken 2>&1); rc=$?
echo "$out" | sed 's/^/#   | /' | head -8
check "up_guest_dying_at_boot_says_so" says 'the guest stopped while booting'
check "up_guest_dying_at_boot_quotes_its_console" says '| broken-init-marker'
check "up_guest_dying_at_boot_rolled_back" rolled_back $rc
check "up_guest_dying_at_boot_console_log_kept" grep -q broken-init-marker "$CONSOLE"

# A guest whose agent never answers: the timeout (DUR) runs from the domain start, and the error names the slow step.
out=$(L up "$NAME" --image hang --timeout 3s 2>&1); rc=$?
echo "$out" | grep -m1 'slow step' | sed 's/^/#   /'
check "up_timeout_names_the_slow_step_guest_agent" says "within the boot timeout (3 s).*slow step: guest agent; .*; console log $CONSOLE"
# ... and what the channel did: connected (QEMU's socket was there), and nothing came back
check "up_timeout_says_what_the_channel_did" says "slow step: guest agent; [1-9][0-9]* connection(s) to [^;]*t-vm.agent, the first [0-9.]* s in, [^;]*; 0 byte(s) came back"
check "up_timeout_rolled_back" rolled_back $rc

# --keep-on-failure: the same failure leaves the guest running for inspection, behind its verified enforcement.
out=$(L up "$NAME" --image hang --timeout 3s --keep-on-failure 2>&1); rc=$?
check "up_keep_on_failure_exits_1 ($rc)" test "$rc" = 1
check "up_keep_on_failure_says_kept" says 'kept for inspection, still filtered'
check "kept_guest_is_running" bash -c "virsh -q -c qemu:///system domstate latch-$NAME | grep -qx running"
check "kept_guest_still_filtered_verified_in_the_kernel" bash -c "'$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].enforced' >/dev/null"
wait_until -t 60 grep -q hang-init-marker "$CONSOLE"
check "kept_guest_console_logged_to_file" grep -q hang-init-marker "$CONSOLE"
L destroy --purge "$NAME" >/dev/null 2>&1; rc=$?
check "kept_guest_destroyed" test "$rc" = 0
check "kept_guest_destroyed_leaves_nothing" rolled_back
check "kept_guest_destroyed_with_its_console_log" test ! -e "$CONSOLE"

# --- up ------------------------------------------------------------------------
t0=$(date +%s%N)
up_json=$(L --json up "$NAME" 2>"$TMP/up.err"); rc=$?
t1=$(date +%s%N)
if [ "$rc" != 0 ]; then
	fail "up_starts_guest_behind_verified_enforcement: exit $rc: $(cat "$TMP/up.err")"
	lts_done
fi
ok "up_starts_guest_behind_verified_enforcement ($(( (t1 - t0) / 1000000 )) ms wall)"
echo "$up_json" >"$TMP/up.json"
sed 's/^/#   stderr: /' "$TMP/up.err"
# the steps, in the order up takes them
step_line() { grep -n -m1 -- "$1" "$TMP/up.err" | cut -d: -f1; }
order=""
for want in "tap $TAP created" "enforcement verified on $TAP" "routing: table $TABLE" "domain latch-$NAME started in .* accelerator \(tcg\|kvm\)" "waiting for the guest agent" "agent answered"; do
	order="$order $(step_line "$want")"
done
order=$(echo $order)
check "up_prints_its_steps_on_stderr_in_order ($order)" test "$(echo "$order" | wc -w)" = 6 -a \
	"$(echo "$order" | tr ' ' '\n' | sort -n | xargs)" = "$order"
check "up_says_allowed_traffic_has_no_route_without_uplink" grep -q 'no uplink in latch.conf, so allowed traffic has no route' "$TMP/up.err"
check "up_json_says_allowed_traffic_is_not_routed" jq -e '(.allowed_traffic_routed | not) and (.routing_note | test("no route"))' "$TMP/up.json"
want_timeout=180000
[ "$(echo "$up_json" | jq -r .accelerator)" = kvm ] && want_timeout=60000
check "up_default_boot_timeout_by_accelerator ($want_timeout ms)" test "$(echo "$up_json" | jq .boot_timeout_ms)" = "$want_timeout"
echo "$up_json" | jq -r '"   enforced after \(.ms_to_enforced) ms, domain started after \(.ms_to_domain_started) ms, agent after \(.ms_to_agent) ms; accelerator \(.accelerator); guest \(.guest_ip4) kernel \(.guest_release)"'
check "up_enforcement_verified_before_domain_started" \
	test "$(echo "$up_json" | jq '.ms_to_enforced < .ms_to_domain_started and .ms_to_domain_started <= .ms_to_agent')" = true
# no latchd runs here: the profile is stored and the guest stays sealed (closed, not open)
check "up_stores_the_default_profile_and_says_latchd_is_not_running" bash -c "jq -e '.profile.name == \"research\" and (.profile.note | test(\"not running\"))' '$TMP/up.json' >/dev/null && grep -qx 'profile = research' '$LATCH_ROOT/var/lib/latch/policy/$NAME.profile'"
check "up_reports_observed_accelerator" test "$(echo "$up_json" | jq -r .accelerator)" = tcg -o \
	"$(echo "$up_json" | jq -r .accelerator)" = kvm

st=$(L --json status "$NAME"); rc=$?
check "status_shows_enforced" test "$rc" = 0 -a "$(echo "$st" | jq -r '.sandboxes[0].enforced')" = true
accel=$(echo "$st" | jq -r '.sandboxes[0].accelerator')
if [ -e /dev/kvm ] && grep -qE ' (vmx|svm)' /proc/cpuinfo; then want=kvm; else want=tcg; fi
check "status_shows_accelerator_$want" test "$accel" = "$want"
check "status_shows_domain_running" test "$(echo "$st" | jq -r '.sandboxes[0].domain')" = running
check "status_says_allowed_traffic_has_no_route" bash -c "'$LATCH_BIN' status $NAME | grep -q 'allowed traffic has no route'"
check "status_json_says_allowed_traffic_is_not_routed" test "$(echo "$st" | jq '.sandboxes[0].allowed_traffic_routed')" = false
check "ls_lists_sandbox_enforced" bash -c "'$LATCH_BIN' --json ls | jq -e '.sandboxes[] | select(.sandbox==\"$NAME\" and .enforced and .domain==\"running\")' >/dev/null"

# --- the guest CPU: agents' native binaries use SSE4.2 and AVX2 (Claude Code's dies of SIGILL on
# libvirt's default qemu64); read from the guest's /proc/cpuinfo, the live XML, and status
if [ "$want" = kvm ]; then want_cpu=host-passthrough; else want_cpu=maximum; fi
L exec "$NAME" -- sh -c 'grep -m1 "^flags" /proc/cpuinfo' >"$TMP/cpuflags" 2>&1
echo "#   guest cpu flags: $(tr -s ' ' <"$TMP/cpuflags" | cut -c1-400)"
for fl in sse4_2 avx avx2; do
	check "guest_cpu_has_$fl" grep -qw "$fl" "$TMP/cpuflags"
done
check "control: guest_cpu_flags_read (sse2 there on any x86_64)" grep -qw sse2 "$TMP/cpuflags"
virsh -q -c qemu:///system dumpxml "latch-$NAME" >"$TMP/live.xml" 2>&1
check "live_xml_asks_for_cpu_$want_cpu" grep -q "<cpu mode=.$want_cpu." "$TMP/live.xml"
check "live_xml_has_no_qemu64" bash -c "! grep -q qemu64 '$TMP/live.xml'"
check_eq "status_json_shows_cpu_mode" "$(echo "$st" | jq -r '.sandboxes[0].cpu_mode')" "$want_cpu"
check "status_text_shows_cpu_mode" bash -c "'$LATCH_BIN' status $NAME | grep -q 'accelerator $want, cpu $want_cpu (observed)'"
# the default image carries no node (the Debian image does: debian_proof.sh); up refuses a kit that needs it
check_not "default_image_has_no_node" L exec "$NAME" -- sh -c 'command -v node'
check "control: default_image_has_sh" L exec "$NAME" -- sh -c 'command -v sh'

# --- the host side, observed with tools latch does not use ---------------------
check "tap_up_with_host_address" bash -c "ip -o addr show dev $TAP | grep -q ' $HOST4/30 '"
check "rule_from_subnet_to_own_table" bash -c "ip rule show | grep -q 'from $POOL.0/30 lookup $TABLE'"
check "table_has_unreachable_default" bash -c "ip route show table $TABLE | grep -q '^unreachable default'"
check "no_masquerade_without_uplink" bash -c "! nft list table inet latch >/dev/null 2>&1"

# --- exec ----------------------------------------------------------------------
rel=$(L exec "$NAME" -- uname -r); rc=$?
check "exec_uname_r ($rel)" test "$rc" = 0 -a -n "$rel"
L exec "$NAME" -- sh -c 'echo out; echo err >&2; exit 7' >"$TMP/o" 2>"$TMP/e"; rc=$?
check "exec_relays_stdout_stderr_and_exit_code" test "$rc" = 7 -a "$(cat "$TMP/o")" = out -a "$(cat "$TMP/e")" = err
check "guest_has_assigned_address" bash -c "'$LATCH_BIN' exec $NAME -- ip -4 addr show | grep -q 'inet $GUEST4/30'"

counter() { # REASON: packets from the guest
	L --json status "$NAME" | jq "[.sandboxes[0].counters[] | select(.reason==\"$1\" and .direction==\"from-guest\") | .packets] | add // 0"
}

# Listeners: one in the host netns at the sandbox's host address (no host service), and the
# control in a namespace behind the host (a guest reaches no address of the host's own).
vm_ctrl_net "$POOL.0/24" "$CTRL_ADDR" && vm_ctrl_http "$CTRL_ADDR" "$CTRL_PORT" "$OTHER_PORT" ||
	fail "control_namespace_set_up"
vm_ctrl_forward "$TAP"
(cd "$TMP/www" && exec python3 -m http.server --bind "$HOST4" "$HOSTSVC_PORT" >/dev/null 2>&1) &
PIDS+=($!)
hostsvc_listens() { [ -n "$(ss -ltnH "( sport = :$HOSTSVC_PORT )")" ]; }
wait_until -t 5 hostsvc_listens

# From inside the guest: busybox nc sends an HTTP/0.9 `GET /` and waits 3 s.
# --- attacks from inside, each beside a control --------------------------------
hp0=$(counter drop_host_port)
host_get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())' "$1" 2>/dev/null; }
check "control_other_port_answers_from_host_itself" bash -c "$(declare -f host_get); host_get http://$CTRL_ADDR:$OTHER_PORT/ | grep -q hello-from-host"
check "control_host_port_answers_from_host_itself" bash -c "$(declare -f host_get); host_get http://$HOST4:$HOSTSVC_PORT/ | grep -q hello-from-host"
check "guest_cannot_reach_host_port_that_is_no_service" bash -c "! guest_out=\$('$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $HOST4 $HOSTSVC_PORT\" 2>/dev/null) || ! echo \"\$guest_out\" | grep -q hello"
check "host_port_drop_counted_by_kernel" test "$(counter drop_host_port)" -gt "$hp0"

dp0=$(counter drop_policy)
check "guest_cannot_reach_denied_address_before_allow" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello"
check "guest_cannot_ping_denied_documentation_address" bash -c "! '$LATCH_BIN' exec $NAME -- ping -c 1 -W 2 $DENIED >/dev/null 2>&1"
check "policy_drops_counted_by_kernel" test "$(counter drop_policy)" -gt "$dp0"

L egress "$NAME" allow "$CTRL_ADDR:$CTRL_PORT" >/dev/null
check "control_allowed_destination_answers_guest" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"
check "allowed_entry_does_not_open_other_ports" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $OTHER_PORT\" 2>/dev/null | grep -q hello"

# --- detach refuses a running VM: it would leave the guest routed and unfiltered ---
out=$(L detach "$NAME" 2>&1); rc=$?
check "detach_of_a_vm_sandbox_is_one_line_exit_2_naming_destroy" \
	bash -c "[ $rc = 2 ] && [ \"\$(printf '%s\n' \"\$1\" | grep -c '^latch:.*latch destroy')/\$(printf '%s\n' \"\$1\" | wc -l)\" = 1/1 ]" _ "$out"
check "detach_refused_leaves_the_enforcement_verified" bash -c "'$LATCH_BIN' status $NAME >/dev/null"
check "detach_refused_keeps_the_policy" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"

# --- down keeps the boundary; destroy removes everything -------------------------
L down "$NAME" >/dev/null; rc=$?
st=$(L --json status "$NAME")
check "down_stops_domain" test "$rc" = 0 -a "$(echo "$st" | jq -r '.sandboxes[0].domain')" = shutoff
check "down_keeps_tap_and_enforcement" test -e "/sys/class/net/$TAP" -a "$(echo "$st" | jq -r '.sandboxes[0].enforced')" = true

L up "$NAME" >/dev/null 2>&1; rc=$?
check "up_after_down_restarts_behind_the_same_enforcement" bash -c "[ $rc = 0 ] && '$LATCH_BIN' exec $NAME -- true && '$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].enforced and .sandboxes[0].domain == \"running\"' >/dev/null"
check "allowed_entry_survives_down_and_up" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"

# --- a profile applied through latchd: `up --profile` -----------------------------
# The control is reachable only through the profile once the hand-added entry is gone.
# latchd's upstream is a closed loopback port (the profile has
# no names, but the stored profile, research, has: they are asked of a loopback port where
# nothing listens, so no query leaves the machine); its resolver binds only the
# sandbox's host address.
mkdir -p "$LATCH_ROOT/etc/latch/profiles"
echo "$CTRL_ADDR/32:$CTRL_PORT" >"$LATCH_ROOT/etc/latch/profiles/vmctl.txt"
chmod 0644 "$LATCH_ROOT/etc/latch/profiles/vmctl.txt"
echo "dns_upstream = 127.0.0.1:53999" >>"$CONF"
L egress "$NAME" revoke "$CTRL_ADDR:$CTRL_PORT" >/dev/null
check "control_closed_without_the_entry" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 2 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"
vm_latchd
L down "$NAME" >/dev/null
L --json up "$NAME" --profile vmctl >"$TMP/up2.json" 2>"$TMP/up2.err"; rc=$?
check "up_profile_applied_by_latchd" bash -c "[ $rc = 0 ] && jq -e '.profile.name == \"vmctl\" and .profile.note == \"applied by latchd\"' '$TMP/up2.json' >/dev/null"
check "up_profile_opens_what_the_profile_allows" bash -c "'$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 3 $CTRL_ADDR $CTRL_PORT\" 2>/dev/null | grep -q hello-from-host"
check "up_profile_keeps_other_ports_closed" bash -c "! '$LATCH_BIN' exec $NAME -- sh -c \"echo 'GET /' | nc -w 2 $CTRL_ADDR $OTHER_PORT\" 2>/dev/null | grep -q hello"
check "status_shows_the_profile" bash -c "'$LATCH_BIN' --json status $NAME | jq -e '.sandboxes[0].profile == \"vmctl\" and .sandboxes[0].profile_applied == \"vmctl\" and (.sandboxes[0].uncontained | not)' >/dev/null"

out=$(L destroy "$NAME"); rc=$?
check "destroy_exits_0" test "$rc" = 0
check "destroy_removes_tap" test ! -e "/sys/class/net/$TAP"
check "destroy_removes_pins" test ! -e "$BPFFS/latch/$NAME"
check "destroy_removes_rule" bash -c "! ip rule show | grep -q 'lookup $TABLE'"
check "destroy_removes_table_routes" test -z "$(ip route show table $TABLE 2>/dev/null)"
check "destroy_removes_domain" bash -c "! '$LATCH_BIN' --json ls | jq -e '.sandboxes[]' >/dev/null && ! virsh -q -c qemu:///system dominfo latch-$NAME >/dev/null 2>&1"
check "destroy_removes_the_sandbox_record" test ! -e "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME/sandbox"
check "destroy_removes_the_stored_profile" test ! -e "$LATCH_ROOT/var/lib/latch/policy/$NAME.profile"
# `down` backed the guest state up: destroy keeps that backup, and says where
check "destroy_keeps_the_guest_state_backup" test -d "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME/state"
check "destroy_says_the_backup_is_kept" says "guest-state backup kept in $LATCH_ROOT/var/lib/latch/sandboxes/$NAME/state"
out=$(L destroy "$NAME" 2>&1); rc=$?
check "destroy_again_is_one_line_exit_4_no_sandbox_naming_the_backup" test "$rc" = 4 -a "$(echo "$out" | wc -l)" = 1
check "destroy_again_says_purge_removes_the_backup" says "destroy $NAME --purge"
out=$(L destroy "$NAME" --purge 2>&1); rc=$?
check "destroy_purge_removes_the_backup" test "$rc" = 0 -a ! -e "$LATCH_ROOT/var/lib/latch/sandboxes/$NAME"
out=$(L destroy "$NAME" --purge 2>&1); rc=$?
check "destroy_purge_again_is_exit_4_no_sandbox" test "$rc" = 4

lts_done
