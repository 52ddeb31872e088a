// SPDX-License-Identifier: GPL-2.0-only
/*
 * secret.c - what the sandbox holds instead of a key, and where the keys are
 * kept meanwhile.
 *
 * Placeholders: 128 bits from getrandom per sandbox and credential, compared
 * in constant time.  A placeholder is worth something only on its own
 * sandbox's broker listener, from its guest, while the sandbox exists; the
 * broker checks that (docs/kits.md, "What a stolen placeholder is worth").
 *
 * Secrets: each in anonymous pages of its own, locked where RLIMIT_MEMLOCK
 * allows, marked MADV_DONTDUMP (no core dump holds it) and MADV_WIPEONFORK
 * (no child inherits it), wiped with explicit_bzero before the pages go.
 * A secret is never printed; messages name the variable or file it came
 * from.  The env-sourced ones are collected by `latch up` (the only process
 * that has them) and handed to latchd; the file-sourced ones latchd reads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit/raw.h"

/* ---- placeholders */

int latch_placeholder_make(char out[LATCH_PLACEHOLDER_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	const size_t plen = sizeof(LATCH_PLACEHOLDER_PREFIX) - 1;
	unsigned char r[LATCH_PLACEHOLDER_RANDOM];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += n;
	}
	memcpy(out, LATCH_PLACEHOLDER_PREFIX, plen);
	for (size_t i = 0; i < sizeof(r); i++) {
		out[plen + 2 * i] = hex[r[i] >> 4];
		out[plen + 2 * i + 1] = hex[r[i] & 15];
	}
	out[LATCH_PLACEHOLDER_LEN] = '\0';
	explicit_bzero(r, sizeof(r));
	return 0;
}

bool latch_placeholder_equal(const char *given, size_t len, const char *placeholder)
{
	size_t plen = strlen(placeholder); /* the length is public: every placeholder has the same */
	volatile unsigned char diff = len != plen;

	/* every byte is looked at, whatever differs first */
	for (size_t i = 0; i < plen; i++)
		diff |= (unsigned char)(i < len ? given[i] : 0) ^ (unsigned char)placeholder[i];
	return !diff && plen;
}

int latch_kit_placeholders_make(const struct latch_kit *kit, char (*out)[LATCH_PLACEHOLDER_LEN + 1])
{
	for (int i = 0; i < kit->n_creds; i++) {
		bool shared;

		do {
			int ret = latch_placeholder_make(out[i]);

			if (ret)
				return ret;
			/* 2^-128 is no reason to let two routes share one */
			shared = false;
			for (int k = 0; k < i; k++)
				shared |= !strcmp(out[k], out[i]);
		} while (shared);
	}
	return 0;
}

/* ---- the sandbox's environment */

/* TMPL with {{url}} and {{placeholder}} filled in, into OUT (NULL: only count).  Returns the length. */
static size_t expand(const char *tmpl, const char *url, const char *placeholder, char *out)
{
	size_t n = 0;

	for (const char *p = tmpl; *p;) {
		const char *with = NULL;
		size_t skip = 1;

		if (!strncmp(p, "{{url}}", 7)) {
			with = url;
			skip = 7;
		} else if (!strncmp(p, "{{placeholder}}", 15)) {
			with = placeholder;
			skip = 15;
		}
		if (with) {
			if (out)
				memcpy(out + n, with, strlen(with));
			n += strlen(with);
		} else {
			if (out)
				out[n] = *p;
			n++;
		}
		p += skip;
	}
	if (out)
		out[n] = '\0';
	return n;
}

static char *env_line(const char *name, const char *tmpl, const char *url, const char *placeholder)
{
	size_t nl = strlen(name), vl = expand(tmpl, url, placeholder, NULL);
	char *line = malloc(nl + 1 + vl + 1);

	if (!line)
		return NULL;
	memcpy(line, name, nl);
	line[nl] = '=';
	expand(tmpl, url, placeholder, line + nl + 1);
	return line;
}

char **latch_kit_env_render(const struct latch_kit *kit, const struct latch_addr *host, uint16_t port,
			    char (*placeholders)[LATCH_PLACEHOLDER_LEN + 1], int *n)
{
	static const char *const proxies[] = { "HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy" };
	static const char *const no_proxy[] = { "NO_PROXY", "no_proxy" };
	char addr[INET6_ADDRSTRLEN], base[INET6_ADDRSTRLEN + 16], url[sizeof(base) + LATCH_KIT_CRED_NAME_MAX + 2];
	bool v6 = host && host->family == AF_INET6;
	int count = 6, k = 0;
	char **env;

	*n = 0;
	if (!host || !host->family || !port || (kit->n_creds && !placeholders)) {
		errno = EINVAL;
		return NULL;
	}
	latch_addr_format(host, addr, sizeof(addr));
	snprintf(base, sizeof(base), "http://%s%s%s:%u", v6 ? "[" : "", addr, v6 ? "]" : "", port);
	for (int i = 0; i < kit->n_creds; i++)
		count += kit->creds[i].n_env;
	env = calloc(count + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_cred *cr = &kit->creds[i];

		snprintf(url, sizeof(url), "%s/%s", base, cr->name);
		for (int e = 0; e < cr->n_env; e++)
			if (!(env[k++] = env_line(cr->env[e].name, cr->env[e].value, url, placeholders[i])))
				goto oom;
	}
	for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
		if (!(env[k++] = env_line(proxies[i], base, NULL, NULL)))
			goto oom;
	for (size_t i = 0; i < sizeof(no_proxy) / sizeof(no_proxy[0]); i++)
		if (!(env[k++] = env_line(no_proxy[i], addr, NULL, NULL)))
			goto oom;
	*n = k;
	return env;
oom:
	latch_kit_env_free(env);
	errno = ENOMEM;
	return NULL;
}

void latch_kit_env_free(char **env)
{
	for (int i = 0; env && env[i]; i++) {
		explicit_bzero(env[i], strlen(env[i]));
		free(env[i]);
	}
	free(env);
}

/* ---- secrets */

static size_t map_len(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + 1 + page - 1) / page * page;
}

static void secret_drop(struct latch_kit_secret *s)
{
	if (s->value) {
		explicit_bzero(s->value, s->len);
		if (s->locked)
			munlock(s->value, map_len(s->len));
		munmap(s->value, map_len(s->len));
	}
	s->value = NULL;
	s->len = 0;
	s->locked = false;
}

int latch_kit_secrets_set(struct latch_kit_secrets *s, const char *route, const char *value, size_t len,
			  const char *what, char *err, size_t errlen)
{
	struct latch_kit_secret *slot = NULL;
	void *p;

	if (len && value[len - 1] == '\n') /* a file's last line break is no part of the key */
		len--;
	if (len && value[len - 1] == '\r')
		len--;
	if (!len)
		return latch_errf(err, errlen, -EINVAL, "%s is empty; put the key there", what);
	if (len > LATCH_KIT_SECRET_MAX)
		return latch_errf(err, errlen, -EINVAL, "%s is longer than %d bytes; is it the key?", what,
				  LATCH_KIT_SECRET_MAX);
	/* the key goes into a header: a line break there would be a header of the guest's choosing */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return latch_errf(err, errlen, -EINVAL,
					  "%s holds a control character or a line break; a key is one line of "
					  "printable text",
					  what);
	if (strlen(route) > LATCH_KIT_ROUTE_MAX)
		return latch_errf(err, errlen, -EINVAL, "route '%s' is too long", route);
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].route, route))
			slot = &s->v[i];
	if (!slot) {
		struct latch_kit_secret *nv = realloc(s->v, (s->n + 1) * sizeof(*nv));

		if (!nv)
			return latch_errf(err, errlen, -ENOMEM, "out of memory for %s", what);
		s->v = nv;
		slot = &s->v[s->n++];
		memset(slot, 0, sizeof(*slot));
		strcpy(slot->route, route);
	}
	secret_drop(slot);
	p = mmap(NULL, map_len(len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return latch_errf(err, errlen, -ENOMEM, "cannot map memory for %s: %s", what, strerror(errno));
	madvise(p, map_len(len), MADV_DONTDUMP);
	madvise(p, map_len(len), MADV_WIPEONFORK);
	slot->locked = !mlock(p, map_len(len));
	memcpy(p, value, len);
	slot->value = p;
	slot->value[len] = '\0';
	slot->len = len;
	return 0;
}

const char *latch_kit_secret_get(const struct latch_kit_secrets *s, const char *route, size_t *len)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].route, route) && s->v[i].value) {
			*len = s->v[i].len;
			return s->v[i].value;
		}
	*len = 0;
	return NULL;
}

void latch_kit_secrets_wipe(struct latch_kit_secrets *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		secret_drop(&s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* NAME's value in ENVP (NULL: this process's environment), or NULL. */
static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	if (!envp)
		return getenv(name);
	for (; *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* Call FN for every upstream of KIT that names a key: each credential's, then its alternatives'. */
static int each_upstream(const struct latch_kit *kit,
			 int (*fn)(const struct latch_kit_upstream *up, const char *route, void *arg), void *arg)
{
	char route[LATCH_KIT_ROUTE_MAX + 1];
	int ret;

	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_cred *cr = &kit->creds[i];

		if ((ret = fn(&cr->up, cr->name, arg)))
			return ret;
		for (int a = 0; a < cr->n_alts; a++) {
			snprintf(route, sizeof(route), "%s/%s", cr->name, cr->alts[a].name);
			if ((ret = fn(&cr->alts[a].up, route, arg)))
				return ret;
		}
	}
	return 0;
}

struct collect {
	const struct latch_kit *kit;
	char *const *envp;
	struct latch_kit_secrets *s;
	latch_kit_warn_fn warn;
	void *arg;
	char *err;
	size_t errlen;
	char warned[LATCH_KIT_CREDS_MAX * (LATCH_KIT_ALTS_MAX + 1)][LATCH_KIT_FILE_PATH_MAX + 1];
	int n_warned;
};

/* One warning per variable or file, however many routes name it. */
static void warn_once(struct collect *c, const char *what, const char *fmt)
{
	char line[LATCH_ERR_MAX];

	for (int i = 0; i < c->n_warned; i++)
		if (!strcmp(c->warned[i], what))
			return;
	if (c->n_warned < (int)(sizeof(c->warned) / sizeof(c->warned[0])))
		snprintf(c->warned[c->n_warned++], sizeof(c->warned[0]), "%s", what);
	snprintf(line, sizeof(line), fmt, what);
	if (c->warn)
		c->warn(line, c->arg);
}

static int collect_env(const struct latch_kit_upstream *up, const char *route, void *arg)
{
	struct collect *c = arg;
	const char *value;

	if (!up->secret_var[0])
		return 0;
	value = env_get(c->envp, up->secret_var);
	if (!value || !*value) {
		warn_once(c, up->secret_var, "%s is not set on the host; the agent may fail to authenticate");
		return 0;
	}
	return latch_kit_secrets_set(c->s, route, value, strlen(value), up->secret_var, c->err, c->errlen);
}

int latch_kit_secrets_from_env(const struct latch_kit *kit, char *const *envp, struct latch_kit_secrets *s,
			       latch_kit_warn_fn warn, void *arg, char *err, size_t errlen)
{
	struct collect *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	*c = (struct collect){
		.kit = kit, .envp = envp, .s = s, .warn = warn, .arg = arg, .err = err, .errlen = errlen
	};
	ret = each_upstream(kit, collect_env, c);
	free(c);
	if (ret)
		latch_kit_secrets_wipe(s);
	return ret;
}

static int collect_file(const struct latch_kit_upstream *up, const char *route, void *arg)
{
	struct collect *c = arg;
	char *buf;
	size_t len;
	int ret;

	if (!up->secret_file[0])
		return 0;
	/* two bytes over the limit: room for a last "\r\n", which latch_kit_secrets_set drops */
	ret = kit_read_checked(up->secret_file, LATCH_FILE_SECRET, LATCH_KIT_SECRET_MAX + 2, &buf, &len, c->err,
			       c->errlen);
	if (ret == -ENOENT) {
		warn_once(c, up->secret_file, "secret_file %s does not exist; the agent may fail to authenticate");
		return 0;
	}
	if (ret)
		return ret;
	ret = latch_kit_secrets_set(c->s, route, buf, len, up->secret_file, c->err, c->errlen);
	explicit_bzero(buf, len);
	free(buf);
	return ret;
}

int latch_kit_secrets_read_files(const struct latch_kit *kit, struct latch_kit_secrets *s, latch_kit_warn_fn warn,
				 void *arg, char *err, size_t errlen)
{
	struct collect *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	*c = (struct collect){ .kit = kit, .s = s, .warn = warn, .arg = arg, .err = err, .errlen = errlen };
	ret = each_upstream(kit, collect_file, c);
	free(c);
	if (ret)
		latch_kit_secrets_wipe(s);
	return ret;
}

enum latch_secret_state latch_kit_secret_state(const struct latch_kit_upstream *up, char *const *envp, char *why,
					       size_t whylen)
{
	const char *value;
	struct stat st;

	latch_errf(why, whylen, 0, "%s", "");
	if (up->secret_var[0]) {
		value = env_get(envp, up->secret_var);
		return value && *value ? LATCH_SECRET_SET : LATCH_SECRET_MISSING;
	}
	if (!up->secret_file[0])
		return LATCH_SECRET_NONE;
	/* lstat, never open: a status needs no secret, and a link is refused as latchd would */
	if (lstat(up->secret_file, &st)) {
		if (errno == ENOENT)
			return LATCH_SECRET_MISSING;
		latch_errf(why, whylen, 0, "%s: cannot look: %s (run as root)", up->secret_file, strerror(errno));
		return LATCH_SECRET_UNKNOWN;
	}
	if (S_ISLNK(st.st_mode)) {
		latch_errf(why, whylen, 0, "%s: is a symbolic link; a secret file must be a regular file",
			   up->secret_file);
		return LATCH_SECRET_UNSAFE;
	}
	if (latch_file_check(up->secret_file, &st, LATCH_FILE_SECRET, why, whylen))
		return LATCH_SECRET_UNSAFE;
	return LATCH_SECRET_SET;
}

const char *latch_secret_state_name(enum latch_secret_state st)
{
	static const char *const names[] = {
		[LATCH_SECRET_NONE] = "none",	    [LATCH_SECRET_SET] = "set",
		[LATCH_SECRET_MISSING] = "missing", [LATCH_SECRET_UNSAFE] = "unsafe",
		[LATCH_SECRET_UNKNOWN] = "unknown",
	};

	return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "unknown";
}
