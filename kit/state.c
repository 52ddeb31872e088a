// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - a sandbox's kit, kept on disk: which kit, the broker's port, the
 * placeholder of each credential, the alternative each one was switched to,
 * and whether the sandbox is stopped.
 *
 * $LATCH_ROOT/var/lib/latch/policy/NAME.kit, root's and 0600: it holds the
 * placeholders the guest was given, so that a latchd restart (or a `latch
 * up` of a sandbox that was down) serves the URLs and placeholders the guest
 * already has.  It never holds a key.  The CLI writes it (`up --kit`,
 * `attach --kit`, `down`, `kit NAME backend`); latchd and the CLI read it.
 *
 *	# latch: the kit of sandbox NAME (root only: it holds the placeholders)
 *	kit claude
 *	port 8119
 *	stopped
 *	credential anthropic latch-placeholder-<32 hex> [ALTERNATIVE]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit/raw.h"

#define STATE_FILE_MAX 8192

int latch_kit_state_path(const char *sandbox, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_POLICY_DIR "/%s.kit", sandbox);
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

/* One line of the file into st; 0 or -EINVAL with `PATH:LINE: ...` in err. */
static int state_line(const char *path, int line, char *text, struct latch_kit_state *st, bool *seen_kit, char *err,
		      size_t errlen)
{
	char *word[5], *save = NULL;
	int n = 0;
	uint32_t port;

	for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 5)
			return latch_errf_at(err, errlen, -EINVAL, path, line, "too many words");
		word[n++] = w;
	}
	if (!n)
		return 0;
	if (!strcmp(word[0], "kit") && n == 2 && !*seen_kit) {
		if (latch_parse_file_name("kit", word[1], err, errlen) || strlen(word[1]) > LATCH_KIT_NAME_MAX)
			return latch_errf_at(err, errlen, -EINVAL, path, line, "'%s' is not a kit name", word[1]);
		strcpy(st->kit, word[1]);
		*seen_kit = true;
		return 0;
	}
	if (!strcmp(word[0], "port") && n == 2) {
		if (latch_parse_uint(word[1], 1, 65535, &port))
			return latch_errf_at(err, errlen, -EINVAL, path, line, "port '%s' is not 1..65535", word[1]);
		st->port = port;
		return 0;
	}
	if (!strcmp(word[0], "stopped") && n == 1) {
		st->stopped = true;
		return 0;
	}
	if (!strcmp(word[0], "credential") && (n == 3 || n == 4)) {
		struct latch_kit_state_cred *c;

		if (st->n_creds == LATCH_KIT_CREDS_MAX)
			return latch_errf_at(err, errlen, -EINVAL, path, line, "more than %d credentials",
					     LATCH_KIT_CREDS_MAX);
		if (!cred_name_ok(word[1]) || !placeholder_ok(word[2]) || (n == 4 && !cred_name_ok(word[3])))
			return latch_errf_at(err, errlen, -EINVAL, path, line,
					     "write 'credential NAME latch-placeholder-<32 hex> [ALTERNATIVE]'");
		if (latch_kit_state_cred(st, word[1]))
			return latch_errf_at(err, errlen, -EINVAL, path, line, "credential %s twice", word[1]);
		c = &st->creds[st->n_creds++];
		strcpy(c->name, word[1]);
		strcpy(c->placeholder, word[2]);
		snprintf(c->backend, sizeof(c->backend), "%s", n == 4 ? word[3] : "");
		return 0;
	}
	return latch_errf_at(err, errlen, -EINVAL, path, line, "'%s' is not a line latch writes here", word[0]);
}

int latch_kit_state_read(const char *sandbox, struct latch_kit_state *st, char *err, size_t errlen)
{
	char path[PATH_MAX], *text;
	bool seen_kit = false;
	size_t len;
	int ret, line = 0;

	memset(st, 0, sizeof(*st));
	if (latch_kit_state_path(sandbox, path, sizeof(path)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	/* root's and 0600, as a secret: the placeholders are worth something inside the sandbox */
	ret = kit_read_checked(path, LATCH_FILE_SECRET, STATE_FILE_MAX, &text, &len, err, errlen);
	if (ret)
		return ret;
	/* lines split by hand: strtok would skip empty ones, and the line numbers with them */
	for (char *l = text, *next; l && !ret; l = next) {
		next = strchr(l, '\n');
		if (next)
			*next++ = '\0';
		line++;
		if (*l != '#')
			ret = state_line(path, line, l, st, &seen_kit, err, errlen);
	}
	explicit_bzero(text, len);
	free(text);
	if (!ret && (!seen_kit || !st->port))
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "has no 'kit' or no 'port' line");
	if (ret)
		memset(st, 0, sizeof(*st));
	return ret;
}

int latch_kit_state_write(const char *sandbox, const struct latch_kit_state *st, char *err, size_t errlen)
{
	char path[PATH_MAX], dir[PATH_MAX], *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	if (latch_kit_state_path(sandbox, path, sizeof(path)) || latch_path(dir, sizeof(dir), LATCH_POLICY_DIR))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	ret = latch_mkdirs(dir, 0700);
	if (ret)
		return latch_errf(err, errlen, ret, "%s: %s", dir, strerror(-ret));
	f = open_memstream(&text, &len);
	if (!f)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	fprintf(f, "# latch: the kit of sandbox %s (root only: it holds the sandbox's placeholders)\n", sandbox);
	fprintf(f, "kit %s\nport %u\n", st->kit, st->port);
	if (st->stopped)
		fprintf(f, "stopped\n");
	for (int i = 0; i < st->n_creds; i++)
		fprintf(f, "credential %s %s%s%s\n", st->creds[i].name, st->creds[i].placeholder,
			st->creds[i].backend[0] ? " " : "", st->creds[i].backend);
	if (fclose(f)) {
		free(text);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = latch_write_atomic(path, 0600, text, len);
	explicit_bzero(text, len);
	free(text);
	if (ret)
		return latch_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
	return 0;
}

int latch_kit_state_remove(const char *sandbox, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (latch_kit_state_path(sandbox, path, sizeof(path)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	if (unlink(path) && errno != ENOENT)
		return latch_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	return 0;
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
