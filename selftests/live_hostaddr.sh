#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_hostaddr.sh - `open` means the internet, not the host.
#
# Invariant: whatever the policy passes (an entry covering everything, or
# the `open` profile), the guest reaches no address of the host other than
# the host services on its own host address: not the host's uplink address
# (v4 and v6), not another sandbox's host address, not a broadcast or
# multicast address on its link, and not an address the host gains while no
# latch process runs.  Each denial is beside a control: the same probe
# works without latch, the guest's own host service and a fake internet
# address work with it, and drop_host_addr counts the denials.
#
# The program asks the kernel's routing at packet time (bpf_fib_lookup), so
# nothing in user space keeps a list of the host's addresses: latchd is
# killed before the last case, and the address added after that is guarded
# all the same.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
lts_setup

SVC=8088          # a service on every host address (and the sandbox's host service)
UP4=198.51.100.253 # H's uplink addresses (on hi0)
UP6=2001:db8:fe::1
OTHER4=192.0.2.5  # another sandbox's host address, on a second link of H
OTHER6=2001:db8:7::1
BCAST=192.0.2.3   # the broadcast of the guest link's /30
MCAST=239.7.7.7
MPORT=8089        # the multicast listener's port
LATE=203.0.113.250 # an address H gains while no latch process runs
LOG=$LTS_TMP/host.log

# --- H: another sandbox's link, servers on every address, a multicast listener on the guest link
in_h ip link add hx0 type veth peer name hx1
in_h ip addr add "$OTHER4/30" dev hx0
in_h ip addr add "$OTHER6/64" dev hx0 nodad
in_h ip link set hx0 up
in_h ip link set hx1 up
lts_bg "$LTS_H" "$LTS_TMP/serve-h.out" "$LTS_PY" "$LTS_NET" serve --tcp "$SVC" --udp "$SVC" --log "$LOG" --lifetime 300
lts_wait_ready "$LTS_TMP/serve-h.out" || fail setup "H's servers did not start"
cat >"$LTS_TMP/mcast.py" <<EOF
import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("$MCAST", $MPORT))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack("4s4s", socket.inet_aton("$MCAST"), socket.inet_aton("$HOST4")))
log = open("$LOG", "a", buffering=1)
print("ready", flush=True)
end = time.monotonic() + 300
s.settimeout(0.5)
while time.monotonic() < end:
    try:
        d, p = s.recvfrom(2048)
        log.write("%.6f $MCAST %s udp %s\n" % (time.clock_gettime(time.CLOCK_BOOTTIME), p[0], d.decode(errors="replace")))
    except socket.timeout:
        pass
EOF
lts_bg "$LTS_H" "$LTS_TMP/mcast.out" "$LTS_PY" "$LTS_TMP/mcast.py"
lts_wait_ready "$LTS_TMP/mcast.out" || fail setup "the multicast listener did not start"

# dgram_arrives ADDR [PORT]: a datagram from the guest (broadcast allowed) reaches a listener of H's
TOKEN=0
dgram_arrives() {
	TOKEN=$((TOKEN + 1))
	in_g "$LTS_PY" -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1); s.sendto(b'tok-$TOKEN', ('$1', ${2:-$SVC}))" 2>/dev/null
	# up to LTS_T for an answer (check_not makes that LTS_T_DENY)
	wait_until -t "$LTS_T" grep -q " udp tok-$TOKEN\$" "$LOG"
}

# --- without latch every probe gets through (so each denial below means something)
check "baseline: tcp $UP4:$SVC (H's uplink address) answers" tcp_ok "$UP4" "$SVC"
check "baseline: tcp [$UP6]:$SVC answers" tcp_ok "$UP6" "$SVC"
check "baseline: tcp $OTHER4:$SVC (another sandbox's host address) answers" tcp_ok "$OTHER4" "$SVC"
check "baseline: a datagram to the link's broadcast $BCAST reaches H" dgram_arrives "$BCAST"
check "baseline: a datagram to 255.255.255.255 reaches H" dgram_arrives 255.255.255.255
check "baseline: a datagram to multicast $MCAST reaches H" dgram_arrives "$MCAST" "$MPORT"

if ! lts_attach --host-port "$SVC" >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi

# probe_set WHY: the guarded addresses are denied, the controls pass
probe_set() {
	local c0
	c0=$(counter drop_host_addr)
	check "$1: control: the guest's own host service $HOST4:$SVC answers" tcp_ok "$HOST4" "$SVC"
	check "$1: control: tcp $SRV_A:80 (the fake internet) passes" tcp_ok "$SRV_A" 80
	check "$1: control: tcp [$SRV6_A]:80 passes" tcp_ok "$SRV6_A" 80
	check_not "$1: tcp $UP4:$SVC (H's uplink address) is denied" tcp_ok "$UP4" "$SVC"
	check_not "$1: tcp [$UP6]:$SVC is denied" tcp_ok "$UP6" "$SVC"
	check_not "$1: tcp $OTHER4:$SVC (another sandbox's host address) is denied" tcp_ok "$OTHER4" "$SVC"
	check_not "$1: tcp [$OTHER6]:$SVC is denied" tcp_ok "$OTHER6" "$SVC"
	check_not "$1: a datagram to the link's broadcast does not reach H" dgram_arrives "$BCAST"
	check_not "$1: a datagram to 255.255.255.255 does not reach H" dgram_arrives 255.255.255.255
	check_not "$1: a datagram to multicast $MCAST does not reach H" dgram_arrives "$MCAST" "$MPORT"
	check_cmp "$1: the denials are counted under drop_host_addr" "$(counter drop_host_addr)" -ge $((c0 + 7))
}

# Entries that cover the host's addresses do not reach them.
check "allow 0.0.0.0/0 and ::/0 (every address, every port)" latch egress "$LTS_NAME" allow 0.0.0.0/0 ::/0
probe_set "covering entries"
check "revoke them" latch egress "$LTS_NAME" revoke 0.0.0.0/0 ::/0
check_not "revoked: tcp $SRV_A:80 is denied again" tcp_ok "$SRV_A" 80

# The open profile, set by latchd, then latchd killed.
mkdir -p "$LTS_TMP/root/etc/latch"
printf 'dns_upstream = %s\n' "$SRV_DNS" >"$LTS_TMP/root/etc/latch/latch.conf"
chmod 0644 "$LTS_TMP/root/etc/latch/latch.conf"
lts_latchd "$LTS_TMP/root" "$LTS_TMP/latchd.log" || fail latchd "latchd did not come up: $(tail -2 "$LTS_TMP/latchd.log")"
check "latch egress NAME profile open" latch egress "$LTS_NAME" profile open
check_eq "open: status reads UNCONTAINED from the kernel" "$(status_json | jq -r '.sandboxes[0].uncontained')" true
kill -KILL "$LATCHD_PID" 2>/dev/null
wait "$LATCHD_PID" 2>/dev/null
probe_set "open"

# An address the host gains now, with no latch process running, is guarded too.
check_eq "no latch process of this test is running" "$(own_latch_pids; kill -0 "$LATCHD_PID" 2>/dev/null && echo latchd)" ""
in_i ip addr add "$LATE/32" dev lo
check "open: tcp $LATE:80, an address of the fake internet, passes" tcp_ok "$LATE" 80
in_i ip addr del "$LATE/32" dev lo
in_h ip addr add "$LATE/32" dev hi0
c0=$(counter drop_host_addr)
check_not "open: once H owns $LATE, tcp $LATE:$SVC is denied (no daemon was told)" tcp_ok "$LATE" "$SVC"
check_cmp "open: ... and counted under drop_host_addr" "$(counter drop_host_addr)" -gt "$c0"
check "open: control: tcp $SRV_B:80 still passes" tcp_ok "$SRV_B" 80

lts_done
