#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# live_install.sh - latch installs and leaves like a system tool, on a tree
# under a DESTDIR of this test's own: make install, the installed latch's
# --version, --help and doctor, the man pages and the completion, the units
# (systemd-analyze verify), `boot install` from the installed latch into a
# LATCH_ROOT with no hooks directory (the build tree's latch refused, and a
# latch without latchd beside it), `boot uninstall` (exactly what install
# wrote; others' files stay),
# latch.conf as a conffile (never overwritten, kept when edited), and make
# uninstall leaving no file behind.  Prints KTAP (selftests/lib.sh's results).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
# shellcheck source=selftests/lib.sh
. "$HERE/lib.sh"
[ "$(id -u)" = 0 ] || lts_skip_all "needs root"
command -v go-md2man >/dev/null || lts_skip_all "needs go-md2man (make deps)"

T=$(mktemp -d /tmp/latch-install.XXXXXX)
LTS_TMP=$T # where check keeps a failing command's output (removed by cleanup)
chmod 0755 "$T"
# doctor loads and pins the room programs and makes latch's cgroups: under names of this test's own
export LATCH_BPFFS=/sys/fs/bpf/latch-selftest-install-$$ LATCH_CGROUP=latch-selftest-install-$$
cleanup() {
	local root
	rm -rf "$T" "$LATCH_BPFFS"
	for root in $(awk '$3 == "cgroup2" || $3 == "cgroup" {print $2}' /proc/mounts); do
		[ -d "$root/$LATCH_CGROUP" ] && find "$root/$LATCH_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}
trap cleanup EXIT
D=$T/dest
M() { make --no-print-directory -C "$TOP" "$@" DESTDIR="$D" PREFIX=/usr >"$T/make.out" 2>&1; }

check "make install into a DESTDIR" M install
L=$D/usr/sbin/latch
check_eq "installed latch --version is the build's" "$("$L" --version)" "$("$TOP/build/latch" --version)"
check "installed latch --help" bash -c "'$L' --help | grep -q '^usage: latch'"
rc=0; LATCH_ROOT=$T/root "$L" --json doctor >"$T/doctor.json" 2>/dev/null || rc=$?
check "installed latch doctor runs (exit 0 or 1, one JSON document)" bash -c "[ $rc -le 1 ] && jq -e '.checks | length > 5' '$T/doctor.json' >/dev/null"
check "latchd beside latch" test -x "$D/usr/sbin/latchd"
check_eq "latch-cni beside latch, linked where runtimes look for CNI plugins" \
	"$(readlink "$D/opt/cni/bin/latch-cni")" /usr/sbin/latch-cni
check "the installed latch-cni answers VERSION" bash -c "echo '{\"cniVersion\":\"1.0.0\"}' | CNI_COMMAND=VERSION '$D/usr/sbin/latch-cni' | jq -e '.supportedVersions | index(\"1.0.0\")' >/dev/null"
check "image recipes and guest programs in lib/latch" bash -c "[ -x '$D/usr/lib/latch/image.sh' ] && [ -x '$D/usr/lib/latch/latch-agent' ] && [ -f '$D/usr/lib/latch/lib.sh' ]"
# Invariant: the installed image recipes put every guest program into the image; without latch-ask
# a guest can't ask for a grant.  Asked the way image.sh asks (lib.sh's image_args and guest_tool),
# from the installed lib.sh, with no LATCH_* override; the agent and latch-rawsend are the control.
picked=$(cd / && env -u LATCH_AGENT -u LATCH_RAWSEND -u LATCH_ASK bash -c '. "$1/lib.sh"; image_args /nonexistent
	echo "agent=$AGENT rawsend=$(guest_tool latch-rawsend LATCH_RAWSEND) ask=$(guest_tool latch-ask LATCH_ASK)"' _ "$D/usr/lib/latch" 2>&1)
I=$D/usr/lib/latch
check_eq "control: the installed recipes pick the installed agent and latch-rawsend" "${picked% ask=*}" \
	"agent=$I/latch-agent rawsend=$I/latch-rawsend"
check_eq "the installed recipes pick the installed latch-ask" "${picked##* }" "ask=$I/latch-ask"
check "latch-ask is installed static, as the initramfs needs" bash -c "[ -x '$I/latch-ask' ] && ! readelf -l '$I/latch-ask' | grep -q INTERP"
for p in man8/latch.8 man8/latchd.8 man8/latch-cni.8 man5/latch.conf.5 man5/latch-profile.5 man5/latch-kit.5; do
	check "man page $p renders" bash -c "man -l '$D/usr/share/man/$p.gz' 2>/dev/null | grep -q '^NAME'"
done
check "bash completion installed" bash -c "source '$D/usr/share/bash-completion/completions/latch'; COMP_WORDS=(latch sta); COMP_CWORD=1; _latch; [ \"\${COMPREPLY[*]}\" = status ]"
check "tmpfiles.d makes /run/latch 0700" grep -q '^d /run/latch 0700 root root' "$D/usr/lib/tmpfiles.d/latch.conf"
# the units, as installed, with the binary they name made to exist for the check
mkdir -p "$T/units"
for u in latch-boot latchd; do sed "s|/usr/sbin/|$D/usr/sbin/|" "$D/usr/lib/systemd/system/$u.service" >"$T/units/$u.service"; done
check "units pass systemd-analyze verify" bash -c "cd '$T/units' && systemd-analyze verify --man=no ./latch-boot.service ./latchd.service 2>&1 | tee '$T/verify.out' | grep -q . && false || true"
[ -s "$T/verify.out" ] && sed 's/^/#   /' "$T/verify.out"
for u in latch-boot latchd; do
	echo "#   $(cd "$T/units" && systemd-analyze security --offline=yes --no-pager "./$u.service" 2>&1 | tail -1)"
done
# Invariant: a fresh install starts: a ReadWritePaths= that names a missing path fails the unit
# (226/NAMESPACE), so the units name only the kernel's own mounts there, with "-" (a container's
# /sys may lack /sys/fs/bpf: latch then says what is missing), and /run/latch and
# /var/lib/latch, which a fresh host lacks, come from RuntimeDirectory=/StateDirectory=.
for u in latch-boot latchd; do
	rw=$(sed -n 's/^ReadWritePaths=//p' "$T/units/$u.service" | tr ' ' '\n' | grep -v '^-/sys/' | tr '\n' ' ')
	check_eq "$u.service: ReadWritePaths= names only /sys mounts, each optional (-)" "${rw:-none}" none
	check "$u.service: systemd makes /run/latch (0700) and /var/lib/latch" bash -c \
		"grep -qx RuntimeDirectory=latch '$T/units/$u.service' && grep -qx RuntimeDirectoryMode=0700 '$T/units/$u.service' && grep -qx StateDirectory=latch '$T/units/$u.service'"
done
# The same, under systemd: the host's /usr booted by systemd-nspawn on an empty root (--volatile=yes:
# no /run/latch, no /var/lib/latch, as on a fresh install), its own network namespace, the installed
# latch and latch-boot.service bound in; a probe unit writes what systemd saw and powers off.
# (latchd.service waits for network-online.target, which a container without network never reaches;
# its directories come from the same lines.)  Skipped where nspawn is missing.
boot_fresh() { # UNIT_FILE: latch-boot's status line and the directories, into $T/nsp/out/status
	local n=$T/nsp
	rm -rf "$n" && mkdir -p "$n/out" "$n/sbin" && cp "$D/usr/sbin/latch" "$n/sbin/"
	sed "s|$D/usr/sbin/|/opt/latch/sbin/|" "$1" >"$n/latch-boot.service"
	cat >"$n/probe.service" <<-'EOF'
		[Unit]
		After=latch-boot.service
		[Service]
		Type=oneshot
		ExecStart=/bin/sh -c 'echo "latch-boot: $(systemctl is-active latch-boot) $(systemctl show -p ExecMainStatus --value latch-boot)" >/out/status; ls -ld /run/latch /var/lib/latch >>/out/status 2>&1; systemctl poweroff'
	EOF
	timeout 120 systemd-nspawn --quiet --volatile=yes -D / --machine="latch-install-$$" --register=no --keep-unit \
		--private-network --capability=all --bind-ro="$n/sbin:/opt/latch/sbin" --bind="$n/out:/out" \
		--bind-ro="$n/latch-boot.service:/etc/systemd/system/latch-boot.service" \
		--bind-ro="$n/probe.service:/etc/systemd/system/probe.service" \
		--boot systemd.firstboot=off systemd.unit=multi-user.target systemd.wants=latch-boot.service \
		systemd.wants=probe.service >"$n/boot.log" 2>&1
}
if command -v systemd-nspawn >/dev/null; then
	boot_fresh "$T/units/latch-boot.service"
	check_eq "under systemd on a fresh root: latch-boot.service starts" "$(head -1 "$T/nsp/out/status" 2>/dev/null)" "latch-boot: active 0"
	check "... and systemd made /run/latch 0700 and /var/lib/latch" bash -c \
		"grep -q '^drwx------ .* /run/latch$' '$T/nsp/out/status' && grep -q '^d.* /var/lib/latch$' '$T/nsp/out/status'"
	# control: the same unit with the directories in ReadWritePaths= fails as a fresh host saw it
	sed -e 's|^ReadWritePaths=-/sys/fs/bpf$|ReadWritePaths=-/sys/fs/bpf /run/latch /var/lib/latch|' \
		-e '/^RuntimeDirectory\|^StateDirectory/d' "$T/units/latch-boot.service" >"$T/old-boot.service"
	boot_fresh "$T/old-boot.service"
	check_eq "control: with ReadWritePaths=/run/latch /var/lib/latch it fails 226/NAMESPACE" \
		"$(head -1 "$T/nsp/out/status" 2>/dev/null)" "latch-boot: failed 226"
else
	echo "# skip: no systemd-nspawn; the units were not started under systemd"
fi
# latchd: its version, a reload that fails when latchd would refuse the config, journal priorities
v=$("$TOP/build/latch" --version)
check_eq "installed latchd --version is the build's latch's" "$("$D/usr/sbin/latchd" --version)" "latchd ${v#latch }"
check_eq "latchd.service reloads through latchd --reload (the running latchd's verdict)" \
	"$(sed -n 's/^ExecReload=//p' "$T/units/latchd.service" | tr '\n' ' ')" "$D/usr/sbin/latchd --reload "
mkdir -p "$T/conf/etc/latch"
echo "dns_upstream = 192.0.2.53" >"$T/conf/etc/latch/latch.conf"
check "control: latchd --check passes a good latch.conf (exit 0)" bash -c "LATCH_ROOT='$T/conf' '$D/usr/sbin/latchd' --check >/dev/null"
echo "dns_upstream = not-an-address" >>"$T/conf/etc/latch/latch.conf"
rc=0; LATCH_ROOT=$T/conf "$D/usr/sbin/latchd" --check 2>"$T/check.err" >/dev/null || rc=$?
check_eq "latchd --check refuses a latch.conf latchd would refuse (exit 1)" "$rc" 1
check "... naming the file and line" grep -qF "$T/conf/etc/latch/latch.conf:2:" "$T/check.err"
check "... as 'latchd: ...' on a terminal or file" grep -q "^latchd: $T/conf" "$T/check.err"
# under systemd stderr is the journal's stream (JOURNAL_STREAM=DEV:INO of it): the error carries
# "<3>" (LOG_ERR, SyslogLevelPrefix) and no "latchd: " of its own, which the journal adds
: >"$T/journal.err"
LATCH_ROOT=$T/conf JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal.err") "$D/usr/sbin/latchd" --check 2>>"$T/journal.err" >/dev/null
check "under the journal: the error is priority 3 with no doubled prefix" grep -q "^<3>$T/conf/etc/latch/latch.conf:2:" "$T/journal.err"
check "latchd.service is Type=notify with a watchdog" bash -c "grep -qx Type=notify '$T/units/latchd.service' && grep -q '^WatchdogSec=' '$T/units/latchd.service'"

# --- boot install: from the installed latch only, into a root without hooks/ --------
R=$T/root
check "no hooks directory beforehand" test ! -e "$R/etc/libvirt/hooks"
rc=0; LATCH_ROOT=$R "$TOP/build/latch" boot install >"$T/bi.out" 2>&1 || rc=$?
check "the build tree's latch is refused by boot install" bash -c "[ $rc = 1 ] && grep -q 'build tree' '$T/bi.out'"
check "... and wrote nothing" test ! -e "$R/etc/libvirt/hooks/qemu.d/latch"
rc=0; out=$(LATCH_ROOT=$R "$L" boot install 2>&1) || rc=$?
check "the installed latch's boot install works (exit 0)" test "$rc" = 0
LATCH_ROOT=$R "$L" --json boot install | jq -r '.wrote[]' | sort >"$T/wrote.list"
H=$R/etc/libvirt/hooks/qemu.d/latch
check "the hook is in qemu.d (made when missing), executable" test -x "$H"
check "the hook calls the installed latch" grep -qF "exec '$L' boot hook" "$H"
check "no single-file hook (others' hooks untouched)" test ! -e "$R/etc/libvirt/hooks/qemu"
check "the boot unit is enabled before libvirtd" test -L "$R/etc/systemd/system/libvirtd.service.wants/latch-boot.service"
# the hook decides without latch for a domain that is not latch's
check "hook: another domain passes without latch" bash -c "echo '<domain/>' | env -i /bin/sh '$H' other-vm prepare begin -"
check "hook: a domain with latch's metadata under another name is refused" bash -c "! echo \"<domain><metadata><x xmlns='https://latch.invalid/1'/></metadata></domain>\" | env -i /bin/sh '$H' other-vm prepare begin - 2>/dev/null"
rc=0; echo '<domain/>' | env -i /bin/sh "$H" latch-nosuch prepare begin - 2>"$T/hook.err" || rc=$?
check "hook: a latch domain with no state is refused by latch" bash -c "[ $rc != 0 ] && grep -q 'refusing to start latch-nosuch' '$T/hook.err'"

# Invariant: boot install enables latchd.service only with the latchd it runs there: a latch
# without latchd beside it is refused and writes nothing (control: the installed pair above).
mkdir -p "$T/lonely/sbin" && cp "$L" "$T/lonely/sbin/latch"
rc=0; LATCH_ROOT=$T/root2 "$T/lonely/sbin/latch" boot install >"$T/lonely.out" 2>&1 || rc=$?
check "boot install without latchd beside latch: refused (exit 1)" test "$rc" = 1
check "... naming the missing latchd" grep -qF "$T/lonely/sbin/latchd is not there" "$T/lonely.out"
check "... and wrote nothing" test ! -e "$T/root2"

# Invariant: boot uninstall removes exactly what boot install wrote and leaves others' files alone:
# an admin's own hook and wants link beside latch's, and a file of theirs at the hook's path.
mkdir -p "$R/etc/libvirt/hooks/qemu.d" "$R/etc/systemd/system/multi-user.target.wants"
printf '#!/bin/sh\nexit 0\n' >"$R/etc/libvirt/hooks/qemu.d/admin" && chmod 0755 "$R/etc/libvirt/hooks/qemu.d/admin"
ln -sf /lib/systemd/system/ssh.service "$R/etc/systemd/system/multi-user.target.wants/ssh.service"
(cd "$R" && find . \( -type f -o -type l \) | sort) >"$T/before-uninstall.list"
rc=0; LATCH_ROOT=$R "$L" --json boot uninstall >"$T/bu.json" 2>&1 || rc=$?
check_eq "boot uninstall (exit 0)" "$rc" 0
check_eq "boot uninstall removed exactly what boot install wrote" "$(jq -r '.removed[]' "$T/bu.json" | sort)" "$(cat "$T/wrote.list")"
check "... and each is gone" bash -c "! xargs -r ls -d <'$T/wrote.list' 2>/dev/null | grep -q ."
check_eq "... the rest of the root is as it was (others' hook and link stay)" \
	"$(cd "$R" && find . \( -type f -o -type l \) | sort)" "$(grep -vxF -f <(sed "s|^$R|.|" "$T/wrote.list") "$T/before-uninstall.list")"
check "... the admin's hook is still there" test -x "$R/etc/libvirt/hooks/qemu.d/admin"
LATCH_ROOT=$R "$L" boot install >/dev/null 2>&1
printf '#!/bin/sh\n# the admin'"'"'s own hook, named latch\nexit 0\n' >"$R/etc/libvirt/hooks/qemu.d/latch"
rc=0; out=$(LATCH_ROOT=$R "$L" boot uninstall 2>&1) || rc=$?
check "a hook at latch's path that latch did not write is kept, and said so" \
	bash -c "[ $rc = 0 ] && grep -q 'kept .*qemu.d/latch: not written by latch' <<<\"\$1\" && grep -q 'admin' '$R/etc/libvirt/hooks/qemu.d/latch'" _ "$out"
check "control: the units and links it wrote went all the same" \
	bash -c "! find '$R/etc/systemd/system' -name 'latch*' | grep -q ."

# --- the conffile and uninstall ----------------------------------------------------------
# make uninstall takes what boot install wrote too (here into the DESTDIR, as LATCH_ROOT)
LATCH_ROOT=$D "$L" boot install >"$T/bi-dest.out" 2>&1
check "boot install into the DESTDIR wrote the hook" test -x "$D/etc/libvirt/hooks/qemu.d/latch"
check "make uninstall" M uninstall
left=$(find "$D" -type f -o -type l | head -5)
check_eq "nothing is left after uninstall" "${left:-nothing}" nothing
M install
echo "uplink = lo" >>"$D/etc/latch/latch.conf"
M install
check "a second install keeps the edited latch.conf" grep -q "^uplink = lo" "$D/etc/latch/latch.conf"
M uninstall
check "uninstall keeps an edited latch.conf, and says so" bash -c "[ -f '$D/etc/latch/latch.conf' ] && grep -q 'kept .*latch.conf: it was edited' '$T/make.out'"
left=$(find "$D" \( -type f -o -type l \) ! -path "$D/etc/latch/latch.conf" | head -5)
check_eq "... and everything else goes" "${left:-nothing}" nothing

lts_done
