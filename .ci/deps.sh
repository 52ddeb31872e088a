#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Install the Debian 12 packages latch builds, runs and tests with, and the
# pinned npm clients of .ci/clients the broker is tested with.
# Safe to run twice: apt-get only installs what is missing.
set -euo pipefail

PKGS=(
	# build
	make gcc clang clang-format llvm pkg-config libbpf-dev bpftool libelf-dev zlib1g-dev
	libnl-3-dev libnl-route-3-dev libjansson-dev libcap-dev libvirt-dev libnftables-dev libarchive-dev
	libcriterion-dev libsqlite3-dev libssl-dev libldns-dev libevent-dev libcyaml-dev libyaml-dev libhttp-parser-dev
	libseccomp-dev libfuzzer-14-dev libsystemd-dev libcurl4-openssl-dev libxxhash-dev
	# install, man pages and the units' checks: go-md2man renders docs/man/*.md; systemd-analyze verifies
	go-md2man systemd man-db
	# run and test
	iproute2 nftables iperf3 jq socat ncat python3 dnsmasq-base knot-dnsutils dnsperf sqlite3 ethtool
	systemd bsdutils # live_audit.sh: a journald of its own, journalctl, logger --journald
	systemd-container # live_install.sh: the installed units booted under systemd-nspawn on a fresh root
	libvirt-daemon-system qemu-system-x86 util-linux procps
	# the broker's tests and benchmark (fake upstreams, git over HTTP, nginx as the reference)
	curl git nginx-light libnginx-mod-http-echo wrk openssl
	# rooms: diff -u for a workspace's changes; bubblewrap is the benchmark's reference
	diffutils bubblewrap
	tmux # vm_tty.sh: latch exec -it on a real pty, keys in and the screen back
	containernetworking-plugins # live_cni.sh: bridge and host-local ahead of latch-cni in a chain
	python3-yaml # make k8s-check: deploy/kubernetes/check.py parses the node agent's manifests
	# the default guest image
	busybox-static cpio kmod xz-utils zstd libc6-dev
	# the debian image's recipe (live_image_pin.sh runs it up to its node pin check)
	debootstrap qemu-utils e2fsprogs
)

# /dev/kvm: with no udev running (a fresh microVM, a container host) the kernel
# leaves it 0600 root:root.  libvirt then probes QEMU as root, finds KVM, finds
# it unusable as its qemu user, and throws its capability cache away on every
# API call (4-10 s each), so a guest starts a minute late.  Do what Debian's
# udev rule does: group kvm, mode 0660.
kvm_mode() {
	[ -c /dev/kvm ] || return 0
	getent group kvm >/dev/null || { echo "deps: no 'kvm' group yet; /dev/kvm left as it is" >&2; return 0; }
	local now
	now=$(stat -c '%a %U:%G' /dev/kvm)
	[ "$now" = "660 root:kvm" ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "deps: /dev/kvm is $now; run as root to set it to 0660 root:kvm (what Debian's udev rule does)" >&2
		return 0
	fi
	chgrp kvm /dev/kvm && chmod 0660 /dev/kvm &&
		echo "deps: /dev/kvm was $now; set it to 0660 root:kvm, as Debian's udev rule would (libvirt's qemu user needs it)"
}

# The real API clients selftests/live_clients.sh runs through the broker
# (Claude Code, Codex CLI, Gemini CLI, the openai and @anthropic-ai/sdk
# libraries, and node 22 for those that need it), pinned with their sha512 in
# .ci/clients/package-lock.json and installed with `npm ci` into one prefix.
# Quick when that lock is already installed there.
CLIENTS=${LATCH_CLIENTS:-/opt/latch-clients}
clients() {
	local src
	src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/clients"
	if cmp -s "$src/package-lock.json" "$CLIENTS/package-lock.json" &&
		cmp -s "$src/package-lock.json" "$CLIENTS/.installed" 2>/dev/null; then
		echo "deps: the test clients of .ci/clients are in $CLIENTS"
		return 0
	fi
	if ! command -v npm >/dev/null; then
		[ "$(id -u)" = 0 ] || { echo "deps: no npm to install the test clients with; run as root" >&2; return 1; }
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
	fi
	echo "deps: installing the test clients of .ci/clients into $CLIENTS (npm ci)"
	rm -f "$CLIENTS/.installed"
	mkdir -p "$CLIENTS"
	cp "$src/package.json" "$src/package-lock.json" "$CLIENTS/"
	# the lock's sha512 is checked for every package; install scripts link Claude Code's native binary
	(cd "$CLIENTS" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false) >/dev/null
	"$CLIENTS/node_modules/.bin/claude" --version >/dev/null ||
		{ echo "deps: $CLIENTS/node_modules/.bin/claude --version fails" >&2; return 1; }
	cp "$src/package-lock.json" "$CLIENTS/.installed"
}

# The built-in claude kit's pinned installer, as the registry serves it, for
# selftests/vm_claude.sh's fake registry (tests never reach the real one):
# packed once into $CLIENTS/tarballs, kept only when its sha512 is the kit's pin.
tarballs() {
	local kit pkg ver pin dir f got
	kit="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/kit/kits/claude.yaml"
	pkg=$(sed -n 's/^  - npm: "\(.*\)"$/\1/p' "$kit")
	ver=$(sed -n 's/^    version: "\(.*\)"$/\1/p' "$kit")
	pin=$(sed -n 's/^    integrity: "\(.*\)"$/\1/p' "$kit")
	dir=$CLIENTS/tarballs
	f=$dir/$(printf '%s' "${pkg#@}" | tr / -)-$ver.tgz
	sum() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }
	if [ -f "$f" ] && [ "$(sum "$f")" = "$pin" ]; then
		echo "deps: $pkg@$ver's tarball is in $dir"
		return 0
	fi
	echo "deps: packing $pkg@$ver into $dir (npm pack)"
	mkdir -p "$dir"
	rm -f "$f"
	(cd "$dir" && npm pack --loglevel=error "$pkg@$ver") >/dev/null
	got=$(sum "$f")
	if [ "$got" != "$pin" ]; then
		rm -f "$f"
		echo "deps: $pkg@$ver's tarball is $got, the kit's pin is $pin; removed" >&2
		return 1
	fi
}

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PKGS[@]} packages present"
	kvm_mode
	clients
	tarballs
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
kvm_mode
clients
tarballs
