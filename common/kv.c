// SPDX-License-Identifier: GPL-2.0-only
/*
 * kv.c - `key = value` files described by a table of keys.
 *
 * latch.conf and each sandbox's state file are such files.  The table says,
 * once, which keys exist, where each value goes and how it is checked; the
 * reader and the writer both walk it, so a key can't be written one way and
 * read another.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define LINE_MAX_LEN 4096
#define MAX_KEYS 64

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* Store one value; on failure a line in msg that says how to write it. */
static int set_value(const struct latch_kv_key *k, void *obj, const char *v, char *msg, size_t msglen)
{
	char *field = (char *)obj + k->offset;
	struct latch_addr *a = (struct latch_addr *)field;

	switch (k->type) {
	case LATCH_KV_STRING:
		if (strlen(v) >= k->size)
			return latch_errf(msg, msglen, -EINVAL, "%s is longer than %zu characters", k->name,
					  k->size - 1);
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return latch_errf(msg, msglen, -EINVAL, "%s has a control character", k->name);
		strcpy(field, v);
		return 0;
	case LATCH_KV_UINT:
		if (latch_parse_uint(v, k->min, k->max, (uint32_t *)field))
			return latch_errf(msg, msglen, -EINVAL, "%s '%s' must be %s", k->name, v,
					  k->help ? k->help : "a number");
		return 0;
	case LATCH_KV_ADDR4:
	case LATCH_KV_ADDR6: {
		int family = k->type == LATCH_KV_ADDR4 ? AF_INET : AF_INET6;

		if (latch_parse_addr(v, a, NULL, 0) || a->family != family) {
			memset(a, 0, sizeof(*a));
			return latch_errf(msg, msglen, -EINVAL, "%s '%s' is not an %s address", k->name, v,
					  family == AF_INET ? "IPv4" : "IPv6");
		}
		return 0;
	}
	case LATCH_KV_MAC:
		return latch_parse_mac(v, (uint8_t *)field, msg, msglen);
	case LATCH_KV_CUSTOM:
	case LATCH_KV_LIST:
		return k->parse(obj, v, msg, msglen);
	case LATCH_KV_SECONDS:
		return latch_parse_seconds(k->name, v, k->min, k->max, (uint32_t *)field, msg, msglen) ? -EINVAL : 0;
	case LATCH_KV_MIB: {
		uint64_t bytes;

		if (latch_parse_size(k->name, v, 1 << 20, (uint64_t)k->min << 20, (uint64_t)k->max << 20, &bytes, msg,
				     msglen))
			return -EINVAL;
		*(uint32_t *)field = (uint32_t)(bytes >> 20);
		return 0;
	}
	}
	return -EINVAL;
}

#define KEY_NAME_MAX 64

/*
 * The optimal string alignment distance of a and b (an edit, or two letters
 * swapped, costs one), or KEY_NAME_MAX + 1 when either is longer.
 */
static int key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int d[KEY_NAME_MAX + 1][KEY_NAME_MAX + 1];

	if (la > KEY_NAME_MAX || lb > KEY_NAME_MAX)
		return KEY_NAME_MAX + 1;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/*
 * The known key nearest to key, or NULL when none is near enough to be the
 * one meant: within a third of its length (two edits for a short key), so
 * that 'pool' is never offered for 'zzz'.
 */
static const char *nearest_key(const char *key, const struct latch_kv_key *keys, int n)
{
	int limit = strlen(key) / 3 > 2 ? (int)strlen(key) / 3 : 2, best = limit + 1;
	const char *near = NULL;

	for (int i = 0; i < n; i++) {
		int dist = key_distance(key, keys[i].name);

		if (dist < best) {
			best = dist;
			near = keys[i].name;
		}
	}
	return near;
}

/* The keys, whole: a list that does not fit ends with ", ..." rather than in the middle of a name. */
static void known_keys(const struct latch_kv_key *keys, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		size_t need = strlen(keys[i].name) + (i ? 2 : 0);

		if (off + need + sizeof(", ...") > len) {
			snprintf(buf + off, len - off, ", ...");
			return;
		}
		off += snprintf(buf + off, len - off, "%s%s", i ? ", " : "", keys[i].name);
	}
}

static int unknown_key(const char *key, const struct latch_kv_key *keys, int n_keys, const char *doc, char *msg,
		       size_t msglen)
{
	const char *near = nearest_key(key, keys, n_keys);
	char known[LATCH_ERR_MAX / 2];

	if (near && doc)
		return latch_errf(msg, msglen, -EINVAL, "unknown key '%s' (did you mean '%s'? see %s)", key, near, doc);
	if (near)
		return latch_errf(msg, msglen, -EINVAL, "unknown key '%s' (did you mean '%s'?)", key, near);
	if (doc)
		return latch_errf(msg, msglen, -EINVAL, "unknown key '%s' (see %s for the keys)", key, doc);
	known_keys(keys, n_keys, known, sizeof(known));
	return latch_errf(msg, msglen, -EINVAL, "unknown key '%s'; known: %s", key, known);
}

/* One line: 0 to go on, or -EINVAL with the message in msg. */
static int read_line(char *line, const struct latch_kv_key *keys, int n_keys, unsigned flags, const char *doc,
		     bool *seen, void *obj, char *msg, size_t msglen)
{
	char *s = trim(line), *eq, *key, *val, *hash;
	int k;

	if (!*s || *s == '#')
		return 0;
	/* "value # note": only after a blank, so a '#' inside a value survives */
	if ((flags & LATCH_KV_TRAILING_COMMENT) && (hash = strstr(s, " #")))
		*hash = '\0';
	eq = strchr(s, '=');
	if (!eq)
		return latch_errf(msg, msglen, -EINVAL, "expected 'key = value', got '%s'", s);
	*eq = '\0';
	key = trim(s);
	val = trim(eq + 1);
	for (k = 0; k < n_keys; k++)
		if (!strcmp(key, keys[k].name))
			break;
	if (k == n_keys)
		return flags & LATCH_KV_UNKNOWN_OK ? 0 : unknown_key(key, keys, n_keys, doc, msg, msglen);
	if (seen[k] && keys[k].type != LATCH_KV_LIST)
		return latch_errf(msg, msglen, -EINVAL, "'%s' given twice", key);
	seen[k] = true;
	return set_value(&keys[k], obj, val, msg, msglen);
}

int latch_kv_parse(const char *path, char *text, const struct latch_kv_key *keys, int n_keys, unsigned flags,
		   const char *doc, void *obj, char *err, size_t errlen)
{
	bool seen[MAX_KEYS] = { false };
	char msg[LATCH_ERR_MAX];
	int lineno = 0;

	if (n_keys > MAX_KEYS)
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "too many keys in the format (a bug)");
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		if (read_line(line, keys, n_keys, flags, doc, seen, obj, msg, sizeof(msg)))
			return latch_errf_at(err, errlen, -EINVAL, path, lineno, "%s", msg);
	}
	return 0;
}

int latch_kv_read(const char *path, const struct latch_kv_key *keys, int n_keys, unsigned flags, const char *doc,
		  void *obj, char *err, size_t errlen)
{
	bool seen[MAX_KEYS] = { false };
	char line[LINE_MAX_LEN], msg[LATCH_ERR_MAX];
	int fd, lineno = 0, ret = 0;
	FILE *f;

	if (n_keys > MAX_KEYS)
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "too many keys in the format (a bug)");
	fd = latch_open_trusted(path, flags & LATCH_KV_SAFE_FILE ? LATCH_FILE_CONFIG : LATCH_FILE_PLAIN, NULL, NULL,
				err, errlen);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "r");
	if (!f) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f))
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "line longer than %zu characters",
					    sizeof(line) - 2);
		else if (read_line(line, keys, n_keys, flags, doc, seen, obj, msg, sizeof(msg)))
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "%s", msg);
	}
	if (!ret && ferror(f))
		ret = latch_errf_at(err, errlen, -EIO, path, 0, "read error");
	fclose(f);
	return ret;
}

static void print_value(FILE *f, const struct latch_kv_key *k, const void *obj)
{
	const char *field = (const char *)obj + k->offset;
	const struct latch_addr *a = (const struct latch_addr *)field;
	const uint8_t *m = (const uint8_t *)field;
	char buf[INET6_ADDRSTRLEN];

	switch (k->type) {
	case LATCH_KV_STRING:
		if (*field)
			fprintf(f, "%s = %s\n", k->name, field);
		break;
	case LATCH_KV_UINT:
	case LATCH_KV_SECONDS: /* a bare number: seconds, or MiB, in each grammar */
	case LATCH_KV_MIB:
		fprintf(f, "%s = %u\n", k->name, *(const uint32_t *)field);
		break;
	case LATCH_KV_ADDR4:
	case LATCH_KV_ADDR6:
		if (a->family) {
			latch_addr_format(a, buf, sizeof(buf));
			fprintf(f, "%s = %s\n", k->name, buf);
		}
		break;
	case LATCH_KV_MAC:
		fprintf(f, "%s = %02x:%02x:%02x:%02x:%02x:%02x\n", k->name, m[0], m[1], m[2], m[3], m[4], m[5]);
		break;
	case LATCH_KV_CUSTOM:
	case LATCH_KV_LIST:
		if (k->print)
			k->print(f, obj);
		break;
	}
}

int latch_kv_write(const char *path, mode_t mode, const char *header, const struct latch_kv_key *keys, int n_keys,
		   const void *obj, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret;

	if (!f)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	fprintf(f, "# %s\n", header);
	for (int i = 0; i < n_keys; i++)
		print_value(f, &keys[i], obj);
	if (fclose(f)) {
		free(text);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	ret = latch_write_atomic(path, mode, text, len);
	explicit_bzero(text, len); /* a state file may hold placeholders */
	free(text);
	if (ret)
		return latch_errf(err, errlen, ret, "cannot write %s: %s", path, strerror(-ret));
	return 0;
}
