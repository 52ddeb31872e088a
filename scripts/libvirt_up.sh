#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# libvirt_up.sh: start virtlogd and libvirtd if they are not running, and wait
# (at most 30 s) until libvirtd answers at qemu:///system.
#
# `pgrep -x libvirtd` alone is not enough: a daemon that was just killed is
# still listed while it exits, and a caller that trusts it then finds no
# socket ("libvirt unreachable").  So the answer of `virsh uri` decides, and
# a daemon that is gone by the next look is started again.
# Exit status 0 when libvirtd answers, 1 (with one line on stderr) when not.
start_missing() {
	pgrep -x virtlogd >/dev/null || virtlogd -d
	pgrep -x libvirtd >/dev/null || libvirtd -d
}
answers() { virsh -c qemu:///system uri >/dev/null 2>&1; }

# each daemon is looked for on every turn: libvirtd may answer while virtlogd is not running
for _ in $(seq 61); do
	start_missing
	answers && exit 0
	sleep 0.5
done
echo "${0##*/}: libvirtd does not answer at qemu:///system after 30 s (see its log, or start it with: libvirtd -d)" >&2
exit 1
