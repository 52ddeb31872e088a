// SPDX-License-Identifier: GPL-2.0-only
/*
 * up.c - a VM sandbox's life beyond its guest: `up` chooses and checks its
 * profile and kit before vm/ creates anything, then joins the booted guest
 * to latchd (kit, profile, environment); `down` and `destroy` undo the
 * kit and profile state with the guest.
 *
 * The guest starts under default deny (sealed).  Its kit first: latchd
 * composes the kit's egress_allow into the profile's policy.  Then the
 * profile: stored, so latchd applies it whenever it (re)starts (stored
 * after the kit, whose request makes latchd look for new sandboxes: one
 * found with a stored profile is switched to it then, and this switch
 * would find that one running); then latchd is asked to switch now.
 * Without latchd the sandbox stays sealed: closed, not open.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "config/config.h"
#include "sandbox/sandbox.h"

/* a failure of up: its kind into res, its line into err; -errno */
__attribute__((format(printf, 6, 7))) static int up_fail(struct latch_sandbox_up_result *res, enum latch_vm_fail fail,
							 int ret, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	res->fail = fail;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret < 0 ? ret : -EIO;
}

/* The profile: o->profile, else the one stored for NAME, else latch.conf's (research); checked as latchd loads it. */
static int up_profile(const struct latch_sandbox_up_opts *o, struct latch_sandbox_up_result *res, char *err,
		      size_t errlen)
{
	char e[LATCH_ERR_MAX], dir[PATH_MAX], overlay[PATH_MAX];
	struct latch_profile p;
	struct latch_conf conf;
	int ret;

	res->profile = o->profile ? o->profile : res->stored_profile;
	if (!o->profile && latch_profile_state_read(o->vm.name, res->stored_profile, sizeof(res->stored_profile))) {
		ret = latch_conf_load(&conf, e, sizeof(e));
		if (ret) /* as latch_vm_up says it */
			return up_fail(res, LATCH_VM_FAIL_INPUT, ret, err, errlen, "up %s: %s", o->vm.name, e);
		snprintf(res->stored_profile, sizeof(res->stored_profile), "%s", conf.profile);
	}
	/* file:line errors before anything is created */
	if ((ret = latch_profile_name_check(res->profile, e, sizeof(e))))
		return up_fail(res, LATCH_VM_FAIL_INPUT, ret, err, errlen, "%s", e);
	latch_path(dir, sizeof(dir), "etc/latch/profiles");
	latch_path(overlay, sizeof(overlay), "etc/latch/allowlist.txt");
	ret = latch_profile_load(dir, res->profile, overlay, &p, e, sizeof(e));
	if (ret)
		return up_fail(res, ret == -ENOENT ? LATCH_VM_FAIL_INPUT : LATCH_VM_FAIL_RUNTIME, ret, err, errlen,
			       "%s", e);
	latch_profile_free(&p);
	return 0;
}

/*
 * up's kit: o->kit, else the one stored for NAME; a fresh sandbox has none
 * unless o->kit names one.  *kit NULL: no kit.
 */
static int up_kit_choose(const struct latch_sandbox_up_opts *o, bool fresh, struct latch_kit **kit,
			 struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	const char *kit_name = o->kit;
	struct latch_kit_state st;
	char e[LATCH_ERR_MAX];

	*kit = NULL;
	if (!kit_name && !fresh && latch_kit_state_read(o->vm.name, &st, e, sizeof(e)) == 0)
		kit_name = st.kit;
	if (!kit_name)
		return 0;
	*kit = latch_sandbox_kit_open_checked(kit_name, e, sizeof(e));
	if (!*kit)
		return up_fail(res, errno == ENOMEM ? LATCH_VM_FAIL_RUNTIME : LATCH_VM_FAIL_INPUT, -errno, err, errlen,
			       "up %s: %s", o->vm.name, e);
	snprintf(res->kit, sizeof(res->kit), "%s", (*kit)->name);
	return 0;
}

/* The kit stored (its placeholders kept when the sandbox had it), its port admitted, handed to latchd. */
static int up_kit_give(const struct latch_sandbox_up_opts *o, const struct latch_kit *kit, bool fresh,
		       struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	const char *name = o->vm.name;
	struct latch_kit_state st;
	char e[LATCH_ERR_MAX];
	int ret;

	res->fail = LATCH_VM_FAIL_RUNTIME;
	if (!kit) {
		struct latch_conf conf;

		if (!fresh)
			return 0;
		/* a fresh sandbox of an old name gets nothing of the old one's kit */
		latch_kit_state_remove(name, e, sizeof(e));
		/* without a kit, latchd's listener on the broker port takes the guest's asks (latch-ask) */
		if ((ret = latch_conf_load(&conf, e, sizeof(e))) ||
		    (ret = latch_sandbox_admit_port(name, conf.broker_port, e, sizeof(e))))
			return up_fail(res, LATCH_VM_FAIL_RUNTIME, ret, err, errlen,
				       "up %s: the broker port for asks: %s", name, e);
		return latch_sandbox_kit_give(name, NULL, false, NULL, &o->say, err, errlen);
	}
	if ((ret = latch_sandbox_kit_store(name, kit, fresh, &st, e, sizeof(e))) ||
	    (ret = latch_sandbox_admit_port(name, st.port, e, sizeof(e))))
		return up_fail(res, LATCH_VM_FAIL_RUNTIME, ret, err, errlen, "up %s: kit %s: %s", name, kit->name, e);
	res->kit_json = json_object();
	ret = latch_sandbox_kit_give(name, kit, false, res->kit_json, &o->say, err, errlen);
	/* the "kit" key alone is the caller's */
	json_t *k = json_incref(json_object_get(res->kit_json, "kit"));

	json_decref(res->kit_json);
	res->kit_json = k;
	return ret;
}

/* The domain runs now (as libvirt says). */
static bool up_is_running(const char *name)
{
	static struct latch_vm_observed ob;

	return !latch_vm_observe(name, &ob) && ob.libvirt_ok && !strcmp(ob.dom.state, "running");
}

/*
 * `up` of a sandbox that is up: hand its kit's keys to latchd again (after
 * latchd restarted, say), as `latch kit NAME secrets` does.  Another kit
 * than the stored one needs a `down` first: the guest holds the old one's
 * placeholders.
 */
static int up_kit_again(const struct latch_sandbox_up_opts *o, const struct latch_kit *kit,
			struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	struct latch_kit_state st;
	char e[LATCH_ERR_MAX];
	json_t *out;
	int ret;

	res->again = true;
	if (latch_kit_state_read(o->vm.name, &st, e, sizeof(e)) || strcmp(st.kit, kit->name))
		return up_fail(res, LATCH_VM_FAIL_INPUT, -EBUSY, err, errlen,
			       "up %s: the sandbox is up with %s%s; `latch down %s` first to give it kit %s",
			       o->vm.name, st.kit[0] ? "kit " : "no kit", st.kit, o->vm.name, kit->name);
	out = json_object();
	ret = latch_sandbox_kit_give(o->vm.name, kit, true, out, &o->say, err, errlen);
	res->fail = LATCH_VM_FAIL_RUNTIME;
	res->kit_json = json_incref(json_object_get(out, "kit"));
	json_decref(out);
	return ret;
}

/* The stored profile, and latchd asked to switch to it now; its refusal keeps the sandbox sealed. */
static int up_profile_apply(const char *name, struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX];
	json_t *rep = NULL;
	int ret;

	ret = latch_profile_state_write(name, res->profile, e, sizeof(e));
	if (ret)
		return up_fail(res, LATCH_VM_FAIL_RUNTIME, ret, err, errlen, "up %s: %s", name, e);
	res->profile_note = "applied by latchd";
	if (latchd_switch(name, res->profile, &rep, e, sizeof(e)))
		res->profile_note = "stored; latchd is not running, so the sandbox stays sealed until it starts";
	if (rep && !json_is_true(json_object_get(rep, "ok")))
		ret = up_fail(res, LATCH_VM_FAIL_RUNTIME, -EPERM, err, errlen,
			      "up %s: profile %s: %s (the sandbox stays sealed)", name, res->profile,
			      json_string_value(json_object_get(rep, "error")));
	json_decref(rep);
	return ret;
}

/* What the guest's shells read: the kit's environment in /etc/profile.d/latch.sh. */
static int up_kit_env(const struct latch_sandbox_up_opts *o, const struct latch_kit *kit,
		      struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	struct latch_kit_state st;
	char e[LATCH_ERR_MAX], **env;
	int n, ret;

	if (!kit)
		return 0;
	if ((ret = latch_sandbox_env(o->vm.name, &env, &n, &st, e, sizeof(e))) ||
	    (ret = latch_vm_set_env(o->vm.name, (const char *const *)env, e, sizeof(e)))) {
		latch_kit_env_free(env);
		return up_fail(res, LATCH_VM_FAIL_RUNTIME, ret, err, errlen, "up %s: the guest's environment: %s",
			       o->vm.name, e);
	}
	latch_kit_env_free(env);
	res->env_file = true;
	if (o->say.fn) {
		char line[LATCH_SANDBOX_ERR_MAX];

		snprintf(line, sizeof(line),
			 "the guest's environment is in %s and every `latch exec` (`latch env %s` prints it)",
			 LATCH_VM_ENV_FILE, o->vm.name);
		o->say.fn(o->say.arg, LATCH_SANDBOX_NOTE, line);
	}
	return 0;
}

/* The guest is up and sealed: its kit, its profile, its environment. */
static int up_join(const struct latch_sandbox_up_opts *o, const struct latch_kit *kit, bool fresh,
		   struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	int ret = up_kit_give(o, kit, fresh, res, err, errlen);

	if (!ret)
		ret = up_profile_apply(o->vm.name, res, err, errlen);
	if (!ret)
		ret = up_kit_env(o, kit, res, err, errlen);
	return ret;
}

/* The kit's agent can run on the sandbox's image (a sandbox that exists keeps the image it has). */
static int up_image_fits(const struct latch_sandbox_up_opts *o, bool fresh, const struct latch_kit *kit,
			 struct latch_sandbox_up_result *res, char *err, size_t errlen)
{
	struct latch_vm_observed *obs = NULL;
	char e[LATCH_ERR_MAX];
	const char *image = o->vm.image;
	int ret;

	if (!kit)
		return 0;
	if (!fresh && (obs = calloc(1, sizeof(*obs))) && !latch_vm_observe(o->vm.name, obs) && obs->have_state)
		image = obs->st.image;
	ret = latch_sandbox_image_fits(kit, image, e, sizeof(e));
	free(obs);
	if (ret)
		return up_fail(res, LATCH_VM_FAIL_INPUT, ret, err, errlen, "up %s: %s", o->vm.name, e);
	return 0;
}

int latch_sandbox_up(const struct latch_sandbox_up_opts *o, struct latch_sandbox_up_result *res, char *err,
		     size_t errlen)
{
	struct latch_kit *kit = NULL;
	char e[LATCH_ERR_MAX];
	bool fresh;
	int ret;

	memset(res, 0, sizeof(*res));
	ret = up_profile(o, res, err, errlen);
	if (ret)
		return ret;
	/* the kit: loaded and checked before anything is created */
	fresh = !latch_vm_exists(o->vm.name);
	ret = up_kit_choose(o, fresh, &kit, res, err, errlen);
	if (ret)
		return ret;
	ret = up_image_fits(o, fresh, kit, res, err, errlen);
	if (ret) {
		latch_kit_free(kit);
		return ret;
	}
	if (kit && !fresh && up_is_running(o->vm.name)) {
		ret = up_kit_again(o, kit, res, err, errlen);
	} else if ((ret = latch_vm_up(&o->vm, &res->vm, &res->fail, e, sizeof(e)))) {
		res->boot_failed = true;
		snprintf(err, errlen, "up %s: %s", o->vm.name, e);
	} else {
		ret = up_join(o, kit, fresh, res, err, errlen);
	}
	latch_kit_free(kit);
	if (ret) {
		json_decref(res->kit_json);
		res->kit_json = NULL;
	}
	return ret;
}

int latch_sandbox_down(const char *name, int timeout_ms, const struct latch_sandbox_say *say,
		       struct latch_vm_down_result *dr, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX];
	int ret = latch_vm_down(name, timeout_ms, dr, fail, e, sizeof(e));

	if (ret)
		return latch_errf(err, errlen, ret, "down %s: %s", name, e);
	/* its broker closes with it, and latchd wipes its keys; `up` hands them again */
	latch_sandbox_kit_stop(name, false, say);
	return 0;
}

int latch_sandbox_destroy(const char *name, bool purge, const struct latch_sandbox_say *say,
			  struct latch_vm_destroy_result *dr, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX];
	int ret = latch_vm_destroy(name, purge, dr, fail, e, sizeof(e));

	if (ret)
		return latch_errf(err, errlen, ret, "destroy %s: %s", name, e);
	/* its profile and what latchd kept of it: a new sandbox of this name inherits nothing */
	if (latch_state_forget(name, e, sizeof(e)) && say && say->fn)
		say->fn(say->arg, LATCH_SANDBOX_WARN, e);
	/* and its kit: a new sandbox of this name gets new placeholders */
	latch_sandbox_kit_stop(name, true, say);
	return 0;
}
