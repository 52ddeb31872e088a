// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd.c - ADD, DEL, CHECK and STATUS.
 *
 * ADD is `latch attach --kit` as a library call: the same attach (default
 * deny, the posture read back), the profile stored and switched by latchd.
 * Anything that fails after the first pin is undone by DEL's own steps, so
 * a failed ADD leaves nothing and the runtime never starts the container
 * unprotected.  DEL finds everything by the sandbox name alone (a hash of
 * the container id and interface), so it needs no state of ADD's, and it
 * is 0 when there is nothing left to remove.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cni/cni.h"
#include "ctl/ctl.h"
#include "kit/kit.h"
#include "profile/profile.h"
#include "sandbox/sandbox.h"

/* latchd resolves profiles and serves the resolver and broker: a container without it would have nothing */
#define LATCHD_PING_MS 2000

static int env_name(const struct latch_cni_env *env, char name[LATCH_NAME_MAX + 1], struct latch_cni_error *e)
{
	if (!env->container_id || !*env->container_id || !env->ifname || !*env->ifname)
		return latch_cni_fail(e, LATCH_CNI_E_ENV, -EINVAL,
				      "latch: CNI_CONTAINERID and CNI_IFNAME must be set (the runtime sets them)");
	if (latch_cni_sandbox_name(env->container_id, env->ifname, name))
		return latch_cni_fail(e, LATCH_CNI_E_IO, -EIO, "latch: cannot hash the container id");
	return 0;
}

/* Everything ADD makes for NAME, removed; nothing there is 0. */
static int remove_all(const char *name, struct latch_cni_error *e)
{
	char err[LATCH_SANDBOX_ERR_MAX];
	json_t *ping;

	latch_kit_state_remove(name, err, sizeof(err));
	/* latchd closes the broker and wipes the keys it kept (it notices the pins go, but later) */
	if (latch_sandbox_exists(name) && (ping = latchd_ping(LATCHD_PING_MS))) {
		json_decref(ping);
		latch_sandbox_kit_give(name, NULL, false, NULL, NULL, err, sizeof(err));
	}
	if (latch_sandbox_exists(name) && latch_sandbox_detach(name, err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_IO, -EIO, "latch: %s: cannot remove the enforcement: %s", name,
				      err);
	if (latch_state_forget(name, err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_IO, -EIO, "latch: %s: %s", name, err);
	return 0;
}

/* The attach's input, as `latch attach` would take it: the gateway is the host and the resolver. */
static void attach_opts(const char *name, const struct latch_cni_link *l, struct latch_sandbox_opts *o)
{
	*o = (struct latch_sandbox_opts){
		.dns_rate = LATCH_DEFAULT_DNS_RATE,
		.dns_burst = LATCH_DEFAULT_DNS_BURST,
		.event_rate = LATCH_DEFAULT_EVENT_RATE,
		.event_burst = LATCH_DEFAULT_EVENT_BURST,
	};
	snprintf(o->name, sizeof(o->name), "%s", name);
	snprintf(o->ifname, sizeof(o->ifname), "%s", l->host_ifname);
	memcpy(o->guest_mac, l->mac, 6);
	o->guest_ip4 = l->ip4;
	o->host_ip4 = o->resolver_ip4 = l->gw4;
	o->guest_ip6 = l->ip6;
	o->host_ip6 = o->resolver_ip6 = l->gw6;
}

/* The profile stored and made live by latchd, the kit handed over with it. */
static int apply_policy(const char *name, const struct latch_cni_policy *p, const struct latch_kit *kit,
			struct latch_cni_error *e)
{
	const char *prof = *p->profile ? p->profile : "sealed";
	char err[LATCH_SANDBOX_ERR_MAX];
	json_t *rep = NULL;
	int ret;

	if ((ret = latch_profile_state_write(name, prof, err, sizeof(err))))
		return latch_cni_fail(e, LATCH_CNI_E_IO, ret, "latch: %s: %s", name, err);
	if (kit) {
		/* stores the kit, hands it to latchd, and switches to the profile stored above */
		if ((ret = latch_sandbox_attach_kit(name, kit, NULL, NULL, err, sizeof(err))))
			return latch_cni_fail(e, LATCH_CNI_E_CONFIG, ret, "latch: %s (from %s)", err, p->from);
		return 0;
	}
	ret = latchd_switch(name, prof, &rep, err, sizeof(err));
	if (ret)
		return latch_cni_fail(e, LATCH_CNI_E_AGAIN, ret, "latch: %s: profile %s: %s", name, prof, err);
	if (!json_is_true(json_object_get(rep, "ok")))
		ret = latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: profile %s (from %s): %s", prof, p->from,
				     json_string_value(json_object_get(rep, "error")) ?: "latchd refused it");
	json_decref(rep);
	return ret;
}

static int posture_ok(const char *name, int code, struct latch_cni_error *e)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_posture p;
	int r = latch_sandbox_posture_of(name, &p, err, sizeof(err));

	if (r)
		return latch_cni_fail(e, code, r, "latch: %s: cannot read the posture back: %s", name, err);
	if (!p.enforced)
		return latch_cni_fail(e, code, -EPERM, "latch: %s is NOT ENFORCED: %s", name, p.why);
	return 0;
}

struct resolver_owner {
	const char *self;
	const struct latch_sandbox_opts *o;
	char owner[LATCH_NAME_MAX + 1];
};

static int resolver_owner_one(const char *name, void *arg)
{
	struct resolver_owner *r = arg;
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb;
	struct latch_config cfg, want;
	bool same;

	if (!strcmp(name, r->self) || !(sb = latch_sandbox_open(name, err, sizeof(err))))
		return 0;
	same = !latch_sandbox_read_config(sb, &cfg);
	latch_sandbox_free(sb);
	latch_sandbox_config(r->o, 0, &want);
	same = same && ((want.resolver_ip4 && cfg.resolver_ip4 == want.resolver_ip4) ||
			(r->o->resolver_ip6.family && !memcmp(cfg.resolver_ip6, want.resolver_ip6, 16)));
	if (same)
		snprintf(r->owner, sizeof(r->owner), "%s", name);
	return same;
}

/*
 * latchd serves one resolver per address, bound on it: a second sandbox on
 * the same gateway would get none, and with it no named policy.  Refused
 * before anything exists, with the sandbox that has it.
 */
static int resolver_free(const char *name, const struct latch_sandbox_opts *o, struct latch_cni_error *e)
{
	struct resolver_owner r = { .self = name, .o = o };
	char gw[INET6_ADDRSTRLEN + 8];

	latch_sandbox_list(resolver_owner_one, &r);
	if (!*r.owner)
		return 0;
	latch_addr_format(o->resolver_ip4.family ? &o->resolver_ip4 : &o->resolver_ip6, gw, sizeof(gw));
	return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EADDRINUSE,
			      "latch: gateway %s is the resolver address of sandbox %s already; latchd serves one "
			      "resolver per address, so each latch-cni container needs a gateway of its own "
			      "(docs/cni.md, \"Limits\")",
			      gw, r.owner);
}

static int add_attached(const char *name, const struct latch_cni_conf *c, struct latch_sandbox_opts *o,
			struct latch_cni_error *e)
{
	char err[LATCH_SANDBOX_ERR_MAX];
	struct latch_kit *kit = NULL;
	enum latch_vm_fail fail;
	int ret;

	ret = latch_sandbox_attach(o, *c->policy.kit ? c->policy.kit : NULL, &kit, &fail, err, sizeof(err));
	if (ret)
		return latch_cni_fail(e, fail == LATCH_VM_FAIL_INPUT ? LATCH_CNI_E_CONFIG : LATCH_CNI_E_ENFORCE, ret,
				      "latch: %s (the host end %s of %s)", err, o->ifname, name);
	ret = apply_policy(name, &c->policy, kit, e);
	latch_kit_free(kit);
	/* the switch wrote the maps: the kernel is asked once more before the runtime starts anything */
	return ret ?: posture_ok(name, LATCH_CNI_E_ENFORCE, e);
}

int latch_cni_add(const struct latch_cni_env *env, const struct latch_cni_conf *c, struct latch_cni_error *e)
{
	char name[LATCH_NAME_MAX + 1];
	struct latch_sandbox_opts o;
	struct latch_cni_error ignored;
	struct latch_cni_link l;
	json_t *ping;
	int ret;

	if ((ret = env_name(env, name, e)))
		return ret;
	if (!env->netns || !*env->netns)
		return latch_cni_fail(e, LATCH_CNI_E_ENV, -EINVAL, "latch: ADD needs CNI_NETNS");
	if ((ret = latch_cni_link_find(env, c->prev, &l, e)))
		return ret;
	ping = latchd_ping(LATCHD_PING_MS);
	if (!ping)
		return latch_cni_fail(e, LATCH_CNI_E_AGAIN, -ECONNREFUSED,
				      "latch: latchd is not answering on this node; start it (systemctl start "
				      "latchd, or the node agent) and the runtime's retry will succeed");
	json_decref(ping);
	/* a runtime's retry of an ADD: what the last one left is stale, and goes first */
	if ((ret = remove_all(name, e)))
		return ret;
	attach_opts(name, &l, &o);
	if ((ret = resolver_free(name, &o, e)))
		return ret;
	ret = add_attached(name, c, &o, e);
	if (ret && remove_all(name, &ignored))
		snprintf(e->details, sizeof(e->details), "and cleaning up failed: %.*s", 900, ignored.msg);
	if (!ret)
		latch_cni_audit(name, "attach", "cni.add", env, o.ifname);
	return ret;
}

int latch_cni_del(const struct latch_cni_env *env, struct latch_cni_error *e)
{
	char name[LATCH_NAME_MAX + 1];
	bool had;
	int ret = env_name(env, name, e);

	if (ret)
		return ret;
	had = latch_sandbox_exists(name);
	ret = remove_all(name, e);
	/* a DEL with nothing to remove (the second, or after a failed ADD) records nothing */
	if (!ret && had)
		latch_cni_audit(name, "detach", "cni.del", env, NULL);
	return ret;
}

/* The pinned config against what ADD would attach now. */
static int check_config(const char *name, const struct latch_sandbox_opts *o, int ifindex, struct latch_cni_error *e)
{
	char err[LATCH_ERR_MAX];
	struct latch_config want, have;
	struct latch_sandbox *sb = latch_sandbox_open(name, err, sizeof(err));
	int ret;

	if (!sb)
		return latch_cni_fail(e, LATCH_CNI_E_POSTURE, -ENOENT, "latch: %s: %s", name, err);
	ret = latch_sandbox_read_config(sb, &have);
	latch_sandbox_free(sb);
	if (ret)
		return latch_cni_fail(e, LATCH_CNI_E_POSTURE, ret, "latch: %s: its config cannot be read", name);
	latch_sandbox_config(o, ifindex, &want);
	if (have.ifindex != want.ifindex || strcmp(have.ifname, want.ifname) ||
	    memcmp(have.guest_mac, want.guest_mac, 6) || have.guest_ip4 != want.guest_ip4 ||
	    have.host_ip4 != want.host_ip4 || memcmp(have.guest_ip6, want.guest_ip6, 16) ||
	    memcmp(have.host_ip6, want.host_ip6, 16))
		return latch_cni_fail(e, LATCH_CNI_E_POSTURE, -EINVAL,
				      "latch: %s enforces another link, MAC or address than the container has now; "
				      "DEL and ADD it again",
				      name);
	return 0;
}

int latch_cni_check(const struct latch_cni_env *env, const struct latch_cni_conf *c, struct latch_cni_error *e)
{
	char name[LATCH_NAME_MAX + 1], prof[LATCH_PROFILE_NAME_MAX + 2] = "";
	const char *want = *c->policy.profile ? c->policy.profile : "sealed";
	struct latch_sandbox_opts o;
	struct latch_cni_link l;
	int ret;

	if ((ret = env_name(env, name, e)))
		return ret;
	if (!env->netns || !*env->netns)
		return latch_cni_fail(e, LATCH_CNI_E_ENV, -EINVAL, "latch: CHECK needs CNI_NETNS");
	if (!latch_sandbox_exists(name))
		return latch_cni_fail(e, LATCH_CNI_E_POSTURE, -ENOENT,
				      "latch: container %s has no enforcement (sandbox %s); DEL and ADD it again",
				      env->container_id, name);
	if ((ret = latch_cni_link_find(env, c->prev, &l, e)))
		return ret;
	attach_opts(name, &l, &o);
	if ((ret = check_config(name, &o, l.host_ifindex, e)) || (ret = posture_ok(name, LATCH_CNI_E_POSTURE, e)))
		return ret;
	latch_profile_state_read(name, prof, sizeof(prof));
	if (strcmp(prof, want))
		return latch_cni_fail(e, LATCH_CNI_E_POSTURE, -EINVAL,
				      "latch: %s runs profile \"%s\", not \"%s\" (from %s); DEL and ADD it again", name,
				      prof, want, c->policy.from);
	return 0;
}

int latch_cni_status(struct latch_cni_error *e)
{
	char err[LATCH_ERR_MAX];
	json_t *ping;

	if (latch_bpffs_ensure(err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_NOT_READY, -ENODEV, "latch: %s", err);
	ping = latchd_ping(LATCHD_PING_MS);
	if (!ping)
		return latch_cni_fail(e, LATCH_CNI_E_NOT_READY, -ECONNREFUSED,
				      "latch: latchd is not answering on this node; start it (systemctl start latchd)");
	json_decref(ping);
	return 0;
}
