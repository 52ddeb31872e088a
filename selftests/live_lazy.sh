#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_lazy.sh - the latch binary's heavy libraries are loaded when a command
# first calls them, not at exec (scripts/lazy.mk), and the commands that do
# call them still work.  libarchive and libnftables are called only with
# guests (vm_workspace's backups, vm_up's masquerade): those tests use them.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"
[ -x "$LATCH_BIN" ] || lts_skip_all "no $LATCH_BIN; run make"
command -v readelf >/dev/null || lts_skip_all "needs readelf"
grep -q 'LATCH_LAZY_LIBS := ' "$LTS_TOP/scripts/lazy.mk" && [ "$(uname -m)" = x86_64 ] ||
	lts_skip_all "lazy loading is x86-64 only"
LAZY=$(sed -n 's/^LATCH_LAZY_LIBS := //p' "$LTS_TOP/scripts/lazy.mk")
TMP=$(mktemp -d /tmp/latch-lazy.XXXXXX)
export LATCH_ROOT=$TMP/root LATCH_BPFFS=/sys/fs/bpf/latch-lazy-$$ LATCH_CGROUP=latch-lazy-$$
lazy_cleanup() {
	local root
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		rmdir "$root/$LATCH_CGROUP"/rooms/* "$root/$LATCH_CGROUP"/rooms "$root/$LATCH_CGROUP"/warm \
			"$root/$LATCH_CGROUP" 2>/dev/null
	done
	rm -rf "$TMP" "$LATCH_BPFFS"
}
trap lazy_cleanup EXIT

# opened LIB CMD...: did CMD (run with LD_DEBUG=files) load libLIB?
opened() {
	local lib=$1
	shift
	LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -q "file=lib$lib[.-].*generating link map"
}

# Invariant: no lazy library is among latch's NEEDED entries (loaded at every exec).
needed=$(readelf -d "$LATCH_BIN" | grep NEEDED)
for lib in $LAZY; do
	if grep -q "\[lib$lib[.-]" <<<"$needed"; then fail "latch does not need lib$lib at exec" "it is NEEDED"; else
		ok "latch does not need lib$lib at exec"; fi
done
# control: the same check sees libcrypto where it is linked the usual way (latchd)
if readelf -d "$LTS_TOP/build/latchd" | grep -q 'NEEDED.*\[libcrypto[.-]'; then ok "control: latchd needs libcrypto at exec"
else fail "control: latchd needs libcrypto at exec" "the check can't see NEEDED entries"; fi

# Invariant: a command that calls none of them loads none (latch run's start).
for lib in $LAZY; do
	if opened "$lib" "$LATCH_BIN" help run; then fail "latch help run loads no lib$lib" "it was loaded"
	else ok "latch help run loads no lib$lib"; fi
done
# ...and a command that calls one loads it, and works.
if opened cyaml "$LATCH_BIN" kits && opened yaml "$LATCH_BIN" kits; then ok "latch kits loads libcyaml and libyaml"
else fail "latch kits loads libcyaml and libyaml" "not loaded"; fi
check "latch kit check works through the stubs" "$LATCH_BIN" kit check "$LTS_TOP/kit/kits/claude.yaml"
# a log to verify: a room's run is audited (latch writes it when latchd does not run)
[ "$(id -u)" = 0 ] && mkdir -p "$LATCH_BPFFS" && "$LATCH_BIN" run -- /bin/true >/dev/null 2>&1
if opened sqlite3 "$LATCH_BIN" audit verify && opened crypto "$LATCH_BIN" audit verify; then
	ok "latch audit verify loads libsqlite3 and libcrypto"
else fail "latch audit verify loads libsqlite3 and libcrypto" "not loaded"; fi
check "latch audit verify works through the stubs" "$LATCH_BIN" audit verify
lts_done
