#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# run.sh - run the root selftests and add up their results.
#
#   bash selftests/run.sh [NAME...]     NAME: live_reach, prog_table, ... (default: all)
#
# Builds what they run first (make selftest-bins), then runs
# build/selftests/prog_table (if built), every selftests/live_*.sh and
# every selftests/vm_*.sh (real guests under libvirt), one after another (the
# live tests measure time and rates), each under a time limit: LTS_LIMIT
# seconds (default 150), LTS_VM_LIMIT (default 420) for the guest tests.
# Before the first guest test the default guest image is brought up to date
# once (`make image`: a no-op when its cache under /var/lib/latch/images is
# current); if that fails the guest tests still run, and fail or skip.
# Each prints "ok ..."/"FAIL ..." lines and ends with "N passed, M failed"
# (and "K skipped"); exit 77 means the whole test was
# skipped.  The last line here is "N passed, M failed" with ", K skipped"
# appended when something was skipped; the exit status is 1 if anything
# failed.
set -u
cd "$(dirname "$0")/.." || exit 1

LIMIT=${LTS_LIMIT:-150} # seconds per test program
VM_LIMIT=${LTS_VM_LIMIT:-420} # seconds per guest test (TCG boots, several execs)
image_done=0
passed=0
failed=0
skipped=0
summary=()

# latch, latchd and the test programs (drivers, packet tables): current, or the tests that need them skip
make --no-print-directory selftest-bins >/dev/null 2>/tmp/latch-selftest-make.$$ ||
	echo "# make selftest-bins failed: $(tail -n1 /tmp/latch-selftest-make.$$)"
rm -f /tmp/latch-selftest-make.$$

tests=()
[ -x build/selftests/prog_table ] && tests+=(build/selftests/prog_table)
[ -x build/selftests/policy_api ] && tests+=(build/selftests/policy_api)
[ -x build/selftests/room_cg ] && tests+=(build/selftests/room_cg)
for t in selftests/live_*.sh selftests/vm_*.sh; do
	[ -e "$t" ] && tests+=("$t")
done
if [ $# -gt 0 ]; then
	want=("$@")
	sel=()
	for t in "${tests[@]}"; do
		b=${t##*/}
		b=${b%.sh}
		for w in "${want[@]}"; do
			[ "$b" = "${w%.sh}" ] && sel+=("$t")
		done
	done
	tests=("${sel[@]}")
fi

# vm_leftovers BEFORE: a guest test killed by the time limit may not have run
# its own cleanup; destroy the sandboxes in the temp LATCH_ROOTs
# (/tmp/latch-vm*) that appeared while it ran, and remove them.  Only those,
# and only those whose test is gone (owner.pid): another run's guests, on
# this host at the same time, are left alone.
vm_leftovers() {
	local d sb
	for d in /tmp/latch-vm*; do
		[ -d "$d/root/var/lib/latch/sandboxes" ] || continue
		grep -qxF "$d" <<<"$1" && continue
		[ -f "$d/owner.pid" ] && kill -0 "$(cat "$d/owner.pid")" 2>/dev/null && continue
		for sb in "$d"/root/var/lib/latch/sandboxes/*; do
			[ -d "$sb" ] || continue
			echo "# destroying sandbox ${sb##*/}, left behind by a guest test that was killed"
			LATCH_ROOT=$d/root LATCH_BPFFS=/sys/fs/bpf/latch-vmtest-leftover build/latch destroy "${sb##*/}" \
				>/dev/null 2>&1
		done
		rm -rf "$d"
	done
	rm -rf /sys/fs/bpf/latch-vmtest-leftover
}

for t in "${tests[@]}"; do
	name=${t##*/}
	name=${name%.sh}
	echo "=== $name"
	out=$(mktemp /tmp/latch-selftest-run.XXXXXX)
	limit=$LIMIT
	if [[ "$name" == vm_* ]]; then
		limit=$VM_LIMIT
		if [ "$image_done" = 0 ]; then
			image_done=1
			make --no-print-directory image >/dev/null 2>"$out.img" ||
				echo "# make image failed: $(tail -n1 "$out.img")"
			rm -f "$out.img"
		fi
	fi
	before=$(ls -d /tmp/latch-vm* 2>/dev/null || true)
	start=$SECONDS
	if [[ "$t" == *.sh ]]; then
		timeout -k 10 "$limit" bash "$t" 2>&1 | tee "$out"
	else
		timeout -k 10 "$limit" "$t" 2>&1 | tee "$out"
	fi
	rc=${PIPESTATUS[0]}
	secs=$((SECONDS - start))
	p=0 f=0 s=0
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
	if [ -n "$line" ]; then
		p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
		f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
	fi
	sline=$(grep -E '^[0-9]+ skipped$' "$out" | tail -1)
	[ -n "$sline" ] && s=${sline%% *}
	if [ "$rc" = 77 ]; then
		s=$((s + 1))
		note="skipped"
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		f=$((f + 1))
		note="TIMED OUT after ${limit}s"
		[[ "$name" == vm_* ]] && vm_leftovers "$before"
	elif [ -z "$line" ]; then
		f=$((f + 1))
		note="exit $rc with no result line"
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1
		note="exit $rc"
	else
		note="exit $rc"
	fi
	rm -f "$out"
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	summary+=("$(printf '%-16s %4d passed %4d failed %4d skipped  %3ds  %s' "$name" "$p" "$f" "$s" "$secs" "$note")")
done

# A test killed outright (timeout -k) could not run its own cleanup: remove
# what a dead test process left behind (namespaces lts-[ghi]-PID, their
# processes, and /sys/fs/bpf/latch-selftest-PID).
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^lts-[ghi]-[0-9]+$'); do
	kill -0 "${ns##*-}" 2>/dev/null && continue
	echo "# removing $ns, left behind by a test that was killed"
	for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	ip netns del "$ns"
done
for d in /sys/fs/bpf/latch-selftest-*; do
	[ -d "$d" ] || continue
	kill -0 "${d##*-}" 2>/dev/null && continue
	echo "# removing $d, left behind by a test that was killed"
	rm -rf "$d"
done

echo "==="
for l in "${summary[@]}"; do echo "$l"; done
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
