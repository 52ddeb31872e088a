// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_doctor.c - `latch doctor`: is this host able to enforce?
 *
 * Every check is a probe of the real thing (load the programs, attach them to
 * a link in a throwaway netns, connect to libvirt), never a guess from
 * version numbers: libvirt is timed, /dev/kvm is opened as libvirt's qemu
 * user.  Each failure comes with the command that fixes it.
 * latchd is asked over its socket; without it the boundary holds, so it is a
 * warning, not a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "config/config.h"
#include "cli/cli.h"
#include "loader/loader.h"
#include "room/room.h"
#include "sandbox/sandbox.h"
#include "vm/vm.h"

enum level { OK, WARN, FAIL };

struct check {
	const char *name;
	enum level level;
	char detail[640];
	char fix[256];
};

static void set(struct check *c, enum level l, const char *detail, const char *fix)
{
	c->level = l;
	snprintf(c->detail, sizeof(c->detail), "%s", detail);
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
}

static void check_btf(struct check *c)
{
	c->name = "kernel BTF";
	if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
		set(c, OK, "/sys/kernel/btf/vmlinux is readable", NULL);
	else
		set(c, FAIL, "/sys/kernel/btf/vmlinux is missing",
		    "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's 5.10+ kernels are)");
}

static void check_bpffs(struct check *c)
{
	struct statfs st;
	char d[512];

	c->name = "bpffs";
	if (statfs(latch_bpffs_root(), &st) == 0 && st.f_type == BPF_FS_MAGIC) {
		snprintf(d, sizeof(d), "mounted at %s", latch_bpffs_root());
		set(c, OK, d, NULL);
	} else {
		snprintf(d, sizeof(d), "not mounted at %s (latch mounts it on the first attach)", latch_bpffs_root());
		set(c, WARN, d, "mount -t bpf bpf " LATCH_BPFFS_DEFAULT);
	}
}

/* `ip netns exec` gives latch a /sys (and bpffs) of its own that vanish with it */
static void check_host_view(struct check *c)
{
	char why[LATCH_ERR_MAX];

	c->name = "host mounts";
	if (latch_host_view_check(why, sizeof(why)))
		set(c, FAIL, why, "nsenter --net=/run/netns/NAME latch ... (not ip netns exec)");
	else
		set(c, OK, "/sys and the bpffs root are the host's", NULL);
}

static void check_caps(struct check *c)
{
	cap_t caps = cap_get_proc();
	cap_flag_value_t bpf = CAP_CLEAR, net = CAP_CLEAR, sys = CAP_CLEAR;

	c->name = "capabilities";
	if (caps) {
		cap_get_flag(caps, CAP_BPF, CAP_EFFECTIVE, &bpf);
		cap_get_flag(caps, CAP_NET_ADMIN, CAP_EFFECTIVE, &net);
		cap_get_flag(caps, CAP_SYS_ADMIN, CAP_EFFECTIVE, &sys);
		cap_free(caps);
	}
	if ((bpf == CAP_SET || sys == CAP_SET) && net == CAP_SET)
		set(c, OK, "CAP_BPF and CAP_NET_ADMIN are effective", NULL);
	else
		set(c, FAIL, "CAP_BPF or CAP_NET_ADMIN missing", "run latch as root (sudo latch ...)");
}

/*
 * Load latch's programs and attach them, in the mode new sandboxes get, to lo
 * of a throwaway network namespace (loader/probe.c does it in a child).
 */
static void check_load_and_attach(struct check *load, struct check *mode, struct check *att)
{
	char detail[LATCH_ERR_MAX + 64], why[LATCH_ERR_MAX];
	enum latch_tc_mode m;
	bool loaded;

	load->name = "BPF programs load";
	mode->name = "tc attach mode";
	att->name = "tc attach";
	if (latch_tc_mode_choose(&m, why, sizeof(why))) {
		set(mode, FAIL, why, "unset LATCH_TC_MODE, or set it to tcx, clsact or auto");
		m = LATCH_TC_CLSACT;
	} else if (m == LATCH_TC_TCX) {
		set(mode, OK, "tcx: links pinned in bpffs, run before any clsact filter (kernel 6.6+)", NULL);
	} else {
		snprintf(detail, sizeof(detail), "clsact: cls_bpf filters (%s)",
			 latch_tcx_supported() ? "forced by LATCH_TC_MODE=clsact" : "this kernel has no TCX");
		set(mode, OK, detail, NULL);
	}
	if (latch_tc_probe(m, &loaded, why, sizeof(why)) == 0) {
		set(att, OK, why, NULL);
	} else {
		snprintf(detail, sizeof(detail), "%s: %s", latch_tc_mode_name(m), why);
		set(att, loaded ? FAIL : WARN, loaded ? detail : "not probed: the programs did not load",
		    m == LATCH_TC_TCX ? "LATCH_TC_MODE=clsact uses clsact filters instead" :
					"load the sch_ingress and cls_bpf modules (modprobe sch_ingress cls_bpf)");
	}
	if (!loaded)
		set(load, FAIL, "the kernel refused latch's programs",
		    "run `latch -v doctor` for the verifier log; a 5.15+ kernel with BTF is needed");
	else if (latch_csum_check_supported())
		set(load, OK, "the verifier accepted latch_from_guest and latch_to_guest", NULL);
	else
		set(load, WARN,
		    "loaded without the checksum-offload check: this kernel lacks bpf_cast_to_kern_ctx (6.2+)",
		    "a 6.2+ kernel; until then see docs/INVARIANTS.md on checksum offload");
}

static void check_cgroup2(struct check *c)
{
	FILE *f = fopen("/proc/mounts", "r");
	char dev[256], mnt[512], type[64], line[1024], d[600];
	bool found = false;

	c->name = "cgroup v2";
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %511s %63s", dev, mnt, type) == 3 && !strcmp(type, "cgroup2")) {
			found = true;
			break;
		}
	}
	if (f)
		fclose(f);
	if (found) {
		snprintf(d, sizeof(d), "mounted at %s", mnt);
		set(c, OK, d, NULL);
	} else {
		set(c, FAIL, "no cgroup2 mount in /proc/mounts (rooms need it)",
		    "mount -t cgroup2 none /sys/fs/cgroup/unified");
	}
}

#define KVM_FIX "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm (what Debian's udev rule does; `make deps` does it)"

/*
 * libvirtd answers, and answers quickly: a capabilities call that takes
 * seconds means it re-probes QEMU on every call, and a guest then starts
 * about a minute late.
 */
static void check_libvirt(struct check *c, const struct latch_vm_kvm *k)
{
	char d[LATCH_ERR_MAX + 64], why[LATCH_ERR_MAX];
	struct latch_vm_libvirt_probe p;

	c->name = "libvirt";
	if (latch_vm_libvirt_probe(&p, why, sizeof(why))) {
		snprintf(d, sizeof(d), "%s (VM sandboxes need it)", why);
		set(c, FAIL, d, "apt-get install libvirt-daemon-system; virtlogd -d; libvirtd -d");
		return;
	}
	snprintf(d, sizeof(d), "qemu:///system answers (libvirt %lu.%lu.%lu): connect %lld ms, capabilities %lld ms%s",
		 p.version / 1000000, p.version / 1000 % 1000, p.version % 1000, (long long)p.connect_ms,
		 (long long)p.caps_ms,
		 p.caps_first_ms > LATCH_VM_CAPS_SLOW_MS && p.caps_ms <= LATCH_VM_CAPS_SLOW_MS ?
			 " (the first call re-probed QEMU once)" :
			 "");
	if (p.caps_ms <= LATCH_VM_CAPS_SLOW_MS) {
		set(c, OK, d, NULL);
		return;
	}
	snprintf(d + strlen(d), sizeof(d) - strlen(d),
		 ": more than %d ms, so libvirtd re-probes QEMU on every call and a guest starts about a minute late",
		 LATCH_VM_CAPS_SLOW_MS);
	set(c, FAIL, d,
	    k->present && !k->qemu_user_opens ?
		    KVM_FIX :
		    "read libvirtd's log (virsh -c qemu:///system capabilities should be quick)");
}

static void check_kvm(struct check *c, const struct latch_vm_kvm *k)
{
	c->name = "KVM";
	if (!k->present)
		set(c, WARN, "no /dev/kvm: guests run under TCG (software emulation, slower)",
		    "enable virtualization in firmware and modprobe kvm_intel or kvm_amd");
	else if (!k->cpu_virt)
		set(c, WARN, "/dev/kvm exists but the CPU shows no vmx/svm: guests run under TCG",
		    "give this VM nested virtualization to use KVM");
	else if (!k->usable)
		set(c, WARN, k->why, "modprobe kvm_intel or kvm_amd");
	else
		set(c, OK, "/dev/kvm and vmx/svm present", NULL);
}

/* libvirt's qemu user must open /dev/kvm, or libvirtd re-probes QEMU on every call (KVM used or not). */
static void check_kvm_access(struct check *c, const struct latch_vm_kvm *k, int probe)
{
	char d[640];

	c->name = "/dev/kvm access";
	if (!k->present)
		set(c, OK, "no /dev/kvm: nothing for libvirt to re-probe", NULL);
	else if (!k->qemu_user_known)
		set(c, WARN, k->why, "apt-get install libvirt-daemon-system");
	else if (probe)
		set(c, WARN, "not checked: only root can open it as libvirt's qemu user", "run `sudo latch doctor`");
	else if (k->qemu_user_opens) {
		snprintf(d, sizeof(d), "libvirt's qemu user %s opens it (%s)", k->qemu_user, k->mode);
		set(c, OK, d, NULL);
	} else {
		snprintf(d, sizeof(d), "%s: libvirtd then re-probes QEMU on every call and guests start a minute late",
			 k->why);
		set(c, FAIL, d, KVM_FIX);
	}
}

/*
 * The uplink: where allowed traffic leaves.  Without one every sandbox's
 * table ends in `unreachable default`; with one it must exist, and replies
 * come back in on it, so IPv4 forwarding must be on there (latch turns it
 * on, guarded, while a sandbox uses it).
 */
static int count_cb(const char *name, void *arg)
{
	return 0;
}

static void check_uplink(struct check *c)
{
	char err[LATCH_ERR_MAX], d[640], path[128], fwd = '0';
	struct latch_conf conf;
	FILE *f;

	c->name = "uplink";
	if (latch_conf_load(&conf, err, sizeof(err))) {
		set(c, FAIL, err, "fix latch.conf at the line named");
		return;
	}
	if (!*conf.uplink) {
		set(c, WARN, "no uplink in latch.conf: sandboxes' allowed traffic has no route (`unreachable default`)",
		    "set `uplink = IFACE` (and `gateway = ADDR`) in /" LATCH_CONF_FILE);
		return;
	}
	if (!if_nametoindex(conf.uplink)) {
		snprintf(d, sizeof(d), "uplink %s (latch.conf) does not exist", conf.uplink);
		set(c, FAIL, d, "set `uplink` in /" LATCH_CONF_FILE " to an interface of `ip -br link`");
		return;
	}
	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/forwarding", conf.uplink);
	f = fopen(path, "re");
	if (f) {
		fwd = (char)fgetc(f);
		fclose(f);
	}
	if (fwd == '1') {
		snprintf(d, sizeof(d), "uplink %s exists, IPv4 forwarding on", conf.uplink);
		set(c, OK, d, NULL);
	} else if (latch_vm_list(count_cb, NULL) > 0) {
		snprintf(d, sizeof(d),
			 "uplink %s exists, but IPv4 forwarding is off on it: replies to the sandboxes' "
			 "allowed traffic are not forwarded back",
			 conf.uplink);
		set(c, FAIL, d, "latch boot apply (routes every sandbox again and turns forwarding on, guarded)");
	} else {
		snprintf(d, sizeof(d),
			 "uplink %s exists; IPv4 forwarding is off until `latch up` turns it on for the "
			 "uplink (replies into latch's taps only)",
			 conf.uplink);
		set(c, OK, d, NULL);
	}
}

/* latchd: asked over its socket, not looked up in the process table */
static void check_latchd(struct check *c)
{
	json_t *rep = latchd_ping(2000);
	char detail[640];

	c->name = "latchd";
	if (!rep) {
		set(c, WARN,
		    "not answering: profiles are not applied, host names not resolved, and guests get no DNS "
		    "answers (the kernel enforces what the maps hold)",
		    "latch boot install && systemctl start latchd");
	} else {
		snprintf(detail, sizeof(detail), "pid %lld answers, serving %zu sandbox(es)",
			 (long long)json_integer_value(json_object_get(rep, "pid")),
			 json_array_size(json_object_get(rep, "sandboxes")));
		set(c, OK, detail, NULL);
	}
	json_decref(rep);
}

/* latchd's own cgroup and hooks, read back (cmd_run.c). */
static void check_latchd_confined(struct check *c)
{
	char line[512];
	int level;

	c->name = "latchd confined";
	json_decref(latch_confinement_report(line, sizeof(line), &level));
	set(c,
	    level == 0 ? OK :
	    level == 1 ? WARN :
			 FAIL,
	    line,
	    level == 2 ? "restart latchd without --unconfined; `latch doctor` says why it could not confine itself" :
			 "systemctl start latchd");
}

struct orphans {
	char names[400], fix[256];
	int n;
};

static int orphan_cb(const char *name, const char *kit, uint32_t pid, void *arg)
{
	struct orphans *o = arg;
	size_t len = strlen(o->names), flen = strlen(o->fix);

	snprintf(o->names + len, sizeof(o->names) - len, "%s%s (kit %s, pid %u)", o->n ? ", " : "", name, kit, pid);
	snprintf(o->fix + flen, sizeof(o->fix) - flen, "%slatch destroy --purge %s", o->n ? "; " : "", name);
	o->n++;
	return 0;
}

/* Sandboxes of a `latch agent run` that was killed: nothing removed them. */
static void check_agent_orphans(struct check *c)
{
	struct orphans o = { .n = 0 };
	char d[600];
	int n = latch_sandbox_agent_orphans(orphan_cb, &o);

	c->name = "agent sandboxes";
	if (n < 0) {
		snprintf(d, sizeof(d), "the owner marks can't be read: %s", strerror(-n));
		set(c, WARN, d, "run `sudo latch doctor`");
	} else if (n == 0) {
		set(c, OK, "none left by a killed `latch agent run`", NULL);
	} else {
		snprintf(d, sizeof(d), "%d left by a killed `latch agent run`: %s", n, o.names);
		set(c, WARN, d, o.fix);
	}
}

/* A room made and run here, `true` in it, read back (latch run --check has the details). */
static void check_rooms(struct check *c)
{
	struct latch_room_probe p;
	char err[LATCH_ERR_MAX], d[600];
	int rc = latch_room_probe(&p, err, sizeof(err));

	c->name = "rooms";
	if (rc || *p.why) {
		set(c, FAIL, *p.why ? p.why : err, "latch run --check says what a room lacks here");
		return;
	}
	snprintf(d, sizeof(d), "a room ran `true`: hooks attached and read back%s; memory %s, cpus %s, pids %s; %s",
		 p.unix_hooks ? " (abstract unix sockets too)" : "", latch_room_via_name(p.limits.memory.via),
		 latch_room_via_name(p.limits.cpu.via), latch_room_via_name(p.limits.pids.via),
		 p.kill_v2 ? "cgroup.kill" : "freeze and kill");
	set(c, OK, d, NULL);
}

int cmd_doctor(int argc, char **argv)
{
	struct check c[24];
	struct latch_vm_kvm kvm;
	int n = 0, failed = 0, kvm_probe;
	json_t *arr = json_array();
	static const char *const lv[] = { "ok", "warn", "FAIL" };

	memset(c, 0, sizeof(c));
	if (argc != 1)
		return latch_err(LATCH_EXIT_USAGE, "doctor takes no arguments");
	check_btf(&c[n++]);
	check_host_view(&c[n++]);
	check_bpffs(&c[n++]);
	check_caps(&c[n++]);
	check_load_and_attach(&c[n], &c[n + 1], &c[n + 2]);
	n += 3;
	check_cgroup2(&c[n++]);
	kvm_probe = latch_vm_kvm_probe(&kvm);
	check_kvm(&c[n++], &kvm);
	check_kvm_access(&c[n++], &kvm, kvm_probe);
	check_libvirt(&c[n++], &kvm);
	check_uplink(&c[n++]);
	check_latchd(&c[n++]);
	check_latchd_confined(&c[n++]);
	check_rooms(&c[n++]);
	check_agent_orphans(&c[n++]);
	for (int i = 0; i < n; i++) {
		if (c[i].level == FAIL)
			failed++;
		if (!latch_json) {
			printf("%-4s  %-18s %s\n", lv[c[i].level], c[i].name, c[i].detail);
			if (c[i].level != OK && *c[i].fix)
				printf("      %-18s fix: %s\n", "", c[i].fix);
		}
		json_array_append_new(arr,
				      json_pack("{s:s, s:s, s:s, s:s?}", "check", c[i].name, "result", lv[c[i].level],
						"detail", c[i].detail, "fix", *c[i].fix ? c[i].fix : NULL));
	}
	latch_json_out(json_pack("{s:o, s:i}", "checks", arr, "failed", failed));
	return failed ? LATCH_EXIT_FAILED : 0;
}
