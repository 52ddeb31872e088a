# SPDX-License-Identifier: GPL-2.0-only
# lib_vm.sh - what the guest tests (selftests/vm_*.sh) share; source it.
#
# It builds on lib.sh (KTAP results: ok, fail, check, check_not, check_eq,
# lts_done; wait_until, wait_counter), and adds skip_all and skip_feature
# (exit 77; selftests/run.sh reads the difference under CI=true), vm_scratch: a bpffs directory and a temp
# dir of the test's own, vm_root: a LATCH_ROOT in it with the test's
# latch.conf, vm_latchd: latchd under that root, and vm_images and
# vm_test_image: guest images that never answer or die booting.  The temp
# dirs are all /tmp/latch-vm-*, which is how selftests/run.sh finds and
# destroys the sandboxes of a test it had to kill.  Set TEST (the test's
# name) before sourcing.

# lib.sh names latch's cgroup after its namespace tests; a guest test names its
# own in vm_scratch, and until then keeps the one it was started with (if any)
if [ -n "${LATCH_CGROUP+set}" ]; then vm_cgroup_was=$LATCH_CGROUP; fi
# shellcheck source=selftests/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [ -n "${vm_cgroup_was+set}" ]; then export LATCH_CGROUP=$vm_cgroup_was; else unset LATCH_CGROUP; fi

# skip_all WHY: the guests cannot run here (no libvirt, a tool, a free pool, a
# guest image): a skip on a developer's host, a failure under CI=true
skip_all() {
	echo "1..0 # SKIP $TEST: $*"
	exit 77
}

# skip_feature WHY: the host lacks the feature this test is about (vm_kvm's
# /dev/kvm): a skip even under CI=true, as a live test's missing kernel feature is
skip_feature() {
	echo "1..0 # SKIP feature: $TEST: $*"
	exit 77
}

# vm_test_lock: one run of this test at a time on the host.  A guest test's
# sandbox name, tap, libvirt domain, routing table and pool are fixed (and
# global to the host), so two runs of the same test (two worktrees, two
# developers) would take each other's: one's rollback removing the other's
# domain or tap.  The lock is a directory, /run/lock/latch-selftest-TEST.d,
# naming the pid that holds it; a run whose holder is gone (finished, or
# killed at its time limit) takes it over, so nothing needs releasing.  The
# second run waits up to LTS_VM_LOCK_WAIT seconds (300).
vm_test_lock() {
	local d=/run/lock/latch-selftest-$TEST.d owner waited=0
	mkdir -p /run/lock
	until mkdir "$d" 2>/dev/null; do
		owner=$(cat "$d/pid" 2>/dev/null)
		if { [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; } ||
			{ [ -z "$owner" ] && [ -n "$(find "$d" -maxdepth 0 -mmin +1 2>/dev/null)" ]; }; then
			rm -rf "$d" # its holder is gone
			continue
		fi
		[ "$waited" = 0 ] && echo "#   another run of $TEST (pid ${owner:-?}) holds $d: waiting for it"
		waited=$((waited + 1))
		[ "$waited" -le $((${LTS_VM_LOCK_WAIT:-300} * 2)) ] || skip_all "another run of $TEST held $d too long"
		sleep 0.5
	done
	echo $$ >"$d/pid"
}

# vm_scratch TAG: BPFFS=/sys/fs/bpf/latch-vm-TAG-PID and TMP=/tmp/latch-vm-TAG.XXXXXX,
# mounting bpffs if it is missing.  TMP is 0755: libvirtd and its qemu user walk
# into run/latch (and a workspace) under it.  LATCH_CGROUP=latch-vm-TAG-PID: a
# latchd started here confines itself in a cgroup of this test's own (the
# default, <cgroup2>/latch/latchd, is the host's latchd's; a second latchd
# there sweeps the first one's slot); vm_cgroups_remove takes it away.
vm_scratch() {
	vm_test_lock
	grep -qs " /sys/fs/bpf bpf " /proc/mounts || mount -t bpf bpf /sys/fs/bpf || skip_all "no bpffs"
	BPFFS=/sys/fs/bpf/latch-vm-$1-$$
	mkdir -p "$BPFFS"
	TMP=$(mktemp -d "/tmp/latch-vm-$1.XXXXXX")
	chmod 0755 "$TMP"
	echo $$ >"$TMP/owner.pid" # run.sh's leftover sweep leaves a live test's sandboxes alone
	export LATCH_CGROUP=latch-vm-$1-$$
}

# vm_sandbox_down: the EXIT trap's first steps: the sandbox NAME destroyed
# (with its guest-state backup) once vm_scratch ran, then every PID in PIDS
# killed and waited for.
vm_sandbox_down() {
	local p
	[ -n "${TMP:-}" ] && "$LATCH_BIN" destroy --purge "$NAME" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	return 0
}

# vm_scratch_down: the EXIT trap's last steps: what vm_scratch made (BPFFS,
# the test's latch cgroups, TMP) removed.
vm_scratch_down() {
	[ -n "${BPFFS:-}" ] && rm -rf "$BPFFS" 2>/dev/null
	vm_cgroups_remove # latch cgroups of this test (a latchd or room confined there)
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
	return 0
}

# vm_cgroups_remove: latch's cgroup directories of this test, in each hierarchy,
# once the latchd in them is gone (call from the cleanup, after killing PIDS).
vm_cgroups_remove() {
	local root
	[ -n "${LATCH_CGROUP:-}" ] || return 0
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		# a v1 memory cgroup can stay busy for a moment after its last task exits
		wait_until -t 2 vm_rmdir_tree "$root/$LATCH_CGROUP" 2>/dev/null
	done
	return 0
}

# vm_rmdir_tree DIR: remove DIR's directories, deepest first; 0 once DIR is gone
vm_rmdir_tree() {
	[ -d "$1" ] || return 0
	find "$1" -depth -type d -exec rmdir {} + 2>/dev/null
	[ ! -d "$1" ]
}

# vm_root WHY [KEY=VALUE]...: a LATCH_ROOT under TMP whose latch.conf (CONF)
# says "# TEST: WHY", then the given keys, table_base = $TABLE (when set) and the image
# cache, root-owned and 0644.  Exports LATCH_ROOT and LATCH_BPFFS, defines L
# (latch under them) and starts virtlogd and libvirtd if they are not running.
vm_root() {
	local kv
	CONF=$TMP/root/etc/latch/latch.conf
	mkdir -p "${CONF%/*}"
	{
		echo "# $TEST: $1"
		shift
		for kv in "$@"; do echo "${kv%%=*} = ${kv#*=}"; done
		[ -z "${TABLE:-}" ] || echo "table_base = $TABLE"
		echo "images = ${LATCH_IMAGES:-/var/lib/latch/images}"
	} >"$CONF"
	chmod 0644 "$CONF"
	export LATCH_ROOT=$TMP/root LATCH_BPFFS=$BPFFS
	# a libvirtd that does not answer is reported by the test that needs it
	bash "$(dirname "${BASH_SOURCE[0]}")/../scripts/libvirt_up.sh" || true
}
L() { "$LATCH_BIN" "$@"; }

# vm_latchd: start the latchd beside LATCH_BIN (LATCHD_PID, added to PIDS) and
# wait up to 5 s for its socket; its log is $TMP/latchd.log.
vm_latchd() {
	"${LATCH_BIN%/*}/latchd" >"$TMP/latchd.log" 2>&1 &
	LATCHD_PID=$!
	PIDS+=("$LATCHD_PID")
	# a latchd that never listens is reported by the checks that need it
	wait_until -t 5 test -S "$LATCH_ROOT/run/latch/latchd.sock" || true
}

# vm_left N: what is left of sandbox N under LATCH_ROOT, one word each ("": nothing):
# its domain, tap, pins, kit state, owner mark, profile, sandbox directory,
# a warm start's disk, and latchd's sandbox (asked over its socket)
vm_left() {
	local policy=$LATCH_ROOT/var/lib/latch/policy
	local w= ping
	virsh dominfo "latch-$1" >/dev/null 2>&1 && w="$w domain"
	ip link show "lt-$1" >/dev/null 2>&1 && w="$w tap"
	[ -n "$(find "$BPFFS" -path "*$1*" 2>/dev/null | head -1)" ] && w="$w pins"
	[ -e "$policy/$1.kit" ] && w="$w kit-state"
	[ -e "$policy/$1.agent" ] && w="$w owner-mark"
	[ -e "$policy/$1.profile" ] && w="$w profile"
	[ -e "$LATCH_ROOT/var/lib/latch/sandboxes/$1" ] && w="$w sandbox-dir"
	[ -e "$LATCH_ROOT/var/lib/latch/overlays/$1.qcow2" ] && w="$w overlay" # a warm start's disk
	# latchd must answer: one that does not would pass for "nothing left"
	# (one run of six saw a refused connect twice, latchd serving before and after: asked up to 3 times)
	for _ in 1 2 3; do
		ping=$(echo '{"op":"ping"}' | socat -T5 - UNIX-CONNECT:"$LATCH_ROOT/run/latch/latchd.sock" 2>&1)
		jq -e .sandboxes >/dev/null 2>&1 <<<"$ping" && break
		sleep 1
	done
	if ! jq -e .sandboxes >/dev/null 2>&1 <<<"$ping"; then
		w="$w latchd-no-answer"
		echo "# latchd did not answer the ping: $ping; its log's tail:" >&2
		tail -5 "$TMP/latchd.log" | sed 's/^/#   /' >&2
	elif [ -n "$(jq -r --arg n "$1" '.sandboxes[] | select(.name == $n) | .name' <<<"$ping")" ]; then
		w="$w latchd"
	fi
	echo "${w# }"
}

# vm_images: IMAGES=$TMP/images, with `default` a link to the real default
# image (LATCH_IMAGES, as `make image` built it); call before vm_root, which
# then points latch.conf's `images` there.
vm_images() {
	IMAGES=$TMP/images
	mkdir -p "$IMAGES"
	ln -s "${LATCH_IMAGES:-/var/lib/latch/images}/default" "$IMAGES/default"
	LATCH_IMAGES=$IMAGES
}

# vm_test_image NAME SCRIPT: an image in IMAGES whose initramfs is busybox-static
# and an /init that runs SCRIPT (a guest that never answers, or dies), booted
# with the default image's kernel.
vm_test_image() {
	local d=$IMAGES/$1 r=$TMP/initrd-$1 a
	mkdir -p "$d" "$r/bin" "$r/dev" "$r/proc"
	cp /bin/busybox "$r/bin/busybox"
	for a in sh echo sleep poweroff mount; do ln -s busybox "$r/bin/$a"; done
	printf '#!/bin/sh\nexport PATH=/bin\nmount -t devtmpfs devtmpfs /dev\nexec </dev/console >/dev/console 2>&1\n%s\n' \
		"$2" > "$r/init"
	chmod 0755 "$r/init"
	(cd "$r" && find . | cpio -o -H newc --quiet | gzip) > "$d/initrd.img"
	cp "$IMAGES/default/vmlinuz" "$d/vmlinuz"
	chmod -R a+rX "$d"
}

# A hook of this test's own in the real /etc/libvirt/hooks/qemu.d/ (latch-TEST-PID),
# acting on this test's domains only: every other domain on the host goes through it
# at once.  libvirtd looks for hooks at its start and on SIGHUP only; once it has seen
# one it reads qemu.d on every call.  So vm_hook_install asks first, with a probe
# domain of this test's own that the hook refuses at prepare, and sends SIGHUP only
# when libvirtd does not run the hook yet (a fresh libvirtd that never saw a hook).
# Removing the hook needs no SIGHUP: libvirtd reads qemu.d afresh on each call.
# A SIGHUP reloads every libvirt driver for every guest on the host (the other
# tests' too), so it is sent once at most per libvirtd, never at cleanup.
VM_HOOK=
VM_HOOK_MADE_DIR=

# vm_hook_install ARMS: the hook, whose `case "$1" in` arms are ARMS (sh, one per
# domain of this test), then vm_hooks_live.  Returns 1 when libvirtd won't run it.
vm_hook_install() {
	VM_HOOK=/etc/libvirt/hooks/qemu.d/latch-$TEST-$$
	[ -d /etc/libvirt/hooks/qemu.d ] || VM_HOOK_MADE_DIR=1
	mkdir -p /etc/libvirt/hooks/qemu.d
	{
		echo '#!/bin/sh'
		echo "# $TEST (pid $$, temporary): only this test's domains are handled here"
		echo 'case "$1" in'
		echo "hookprobe-$$) [ \"\$2\" = prepare ] && { echo 'hook probe: refused' >&2; exit 1; } ;;"
		printf '%s\n' "$1"
		echo 'esac'
		echo 'exit 0'
	} >"$VM_HOOK.tmp"
	chmod 0755 "$VM_HOOK.tmp" && mv "$VM_HOOK.tmp" "$VM_HOOK"
	vm_hooks_live
}

vm_hook_remove() {
	[ -n "$VM_HOOK" ] || return 0
	rm -f "$VM_HOOK" "$VM_HOOK.tmp"
	[ -n "$VM_HOOK_MADE_DIR" ] && rmdir /etc/libvirt/hooks/qemu.d /etc/libvirt/hooks 2>/dev/null
	VM_HOOK=
	return 0
}

# vm_hook_probe: 0 when libvirtd runs this test's hook now (the probe domain is refused by it).
vm_hook_probe() {
	local out
	cat >"$TMP/hookprobe.xml" <<X
<domain type='qemu'><name>hookprobe-$$</name><memory unit='MiB'>32</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>
X
	if out=$(virsh -q -c qemu:///system create "$TMP/hookprobe.xml" 2>&1); then
		virsh -q -c qemu:///system destroy "hookprobe-$$" >/dev/null 2>&1
		return 1
	fi
	grep -q 'hook probe: refused' <<<"$out"
}

vm_hooks_live() {
	local p i
	vm_hook_probe && return 0
	for i in 1 2; do
		echo "#   libvirtd does not run qemu.d's hooks yet (none since its start): SIGHUP ($i), to look again"
		for p in $(pgrep -x libvirtd); do kill -HUP "$p"; done
		# each probe creates a domain: every 0.5 s, not the default 0.1
		sleep 0.5
		wait_until -t 10 -i 0.5 vm_hook_probe 2>/dev/null && return 0
	done
	return 1
}

# vm_ctrl_net "POOL_CIDR..." ADDR...: the test's allowed destinations (ADDR,
# v4 or v6), in a network namespace of their own (CTRL_NS) behind a veth from
# the host.  A guest never reaches an address of the host's own
# (docs/INVARIANTS.md, invariant 48), so an allowed destination has to be
# somewhere the host forwards to.  Rules (pref 10100, ahead of latch's) send
# each ADDR to a table of this test's own (TABLE + 5000) via the veth, for the
# guest and the host alike.  The namespace has routes back to the sandbox
# pools POOL_CIDR and nothing else: no default route, so nothing it sends can
# be forwarded out of the host.  Run a server there with `ctrl_ns CMD...`.
# Call vm_ctrl_forward TAP after every `latch up` or boot apply that makes
# the tap, and vm_ctrl_net_down in the EXIT trap.
vm_ctrl_net() {
	local net back=$1 a
	shift
	CTRL_NS=ltctl-$TEST-$$
	CTRL_VETH=ltc$$
	CTRL_TABLE=$((TABLE + 5000))
	CTRL_ADDRS=("$@")
	net=$(python3 "$(dirname "${BASH_SOURCE[0]}")/free_net.py" 203.0.113.240/30 198.51.100.240/30 203.0.113.236/30) ||
		return 1
	[ -n "$net" ] || return 1
	net=${net%/*}
	CTRL_GW=${net%.*}.$((${net##*.} + 1))	# ours, on the veth
	CTRL_NH=${net%.*}.$((${net##*.} + 2))	# the namespace's
	ip netns add "$CTRL_NS" || return 1
	ip link add "$CTRL_VETH" type veth peer name ltd$$ netns "$CTRL_NS" || return 1
	ip addr add "$CTRL_GW/30" dev "$CTRL_VETH"
	ip addr add 2001:db8:77:ff::1/64 dev "$CTRL_VETH" nodad
	ip link set "$CTRL_VETH" up
	ip -n "$CTRL_NS" link set lo up
	ip -n "$CTRL_NS" addr add "$CTRL_NH/30" dev ltd$$
	ip -n "$CTRL_NS" addr add 2001:db8:77:ff::2/64 dev ltd$$ nodad
	ip -n "$CTRL_NS" link set ltd$$ up
	for a in $back; do
		if [[ $a == *:* ]]; then ip -n "$CTRL_NS" -6 route add "$a" via 2001:db8:77:ff::1
		else ip -n "$CTRL_NS" route add "$a" via "$CTRL_GW"; fi
	done
	sysctl -qw "net.ipv4.conf.$CTRL_VETH.forwarding=1"
	[ -e "/proc/sys/net/ipv6/conf/$CTRL_VETH/force_forwarding" ] &&
		sysctl -qw "net.ipv6.conf.$CTRL_VETH.force_forwarding=1"
	for a in "$@"; do
		if [[ $a == *:* ]]; then
			ip -n "$CTRL_NS" addr add "$a/128" dev lo nodad
			ip -6 route add "$a/128" via 2001:db8:77:ff::2 dev "$CTRL_VETH" table "$CTRL_TABLE"
			ip -6 rule add to "$a/128" lookup "$CTRL_TABLE" pref 10100
		else
			ip -n "$CTRL_NS" addr add "$a/32" dev lo
			ip route add "$a/32" via "$CTRL_NH" dev "$CTRL_VETH" table "$CTRL_TABLE"
			ip rule add to "$a/32" lookup "$CTRL_TABLE" pref 10100
		fi
	done
}

# vm_ctrl_forward TAP: let the host forward what the guest sends on TAP (IPv4,
# and IPv6 where the kernel has per-device force_forwarding); the sysctls go with the tap.
vm_ctrl_forward() {
	sysctl -qw "net.ipv4.conf.$1.forwarding=1"
	if [ -e "/proc/sys/net/ipv6/conf/$1/force_forwarding" ]; then
		sysctl -qw "net.ipv6.conf.$1.forwarding=1" "net.ipv6.conf.$1.force_forwarding=1"
	fi
}

ctrl_ns() { ip netns exec "$CTRL_NS" "$@"; }

# vm_netns_empty NS: no process runs in NS
vm_netns_empty() { [ -z "$(ip netns pids "$1" 2>/dev/null)" ]; }

# vm_ctrl_http ADDR PORT...: HTTP servers in CTRL_NS on ADDR, serving $TMP/www
# ("hello-from-host"), PIDs added to PIDS; waits up to 5 s until each port listens
vm_ctrl_http() {
	local addr=$1 p
	shift
	mkdir -p "$TMP/www"
	echo "hello-from-host" >"$TMP/www/index.html"
	for p in "$@"; do
		(cd "$TMP/www" && exec ip netns exec "$CTRL_NS" python3 -m http.server --bind "$addr" "$p" >/dev/null 2>&1) &
		PIDS+=($!)
	done
	wait_until -t 5 vm_ctrl_listening "$@"
}

# vm_ctrl_listening PORT...: every PORT has a TCP listener in CTRL_NS
vm_ctrl_listening() {
	local p
	for p in "$@"; do
		[ -n "$(ctrl_ns ss -ltnH "( sport = :$p )")" ] || return 1
	done
}

vm_ctrl_net_down() {
	local a
	[ -n "${CTRL_NS:-}" ] || return 0
	for a in "${CTRL_ADDRS[@]}"; do
		if [[ $a == *:* ]]; then ip -6 rule del to "$a/128" lookup "$CTRL_TABLE" pref 10100 2>/dev/null
		else ip rule del to "$a/32" lookup "$CTRL_TABLE" pref 10100 2>/dev/null; fi
	done
	ip route flush table "$CTRL_TABLE" 2>/dev/null
	ip -6 route flush table "$CTRL_TABLE" 2>/dev/null
	ip link del "$CTRL_VETH" 2>/dev/null
	# whatever the test started in its namespace (servers) goes with it: a process would keep it alive
	vm_netns_kill "$CTRL_NS"
	ip netns del "$CTRL_NS" 2>/dev/null
	CTRL_NS=
}

# vm_netns_kill NS: kill every process in this test's namespace NS, and wait (up to 2 s) for them to go.
vm_netns_kill() {
	local pids
	pids=$(ip netns pids "$1" 2>/dev/null)
	[ -n "$pids" ] || return 0
	kill $pids 2>/dev/null
	wait_until -t 2 vm_netns_empty "$1" 2>/dev/null && return 0
	kill -9 $(ip netns pids "$1" 2>/dev/null) 2>/dev/null
	return 0
}

# vm_tree_image [KEY=FILE]...: the guest must run this tree's agent (and each
# FILE the image recipe records under KEY, e.g. ask=build/vm/latch-ask): when
# the shared image cache holds another build's, build a private image in
# $TMP/images and point LATCH_IMAGES there (the recipe reuses the kernel it
# fetched); skip_all when that fails.  Call after vm_scratch, before vm_root.
vm_tree_image() {
	local top shared kv want
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	shared=${LATCH_IMAGES:-/var/lib/latch/images}
	want=("agent=$top/build/vm/latch-agent" "$@")
	for kv in "${want[@]}"; do
		grep -qsx "${kv%%=*} $(sha256sum "${kv#*=}" | cut -d' ' -f1)" "$shared/default/manifest.txt" && continue
		mkdir -p "$TMP/images"
		"$top/vm/images/image.sh" "$TMP/images/default" "$top/build/vm/latch-agent" >"$TMP/image.out" 2>&1 ||
			skip_all "cannot build a guest image with this tree's guest programs: $(tail -1 "$TMP/image.out")"
		LATCH_IMAGES=$TMP/images
		return 0
	done
}
