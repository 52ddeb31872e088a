// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox_vm.c - `latch up`, `down` and `destroy` for VM sandboxes: the
 * order of the steps, and the rollback when one fails.
 *
 * Everything runs under the lifecycle lock.  The state file is written
 * before the first kernel object exists and removed after the last one is
 * gone, so a crash at any point leaves something `destroy` can finish.
 * Removal is by name and idempotent: each step removes what it finds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/agent_client.h"
#include "vm/guest_state.h"
#include "vm/sandbox_vm.h"

__attribute__((format(printf, 5, 6))) static int ufail(char *err, size_t errlen, enum latch_vm_fail *fail,
						      enum latch_vm_fail kind, const char *fmt, ...)
{
	va_list ap;

	*fail = kind;
	va_start(ap, fmt);
	latch_verrf(err, errlen, kind == LATCH_VM_FAIL_INPUT ? -EINVAL : kind == LATCH_VM_FAIL_POSTURE ? -EPERM : -EIO, fmt,
		    ap);
	va_end(ap);
	return kind == LATCH_VM_FAIL_INPUT ? -EINVAL : kind == LATCH_VM_FAIL_POSTURE ? -EPERM : -EIO;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int latch_vm_agent_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, "run/latch/%s.agent", name);
}

void latch_vm_net_opts(const struct latch_vm_state *st, struct latch_net_opts *n)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->tap, sizeof(n->tap), "%s", st->tap);
	n->subnet4 = st->subnet4;
	n->host4 = st->host4;
	n->subnet6 = st->subnet6;
	n->host6 = st->host6;
	n->table = st->table;
	n->rule_priority = st->rule_priority;
	snprintf(n->uplink, sizeof(n->uplink), "%s", st->uplink);
	n->gateway4 = st->gateway4;
	n->gateway6 = st->gateway6;
}

static void fmt_addr(const struct latch_addr *a, char *buf, size_t len)
{
	if (!a->family || !inet_ntop(a->family, a->bytes, buf, len))
		snprintf(buf, len, "-");
}

/* Image files for a name; true when both are there. */
static bool image_present(const char *dir)
{
	char k[PATH_MAX + 16], i[PATH_MAX + 16];

	snprintf(k, sizeof(k), "%s/vmlinuz", dir);
	snprintf(i, sizeof(i), "%s/initrd.img", dir);
	return access(k, R_OK) == 0 && access(i, R_OK) == 0;
}

/* vm/image.sh: $LATCH_IMAGE_SH, beside the source tree of this binary, or installed. */
static int find_image_sh(char *buf, size_t len)
{
	const char *env = getenv("LATCH_IMAGE_SH");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK) ? -ENOENT : 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
		if (snprintf(buf, len, "%s/../vm/images/image.sh", exe) < (int)len && access(buf, X_OK) == 0)
			return 0;
	}
	snprintf(buf, len, "/usr/lib/latch/image.sh");
	return access(buf, X_OK) ? -ENOENT : 0;
}

/* Run image.sh DIR with its output on our stderr (stdout may be JSON). */
static int build_image(const char *dir, char *err, size_t errlen)
{
	char sh[PATH_MAX];
	int status;
	pid_t pid;

	if (find_image_sh(sh, sizeof(sh)))
		return snprintf(err, errlen, "vm/image.sh not found; set LATCH_IMAGE_SH or run `make image`"), -ENOENT;
	pid = fork();
	if (pid < 0)
		return snprintf(err, errlen, "fork: %s", strerror(errno)), -errno;
	if (pid == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execl("/bin/bash", "bash", sh, dir, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return snprintf(err, errlen, "waitpid: %s", strerror(errno)), -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return snprintf(err, errlen, "building the image in %s failed (%s exit %d)", dir, sh,
				WIFEXITED(status) ? WEXITSTATUS(status) : -1),
		       -EIO;
	if (!image_present(dir))
		return snprintf(err, errlen, "%s ran but %s has no vmlinuz and initrd.img", sh, dir), -EIO;
	return 0;
}

/* Poll the agent socket until it answers or the deadline passes. */
static int wait_agent(struct latch_virt *v, const char *name, const char *sock, int64_t deadline,
		      char *release, size_t rlen, char *err, size_t errlen)
{
	struct latch_domain_info di;
	int r = -ETIMEDOUT;

	while (now_ms() < deadline) {
		struct latch_agent *a = NULL;

		r = latch_agent_connect(sock, &a);
		if (r == 0) {
			int left = (int)(deadline - now_ms());

			r = latch_agent_ping(a, left > 0 ? left : 1, release, rlen);
			latch_agent_close(a);
			if (r == 0)
				return 0;
		}
		latch_domain_info(v, name, &di);
		if (strcmp(di.state, "running"))
			return snprintf(err, errlen, "the guest stopped while booting (domain %s)", di.state), -EIO;
		usleep(100 * 1000);
	}
	snprintf(err, errlen, "the guest agent did not answer within the boot timeout (%s)", strerror(-r));
	return -ETIMEDOUT;
}

int latch_vm_enforce_fresh(const struct latch_vm_state *st, char *err, size_t errlen)
{
	struct latch_sandbox_opts so;

	memset(&so, 0, sizeof(so));
	snprintf(so.name, sizeof(so.name), "%s", st->name);
	snprintf(so.ifname, sizeof(so.ifname), "%s", st->tap);
	memcpy(so.guest_mac, st->mac, 6);
	so.guest_ip4 = st->guest4;
	so.host_ip4 = so.resolver_ip4 = st->host4;
	so.guest_ip6 = st->guest6;
	so.host_ip6 = so.resolver_ip6 = st->host6;
	so.dns_rate = LATCH_DEFAULT_DNS_RATE;
	so.dns_burst = LATCH_DEFAULT_DNS_BURST;
	so.event_rate = LATCH_DEFAULT_EVENT_RATE;
	so.event_burst = LATCH_DEFAULT_EVENT_BURST;
	return latch_sandbox_create(&so, err, errlen) ? -EIO : 0;
}

/* The domain of a state: the image's kernel and initrd, addresses on the command line. */
static int domain_opts(const struct latch_vm_state *st, struct latch_domain_opts *d, char *accel_why,
		       size_t whylen)
{
	char g4[64], h4[64], g6[64], h6[64];

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", st->name);
	d->kvm = latch_kvm_usable(accel_why, whylen);
	d->memory_mib = st->memory_mib;
	d->cpus = st->cpus;
	if (snprintf(d->kernel, sizeof(d->kernel), "%s/vmlinuz", st->image_dir) >= (int)sizeof(d->kernel) ||
	    snprintf(d->initrd, sizeof(d->initrd), "%s/initrd.img", st->image_dir) >= (int)sizeof(d->initrd))
		return -ENAMETOOLONG;
	fmt_addr(&st->guest4, g4, sizeof(g4));
	fmt_addr(&st->host4, h4, sizeof(h4));
	fmt_addr(&st->guest6, g6, sizeof(g6));
	fmt_addr(&st->host6, h6, sizeof(h6));
	if (st->guest6.family)
		snprintf(d->cmdline, sizeof(d->cmdline),
			 "console=ttyS0 quiet panic=-1 latch.ip=%s/30 latch.gw=%s latch.ip6=%s/64 latch.gw6=%s", g4,
			 h4, g6, h6);
	else
		snprintf(d->cmdline, sizeof(d->cmdline), "console=ttyS0 quiet panic=-1 latch.ip=%s/30 latch.gw=%s",
			 g4, h4);
	memcpy(d->mac, st->mac, 6);
	snprintf(d->tap, sizeof(d->tap), "%s", st->tap);
	latch_vm_agent_path(st->name, d->agent_sock, sizeof(d->agent_sock));
	snprintf(d->workspace, sizeof(d->workspace), "%s", st->workspace);
	return 0;
}

/* Put the host copy of the guest state back, when there is one; never fatal. */
static void restore_state(const char *name, struct latch_vm_up_result *res)
{
	char dir[PATH_MAX];
	int r;

	if (latch_guest_state_dir(name, dir, sizeof(dir)) || access(dir, F_OK))
		return;
	r = latch_guest_state_restore(name, NULL, &res->restored_bytes, res->restore_note,
				      sizeof(res->restore_note));
	res->restored = r == 0;
}

/* Undo in reverse; each step acts only on what exists. */
static void teardown(struct latch_virt *v, const struct latch_vm_state *st, bool keep_state)
{
	struct latch_net_opts n;
	char e[LATCH_ERR_MAX], sock[PATH_MAX];

	if (v)
		latch_domain_remove(v, st->name, e, sizeof(e));
	latch_vm_net_opts(st, &n);
	latch_net_down(&n, e, sizeof(e));
	if (latch_sandbox_exists(st->name))
		latch_sandbox_detach(st->name, e, sizeof(e));
	latch_net_tap_delete(st->tap, e, sizeof(e));
	if (!latch_vm_agent_path(st->name, sock, sizeof(sock)))
		unlink(sock);
	if (!keep_state)
		latch_state_remove(st->name);
}

/*
 * `up` of a sandbox that was taken `down`: same tap, pins and state.  The
 * enforcement is verified again (and re-attached from the pins if it fell
 * off) before the domain is started; a failure leaves the sandbox down, as
 * it was found.
 */
static int restart(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, int64_t t0,
		   enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_vm_state *st = &res->obs.st;
	struct latch_domain_info di;
	struct latch_net_opts n;
	struct latch_posture p;
	struct latch_virt *v;
	char e[LATCH_ERR_MAX], sock[PATH_MAX];
	int ret;

	ret = latch_state_load(o->name, st, err, errlen);
	if (ret)
		return ret;
	v = latch_virt_open(err, errlen);
	if (!v)
		return -ECONNREFUSED;
	latch_domain_info(v, o->name, &di);
	if (di.exists && !di.latch_managed) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			    "a libvirt domain " LATCH_DOMAIN_PREFIX "%s exists and latch did not make it", o->name);
		goto out;
	}
	if (di.exists && strcmp(di.state, "shutoff")) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "sandbox '%s' is already up (domain %s)", o->name,
			    di.state);
		goto out;
	}
	if (!latch_net_tap_exists(st->tap)) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_POSTURE,
			    "tap %s is gone (host rebooted?); `latch boot apply` re-creates it, or `latch destroy %s`",
			    st->tap, o->name);
		goto out;
	}
	if (latch_sandbox_posture_of(o->name, &p, e, sizeof(e)) == 0 && !p.enforced)
		latch_sandbox_reattach(o->name, e, sizeof(e));
	if (latch_sandbox_posture_of(o->name, &p, e, sizeof(e)) || !p.enforced) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_POSTURE,
			    "enforcement on %s could not be verified (%s); the domain was not started", st->tap,
			    p.enforced ? e : p.why);
		goto out;
	}
	res->ms_enforced = now_ms() - t0;
	latch_vm_net_opts(st, &n);
	ret = latch_net_up(&n, err, errlen);
	if (ret)
		goto out;
	latch_vm_agent_path(o->name, sock, sizeof(sock));
	unlink(sock);
	if (di.exists) {
		latch_kvm_usable(res->accel_why, sizeof(res->accel_why));
		ret = latch_domain_start(v, o->name, err, errlen);
	} else {
		/* the domain is gone (undefined by hand, or a rebuild): a fresh guest on the same tap */
		struct latch_domain_opts d;

		if (!image_present(st->image_dir) && (ret = build_image(st->image_dir, err, errlen)))
			goto out;
		ret = domain_opts(st, &d, res->accel_why, sizeof(res->accel_why));
		if (ret) {
			snprintf(err, errlen, "image path %s is too long", st->image_dir);
			goto out;
		}
		ret = latch_domain_create(v, &d, err, errlen);
	}
	if (ret)
		goto out;
	res->ms_domain = now_ms() - t0;
	ret = wait_agent(v, o->name, sock, t0 + o->boot_timeout_ms, res->release, sizeof(res->release), err,
			 errlen);
	if (ret) {
		bool forced;

		latch_domain_stop(v, o->name, 0, &forced, e, sizeof(e));
		goto out;
	}
	res->ms_agent = now_ms() - t0;
	restore_state(o->name, res);
out:
	latch_virt_close(v);
	return ret;
}

static int check_up_opts(const struct latch_vm_up_opts *o, const struct latch_conf *c, char *image_dir,
			 size_t dirlen, char *err, size_t errlen, enum latch_vm_fail *fail)
{
	char e[LATCH_ERR_MAX];

	if (latch_parse_name(o->name, e, sizeof(e)))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "%s", e);
	if (strlen(o->name) > LATCH_VM_NAME_MAX)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "VM sandbox name '%s' is longer than %d characters (its tap lt-NAME must fit in %d)",
			     o->name, LATCH_VM_NAME_MAX, IF_NAMESIZE - 1);
	if (latch_parse_name(o->image, e, sizeof(e)))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "unknown image '%s'", o->image);
	if (snprintf(image_dir, dirlen, "%s/%s", c->images, o->image) >= (int)dirlen)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "image path too long");
	if (!strcmp(o->image, "debian") && !image_present(image_dir))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "image 'debian' is not built yet; run `latch image build --image debian` first "
			     "(debootstrap, a few minutes)");
	if (strcmp(o->image, LATCH_VM_DEFAULT_IMAGE) && !image_present(image_dir))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "unknown image '%s': no %s/vmlinuz and initrd.img; use '%s', or build 'debian' with "
			     "`latch image build --image debian`",
			     o->image, image_dir, LATCH_VM_DEFAULT_IMAGE);
	if (o->memory_mib < 64 || o->memory_mib > 65536)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "--memory %u: give 64..65536 MiB", o->memory_mib);
	if (o->cpus < 1 || o->cpus > 64)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "--cpus %u: give 1..64", o->cpus);
	if (*o->workspace) {
		struct stat sbuf;

		if (o->workspace[0] != '/' || stat(o->workspace, &sbuf) || !S_ISDIR(sbuf.st_mode))
			return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
				     "--workspace '%s' is not an existing directory (absolute path)", o->workspace);
	}
	return 0;
}

int latch_vm_up(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, enum latch_vm_fail *fail,
		char *err, size_t errlen)
{
	int64_t t0 = now_ms();
	struct latch_vm_state *st = &res->obs.st;
	struct latch_domain_opts d;
	struct latch_net_opts n;
	struct latch_posture p;
	struct latch_virt *v = NULL;
	struct latch_conf conf;
	char e[LATCH_ERR_MAX], image_dir[PATH_MAX];
	bool tap_created = false;
	int lock, ret;

	memset(res, 0, sizeof(*res));
	*fail = LATCH_VM_FAIL_RUNTIME;
	if (latch_conf_load(&conf, err, errlen))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "%s", strcpy(e, err));
	ret = check_up_opts(o, &conf, image_dir, sizeof(image_dir), err, errlen, fail);
	if (ret)
		return ret;
	lock = latch_state_lock(err, errlen);
	if (lock < 0)
		return lock;

	/* name in use, in any of the places a sandbox leaves a trace */
	snprintf(st->tap, sizeof(st->tap), "lt-%s", o->name);
	if (latch_state_exists(o->name)) {
		ret = restart(o, res, t0, fail, err, errlen);
		goto unlock;
	}
	if (latch_sandbox_exists(o->name))
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			    "name '%s' is in use by an attached sandbox; `latch detach %s` or pick another name",
			    o->name, o->name);
	else if (latch_net_tap_exists(st->tap))
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			    "device %s already exists; `latch destroy %s` removes a leftover tap", st->tap, o->name);
	if (ret)
		goto unlock;
	v = latch_virt_open(err, errlen);
	if (!v) {
		ret = -ECONNREFUSED;
		goto unlock;
	}
	{
		struct latch_domain_info di;

		latch_domain_info(v, o->name, &di);
		if (di.exists) {
			ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
				    "a libvirt domain " LATCH_DOMAIN_PREFIX "%s already exists%s", o->name,
				    di.latch_managed ? "; `latch destroy` it first" : " and latch did not make it");
			goto unlock;
		}
	}

	/* 1. allocate, and record it before anything exists in the kernel */
	snprintf(st->name, sizeof(st->name), "%s", o->name);
	snprintf(st->image, sizeof(st->image), "%s", o->image);
	snprintf(st->image_dir, sizeof(st->image_dir), "%s", image_dir);
	snprintf(st->workspace, sizeof(st->workspace), "%s", o->workspace);
	st->memory_mib = o->memory_mib;
	st->cpus = o->cpus;
	ret = latch_state_allocate(&conf, st, err, errlen);
	if (ret) {
		if (ret == -ENOSPC)
			*fail = LATCH_VM_FAIL_INPUT;
		goto unlock;
	}
	ret = latch_net_check_free(&st->subnet4, 30, err, errlen);
	if (!ret && st->subnet6.family)
		ret = latch_net_check_free(&st->subnet6, 64, err, errlen);
	if (ret) {
		if (ret == -EADDRINUSE)
			*fail = LATCH_VM_FAIL_INPUT;
		goto unlock;
	}
	ret = latch_state_save(st, err, errlen);
	if (ret)
		goto unlock;

	/* 2. the tap, down and bare */
	ret = latch_net_tap_create(st->tap, &tap_created, err, errlen);
	if (ret)
		goto rollback;

	/* 3. enforcement on it */
	if (latch_vm_enforce_fresh(st, e, sizeof(e))) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_RUNTIME, "enforcement on %s: %s", st->tap, e);
		goto rollback;
	}

	/* 4. read it back: nothing starts unless the kernel says it is enforced */
	if (latch_sandbox_posture_of(st->name, &p, e, sizeof(e)) || !p.enforced) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_POSTURE,
			    "enforcement on %s could not be verified (%s); no domain was started", st->tap,
			    p.enforced ? e : p.why);
		goto rollback;
	}
	res->ms_enforced = now_ms() - t0;

	/* 5. routing */
	latch_vm_net_opts(st, &n);
	ret = latch_net_up(&n, err, errlen);
	if (ret)
		goto rollback;

	/* 6. the image */
	if (!image_present(image_dir)) {
		ret = build_image(image_dir, err, errlen);
		if (ret)
			goto rollback;
		res->image_built = true;
	}

	/* 7. the domain */
	if (domain_opts(st, &d, res->accel_why, sizeof(res->accel_why))) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "image path %s is too long", image_dir);
		goto rollback;
	}
	unlink(d.agent_sock);
	ret = latch_domain_create(v, &d, err, errlen);
	if (ret)
		goto rollback;
	res->ms_domain = now_ms() - t0;

	/* 8. the agent */
	ret = wait_agent(v, st->name, d.agent_sock, t0 + o->boot_timeout_ms, res->release, sizeof(res->release),
			 err, errlen);
	if (ret)
		goto rollback;
	res->ms_agent = now_ms() - t0;
	restore_state(o->name, res); /* a state that outlived `destroy`: none, unless put there */
	latch_virt_close(v);
	close(lock);
	latch_vm_observe(o->name, &res->obs);
	return 0;

rollback:
	teardown(v, st, false);
	if (!ret)
		ret = -EIO;
unlock:
	latch_virt_close(v);
	close(lock);
	if (!ret)
		latch_vm_observe(o->name, &res->obs); /* a restart */
	return ret;
}

int latch_vm_down(const char *name, int timeout_ms, struct latch_vm_down_result *dr, enum latch_vm_fail *fail,
		  char *err, size_t errlen)
{
	struct latch_vm_state st;
	struct latch_virt *v;
	char sock[PATH_MAX];
	int lock, ret;

	*fail = LATCH_VM_FAIL_RUNTIME;
	memset(dr, 0, sizeof(*dr));
	lock = latch_state_lock(err, errlen);
	if (lock < 0)
		return lock;
	ret = latch_state_load(name, &st, err, errlen);
	if (ret) {
		if (ret == -ENOENT)
			*fail = LATCH_VM_FAIL_INPUT;
		goto out;
	}
	v = latch_virt_open(err, errlen);
	if (!v) {
		ret = -ECONNREFUSED;
		goto out;
	}
	/* the agent's memory first, while the guest still has it */
	dr->backed_up = latch_guest_state_backup(name, &dr->backup_bytes, &dr->backup_files, dr->backup_note,
						 sizeof(dr->backup_note)) == 0;
	/* a clean power-off: the guest gets to flush its workspace */
	if (!latch_vm_agent_path(name, sock, sizeof(sock))) {
		struct latch_agent *a = NULL;

		if (latch_agent_connect(sock, &a) == 0) {
			static const char *const argv[] = { "/sbin/poweroff", NULL };
			struct latch_agent_exec_opts eo = { .timeout_ms = 2000 };
			struct latch_agent_result r;

			if (latch_agent_ping(a, 2000, NULL, 0) == 0)
				latch_agent_exec(a, argv, &eo, -1, -1, &r);
			latch_agent_close(a);
		}
	}
	ret = latch_domain_stop(v, name, timeout_ms, &dr->forced, err, errlen);
	if (ret == -ENOENT)
		ret = 0; /* no domain: nothing to stop */
	latch_virt_close(v);
out:
	close(lock);
	return ret;
}

int latch_vm_destroy(const char *name, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_vm_state st;
	struct latch_virt *v;
	struct latch_net_opts n;
	char e[LATCH_ERR_MAX], sock[PATH_MAX];
	int lock, ret;

	*fail = LATCH_VM_FAIL_RUNTIME;
	lock = latch_state_lock(err, errlen);
	if (lock < 0)
		return lock;
	ret = latch_state_load(name, &st, e, sizeof(e));
	if (ret && ret != -ENOENT) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_RUNTIME, "%s; remove it by hand once the rest is gone",
			    e);
		goto out;
	}
	v = latch_virt_open(err, errlen);
	if (!v) {
		/* the domain may be running on the tap: keep everything until libvirt can stop it */
		ret = -ECONNREFUSED;
		goto out;
	}
	if (ret == -ENOENT) {
		/* no state: remove what carries the name, if latch made it */
		struct latch_domain_info di;
		char tap[IF_NAMESIZE];

		latch_domain_info(v, name, &di);
		snprintf(tap, sizeof(tap), "lt-%s", name);
		if (!di.latch_managed && !latch_net_tap_exists(tap)) {
			latch_virt_close(v);
			ret = ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT, "no VM sandbox '%s' (see `latch ls`)", name);
			goto out;
		}
		if (di.latch_managed)
			ret = latch_domain_remove(v, name, err, errlen);
		if (!ret && latch_sandbox_exists(name))
			latch_sandbox_detach(name, e, sizeof(e));
		if (!ret)
			ret = latch_net_tap_delete(tap, err, errlen);
		latch_virt_close(v);
		goto out;
	}
	ret = latch_domain_remove(v, name, err, errlen);
	latch_virt_close(v);
	if (ret)
		goto out; /* never pull the tap's enforcement from under a guest that still runs */
	latch_vm_net_opts(&st, &n);
	ret = latch_net_down(&n, err, errlen);
	if (latch_sandbox_exists(name) && latch_sandbox_detach(name, e, sizeof(e)) && !ret)
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_RUNTIME, "%s", e);
	if (!ret)
		ret = latch_net_tap_delete(st.tap, err, errlen);
	if (!latch_vm_agent_path(name, sock, sizeof(sock)))
		unlink(sock);
	/* the state goes last, and only when the rest is gone: it is how a retry finds them */
	if (!ret)
		ret = latch_state_remove(name);
out:
	close(lock);
	return ret;
}

int latch_vm_observe(const char *name, struct latch_vm_observed *obs)
{
	struct latch_net_opts n;
	struct latch_virt *v;
	char e[LATCH_ERR_MAX];
	int r;

	memset(obs, 0, sizeof(*obs));
	r = latch_state_load(name, &obs->st, e, sizeof(e));
	if (r)
		return r;
	obs->have_state = true;
	obs->pins = latch_sandbox_exists(name);
	if (obs->pins)
		latch_sandbox_posture_of(name, &obs->posture, e, sizeof(e));
	v = latch_virt_open(e, sizeof(e));
	if (v) {
		obs->libvirt_ok = true;
		latch_domain_info(v, name, &obs->dom);
		latch_virt_close(v);
	}
	latch_vm_net_opts(&obs->st, &n);
	latch_net_observe(&n, &obs->net);
	return 0;
}
