// SPDX-License-Identifier: GPL-2.0-only
/*
 * conf.c - the network config on stdin and which policy a container gets.
 *
 * The policy comes from outside the container, most specific first: the
 * node's pod file (the operator's, matched on CNI_ARGS' K8S_POD_NAMESPACE
 * and K8S_POD_NAME), then runtimeConfig's `latch` (what the runtime was
 * told when it started the container), then the network config's `latch`
 * section.  Nothing the container's processes write is read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni/cni.h"
#include "profile/profile.h"

const char *const latch_cni_versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", NULL };

bool latch_cni_version_known(const char *v)
{
	for (int i = 0; v && latch_cni_versions[i]; i++)
		if (!strcmp(v, latch_cni_versions[i]))
			return true;
	return false;
}

int latch_cni_fail(struct latch_cni_error *e, int code, int ret, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return ret;
}

/* A profile or kit name from WHERE: a string of the profile name rules (kits share them). */
static int policy_name(json_t *v, const char *where, const char *field, char *out, size_t len,
		       struct latch_cni_error *e)
{
	char err[LATCH_ERR_MAX];
	const char *s;

	if (!v)
		return 0;
	s = json_string_value(v);
	if (!s)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: %s: \"%s\" must be a string", where,
				      field);
	if (latch_profile_name_check(s, err, sizeof(err)) || strlen(s) >= len)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: %s: \"%s\" \"%s\" is no valid name: %s",
				      where, field, s, err);
	snprintf(out, len, "%s", s);
	return 0;
}

/* A `latch` object ({"profile", "kit"}, nothing else) into P when it names either. */
static int policy_object(json_t *o, const char *where, struct latch_cni_policy *p, struct latch_cni_error *e)
{
	struct latch_cni_policy q = { 0 };
	const char *k;
	json_t *v;
	int ret;

	if (!o)
		return 0;
	if (!json_is_object(o))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: %s: \"latch\" must be an object", where);
	json_object_foreach(o, k, v) {
		if (strcmp(k, "profile") && strcmp(k, "kit"))
			return latch_cni_fail(e, LATCH_CNI_E_FIELD, -EINVAL,
					      "latch: %s: unknown field \"latch.%s\"; it takes \"profile\" and \"kit\"",
					      where, k);
	}
	if ((ret = policy_name(json_object_get(o, "profile"), where, "profile", q.profile, sizeof(q.profile), e)) ||
	    (ret = policy_name(json_object_get(o, "kit"), where, "kit", q.kit, sizeof(q.kit), e)))
		return ret;
	snprintf(q.from, sizeof(q.from), "%s", where);
	*p = q;
	return 0;
}

/* CNI_ARGS' value of KEY ("K=V;K=V") into out; "" when absent. */
static int cni_arg(const char *args, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);
	const char *s = args;

	*out = '\0';
	while (s && *s) {
		const char *end = strchr(s, ';');
		size_t n = end ? (size_t)(end - s) : strlen(s);

		if (n > klen && !strncmp(s, key, klen) && s[klen] == '=') {
			if (n - klen - 1 >= len)
				return -ENAMETOOLONG;
			memcpy(out, s + klen + 1, n - klen - 1);
			out[n - klen - 1] = '\0';
			return 0;
		}
		s = end ? end + 1 : NULL;
	}
	return 0;
}

static int conf_policy(const struct latch_cni_env *env, struct latch_cni_conf *c, struct latch_cni_error *e)
{
	char ns[256], pod[256];
	bool found = false;
	json_t *rc;
	int ret;

	snprintf(c->policy.from, sizeof(c->policy.from), "the default (no latch section): sealed");
	if ((ret = policy_object(json_object_get(c->root, "latch"), "the network config", &c->policy, e)))
		return ret;
	rc = json_object_get(c->root, "runtimeConfig");
	if (rc && !json_is_object(rc))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: \"runtimeConfig\" must be an object");
	if ((ret = policy_object(json_object_get(rc, "latch"), "runtimeConfig", &c->policy, e)))
		return ret;
	if (cni_arg(env->args, "K8S_POD_NAMESPACE", ns, sizeof(ns)) ||
	    cni_arg(env->args, "K8S_POD_NAME", pod, sizeof(pod)))
		return latch_cni_fail(e, LATCH_CNI_E_ENV, -EINVAL,
				      "latch: CNI_ARGS: K8S_POD_NAMESPACE or K8S_POD_NAME is longer than 255 bytes");
	if (!*ns)
		return 0;
	return latch_cni_pods_lookup(ns, pod, &c->policy, &found, e);
}

int latch_cni_conf_parse(const char *text, const struct latch_cni_env *env, struct latch_cni_conf *c,
			 struct latch_cni_error *e)
{
	json_error_t je;

	memset(c, 0, sizeof(*c));
	c->root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!c->root || !json_is_object(c->root)) {
		latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL,
			       "latch: the network config on stdin is no JSON object: %s",
			       c->root ? "not an object" : je.text);
		latch_cni_conf_free(c);
		return -EINVAL;
	}
	c->version = json_string_value(json_object_get(c->root, "cniVersion"));
	if (!latch_cni_version_known(c->version)) {
		latch_cni_fail(e, LATCH_CNI_E_VERSION, -EPROTONOSUPPORT,
			       "latch: cniVersion \"%s\" is not one latch-cni speaks (0.3.0, 0.3.1, 0.4.0, 1.0.0)",
			       c->version ? c->version : "(missing)");
		return -EPROTONOSUPPORT;
	}
	c->prev = json_object_get(c->root, "prevResult");
	if (c->prev && !json_is_object(c->prev))
		return latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL, "latch: \"prevResult\" must be an object");
	return conf_policy(env, c, e);
}

void latch_cni_conf_free(struct latch_cni_conf *c)
{
	json_decref(c->root);
	c->root = NULL;
	c->prev = NULL;
}
