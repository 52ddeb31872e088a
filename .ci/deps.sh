#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Install the Debian 12 packages latch builds, runs and tests with.
# Safe to run twice: apt-get only installs what is missing.
set -euo pipefail

PKGS=(
	# build
	make gcc clang llvm pkg-config libbpf-dev bpftool libelf-dev zlib1g-dev
	libnl-3-dev libnl-route-3-dev libjansson-dev libcap-dev libvirt-dev libnftables-dev libarchive-dev
	libcriterion-dev libsqlite3-dev libssl-dev libldns-dev libevent-dev
	# run and test
	iproute2 nftables iperf3 jq socat ncat python3 dnsmasq-base knot-dnsutils dnsperf sqlite3
	libvirt-daemon-system qemu-system-x86 util-linux procps
	# the default guest image
	busybox-static cpio kmod xz-utils zstd libc6-dev
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PKGS[@]} packages present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing ${missing[*]}; run as root to install them" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
