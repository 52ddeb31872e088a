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
# seconds (default 150), LTS_VM_LIMIT (default 420) for the guest tests, or
# more where a test's header says '# lts-limit: SECONDS'.
# Before the first guest test the default guest image is brought up to date
# once (`make image`: a no-op when its cache under /var/lib/latch/images is
# current); if that fails the guest tests still run, and fail or skip.
# Each script prints KTAP (selftests/lib.sh: "ok N name", "not ok N name",
# a trailing plan "1..N" and "# Totals: pass:P fail:F ... skip:S ..."); the
# compiled programs print "ok ..."/"FAIL ..." lines and "N passed, M failed".
# A script whose plan does not match its result lines failed (it died
# half-way, or printed a stray result).  Exit 77 means the whole test was
# skipped; under CI=true a guest test (vm_*) that skips fails the run, unless
# its skip is a host feature it tests ("1..0 # SKIP feature: ...", lib_vm.sh's
# skip_feature): a CI host without libvirt or a guest image must not go green.
# The last line here is "N passed, M failed" with ", K skipped" appended when
# something was skipped; the exit status is 1 if anything failed.
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

# vm_leftovers [BEFORE]: a guest test killed by the time limit (or a run cut
# short, as a machine that restarts mid-test cuts it) may not have run its own
# cleanup.  For each temp LATCH_ROOT (/tmp/latch-vm-NAME.XXXXXX) not listed in
# BEFORE whose test is gone (owner.pid): destroy its sandboxes, then remove
# its bpffs root, its cgroups and its control namespace, all named after the
# test and its pid (lib_vm.sh's vm_scratch and vm_ctrl_net).  A live test's,
# another run's on this host at the same time, is left alone.  Called after a
# guest test timed out, and once before the first test for what an earlier
# run left.
# test_alive PID: the process runs (a zombie, not yet reaped, is gone)
test_alive() {
	kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

vm_leftovers() {
	local d sb pid name ns bpffs cg left p
	for d in /tmp/latch-vm-*; do
		[ -d "$d" ] || continue
		grep -qxF "$d" <<<"${1:-}" && continue
		pid=$(cat "$d/owner.pid" 2>/dev/null || true)
		[ -n "$pid" ] && test_alive "$pid" && continue
		name=${d#/tmp/latch-vm-}
		name=${name%.*}
		bpffs=/sys/fs/bpf/latch-vm-$name-${pid:-none}
		left=0
		for sb in "$d"/root/var/lib/latch/sandboxes/*; do
			[ -d "$sb" ] || continue
			echo "# destroying sandbox ${sb##*/}, left behind by a guest test that did not finish (pid ${pid:-?})"
			LATCH_ROOT=$d/root LATCH_BPFFS=$bpffs LATCH_CGROUP=latch-vm-$name-${pid:-none} \
				build/latch destroy --purge "${sb##*/}" >/dev/null 2>&1 || left=1
		done
		if [ "$left" = 1 ]; then
			echo "# could not destroy all of $d's sandboxes (is libvirtd running?); kept for the next run"
			continue
		fi
		if [ -n "$pid" ]; then
			for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^ltctl-.*-$pid\$"); do
				p=$(ip netns pids "$ns" 2>/dev/null)
				[ -n "$p" ] && kill -9 $p 2>/dev/null # the gone test's servers in its own namespace
				ip netns del "$ns" 2>/dev/null
			done
			for cg in /sys/fs/cgroup/*/latch-vm-$name-$pid /sys/fs/cgroup/latch-vm-$name-$pid; do
				[ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
			done
			rm -rf "$bpffs"
		fi
		rm -rf "$d"
	done
	# cgroups of guest tests whose process is gone, with or without a temp root
	for cg in /sys/fs/cgroup/*/latch-vm-*-* /sys/fs/cgroup/latch-vm-*-*; do
		[ -d "$cg" ] || continue
		pid=${cg##*-}
		[[ "$pid" =~ ^[0-9]+$ ]] || continue
		test_alive "$pid" && continue
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	# vm_ctrl_net's rules (pref 10100) whose table lost its routes with a gone test's veth:
	# left in place, the next run's identical rule would fail with "File exists"
	local fam rule table
	for fam in -4 -6; do
		ip "$fam" rule list pref 10100 2>/dev/null | while read -r rule; do
			table=$(sed -n 's/.* lookup \([0-9]*\).*/\1/p' <<<"$rule")
			[ -n "$table" ] && [ -z "$(ip "$fam" route show table "$table" 2>/dev/null)" ] || continue
			ip "$fam" rule del pref 10100 table "$table" to "$(sed -n 's/.* to \([^ ]*\) .*/\1/p' <<<"$rule")" 2>/dev/null
		done
	done
}

vm_leftovers ""

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
	# a test that needs longer says so in its header ('# lts-limit: SECONDS'); LTS_LIMIT may give more
	own=$(sed -n '1,40s/^# lts-limit: \([0-9][0-9]*\).*/\1/p' "$t" 2>/dev/null | head -n 1)
	[ -n "$own" ] && [ "$own" -gt "$limit" ] && limit=$own
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
	plan_note=
	line=$(grep -E '^# Totals: pass:[0-9]+ fail:[0-9]+ ' "$out" | tail -1)
	if [ -n "$line" ]; then # KTAP
		p=$(sed -E 's/.* pass:([0-9]+) .*/\1/' <<<"$line")
		f=$(sed -E 's/.* fail:([0-9]+) .*/\1/' <<<"$line")
		s=$(sed -E 's/.* skip:([0-9]+).*/\1/' <<<"$line")
		plan=$(grep -E '^1\.\.[0-9]+$' "$out" | tail -1)
		results=$(grep -cE '^(not )?ok [0-9]+ ' "$out")
		[ "${plan#1..}" = "$results" ] && [ "$results" = $((p + f + s)) ] ||
			plan_note="plan '${plan:-none}' but $results result lines"
	elif grep -q '^KTAP version 1$' "$out"; then # a script cut short: its results so far
		p=$(grep -E '^ok [0-9]+ ' "$out" | grep -vc ' # SKIP')
		s=$(grep -E '^ok [0-9]+ ' "$out" | grep -c ' # SKIP')
		f=$(grep -cE '^not ok [0-9]+ ' "$out")
	else # the compiled programs
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
		if [ -n "$line" ]; then
			p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
			f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
		fi
		sline=$(grep -E '^[0-9]+ skipped$' "$out" | tail -1)
		[ -n "$sline" ] && s=${sline%% *}
	fi
	why=$(grep -E '^1\.\.0 # SKIP ' "$out" | tail -1)
	if [ "$rc" = 77 ] && [ "${CI:-}" = true ] && [[ "$name" == vm_* ]] && [[ "$why" != *"# SKIP feature: "* ]]; then
		f=$((f + 1))
		note="skipped, and CI=true: a guest test must run (${why#1..0 # SKIP })"
	elif [ "$rc" = 77 ]; then
		s=$((s + 1))
		note="skipped"
	elif [ -n "$plan_note" ]; then
		f=$((f + 1))
		note="exit $rc, $plan_note"
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
