// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox_kit.c - a sandbox's kit, from the command line: what `up --kit`,
 * `attach --kit`, `down`, `destroy`, `exec`, `env` and `kit NAME ...` share.
 *
 * The kit state (kit.h, var/lib/latch/policy/NAME.kit) is written here and
 * nowhere else: which kit, the broker's port, the placeholders the guest
 * holds, the alternatives, stopped or not.  latchd serves what it says.
 * The keys of `secret: VAR` credentials exist only in the environment of
 * the command that hands them (this process): they go to latchd over its
 * root-only socket, in buffers wiped after use, and nowhere else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "cli/cli.h"
#include "config/config.h"
#include "kit/kit.h"
#include "loader/loader.h"
#include "profile/profile.h"
#include "vm/vm.h"

int latch_sandbox_kit(const char *name, struct latch_kit_state *st, struct latch_kit **kit, char *err, size_t errlen)
{
	int ret = latch_kit_state_read(name, st, err, errlen);

	*kit = NULL;
	if (ret)
		return ret;
	*kit = latch_kit_open_cli(st->kit, err, errlen);
	return *kit ? 0 : -errno;
}

int latch_sandbox_kit_store(const char *name, const struct latch_kit *kit, bool fresh, struct latch_kit_state *st,
			    char *err, size_t errlen)
{
	struct latch_kit_state old;
	struct latch_conf conf;
	char e[LATCH_ERR_MAX];
	int ret = latch_conf_load(&conf, err, errlen);

	if (ret)
		return ret;
	/* a sandbox that had this kit keeps the placeholders its guest holds; a new one gets new ones */
	ret = fresh ? -ENOENT : latch_kit_state_read(name, &old, e, sizeof(e));
	ret = latch_kit_state_for(kit, conf.broker_port, ret ? NULL : &old, st);
	explicit_bzero(&old, sizeof(old));
	if (ret)
		return latch_errf(err, errlen, ret, "cannot make placeholders: %s", strerror(-ret));
	return latch_kit_state_write(name, st, err, errlen);
}

int latch_sandbox_admit_port(const char *name, uint16_t port, char *err, size_t errlen)
{
	struct latch_sandbox *sb = latch_sandbox_open(name, err, errlen);
	struct latch_config cfg;
	int lock, ret = 0;

	if (!sb)
		return -ENOENT;
	/* the config is read, changed and written whole: a switch's flip writes it under the same lock */
	lock = latch_policy_lock(name, err, errlen);
	if (lock < 0) {
		latch_sandbox_free(sb);
		return lock;
	}
	ret = latch_sandbox_read_config(sb, &cfg);
	for (int i = 0; !ret && i < cfg.n_host_ports && i < LATCH_HOST_PORTS_MAX; i++)
		if (ntohs(cfg.host_ports[i]) == port)
			goto out;
	if (!ret && cfg.n_host_ports >= LATCH_HOST_PORTS_MAX)
		ret = latch_errf(err, errlen, -ENOSPC,
				 "%s has %d host services already; no room for the broker's port %u", name,
				 LATCH_HOST_PORTS_MAX, port);
	if (!ret) {
		cfg.host_ports[cfg.n_host_ports++] = htons(port);
		ret = latch_sandbox_write_config(sb, &cfg);
	}
	if (ret && !*err)
		latch_errf(err, errlen, ret, "%s: cannot write its config: %s", name, strerror(-ret));
out:
	latch_policy_unlock(lock);
	latch_sandbox_free(sb);
	return ret;
}

static void warn_line(const char *line, void *arg)
{
	json_t *warnings = arg;

	fprintf(stderr, "latch: warning: %s\n", line);
	if (warnings)
		json_array_append_new(warnings, json_string(line));
}

int latch_sandbox_kit_hand(const char *name, const struct latch_kit *kit, json_t *warnings, json_t **reply, char *err,
			   size_t errlen)
{
	struct latch_kit_secrets sec = { 0 };
	json_t *keys = NULL;
	int ret = 0;

	*reply = NULL;
	latch_json_wipe_frees();
	if (kit) {
		ret = latch_kit_secrets_from_env(kit, NULL, &sec, warn_line, warnings, err, errlen);
		if (ret)
			return ret;
		keys = json_object();
		for (int i = 0; i < sec.n; i++)
			if (sec.v[i].value)
				json_object_set_new(keys, sec.v[i].route, json_stringn(sec.v[i].value, sec.v[i].len));
		latch_kit_secrets_wipe(&sec);
	}
	ret = latchd_kit(name, keys, reply, err, errlen);
	json_decref(keys);
	if (!ret && !json_is_true(json_object_get(*reply, "ok")))
		ret = latch_errf(err, errlen, -EIO, "latchd: %s", json_string_value(json_object_get(*reply, "error")));
	return ret;
}

int latch_sandbox_env(const char *name, char ***env, int *n, struct latch_kit_state *st, char *err, size_t errlen)
{
	struct latch_kit *kit;
	struct latch_sandbox *sb;
	struct latch_config cfg;
	struct latch_addr host = { 0 };
	int ret;

	*env = NULL;
	*n = 0;
	ret = latch_sandbox_kit(name, st, &kit, err, errlen);
	if (ret == -ENOENT)
		return 0; /* no kit: nothing is given */
	if (ret)
		return ret;
	sb = latch_sandbox_open(name, err, errlen);
	if (!sb) {
		latch_kit_free(kit);
		return -ENOENT;
	}
	ret = latch_sandbox_read_config(sb, &cfg);
	latch_sandbox_free(sb);
	/* the URL names the host's v4 address when there is one: every guest of latch up has v4 */
	if (!ret && (cfg.flags & LATCH_CFG_HAVE_IP4)) {
		host.family = AF_INET;
		memcpy(&host.v4, &cfg.host_ip4, 4);
	} else if (!ret && (cfg.flags & LATCH_CFG_HAVE_IP6)) {
		host.family = AF_INET6;
		memcpy(host.bytes, cfg.host_ip6, 16);
	} else {
		ret = latch_errf(err, errlen, -EIO, "%s: cannot read its host address from its pins", name);
	}
	if (!ret) {
		*env = latch_kit_state_env(kit, st, &host, n);
		if (!*env)
			ret = latch_errf(err, errlen, -errno,
					 errno == ESTALE ?
						 "kit %s has a credential sandbox %s was given no placeholder "
						 "for (the kit changed since): `latch up %s --kit %s` again" :
						 "kit %s of %s: cannot render the environment",
					 kit->name, name, name, kit->name);
	}
	latch_kit_free(kit);
	return ret;
}

/* ---- the steps of up and attach */

/* What the sandbox is told about its kit, on stderr (as kosa8 says it). */
static void say_kit(const struct latch_kit *kit, const struct latch_kit_state *st)
{
	if (latch_json)
		return;
	fprintf(stderr, "latch: kit %s (%s)\n", kit->name, kit->source);
	if (kit->n_egress) {
		fprintf(stderr, "latch: network: the sandbox's profile, and");
		for (int i = 0; i < kit->n_egress; i++)
			fprintf(stderr, "%s %s", i ? "," : "", kit->egress[i]);
		fprintf(stderr, "\n");
	}
	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_upstream *up = &kit->creds[i].up;

		fprintf(stderr,
			"latch: brokering %s -> %s on port %u (the sandbox holds a placeholder, never the key)\n",
			up->secret_var[0] ? up->secret_var : up->secret_file, up->host, st->port);
	}
}

/* Have latchd switch NAME to its stored profile again: the kit's egress_allow changed. */
static int switch_stored(const char *name, char *err, size_t errlen)
{
	char prof[LATCH_PROFILE_NAME_MAX + 2];
	json_t *rep = NULL;
	int ret;

	if (latch_profile_state_read(name, prof, sizeof(prof)))
		return 0; /* no profile: latchd answers nothing, with or without the kit */
	ret = latchd_switch(name, prof, &rep, err, errlen);
	if (!ret && !json_is_true(json_object_get(rep, "ok")))
		ret = latch_errf(err, errlen, -EIO, "profile %s: %s", prof,
				 json_string_value(json_object_get(rep, "error")));
	json_decref(rep);
	return ret;
}

int latch_sandbox_kit_give(const char *name, const struct latch_kit *kit, bool switch_after, json_t *out)
{
	struct latch_kit_state st = { 0 };
	char err[LATCH_ERR_MAX];
	json_t *rep = NULL, *warnings = json_array();
	const char *note = "served by latchd";
	int ret;

	if (kit && latch_kit_state_read(name, &st, err, sizeof(err)) == 0)
		say_kit(kit, &st);
	ret = latch_sandbox_kit_hand(name, kit, warnings, &rep, err, sizeof(err));
	if (ret == -ENOENT || ret == -ECONNREFUSED) {
		note = "latchd is not running: its broker opens when latchd starts, and keys from the environment must "
		       "then be handed again (`latch kit NAME secrets`)";
		if (kit && !latch_json)
			fprintf(stderr, "latch: warning: %s\n", note);
		ret = 0;
	} else if (ret) {
		json_decref(warnings);
		return latch_err(LATCH_EXIT_FAILED, "%s: kit: %s", name, err);
	}
	if (rep) {
		json_t *b = json_object_get(rep, "broker");

		if (kit && json_is_object(b) && !json_is_true(json_object_get(b, "listening")))
			fprintf(stderr, "latch: warning: %s: the broker is not listening: %s\n", name,
				json_string_value(json_object_get(b, "why")) ?: "?");
		if (switch_after && json_is_true(json_object_get(rep, "egress_changed")) &&
		    switch_stored(name, err, sizeof(err))) {
			json_decref(rep);
			json_decref(warnings);
			return latch_err(LATCH_EXIT_FAILED, "%s: the kit's network: %s", name, err);
		}
	}
	if (out && kit)
		json_object_set_new(out, "kit",
				    json_pack("{s:s, s:i, s:s, s:o, s:O?}", "name", kit->name, "port", st.port, "note",
					      note, "warnings", warnings, "broker",
					      rep ? json_object_get(rep, "broker") : NULL));
	else
		json_decref(warnings);
	json_decref(rep);
	explicit_bzero(&st, sizeof(st));
	return 0;
}

int latch_sandbox_kit_again(const char *name, struct latch_kit *kit, const char *said)
{
	json_t *out = json_pack("{s:s, s:s}", "sandbox", name, "action", "keys handed again");
	int rc = latch_sandbox_kit_give(name, kit, true, out);

	if (!rc && !latch_json)
		printf("%s: %skit %s's keys handed to latchd again\n", name, said, kit->name);
	latch_kit_free(kit);
	if (rc) {
		json_decref(out);
		return rc;
	}
	latch_json_out(out);
	return 0;
}

int latch_sandbox_kit_stop(const char *name, bool remove)
{
	struct latch_kit_state st;
	char err[LATCH_ERR_MAX];
	json_t *rep = NULL;
	int ret;

	if (remove)
		ret = latch_kit_state_remove(name, err, sizeof(err));
	else if ((ret = latch_kit_state_read(name, &st, err, sizeof(err))) == -ENOENT)
		return 0;
	else if (!ret) {
		st.stopped = true;
		ret = latch_kit_state_write(name, &st, err, sizeof(err));
		explicit_bzero(&st, sizeof(st));
	}
	if (ret)
		fprintf(stderr, "latch: warning: %s: its kit: %s\n", name, err);
	/* latchd closes the broker and wipes its keys now (not running: it holds none) */
	latchd_kit(name, NULL, &rep, err, sizeof(err));
	json_decref(rep);
	return ret;
}

void latch_sandbox_kit_status(const char *name, const json_t *broker, bool latchd_up, json_t *o)
{
	struct latch_kit_state st;
	char err[LATCH_ERR_MAX];
	json_t *k;

	if (latch_kit_state_read(name, &st, err, sizeof(err))) {
		json_object_set_new(o, "kit", json_null());
		return;
	}
	k = json_pack("{s:s, s:i, s:b, s:b}", "name", st.kit, "port", st.port, "stopped", st.stopped, "latchd",
		      latchd_up);
	/* what latchd serves, when it answers: the stored kit alone is only intent */
	if (json_is_object(broker))
		json_object_set_new(k, "served", json_deep_copy(broker));
	json_object_set_new(o, "kit", k);
	explicit_bzero(&st, sizeof(st));
}

void latch_sandbox_kit_print(const json_t *k)
{
	const json_t *served = json_object_get(k, "served"), *r;
	size_t i, missing = 0;

	if (!json_is_object(k))
		return;
	printf("  kit:      %s, port %lld: ", json_string_value(json_object_get(k, "name")),
	       (long long)json_integer_value(json_object_get(k, "port")));
	if (json_is_true(json_object_get(k, "stopped")))
		printf("stopped (latchd holds no key for it)\n");
	else if (!json_is_true(json_object_get(k, "latchd")))
		printf("stored; latchd is not running, so no broker serves it\n");
	else if (!json_is_true(json_object_get(served, "listening")))
		printf("NOT SERVED: %s\n",
		       json_string_value(json_object_get(served, "why")) ?: "latchd has no broker for it");
	else {
		printf("broker listening, %zu route(s)", json_array_size(json_object_get(served, "routes")));
		json_array_foreach(json_object_get(served, "routes"), i, r)
			if (!strcmp(json_string_value(json_object_get(r, "secret")) ?: "", "missing"))
				printf("%s %s", missing++ ? "," : "; keys missing:",
				       json_string_value(json_object_get(r, "secret_var")) ?:
					       json_string_value(json_object_get(r, "name")));
		printf("\n");
	}
}
