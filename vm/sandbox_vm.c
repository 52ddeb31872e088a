// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox_vm.c - `latch up`, `down` and `destroy` for VM sandboxes: the
 * order of the steps, and the rollback when one fails.
 *
 * Everything runs under the lifecycle lock.  The state file is written
 * before the first kernel object exists and removed after the last one is
 * gone, so a crash at any point leaves something `destroy` can finish.
 * Removal is by name and idempotent: each step removes what it finds.
 *
 * `up` says each step as it happens (the caller prints the lines) and times
 * them.  The boot timeout runs from starting the domain to the agent's
 * answer, so a slow image build never eats into it; when it runs out, the
 * error says which of the two took the time, and the serial console's log
 * (virtlogd keeps it in a file) is quoted.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "vm/agent_client.h"
#include "vm/libvirt.h"
#include "vm/sandbox_vm.h"
#include "vm/template.h"
#include "vm/state.h"

__attribute__((format(printf, 5, 6))) static int ufail(char *err, size_t errlen, enum latch_vm_fail *fail,
						       enum latch_vm_fail kind, const char *fmt, ...)
{
	int ret = kind == LATCH_VM_FAIL_INPUT	   ? -EINVAL :
		  kind == LATCH_VM_FAIL_POSTURE	   ? -EPERM :
		  kind == LATCH_VM_FAIL_NO_SANDBOX ? -ENOENT :
						     -EIO;
	va_list ap;

	*fail = kind;
	va_start(ap, fmt);
	latch_verrf(err, errlen, ret, fmt, ap);
	va_end(ap);
	return ret;
}

void latch_vm_step(const struct latch_vm_up_opts *o, const char *fmt, ...)
{
	char line[LATCH_ERR_MAX];
	va_list ap;

	if (!o->step)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	o->step(line, o->step_arg);
}

/* Text from a guest or an operator, with every byte that is not printable ASCII written \xHH. */
static void escape(const char *in, size_t n, char *out, size_t len, bool keep_newlines)
{
	size_t o = 0;

	for (size_t i = 0; i < n && in[i] && o + 5 < len; i++) {
		unsigned char c = in[i];

		if ((c >= 0x20 && c < 0x7f && c != '\\') || (keep_newlines && c == '\n'))
			out[o++] = c;
		else
			o += snprintf(out + o, len - o, "\\x%02x", c);
	}
	out[o] = '\0';
}

int latch_vm_console_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, "var/log/latch/%s.console.log", name);
}

/* The last lines of the console log into res->console_tail; nothing when there is no log. */
static void console_tail(struct latch_vm_up_result *res)
{
	char buf[1536], *start = buf;
	ssize_t n = 0;
	off_t size;
	int fd = open(res->console_log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > 0)
		n = pread(fd, buf, sizeof(buf) - 1, size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (size > n && (start = strchr(buf, '\n')))
		start++; /* the first line was cut */
	else
		start = buf;
	/* a serial line ends in \r\n */
	for (char *c = start, *w = start;; c++) {
		if (*c != '\r')
			*w++ = *c;
		if (!*c)
			break;
	}
	escape(start, strlen(start), res->console_tail, sizeof(res->console_tail), true);
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
int latch_vm_domain_opts(const struct latch_vm_state *st, struct latch_domain_opts *d, char *accel_why, size_t whylen)
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
	latch_addr_format(&st->guest4, g4, sizeof(g4));
	latch_addr_format(&st->host4, h4, sizeof(h4));
	latch_addr_format(&st->guest6, g6, sizeof(g6));
	latch_addr_format(&st->host6, h6, sizeof(h6));
	if (st->guest6.family)
		snprintf(d->cmdline, sizeof(d->cmdline),
			 "console=ttyS0 quiet panic=-1 latch.ip=%s/30 latch.gw=%s latch.ip6=%s/64 latch.gw6=%s", g4, h4,
			 g6, h6);
	else
		snprintf(d->cmdline, sizeof(d->cmdline), "console=ttyS0 quiet panic=-1 latch.ip=%s/30 latch.gw=%s", g4,
			 h4);
	memcpy(d->mac, st->mac, 6);
	snprintf(d->tap, sizeof(d->tap), "%s", st->tap);
	latch_vm_agent_path(st->name, d->agent_sock, sizeof(d->agent_sock));
	snprintf(d->workspace, sizeof(d->workspace), "%s", st->workspace);
	return latch_vm_console_path(st->name, d->console_log, sizeof(d->console_log));
}

int latch_vm_boot_timeout(const struct latch_vm_up_opts *o, bool kvm)
{
	return o->boot_timeout_ms > 0 ? o->boot_timeout_ms :
	       kvm		      ? LATCH_VM_BOOT_TIMEOUT_KVM_MS :
					LATCH_VM_BOOT_TIMEOUT_TCG_MS;
}

int latch_vm_domain_alive(void *arg)
{
	struct latch_vm_domain_watch *w = arg;
	struct latch_domain_info di;

	latch_domain_info(w->v, w->name, &di);
	if (strcmp(di.state, "running"))
		return latch_errf(w->err, w->errlen, -EIO, "the guest stopped while booting (domain %s)", di.state);
	return 0;
}

/* What the channel did while the guest did not answer, for the timeout's message. */
static void agent_seen(const struct latch_agent_wait_stats *st, const char *sock, char *buf, size_t len)
{
	if (!st->connects)
		snprintf(buf, len, "%s could not be connected: %s%s", sock, strerror(-st->last_error),
			 st->lock_busy ? " (another latch command held the channel)" : "");
	else
		snprintf(buf, len,
			 "%d connection(s) to %s, the first %.1f s in, each pinged every 0.25 s for up to %d s; "
			 "%llu byte(s) came back",
			 st->connects, sock, st->first_connect_ms / 1000.0, LATCH_AGENT_SESSION_MS / 1000,
			 (unsigned long long)st->bytes_in);
}

/*
 * Start the domain (a fresh one from st, or the one libvirt has defined) and
 * wait for its agent, within the boot timeout.  *started says whether a
 * domain ran, i.e. whether there is a guest to inspect after a failure.
 */
static int boot_guest(struct latch_virt *v, const struct latch_vm_state *st, bool defined,
		      const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, int64_t t0, bool *started,
		      char *err, size_t errlen)
{
	struct latch_agent_wait_stats seen;
	struct latch_domain_info di;
	struct latch_domain_opts d;
	char dir[PATH_MAX];
	int64_t t_start, dom_ms;
	int ret, timeout;

	*started = false;
	if (latch_vm_domain_opts(st, &d, res->accel_why, sizeof(res->accel_why)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s is too long", st->image_dir);
	timeout = latch_vm_boot_timeout(o, d.kvm);
	res->boot_timeout_ms = timeout;
	snprintf(res->console_log, sizeof(res->console_log), "%s", d.console_log);
	snprintf(dir, sizeof(dir), "%s", d.console_log);
	*strrchr(dir, '/') = '\0';
	ret = latch_mkdirs(dir, 0700);
	if (ret)
		return latch_errf(err, errlen, ret, "cannot create %s: %s", dir, strerror(-ret));
	unlink(d.agent_sock);

	t_start = latch_now_ms();
	ret = defined ? latch_domain_start(v, st->name, err, errlen) : latch_domain_create(v, &d, err, errlen);
	dom_ms = latch_now_ms() - t_start;
	if (ret)
		return ret;
	*started = true;
	res->ms_domain = latch_now_ms() - t0;
	latch_domain_info(v, st->name, &di);
	latch_vm_step(o, "domain " LATCH_DOMAIN_PREFIX "%s started in %.1f s, accelerator %s (%s)", st->name,
		      dom_ms / 1000.0, *di.accel ? di.accel : "?", res->accel_why);
	latch_vm_step(o, "waiting for the guest agent (boot timeout %d s from the domain start; console log %s)",
		      timeout / 1000, d.console_log);
	ret = latch_agent_wait(d.agent_sock, (int)(t_start + timeout - latch_now_ms()), latch_vm_domain_alive,
			       &(struct latch_vm_domain_watch){ v, st->name, err, errlen }, res->release,
			       sizeof(res->release), &seen);
	if (ret == -ETIMEDOUT) {
		char what[PATH_MAX + 160];

		agent_seen(&seen, d.agent_sock, what, sizeof(what));
		if (dom_ms * 2 >= timeout)
			latch_errf(err, errlen, ret,
				   "the guest agent did not answer within the boot timeout (%d s): starting the domain "
				   "took %.1f s of it (slow step: domain start; `latch doctor` checks libvirt)",
				   timeout / 1000, dom_ms / 1000.0);
		else
			latch_errf(
				err, errlen, ret,
				"the guest agent did not answer within the boot timeout (%d s): the domain started in "
				"%.1f s, then the guest did not answer for %.1f s (slow step: guest agent; %s; console "
				"log %s)",
				timeout / 1000, dom_ms / 1000.0, (latch_now_ms() - t_start - dom_ms) / 1000.0, what,
				d.console_log);
	}
	if (ret) {
		console_tail(res);
		return ret;
	}
	res->ms_agent = latch_now_ms() - t0;
	latch_vm_step(o, "agent answered in %.1f s after the domain started: guest kernel %s",
		      (latch_now_ms() - t_start) / 1000.0, res->release);
	return 0;
}

/* Put the host copy of the guest state back, when there is one; never fatal. */
static void restore_state(const char *name, struct latch_vm_up_result *res)
{
	char dir[PATH_MAX];
	int r;

	if (latch_vm_backup_dir(name, dir, sizeof(dir)) || access(dir, F_OK))
		return;
	r = latch_vm_restore(name, NULL, &res->restored_bytes, res->restore_note, sizeof(res->restore_note));
	res->restored = r == 0;
}

/* Undo in reverse; each step acts only on what exists.  The guest-state backup and the console log stay. */
static void teardown(struct latch_virt *v, const struct latch_vm_state *st)
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
	latch_template_overlay_remove(st->name);
	latch_state_remove(st->name);
}

/* Read the enforcement back (re-attaching from the pins if asked): nothing starts unless it holds. */
static int verify_enforced(const struct latch_vm_up_opts *o, const struct latch_vm_state *st, bool reattach, int64_t t0,
			   struct latch_vm_up_result *res, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_posture p;
	char e[LATCH_ERR_MAX];

	if (reattach && latch_sandbox_posture_of(st->name, &p, e, sizeof(e)) == 0 && !p.enforced)
		latch_sandbox_reattach(st->name, e, sizeof(e));
	if (latch_sandbox_posture_of(st->name, &p, e, sizeof(e)) || !p.enforced)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_POSTURE,
			     "enforcement on %s could not be verified (%s); no domain was started", st->tap,
			     p.enforced ? e : p.why);
	res->ms_enforced = latch_now_ms() - t0;
	latch_vm_step(o, "enforcement verified on %s in the kernel (%lld ms)", st->tap, (long long)res->ms_enforced);
	return 0;
}

/* The routing, and the step line that says where allowed traffic goes. */
static int route(const struct latch_vm_up_opts *o, const struct latch_vm_state *st, char *err, size_t errlen)
{
	struct latch_net_opts n;
	int ret;

	latch_vm_net_opts(st, &n);
	ret = latch_net_up(&n, err, errlen);
	if (ret)
		return ret;
	if (*st->uplink)
		latch_vm_step(o, "routing: table %u, default via uplink %s", st->table, st->uplink);
	else
		latch_vm_step(
			o,
			"routing: table %u, unreachable default: no uplink in latch.conf, so allowed traffic has no "
			"route",
			st->table);
	return 0;
}

/* The image, built when it is missing. */
static int ensure_image(const struct latch_vm_up_opts *o, const struct latch_vm_state *st,
			struct latch_vm_up_result *res, char *err, size_t errlen)
{
	int recipe_exit;

	if (latch_vm_image_present(st->image_dir))
		return 0;
	latch_vm_step(o, "building the %s image in %s", st->image, st->image_dir);
	res->image_built = true;
	return latch_vm_image_build_into(st->image, st->image_dir, false, &recipe_exit, err, errlen);
}

/*
 * `up` of a sandbox that was taken `down`: same tap, pins and state.  The
 * enforcement is verified again (and re-attached from the pins if it fell
 * off) before the domain is started; a failure leaves the sandbox down, as
 * it was found (or, with keep_on_failure, the guest running for inspection).
 */
static int restart(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, int64_t t0,
		   enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_vm_state *st = &res->obs.st;
	struct latch_domain_info di;
	struct latch_virt *v;
	bool started = false;
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
	latch_vm_step(o, "sandbox %s is down: starting it again behind the same tap, enforcement and state", o->name);
	ret = verify_enforced(o, st, true, t0, res, fail, err, errlen);
	if (!ret)
		ret = route(o, st, err, errlen);
	/* the domain is gone (undefined by hand, or a rebuild): a fresh guest on the same tap */
	if (!ret && !di.exists)
		ret = ensure_image(o, st, res, err, errlen);
	if (!ret)
		ret = boot_guest(v, st, di.exists, o, res, t0, &started, err, errlen);
	if (ret && started && o->keep_on_failure) {
		res->kept = true;
	} else if (ret && started) {
		char e[LATCH_ERR_MAX];
		bool forced;

		latch_domain_stop(v, o->name, 0, &forced, e, sizeof(e));
	}
	if (!ret)
		restore_state(o->name, res);
out:
	latch_virt_close(v);
	return ret;
}

static int check_up_opts(const struct latch_vm_up_opts *o, const struct latch_conf *c, char *image_dir, size_t dirlen,
			 char *err, size_t errlen, enum latch_vm_fail *fail)
{
	char e[LATCH_ERR_MAX], shown[PATH_MAX];

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
	if (!strcmp(o->image, "debian") && !latch_vm_image_present(image_dir))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "image 'debian' is not built yet; run `latch image build --image debian` first "
			     "(debootstrap, a few minutes)");
	if (strcmp(o->image, LATCH_VM_DEFAULT_IMAGE) && !latch_vm_image_present(image_dir))
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

		escape(o->workspace, sizeof(o->workspace), shown, sizeof(shown), false);
		/* it goes into the state file, one line per key: a newline would write keys of its own */
		if (strcmp(shown, o->workspace))
			return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
				     "--workspace '%s' has control characters or backslashes; give a plain path",
				     shown);
		if (o->workspace[0] != '/' || stat(o->workspace, &sbuf) || !S_ISDIR(sbuf.st_mode))
			return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
				     "--workspace '%s' is not an existing directory (absolute path)", o->workspace);
	}
	return 0;
}

/* Refuse a name in use in any of the places a sandbox leaves a trace. */
static int check_name_free(struct latch_virt *v, const struct latch_vm_up_opts *o, const char *tap,
			   enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_domain_info di;

	if (latch_sandbox_exists(o->name))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "name '%s' is in use by an attached sandbox; `latch detach %s` or pick another name",
			     o->name, o->name);
	if (latch_net_tap_exists(tap))
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "device %s already exists; `latch destroy %s` removes a leftover tap", tap, o->name);
	latch_domain_info(v, o->name, &di);
	if (di.exists)
		return ufail(err, errlen, fail, LATCH_VM_FAIL_INPUT,
			     "a libvirt domain " LATCH_DOMAIN_PREFIX "%s already exists%s", o->name,
			     di.latch_managed ? "; `latch destroy` it first" : " and latch did not make it");
	return 0;
}

/* 1. allocate, and record it before anything exists in the kernel */
static int allocate(const struct latch_vm_up_opts *o, const struct latch_conf *conf, const char *image_dir,
		    struct latch_vm_state *st, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	int ret;

	snprintf(st->name, sizeof(st->name), "%s", o->name);
	snprintf(st->image, sizeof(st->image), "%s", o->image);
	snprintf(st->image_dir, sizeof(st->image_dir), "%s", image_dir);
	snprintf(st->workspace, sizeof(st->workspace), "%s", o->workspace);
	st->memory_mib = o->memory_mib;
	st->cpus = o->cpus;
	ret = latch_state_allocate(conf, st, err, errlen);
	if (!ret && o->warm)
		memcpy(st->mac, (uint8_t[6])LATCH_TEMPLATE_MAC, sizeof(st->mac)); /* a restored guest keeps it */
	if (!ret)
		ret = latch_net_check_free(&st->subnet4, 30, err, errlen);
	if (!ret && st->subnet6.family)
		ret = latch_net_check_free(&st->subnet6, 64, err, errlen);
	if (ret == -ENOSPC || ret == -EADDRINUSE)
		*fail = LATCH_VM_FAIL_INPUT;
	return ret ?: latch_state_save(st, err, errlen);
}

int latch_vm_up(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, enum latch_vm_fail *fail, char *err,
		size_t errlen)
{
	int64_t t0 = latch_now_ms();
	struct latch_vm_state *st = &res->obs.st;
	struct latch_virt *v = NULL;
	struct latch_conf conf;
	char e[LATCH_ERR_MAX], image_dir[PATH_MAX];
	bool tap_created = false, started = false;
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

	snprintf(st->tap, sizeof(st->tap), "lt-%s", o->name);
	if (latch_vm_exists(o->name)) {
		ret = restart(o, res, t0, fail, err, errlen);
		goto unlock;
	}
	v = latch_virt_open(err, errlen);
	if (!v) {
		ret = -ECONNREFUSED;
		goto unlock;
	}
	ret = check_name_free(v, o, st->tap, fail, err, errlen);
	if (!ret)
		ret = allocate(o, &conf, image_dir, st, fail, err, errlen);
	if (ret)
		goto unlock;

	/* 2. the tap, down and bare */
	ret = latch_net_tap_create(st->tap, &tap_created, err, errlen);
	if (ret)
		goto rollback;
	latch_vm_step(o, "tap %s created, down and bare", st->tap);

	/* 3. enforcement on it */
	if (latch_vm_enforce_fresh(st, e, sizeof(e))) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_RUNTIME, "enforcement on %s: %s", st->tap, e);
		goto rollback;
	}

	/* 4. read it back: nothing starts unless the kernel says it is enforced; 5. routing; 6. the image */
	ret = verify_enforced(o, st, false, t0, res, fail, err, errlen);
	if (!ret)
		ret = route(o, st, err, errlen);
	if (!ret)
		ret = ensure_image(o, st, res, err, errlen);

	/* 7. the domain, 8. the agent: restored from a template when asked and it works, else booted */
	if (!ret && !(o->warm && latch_vm_warm_start(v, st, o, res, t0) == 0))
		ret = boot_guest(v, st, false, o, res, t0, &started, err, errlen);
	if (ret && started && o->keep_on_failure) {
		res->kept = true; /* the tap's enforcement stays with it */
		goto unlock;
	}
	if (ret)
		goto rollback;
	restore_state(o->name, res); /* the backup of an earlier sandbox of this name, if one was kept */
	latch_virt_close(v);
	close(lock);
	latch_vm_observe(o->name, &res->obs);
	return 0;

rollback:
	teardown(v, st);
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
	struct latch_agent *a;
	struct latch_virt *v;
	char e[LATCH_ERR_MAX];
	int lock, ret;

	*fail = LATCH_VM_FAIL_RUNTIME;
	memset(dr, 0, sizeof(*dr));
	lock = latch_state_lock(err, errlen);
	if (lock < 0)
		return lock;
	ret = latch_state_load(name, &st, err, errlen);
	if (ret) {
		if (ret == -ENOENT)
			*fail = LATCH_VM_FAIL_NO_SANDBOX;
		goto out;
	}
	v = latch_virt_open(err, errlen);
	if (!v) {
		ret = -ECONNREFUSED;
		goto out;
	}
	/* the agent's memory first, while the guest still has it */
	dr->backed_up = latch_vm_backup(name, &dr->backup_bytes, &dr->backup_files, dr->backup_note,
					sizeof(dr->backup_note)) == 0;
	/* a clean power-off: the guest gets to flush its workspace */
	if (latch_agent_open_sandbox(name, 2000, &a, e, sizeof(e)) == 0) {
		static const char *const argv[] = { "/sbin/poweroff", NULL };
		struct latch_agent_exec_opts eo = { .timeout_ms = 2000 };
		struct latch_agent_result r;

		latch_agent_exec(a, argv, &eo, -1, -1, &r);
		latch_agent_close(a);
	}
	ret = latch_domain_stop(v, name, timeout_ms, &dr->forced, err, errlen);
	if (ret == -ENOENT)
		ret = 0; /* no domain: nothing to stop */
	latch_virt_close(v);
out:
	close(lock);
	return ret;
}

/* What carries the name when there is no state: latch's domain, a tap; or only a kept backup. */
static int destroy_stateless(struct latch_virt *v, const char *name, bool purge, struct latch_vm_destroy_result *dr,
			     enum latch_vm_fail *fail, char *err, size_t errlen)
{
	struct latch_domain_info di;
	char tap[IF_NAMESIZE], e[LATCH_ERR_MAX];
	int ret = 0;

	latch_domain_info(v, name, &di);
	snprintf(tap, sizeof(tap), "lt-%s", name);
	if (!di.latch_managed && !latch_net_tap_exists(tap)) {
		if (dr->backup_kept && purge)
			return latch_state_purge(name);
		if (dr->backup_kept)
			return ufail(err, errlen, fail, LATCH_VM_FAIL_NO_SANDBOX,
				     "no VM sandbox '%s'; its guest-state backup is kept in %s (`latch destroy %s "
				     "--purge` removes it)",
				     name, dr->backup_dir, name);
		return ufail(err, errlen, fail, LATCH_VM_FAIL_NO_SANDBOX, "no VM sandbox '%s' (see `latch ls`)", name);
	}
	if (di.latch_managed)
		ret = latch_domain_remove(v, name, err, errlen);
	if (!ret && latch_sandbox_exists(name))
		latch_sandbox_detach(name, e, sizeof(e));
	if (!ret)
		ret = latch_net_tap_delete(tap, err, errlen);
	if (!ret)
		latch_template_overlay_remove(name);
	if (!ret && purge)
		ret = latch_state_purge(name);
	return ret;
}

int latch_vm_destroy(const char *name, bool purge, struct latch_vm_destroy_result *dr, enum latch_vm_fail *fail,
		     char *err, size_t errlen)
{
	struct latch_vm_state st;
	struct latch_virt *v;
	struct latch_net_opts n;
	char e[LATCH_ERR_MAX], path[PATH_MAX];
	int lock, ret;

	*fail = LATCH_VM_FAIL_RUNTIME;
	memset(dr, 0, sizeof(*dr));
	dr->backup_kept = !latch_vm_backup_dir(name, dr->backup_dir, sizeof(dr->backup_dir)) &&
			  access(dr->backup_dir, F_OK) == 0;
	lock = latch_state_lock(err, errlen);
	if (lock < 0)
		return lock;
	ret = latch_state_load(name, &st, e, sizeof(e));
	if (ret && ret != -ENOENT) {
		ret = ufail(err, errlen, fail, LATCH_VM_FAIL_RUNTIME, "%s; remove it by hand once the rest is gone", e);
		goto out;
	}
	v = latch_virt_open(err, errlen);
	if (!v) {
		/* the domain may be running on the tap: keep everything until libvirt can stop it */
		ret = -ECONNREFUSED;
		goto out;
	}
	if (ret == -ENOENT) {
		ret = destroy_stateless(v, name, purge, dr, fail, err, errlen);
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
	if (!latch_vm_agent_path(name, path, sizeof(path)))
		unlink(path);
	if (!latch_vm_console_path(name, path, sizeof(path)))
		unlink(path);
	latch_template_overlay_remove(name); /* a warm start's disk */
	/* the state goes last, and only when the rest is gone: it is how a retry finds them */
	if (!ret)
		ret = purge ? latch_state_purge(name) : latch_state_remove(name);
out:
	if (!ret && purge)
		dr->backup_kept = false;
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
