// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_doctor.c - `latch doctor`: is this host able to enforce?
 *
 * Every check is a probe of the real thing (load the programs, attach them
 * to a link in a throwaway netns, connect to libvirt), never a guess from
 * version numbers.  Each failure comes with the command that fixes it.
 * latchd is asked over its socket; without it the boundary holds, so it is a
 * warning, not a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "broker/latchd_client.h"
#include "cli/cli.h"
#include "loader/sandbox.h"
#include "loader/tc.h"
#include "vm/libvirt.h"

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
		set(c, WARN, d, "mount -t bpf bpf /sys/fs/bpf");
	}
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
		    m == LATCH_TC_TCX ? "LATCH_TC_MODE=clsact uses clsact filters instead"
				      : "load the sch_ingress and cls_bpf modules (modprobe sch_ingress cls_bpf)");
	}
	if (!loaded)
		set(load, FAIL, "the kernel refused latch's programs",
		    "run `latch -v doctor` for the verifier log; a 5.15+ kernel with BTF is needed");
	else if (latch_csum_check_supported())
		set(load, OK, "the verifier accepted latch_from_guest and latch_to_guest", NULL);
	else
		set(load, WARN, "loaded without the checksum-offload check: this kernel lacks bpf_cast_to_kern_ctx (6.2+)",
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

static void check_libvirt(struct check *c)
{
	char d[LATCH_ERR_MAX + 64], why[LATCH_ERR_MAX];
	unsigned long ver = 0;

	c->name = "libvirt";
	if (latch_virt_probe(&ver, why, sizeof(why))) {
		snprintf(d, sizeof(d), "%s (VM sandboxes need it)", why);
		set(c, FAIL, d, "apt-get install libvirt-daemon-system; virtlogd -d; libvirtd -d");
		return;
	}
	snprintf(d, sizeof(d), "qemu:///system answers (libvirt %lu.%lu.%lu)", ver / 1000000, ver / 1000 % 1000,
		 ver % 1000);
	set(c, OK, d, NULL);
}

static void check_kvm(struct check *c)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096];
	bool virt = false;

	c->name = "KVM";
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && (strstr(line, " vmx") || strstr(line, " svm")))
			virt = true;
	if (f)
		fclose(f);
	if (access("/dev/kvm", R_OK | W_OK))
		set(c, WARN, "no usable /dev/kvm: guests run under TCG (software emulation, slower)",
		    "enable virtualization in firmware and modprobe kvm_intel or kvm_amd");
	else if (!virt)
		set(c, WARN, "/dev/kvm exists but the CPU shows no vmx/svm: guests run under TCG",
		    "give this VM nested virtualization to use KVM");
	else
		set(c, OK, "/dev/kvm and vmx/svm present", NULL);
}

/* latchd: asked over its socket, not looked up in the process table */
static void check_latchd(struct check *c)
{
	json_t *rep = latchd_ping(2000);
	char detail[640];

	c->name = "latchd";
	if (!rep) {
		set(c, WARN, "not answering: profiles are not applied, host names not resolved, and guests get no DNS "
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

int cmd_doctor(int argc, char **argv)
{
	struct check c[10];
	int n = 0, failed = 0;
	json_t *arr = json_array();
	static const char *const lv[] = { "ok", "warn", "FAIL" };

	memset(c, 0, sizeof(c));
	if (argc != 1)
		return latch_err(LATCH_EXIT_USAGE, "doctor takes no arguments");
	check_btf(&c[n++]);
	check_bpffs(&c[n++]);
	check_caps(&c[n++]);
	check_load_and_attach(&c[n], &c[n + 1], &c[n + 2]);
	n += 3;
	check_cgroup2(&c[n++]);
	check_libvirt(&c[n++]);
	check_kvm(&c[n++]);
	check_latchd(&c[n++]);
	for (int i = 0; i < n; i++) {
		if (c[i].level == FAIL)
			failed++;
		if (!latch_json) {
			printf("%-4s  %-18s %s\n", lv[c[i].level], c[i].name, c[i].detail);
			if (c[i].level != OK && *c[i].fix)
				printf("      %-18s fix: %s\n", "", c[i].fix);
		}
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "check", c[i].name, "result",
						     lv[c[i].level], "detail", c[i].detail, "fix", c[i].fix));
	}
	latch_json_out(json_pack("{s:o, s:i}", "checks", arr, "failed", failed));
	return failed ? LATCH_EXIT_FAILED : 0;
}
