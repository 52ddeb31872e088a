// SPDX-License-Identifier: GPL-2.0-only
/*
 * attach.c - `latch attach`'s work once its options are parsed: the kit
 * checked and its port among the host services before anything exists,
 * the enforcement attached, its posture read back (the filters are in
 * place only if the kernel says so), then the kit and profile handed to
 * latchd.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include "ctl/ctl.h"
#include "config/config.h"
#include "sandbox/sandbox.h"

/* Read the posture back after attaching: someone else's filter may still run first. */
static int verify_attached(const char *name, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX] = "";
	struct latch_posture p;
	int r = latch_sandbox_posture_of(name, &p, e, sizeof(e));

	*fail = LATCH_VM_FAIL_POSTURE;
	if (r == -ENOENT)
		return latch_errf(err, errlen, r, "%s: cannot read the posture back: %s", name, e);
	if (r || !p.enforced)
		return latch_errf(
			err, errlen, r ?: -EPERM,
			"%s is attached but NOT ENFORCED: %s (see `latch status %s`; remove it and re-attach)", name,
			r ? strerror(-r) : p.why, name);
	return 0;
}

/* The kit, checked as latchd will read it, and latch.conf's broker_port among the host services. */
static int attach_kit_prepare(const char *kit_name, struct latch_sandbox_opts *o, struct latch_kit **kit,
			      enum latch_vm_fail *fail, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX];
	struct latch_conf conf;
	bool have = false;
	int ret;

	*fail = LATCH_VM_FAIL_INPUT;
	*kit = latch_sandbox_kit_open_checked(kit_name, e, sizeof(e));
	if (!*kit) {
		ret = -errno;
		if (ret == -ENOMEM)
			*fail = LATCH_VM_FAIL_RUNTIME;
		return latch_errf(err, errlen, ret, "attach --kit: %s", e);
	}
	ret = latch_conf_load(&conf, err, errlen);
	for (int i = 0; !ret && i < o->n_host_ports; i++)
		have |= o->host_ports[i] == conf.broker_port;
	if (!ret && !have && o->n_host_ports >= LATCH_HOST_PORTS_MAX)
		ret = latch_errf(err, errlen, -E2BIG,
				 "--kit needs a host port for the broker (%u); give at most %d "
				 "--host-port options",
				 conf.broker_port, LATCH_HOST_PORTS_MAX - 1);
	if (ret) {
		latch_kit_free(*kit);
		*kit = NULL;
		return ret;
	}
	if (!have)
		o->host_ports[o->n_host_ports++] = conf.broker_port;
	return 0;
}

int latch_sandbox_attach(struct latch_sandbox_opts *o, const char *kit_name, struct latch_kit **kit,
			 enum latch_vm_fail *fail, char *err, size_t errlen)
{
	int ret;

	*kit = NULL;
	*fail = LATCH_VM_FAIL_INPUT;
	if (!if_nametoindex(o->ifname))
		return latch_errf(err, errlen, -ENODEV, "--dev: no device '%s' on this host (see `ip link`)",
				  o->ifname);
	if (latch_sandbox_exists(o->name))
		return latch_errf(err, errlen, -EEXIST,
				  "sandbox '%s' already exists; `latch detach %s` first, or "
				  "`latch attach %s` alone to re-attach it",
				  o->name, o->name, o->name);
	/* the kit is loaded and checked, and its port added to the host services, before anything exists */
	if (kit_name && (ret = attach_kit_prepare(kit_name, o, kit, fail, err, errlen)))
		return ret;
	*fail = LATCH_VM_FAIL_RUNTIME;
	ret = latch_sandbox_create(o, err, errlen);
	if (!ret)
		ret = verify_attached(o->name, fail, err, errlen);
	if (ret) {
		latch_kit_free(*kit);
		*kit = NULL;
	}
	return ret;
}

int latch_sandbox_attach_kit(const char *name, const struct latch_kit *kit, json_t *out,
			     const struct latch_sandbox_say *say, char *err, size_t errlen)
{
	char e[LATCH_ERR_MAX], prof[LATCH_PROFILE_NAME_MAX + 2];
	struct latch_kit_state st;
	json_t *rep = NULL;
	int ret;

	if (!kit) {
		/* nothing of an old sandbox's kit: no state, and latchd closes a broker it may still keep */
		latch_kit_state_remove(name, e, sizeof(e));
		return latch_sandbox_kit_give(name, NULL, false, NULL, say, err, errlen);
	}
	if ((ret = latch_sandbox_kit_store(name, kit, true, &st, e, sizeof(e))))
		return latch_errf(err, errlen, ret, "%s: kit %s: %s", name, kit->name, e);
	/*
	 * The kit before the profile: its request makes latchd find the new
	 * sandbox, which latchd would switch to a profile stored already; the
	 * switch below would then find that one running.
	 */
	ret = latch_sandbox_kit_give(name, kit, false, out, say, err, errlen);
	if (ret)
		return ret;
	if (latch_profile_state_read(name, prof, sizeof(prof))) {
		snprintf(prof, sizeof(prof), "sealed");
		if ((ret = latch_profile_state_write(name, prof, err, errlen)))
			return ret;
		if (say && say->fn) {
			char line[LATCH_SANDBOX_ERR_MAX];

			snprintf(line, sizeof(line),
				 "%s: profile sealed, with the kit's network on top "
				 "(`latch egress %s profile P` picks another)",
				 name, name);
			say->fn(say->arg, LATCH_SANDBOX_NOTE, line);
		}
	}
	/* the profile composed with the kit's egress_allow; without latchd it applies when latchd starts */
	if (!latchd_switch(name, prof, &rep, e, sizeof(e)) && !json_is_true(json_object_get(rep, "ok")))
		ret = latch_errf(err, errlen, -EPERM, "%s: profile %s: %s", name, prof,
				 json_string_value(json_object_get(rep, "error")));
	json_decref(rep);
	return ret;
}

int latch_sandbox_attach_again(const char *name, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	int ret;

	*fail = LATCH_VM_FAIL_NO_SANDBOX;
	if (!latch_sandbox_exists(name))
		return latch_errf(err, errlen, -ENOENT,
				  "no sandbox '%s' to re-attach; give --dev and the addresses to "
				  "create it",
				  name);
	*fail = LATCH_VM_FAIL_RUNTIME;
	ret = latch_sandbox_reattach(name, err, errlen);
	if (ret)
		return ret;
	return verify_attached(name, fail, err, errlen);
}
