#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_csum.sh - a checksum-offload request can't move a packet after latch.
#
# Invariant: a frame from the guest asking the host to complete its checksum
# (virtio-net's NEEDS_CSUM; CHECKSUM_PARTIAL in the host) passes only when
# the checksum goes where the L4 checksum is.  Otherwise the host, after tc,
# writes 16 bits of the guest's choosing at the offset the guest chose: here,
# over the UDP destination port, so that a datagram latch passed to an
# allowed port arrives at a denied one.
#
# The guest is a tap opened with IFF_VNET_HDR (selftests/vnet_send.py) in H;
# H forwards to the fake internet I over hi0 with transmit checksumming off,
# so the host itself writes the checksum there.  Without latch the rewrite
# is shown to work (the control that makes the test able to fail); with
# latch the forged request is dropped and counted drop_csum, while an honest
# request (csum_offset 6) to the allowed port arrives.  Needs a kernel that
# lets the program read csum_start (6.2+); skipped otherwise.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
command -v ethtool >/dev/null || lts_skip_all "needs ethtool"
lts_setup

TAP=ltc$$
TAP=${TAP:0:15}
TGUEST_MAC=02:00:00:00:00:12
TGUEST4=192.0.2.10
THOST4=192.0.2.9
SEND="$LTS_DIR/vnet_send.py"
LOG_OK=$LTS_TMP/udp5200.log
LOG_DENIED=$LTS_TMP/udp5300.log

# --- the tap (persistent until its namespace goes), and H forwarding without transmit checksum offload
in_h ip tuntap add dev "$TAP" mode tap
in_h ip addr add "$THOST4/30" dev "$TAP"
in_h ip link set "$TAP" up
in_h ip route add 192.0.2.8/30 dev "$TAP" table 100
in_h ethtool -K hi0 tx off >/dev/null || fail setup "ethtool -K hi0 tx off"
lts_bg "$LTS_I" "$LTS_TMP/serve5200.out" "$LTS_PY" "$LTS_NET" serve --udp 5200 --addr "$SRV_A" --log "$LOG_OK" --lifetime 120
lts_bg "$LTS_I" "$LTS_TMP/serve5300.out" "$LTS_PY" "$LTS_NET" serve --udp 5300 --addr "$SRV_A" --log "$LOG_DENIED" \
	--lifetime 120
lts_wait_ready "$LTS_TMP/serve5200.out" && lts_wait_ready "$LTS_TMP/serve5300.out" || fail setup "the servers in I did not start"

# send TOKEN MODE...: one datagram to SRV_A:5200 from the tap guest, carrying TOKEN
send() {
	local t=$1
	shift
	in_h "$LTS_PY" "$SEND" "$TAP" "$TGUEST_MAC" "$TGUEST4" "$SRV_A" 5200 --token "$t" "$@"
}
# landed LOG TOKEN: the datagram reached that server (waits up to 1 s)
landed() { wait_until -t 1 grep -aq " udp $2 " "$1"; }

# --- without latch: an honest request is delivered, and the forged one is rewritten to port 5300
send base-honest --honest
check "baseline: an honest checksum request arrives at $SRV_A:5200" landed "$LOG_OK" base-honest
send base-forged --rewrite-port 5300
check "baseline: a forged request sent to :5200 arrives at :5300 (the host rewrote the port)" landed "$LOG_DENIED" base-forged
check_not "baseline: ... and not at :5200" landed "$LOG_OK" base-forged

if ! latch attach "$LTS_NAME" --dev "$TAP" --guest-mac "$TGUEST_MAC" --guest-ip "$TGUEST4" --host-ip "$THOST4" >/dev/null; then
	fail attach "latch attach failed"
	lts_done
fi
if [ "$(status_json | jq -r '.sandboxes[0].csum_check')" != true ]; then
	lts_skip_all "this kernel's program can't read csum_start (before 6.2)"
fi
check "allow $SRV_A:5200/udp only" latch egress "$LTS_NAME" allow "$SRV_A:5200/udp"

c0=$(counter drop_csum)
send honest-1 --honest
check "control: an honest checksum request to the allowed port arrives" landed "$LOG_OK" honest-1
send forged-1 --rewrite-port 5300
check_not "a forged checksum request does not reach the denied port" landed "$LOG_DENIED" forged-1
check_not "... nor the allowed one" landed "$LOG_OK" forged-1
check_cmp "the forged request is counted under drop_csum" "$(counter drop_csum)" -eq $((c0 + 1))
send honest-2 --honest
check "control: an honest request after it still arrives" landed "$LOG_OK" honest-2
check_cmp "control: honest requests are not counted under drop_csum" "$(counter drop_csum)" -eq $((c0 + 1))

lts_done
