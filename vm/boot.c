// SPDX-License-Identifier: GPL-2.0-only
/*
 * boot.c - `latch boot apply`, `latch boot install` and the qemu hook check.
 *
 * apply re-creates a sandbox's tap from its recorded state and puts the
 * enforcement back before anything can flow: the tap is made down and bare,
 * the programs are attached (from the pins, or fresh with an empty policy
 * when the pins are gone), the posture is read back, and only then is the
 * tap brought up and routed.  A sandbox whose posture can't be verified is
 * left with its tap down; the hook then refuses its domain.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/libvirt.h"
#include "vm/sandbox_vm.h"
#include "vm/state.h"

static int apply_one(const char *name, struct latch_boot_result *r)
{
	struct latch_vm_state st;
	struct latch_net_opts n;
	struct latch_posture p;
	char e[LATCH_ERR_MAX - 128];
	int ret;

	memset(r, 0, sizeof(*r));
	ret = latch_state_load(name, &st, r->note, sizeof(r->note));
	if (ret)
		return ret;
	if (latch_bpffs_ensure(e, sizeof(e)))
		return snprintf(r->note, sizeof(r->note), "bpffs: %s", e), -ENODEV;
	ret = latch_net_tap_create(st.tap, &r->tap_created, r->note, sizeof(r->note));
	if (ret)
		return ret;
	if (latch_sandbox_exists(name)) {
		r->from_pins = true;
		if (latch_sandbox_reattach(name, e, sizeof(e)))
			return snprintf(r->note, sizeof(r->note), "re-attach from the pins: %s", e), -EIO;
	} else if (latch_vm_enforce_fresh(&st, e, sizeof(e))) {
		return snprintf(r->note, sizeof(r->note), "no pins, and fresh enforcement failed: %s", e), -EIO;
	}
	if (latch_sandbox_posture_of(name, &p, e, sizeof(e)) || !p.enforced)
		return snprintf(r->note, sizeof(r->note), "not verified: %s", p.enforced ? e : p.why), -EPERM;
	r->enforced = true;
	latch_vm_net_opts(&st, &n);
	r->routed = latch_net_up(&n, r->note, sizeof(r->note)) == 0;
	return 0;
}

struct apply_ctx {
	void (*fn)(const char *name, int ret, const struct latch_boot_result *r, void *arg);
	void *arg;
	int failed;
};

static int apply_cb(const char *name, void *arg)
{
	struct apply_ctx *c = arg;
	struct latch_boot_result r;
	int ret = apply_one(name, &r);

	c->failed += ret != 0;
	c->fn(name, ret, &r, c->arg);
	return 0;
}

int latch_vm_boot_apply(void (*fn)(const char *name, int ret, const struct latch_boot_result *r, void *arg),
			void *arg)
{
	struct apply_ctx c = { fn, arg, 0 };
	int n = latch_vm_list(apply_cb, &c);

	return n < 0 ? n : c.failed;
}

static int write_file(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
	char dir[PATH_MAX], *slash;
	int r;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		r = latch_mkdirs(dir, 0755);
		if (r)
			return latch_errf(err, errlen, r, "mkdir %s: %s", dir, strerror(-r));
	}
	r = latch_write_atomic(path, mode, text, strlen(text));
	if (r)
		return latch_errf(err, errlen, r, "%s: %s", path, strerror(-r));
	return 0;
}

/* Environment lines that carry LATCH_ROOT/LATCH_BPFFS into what runs without ours. */
static void env_of(char *unit_env, size_t ulen, char *sh_env, size_t slen)
{
	const char *root = getenv("LATCH_ROOT"), *bpffs = getenv("LATCH_BPFFS");

	*unit_env = *sh_env = '\0';
	if (root && *root) {
		snprintf(unit_env + strlen(unit_env), ulen - strlen(unit_env), "Environment=LATCH_ROOT=%s\n", root);
		snprintf(sh_env + strlen(sh_env), slen - strlen(sh_env), "export LATCH_ROOT='%s'\n", root);
	}
	if (bpffs && *bpffs) {
		snprintf(unit_env + strlen(unit_env), ulen - strlen(unit_env), "Environment=LATCH_BPFFS=%s\n", bpffs);
		snprintf(sh_env + strlen(sh_env), slen - strlen(sh_env), "export LATCH_BPFFS='%s'\n", bpffs);
	}
}

/*
 * Write etc/systemd/system/NAME and enable it: a link in NAME's place in
 * each of the wants directories (`systemctl enable` without systemd, so that
 * it works under LATCH_ROOT too).
 */
static int install_unit(const char *name, const char *text, const char *const *wanted_by, size_t n_wanted,
			void (*wrote)(const char *path, void *arg), void *arg, char *err, size_t errlen)
{
	char unit[PATH_MAX], dir[PATH_MAX], link[PATH_MAX];
	int r;

	if (latch_path(unit, sizeof(unit), "etc/systemd/system/%s", name))
		return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
	r = write_file(unit, text, 0644, err, errlen);
	if (r)
		return r;
	wrote(unit, arg);
	for (size_t i = 0; i < n_wanted; i++) {
		if (latch_path(dir, sizeof(dir), "etc/systemd/system/%s.wants", wanted_by[i]) ||
		    snprintf(link, sizeof(link), "%s/%s", dir, name) >= (int)sizeof(link))
			return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
		mkdir(dir, 0755);
		unlink(link);
		if (symlink(unit, link))
			return snprintf(err, errlen, "symlink %s: %s", link, strerror(errno)), -errno;
		wrote(link, arg);
	}
	return 0;
}

int latch_vm_boot_install(const char *latch_bin, void (*wrote)(const char *path, void *arg), void *arg, char *err,
		       size_t errlen)
{
	static const char *const boot_wanted_by[] = { "sysinit.target", "libvirtd.service", "virtqemud.service" };
	static const char *const latchd_wanted_by[] = { "multi-user.target" };
	const char *slash = strrchr(latch_bin, '/');
	char hook[PATH_MAX], latchd[PATH_MAX];
	char uenv[2 * PATH_MAX + 64], senv[2 * PATH_MAX + 64], text[8192];
	int r;

	if (strchr(latch_bin, '\'') || strchr(latch_bin, '\n') || latch_bin[0] != '/')
		return snprintf(err, errlen, "latch's path '%s' can't go into a unit", latch_bin), -EINVAL;
	env_of(uenv, sizeof(uenv), senv, sizeof(senv));
	if (latch_path(hook, sizeof(hook), "etc/libvirt/hooks/qemu") ||
	    snprintf(latchd, sizeof(latchd), "%.*slatchd", (int)(slash - latch_bin + 1), latch_bin) >=
		    (int)sizeof(latchd))
		return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
	snprintf(text, sizeof(text),
		 "# Written by `latch boot install`.\n"
		 "# Default-deny on every latch sandbox's tap before libvirt can start a guest.\n"
		 "[Unit]\n"
		 "Description=latch: the boundary before any guest\n"
		 "DefaultDependencies=no\n"
		 "After=sys-fs-bpf.mount local-fs.target\n"
		 "Wants=sys-fs-bpf.mount\n"
		 "Before=libvirtd.service virtqemud.service libvirt-guests.service\n"
		 "\n"
		 "[Service]\n"
		 "Type=oneshot\n"
		 "RemainAfterExit=yes\n"
		 "%s"
		 "ExecStart=%s boot apply\n"
		 "\n"
		 "[Install]\n"
		 "WantedBy=sysinit.target libvirtd.service virtqemud.service\n",
		 uenv, latch_bin);
	r = install_unit("latch-boot.service", text, boot_wanted_by,
			 sizeof(boot_wanted_by) / sizeof(boot_wanted_by[0]), wrote, arg, err, errlen);
	if (r)
		return r;
	/*
	 * latchd, next to latch: ordered after the boundary, never before it.
	 * It only adds reach (names, learned answers); without it the sandboxes
	 * stay as the pins say, so a failure to start is never a hole.
	 */
	snprintf(text, sizeof(text),
		 "# Written by `latch boot install`.\n"
		 "# latchd: named policy, the sandboxes' resolvers, kernel deny events into the audit log.\n"
		 "[Unit]\n"
		 "Description=latch daemon: named egress policy and the filtering resolver\n"
		 "After=latch-boot.service network-online.target\n"
		 "Requires=latch-boot.service\n"
		 "\n"
		 "[Service]\n"
		 "Type=simple\n"
		 "%s"
		 "ExecStart=%s\n"
		 "ExecReload=/bin/kill -HUP $MAINPID\n"
		 "Restart=on-failure\n"
		 "RestartSec=1\n"
		 "\n"
		 "[Install]\n"
		 "WantedBy=multi-user.target\n",
		 uenv, latchd);
	r = install_unit("latchd.service", text, latchd_wanted_by, 1, wrote, arg, err, errlen);
	if (r)
		return r;
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n"
		 "# Written by `latch boot install`: libvirt runs this as qemu DOMAIN OP SUBOP, with the\n"
		 "# domain XML on stdin.  A non-zero exit on prepare/start stops the domain from starting.\n"
		 "# latch refuses a latch-managed domain whose enforcement it can't verify.\n"
		 "%s"
		 "exec '%s' boot hook \"$@\"\n",
		 senv, latch_bin);
	r = write_file(hook, text, 0755, err, errlen);
	if (r)
		return r;
	wrote(hook, arg);
	return 0;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static int hook_check(const char *dom, const char *op, const char *xml, char *err, size_t errlen)
{
	const size_t plen = strlen(LATCH_DOMAIN_PREFIX);
	bool prefixed = !strncmp(dom, LATCH_DOMAIN_PREFIX, plen);
	struct latch_vm_state st;
	struct latch_posture p;
	char e[LATCH_ERR_MAX], want[64];
	const char *name = dom + plen;

	if (strcmp(op, "prepare") && strcmp(op, "start") && strcmp(op, "restore"))
		return 0;
	if (!prefixed && !strstr(xml, LATCH_XMLNS))
		return 0;
	if (!prefixed)
		return snprintf(err, errlen, "domain %s carries latch's metadata but not its name", dom), -EPERM;
	if (latch_state_load(name, &st, e, sizeof(e)))
		return snprintf(err, errlen, "no latch state for sandbox '%s': %s", name, e), -EPERM;
	if (!latch_net_tap_exists(st.tap))
		return snprintf(err, errlen, "tap %s is missing (`latch boot apply`)", st.tap), -EPERM;
	if (latch_sandbox_posture_of(name, &p, e, sizeof(e)))
		return snprintf(err, errlen, "no pinned enforcement for '%s': %s", name, e), -EPERM;
	if (!p.enforced)
		return snprintf(err, errlen, "enforcement on %s not verified: %s", st.tap, p.why), -EPERM;
	/* the domain's only NIC must be that tap */
	snprintf(want, sizeof(want), "<target dev='%s'", st.tap);
	if (count(xml, "<interface ") != 1 || count(xml, "<interface type='ethernet'") != 1 || !strstr(xml, want))
		return snprintf(err, errlen, "domain %s has a NIC other than its filtered tap %s", dom, st.tap), -EPERM;
	return 0;
}

int latch_vm_boot_hook(const char *dom, const char *op, int xml_fd, char *err, size_t errlen)
{
	static char xml[1 << 20];
	size_t n = 0;
	ssize_t k;

	while (n < sizeof(xml) - 1 && ((k = read(xml_fd, xml + n, sizeof(xml) - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		n += k > 0 ? (size_t)k : 0;
	xml[n] = '\0';
	return hook_check(dom, op, xml, err, errlen);
}
