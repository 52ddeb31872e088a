// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - a sandbox's kit, kept on disk: which kit, the broker's port, the
 * placeholder of each credential, the alternative each one was switched to,
 * and whether the sandbox is stopped.
 *
 * NAME.kit (LATCH_STATE_KIT of the state API), read as a secret: it holds
 * the placeholders the guest was given, so that a latchd restart (or a
 * `latch up` of a sandbox that was down) serves the URLs and placeholders
 * the guest already has.  It never holds a key.  The CLI writes it (`up
 * --kit`, `attach --kit`, `down`, `kit NAME backend`); latchd and the CLI
 * read it.
 *
 *	# latch: the kit of sandbox NAME (root only: it holds the placeholders)
 *	kit = claude
 *	port = 8119
 *	stopped = yes
 *	credential = anthropic latch-placeholder-<32 hex> [ALTERNATIVE]
 *
 * An older latch wrote the same lines without '=' ("kit claude",
 * "stopped"): read too, and rewritten in this format by the next write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit/raw.h"

int latch_kit_state_path(const char *sandbox, char *buf, size_t len)
{
	return latch_state_file_path(sandbox, LATCH_STATE_KIT, buf, len);
}

static bool cred_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= LATCH_KIT_CRED_NAME_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static bool placeholder_ok(const char *s)
{
	const size_t plen = sizeof(LATCH_PLACEHOLDER_PREFIX) - 1;

	return strlen(s) == LATCH_PLACEHOLDER_LEN && !strncmp(s, LATCH_PLACEHOLDER_PREFIX, plen) &&
	       strspn(s + plen, "0123456789abcdef") == LATCH_PLACEHOLDER_LEN - plen;
}

static int kit_parse(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_kit_state *st = obj;

	if (latch_parse_file_name("kit", v, msg, msglen) || strlen(v) > LATCH_KIT_NAME_MAX)
		return latch_errf(msg, msglen, -EINVAL, "'%s' is not a kit name", v);
	strcpy(st->kit, v);
	return 0;
}

static int port_parse(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_kit_state *st = obj;
	uint32_t port;

	if (latch_parse_uint(v, 1, 65535, &port))
		return latch_errf(msg, msglen, -EINVAL, "port '%s' is not 1..65535", v);
	st->port = port;
	return 0;
}

static int stopped_parse(void *obj, const char *v, char *msg, size_t msglen)
{
	if (strcmp(v, "yes"))
		return latch_errf(msg, msglen, -EINVAL, "stopped '%s': latch writes 'stopped = yes' or nothing", v);
	((struct latch_kit_state *)obj)->stopped = true;
	return 0;
}

/* "NAME PLACEHOLDER [ALTERNATIVE]" */
static int cred_parse(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_kit_state *st = obj;
	char text[256], *word[4], *save = NULL;
	struct latch_kit_state_cred *c;
	int n = 0;

	if (snprintf(text, sizeof(text), "%s", v) >= (int)sizeof(text))
		return latch_errf(msg, msglen, -EINVAL, "credential line too long");
	for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 4)
			return latch_errf(msg, msglen, -EINVAL, "too many words");
		word[n++] = w;
	}
	if (st->n_creds == LATCH_KIT_CREDS_MAX)
		return latch_errf(msg, msglen, -EINVAL, "more than %d credentials", LATCH_KIT_CREDS_MAX);
	if (n < 2 || n > 3 || !cred_name_ok(word[0]) || !placeholder_ok(word[1]) || (n == 3 && !cred_name_ok(word[2])))
		return latch_errf(msg, msglen, -EINVAL,
				  "write 'credential = NAME latch-placeholder-<32 hex> [ALTERNATIVE]'");
	if (latch_kit_state_cred(st, word[0]))
		return latch_errf(msg, msglen, -EINVAL, "credential %s twice", word[0]);
	c = &st->creds[st->n_creds++];
	strcpy(c->name, word[0]);
	strcpy(c->placeholder, word[1]);
	snprintf(c->backend, sizeof(c->backend), "%s", n == 3 ? word[2] : "");
	explicit_bzero(text, sizeof(text));
	return 0;
}

static void kit_print(FILE *f, const void *obj)
{
	const struct latch_kit_state *st = obj;

	fprintf(f, "kit = %s\nport = %u\n", st->kit, st->port);
	if (st->stopped)
		fprintf(f, "stopped = yes\n");
}

static void creds_print(FILE *f, const void *obj)
{
	const struct latch_kit_state *st = obj;

	for (int i = 0; i < st->n_creds; i++)
		fprintf(f, "credential = %s %s%s%s\n", st->creds[i].name, st->creds[i].placeholder,
			st->creds[i].backend[0] ? " " : "", st->creds[i].backend);
}

/* One line of the format an older latch wrote into st; 0 or -EINVAL with `PATH:LINE: ...` in err. */
static int legacy_line(const char *path, int line, char *text, struct latch_kit_state *st, bool *seen_kit, char *err,
		       size_t errlen)
{
	char *word[5], *save = NULL, rest[256] = "", msg[LATCH_ERR_MAX];
	int n = 0;

	for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 5)
			return latch_errf_at(err, errlen, -EINVAL, path, line, "too many words");
		word[n++] = w;
	}
	if (!n)
		return 0;
	if (!strcmp(word[0], "kit") && n == 2 && !*seen_kit) {
		if (kit_parse(st, word[1], msg, sizeof(msg)))
			return latch_errf_at(err, errlen, -EINVAL, path, line, "%s", msg);
		*seen_kit = true;
		return 0;
	}
	if (!strcmp(word[0], "port") && n == 2)
		return port_parse(st, word[1], msg, sizeof(msg)) ?
			       latch_errf_at(err, errlen, -EINVAL, path, line, "%s", msg) :
			       0;
	if (!strcmp(word[0], "stopped") && n == 1) {
		st->stopped = true;
		return 0;
	}
	if (!strcmp(word[0], "credential") && (n == 3 || n == 4)) {
		snprintf(rest, sizeof(rest), "%s %s %s", word[1], word[2], n == 4 ? word[3] : "");
		if (cred_parse(st, rest, msg, sizeof(msg))) {
			explicit_bzero(rest, sizeof(rest));
			/* the old format's own words for the fix */
			if (strstr(msg, "write 'credential"))
				return latch_errf_at(
					err, errlen, -EINVAL, path, line,
					"write 'credential NAME latch-placeholder-<32 hex> [ALTERNATIVE]'");
			return latch_errf_at(err, errlen, -EINVAL, path, line, "%s", msg);
		}
		explicit_bzero(rest, sizeof(rest));
		return 0;
	}
	return latch_errf_at(err, errlen, -EINVAL, path, line, "'%s' is not a line latch writes here", word[0]);
}

static int legacy_read(const char *path, char *text, void *obj, char *err, size_t errlen)
{
	bool seen_kit = false;
	int ret = 0, line = 0;

	/* lines split by hand: strtok would skip empty ones, and the line numbers with them */
	for (char *l = text, *next; l && !ret; l = next) {
		next = strchr(l, '\n');
		if (next)
			*next++ = '\0';
		line++;
		if (*l != '#')
			ret = legacy_line(path, line, l, obj, &seen_kit, err, errlen);
	}
	return ret;
}

/* kit_print() writes kit, port and stopped together: one key prints, the others only read */
static const struct latch_kv_key kit_state_keys[] = {
	LATCH_KV_FN("kit", kit_parse, kit_print),
	LATCH_KV_FN("port", port_parse, NULL),
	LATCH_KV_FN("stopped", stopped_parse, NULL),
	LATCH_KV_LIST_FN("credential", cred_parse, creds_print),
};
static const struct latch_state_format kit_state_format = { kit_state_keys, 4, 0, legacy_read };

int latch_kit_state_read(const char *sandbox, struct latch_kit_state *st, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret;

	memset(st, 0, sizeof(*st));
	ret = latch_state_file_read(sandbox, LATCH_STATE_KIT, &kit_state_format, st, err, errlen);
	if (!ret && (!*st->kit || !st->port)) {
		latch_kit_state_path(sandbox, path, sizeof(path));
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "has no 'kit' or no 'port' line");
	}
	if (ret)
		explicit_bzero(st, sizeof(*st));
	return ret;
}

int latch_kit_state_write(const char *sandbox, const struct latch_kit_state *st, char *err, size_t errlen)
{
	char header[128];

	snprintf(header, sizeof(header),
		 "latch: the kit of sandbox %s (root only: it holds the sandbox's placeholders)", sandbox);
	return latch_state_file_write(sandbox, LATCH_STATE_KIT, &kit_state_format, header, st, err, errlen);
}

int latch_kit_state_remove(const char *sandbox, char *err, size_t errlen)
{
	return latch_state_file_remove(sandbox, LATCH_STATE_KIT, err, errlen);
}

struct latch_kit_state_cred *latch_kit_state_cred(const struct latch_kit_state *st, const char *cred)
{
	for (int i = 0; i < st->n_creds; i++)
		if (!strcmp(st->creds[i].name, cred))
			return (struct latch_kit_state_cred *)&st->creds[i];
	return NULL;
}

int latch_kit_state_for(const struct latch_kit *kit, uint16_t port, const struct latch_kit_state *old,
			struct latch_kit_state *st)
{
	bool same = old && !strcmp(old->kit, kit->name);

	memset(st, 0, sizeof(*st));
	snprintf(st->kit, sizeof(st->kit), "%s", kit->name);
	st->port = same && old->port ? old->port : port;
	for (int i = 0; i < kit->n_creds && i < LATCH_KIT_CREDS_MAX; i++) {
		const struct latch_kit_cred *cr = &kit->creds[i];
		struct latch_kit_state_cred *c = &st->creds[st->n_creds++], *was;
		int ret;

		strcpy(c->name, cr->name);
		was = same ? latch_kit_state_cred(old, cr->name) : NULL;
		if (was) {
			/* the guest holds this one already */
			strcpy(c->placeholder, was->placeholder);
			/* an alternative the kit no longer has: back to the credential's own upstream */
			for (int a = 0; a < cr->n_alts; a++)
				if (!strcmp(cr->alts[a].name, was->backend))
					strcpy(c->backend, was->backend);
			continue;
		}
		/* never the placeholder of another credential, however unlikely */
		do {
			ret = latch_placeholder_make(c->placeholder);
			if (ret)
				return ret;
			for (int k = 0; k < st->n_creds - 1; k++)
				if (!strcmp(st->creds[k].placeholder, c->placeholder))
					ret = 1;
		} while (ret);
	}
	return 0;
}

char **latch_kit_state_env(const struct latch_kit *kit, const struct latch_kit_state *st, const struct latch_addr *host,
			   int *n)
{
	char(*ph)[LATCH_PLACEHOLDER_LEN + 1] = calloc(kit->n_creds ? kit->n_creds : 1, sizeof(*ph));
	char **env;

	*n = 0;
	if (!ph)
		return NULL;
	for (int i = 0; i < kit->n_creds; i++) {
		struct latch_kit_state_cred *c = latch_kit_state_cred(st, kit->creds[i].name);

		if (!c) { /* the kit gained a credential since: `latch up --kit` gives it a placeholder */
			free(ph);
			errno = ESTALE;
			return NULL;
		}
		strcpy(ph[i], c->placeholder);
	}
	env = latch_kit_env_render(kit, host, st->port, ph, n);
	explicit_bzero(ph, (kit->n_creds ? kit->n_creds : 1) * sizeof(*ph));
	free(ph);
	return env;
}
