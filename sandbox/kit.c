// SPDX-License-Identifier: GPL-2.0-only
/*
 * kit.c - a sandbox's kit: what `up --kit`, `attach --kit`, `down`,
 * `destroy`, `exec`, `env` and `kit NAME ...` share.
 *
 * The kit state (kit.h, var/lib/latch/policy/NAME.kit) is written here and
 * nowhere else: which kit, the broker's port, the placeholders the guest
 * holds, the alternatives, stopped or not.  latchd serves what it says.
 * The keys of `secret: VAR` credentials exist only in the environment of
 * the command that hands them (this process): they go to latchd over its
 * root-only socket, in buffers wiped after use, and nowhere else.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "config/config.h"
#include "sandbox/sandbox.h"

void latch_sandbox_sayf(const struct latch_sandbox_say *s, enum latch_sandbox_say_kind kind, const char *fmt, ...)
{
	char *line;
	va_list ap;
	int n;

	if (!s || !s->fn)
		return;
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	s->fn(s->arg, kind, line);
	free(line);
}

struct latch_kit_opts latch_sandbox_kit_opts(char *dir, size_t len)
{
	struct latch_kit_opts o = { 0 };

	if (!latch_kit_dir(dir, len))
		o.dir = dir;
	return o;
}

struct latch_kit *latch_sandbox_kit_open(const char *name, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));

	return latch_kit_load(name, &o, err, errlen);
}

/* A secret_file latchd would refuse: why into why, 1. */
static int unsafe_secret(const struct latch_kit *kit, char *why, size_t len)
{
	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_cred *cr = &kit->creds[i];

		if (latch_kit_secret_state(&cr->up, NULL, why, len) == LATCH_SECRET_UNSAFE)
			return 1;
		for (int a = 0; a < cr->n_alts; a++)
			if (latch_kit_secret_state(&cr->alts[a].up, NULL, why, len) == LATCH_SECRET_UNSAFE)
				return 1;
	}
	return 0;
}

struct latch_kit *latch_sandbox_kit_verdict(struct latch_kit *kit, char *err, size_t errlen)
{
	if (kit && unsafe_secret(kit, err, errlen)) {
		latch_kit_free(kit);
		errno = EPERM;
		return NULL;
	}
	return kit;
}

struct latch_kit *latch_sandbox_kit_open_checked(const char *name, char *err, size_t errlen)
{
	return latch_sandbox_kit_verdict(latch_sandbox_kit_open(name, err, errlen), err, errlen);
}

int latch_sandbox_kit(const char *name, struct latch_kit_state *st, struct latch_kit **kit, char *err, size_t errlen)
{
	int ret = latch_kit_state_read(name, st, err, errlen);

	*kit = NULL;
	if (ret)
		return ret;
	*kit = latch_sandbox_kit_open(st->kit, err, errlen);
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

/* the missing keys latch_kit_secrets_from_env() warns of: said, and kept for the JSON document */
struct warnings {
	json_t *list;
	const struct latch_sandbox_say *say;
};

static void warn_line(const char *line, void *arg)
{
	struct warnings *w = arg;

	latch_sandbox_sayf(w->say, LATCH_SANDBOX_WARN, "%s", line);
	json_array_append_new(w->list, json_string(line));
}

/*
 * Hand latchd NAME's kit as stored, with the keys of `secret: VAR`s from
 * this environment (KIT NULL: no keys, the broker follows the state).
 * Returns as latchd_call() (-ENOENT/-ECONNREFUSED: latchd is not running);
 * latchd's refusal is -EIO with its line.
 */
static int kit_hand(const char *name, const struct latch_kit *kit, struct warnings *w, json_t **reply, char *err,
		    size_t errlen)
{
	struct latch_kit_secrets sec = { 0 };
	json_t *keys = NULL;
	int ret = 0;

	*reply = NULL;
	latch_json_wipe_frees();
	if (kit) {
		ret = latch_kit_secrets_from_env(kit, NULL, &sec, warn_line, w, err, errlen);
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

/* What the sandbox is told about its kit (as kosa8 says it). */
static void say_kit(const struct latch_kit *kit, const struct latch_kit_state *st, const struct latch_sandbox_say *s)
{
	latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "kit %s (%s)", kit->name, kit->source);
	if (kit->n_egress) {
		char *line = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&line, &len);

		if (f) {
			fprintf(f, "network: the sandbox's profile, and");
			for (int i = 0; i < kit->n_egress; i++)
				fprintf(f, "%s %s", i ? "," : "", kit->egress[i]);
			if (!fclose(f))
				latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "%s", line);
		}
		free(line);
	}
	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_upstream *up = &kit->creds[i].up;

		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE,
				   "brokering %s -> %s on port %u (the sandbox holds a placeholder, never the key)",
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

/* latchd's answer to the hand-over: a broker that could not listen is a warning; the network switched again. */
static int kit_given(const char *name, const struct latch_kit *kit, bool switch_after, const json_t *rep,
		     const struct latch_sandbox_say *s, char *err, size_t errlen)
{
	const json_t *b = json_object_get(rep, "broker");
	char e[LATCH_ERR_MAX];

	if (kit && json_is_object(b) && !json_is_true(json_object_get(b, "listening")))
		latch_sandbox_sayf(s, LATCH_SANDBOX_WARN, "%s: the broker is not listening: %s", name,
				   json_string_value(json_object_get(b, "why")) ?: "?");
	if (switch_after && json_is_true(json_object_get(rep, "egress_changed")) && switch_stored(name, e, sizeof(e)))
		return latch_errf(err, errlen, -EIO, "%s: the kit's network: %s", name, e);
	return 0;
}

int latch_sandbox_kit_give(const char *name, const struct latch_kit *kit, bool switch_after, json_t *out,
			   const struct latch_sandbox_say *s, char *err, size_t errlen)
{
	struct latch_kit_state st = { 0 };
	struct warnings w = { .list = json_array(), .say = s };
	char e[LATCH_ERR_MAX];
	json_t *rep = NULL;
	const char *note = "served by latchd";
	int ret;

	if (kit && latch_kit_state_read(name, &st, e, sizeof(e)) == 0)
		say_kit(kit, &st, s);
	ret = kit_hand(name, kit, &w, &rep, e, sizeof(e));
	if (ret == -ENOENT || ret == -ECONNREFUSED) {
		note = "latchd is not running: its broker opens when latchd starts, and keys from the environment must "
		       "then be handed again (`latch kit NAME secrets`)";
		if (kit)
			latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "warning: %s", note);
		ret = 0;
	} else if (ret) {
		json_decref(w.list);
		return latch_errf(err, errlen, ret, "%s: kit: %s", name, e);
	}
	if (rep && (ret = kit_given(name, kit, switch_after, rep, s, err, errlen))) {
		json_decref(rep);
		json_decref(w.list);
		return ret;
	}
	if (out && kit)
		json_object_set_new(out, "kit",
				    json_pack("{s:s, s:i, s:s, s:o, s:O?}", "name", kit->name, "port", st.port, "note",
					      note, "warnings", w.list, "broker",
					      rep ? json_object_get(rep, "broker") : NULL));
	else
		json_decref(w.list);
	json_decref(rep);
	explicit_bzero(&st, sizeof(st));
	return 0;
}

int latch_sandbox_kit_stop(const char *name, bool remove, const struct latch_sandbox_say *s)
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
		latch_sandbox_sayf(s, LATCH_SANDBOX_WARN, "%s: its kit: %s", name, err);
	/* latchd closes the broker and wipes its keys now (not running: it holds none) */
	latchd_kit(name, NULL, &rep, err, sizeof(err));
	json_decref(rep);
	return ret;
}

int latch_sandbox_kit_backend(const char *name, struct latch_kit_state *st, const char *cred, const char *backend,
			      bool *applied, char *err, size_t errlen)
{
	struct latch_kit_state_cred *sc = latch_kit_state_cred(st, cred);
	char e[LATCH_ERR_MAX];
	json_t *rep = NULL;
	int ret;

	*applied = false;
	if (!sc)
		return latch_errf(err, errlen, -ENOENT, "kit %s of %s has no credential '%s'", st->kit, name, cred);
	snprintf(sc->backend, sizeof(sc->backend), "%s", backend);
	ret = latch_kit_state_write(name, st, err, errlen);
	if (ret)
		return ret;
	ret = latchd_backend(name, cred, sc->backend, &rep, e, sizeof(e));
	if (!ret && !json_is_true(json_object_get(rep, "ok")))
		ret = latch_errf(e, sizeof(e), -EIO, "%s", json_string_value(json_object_get(rep, "error")));
	json_decref(rep);
	if (ret == -ENOENT || ret == -ECONNREFUSED)
		return 0;
	if (ret)
		return latch_errf(err, errlen, ret, "%s: backend: %s", name, e);
	*applied = true;
	return 0;
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
