// SPDX-License-Identifier: GPL-2.0-only
/*
 * config.c - read latch.conf into a struct latch_conf, and build paths under
 * LATCH_ROOT.
 *
 * The config decides where sandbox traffic may be routed, so it is held to
 * the same standard as a secrets file: owned by root, writable by nobody
 * else, unknown or repeated keys refused.  Checks that need the live system
 * (does the uplink exist?) are left to the moment it is used.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vm/config.h"

int latch_path(char *buf, size_t len, const char *fmt, ...)
{
	const char *root = getenv("LATCH_ROOT");
	char suffix[PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(suffix, sizeof(suffix), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(suffix))
		return -ENAMETOOLONG;
	if (!root || !*root)
		root = "";
	n = snprintf(buf, len, "%s/%s", root, suffix);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int latch_mkdirs(const char *dir, mode_t mode)
{
	char buf[PATH_MAX];

	if (strlen(dir) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

static void conf_defaults(struct latch_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->pool4.family = AF_INET;
	inet_pton(AF_INET, "10.213.0.0", &c->pool4.v4);
	c->pool4_len = 16;
	c->table_base = LATCH_CONF_TABLE_BASE;
	c->rule_priority = LATCH_CONF_RULE_PRIORITY;
	latch_path(c->images, sizeof(c->images), "var/lib/latch/images");
	c->dns_ttl_min = LATCH_CONF_TTL_MIN;
	c->dns_ttl_max = LATCH_CONF_TTL_MAX;
	strcpy(c->profile, LATCH_CONF_PROFILE);
	c->backup_interval = LATCH_CONF_BACKUP_INTERVAL;
}

/* "ADDR/LEN" of the given family, host bits zero. */
static int parse_prefix(const char *s, int family, int min, int max, struct latch_addr *a, int *len,
			char *msg, size_t msglen)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, e[LATCH_ERR_MAX];
	uint32_t l;
	int bits = family == AF_INET ? 32 : 128;

	if (strlen(s) >= sizeof(buf) || !(slash = strchr(strcpy(buf, s), '/'))) {
		snprintf(msg, msglen, "'%s' is not a prefix; write ADDR/LEN", s);
		return -EINVAL;
	}
	*slash = '\0';
	if (latch_parse_addr(buf, a, e, sizeof(e)) || a->family != family) {
		snprintf(msg, msglen, "'%s' is not an %s prefix", s, family == AF_INET ? "IPv4" : "IPv6");
		return -EINVAL;
	}
	if (latch_parse_uint(slash + 1, min, max, &l)) {
		snprintf(msg, msglen, "prefix length of '%s' must be %d..%d", s, min, max);
		return -EINVAL;
	}
	for (int b = l; b < bits; b++)
		if (a->bytes[b / 8] & (0x80 >> (b % 8))) {
			snprintf(msg, msglen, "'%s' has bits set past /%u; write the network address", s, l);
			return -EINVAL;
		}
	*len = l;
	return 0;
}

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

enum { K_POOL, K_POOL6, K_UPLINK, K_GW, K_GW6, K_TABLE, K_PRIO, K_IMAGES, K_DNS_UP, K_TTL_MIN, K_TTL_MAX,
       K_PROFILE, K_BACKUP, K_COUNT };
static const char *const keys[K_COUNT] = { "pool",	  "pool6",	   "uplink",	    "gateway",
					   "gateway6",	  "table_base",	   "rule_priority", "images",
					   "dns_upstream", "dns_ttl_min", "dns_ttl_max",   "profile",
					   "backup_interval" };

/* "ADDR", "ADDR:PORT" or "[ADDR6]:PORT", comma-separated, at most LATCH_CONF_UPSTREAM_MAX. */
static int parse_upstreams(struct latch_conf *c, const char *v, char *msg, size_t msglen)
{
	char buf[512], *save = NULL, *tok, e[LATCH_ERR_MAX];

	if (strlen(v) >= sizeof(buf)) {
		snprintf(msg, msglen, "dns_upstream is too long");
		return -EINVAL;
	}
	strcpy(buf, v);
	c->n_dns_upstream = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *a = trim(tok), *port = NULL, *end;
		uint32_t p = 53;

		if (c->n_dns_upstream == LATCH_CONF_UPSTREAM_MAX) {
			snprintf(msg, msglen, "dns_upstream: at most %d servers", LATCH_CONF_UPSTREAM_MAX);
			return -EINVAL;
		}
		if (*a == '[') {
			end = strchr(a, ']');
			if (!end || (end[1] && end[1] != ':')) {
				snprintf(msg, msglen, "dns_upstream '%s': write [IPV6]:PORT", a);
				return -EINVAL;
			}
			*end = '\0';
			port = end[1] ? end + 2 : NULL;
			a++;
		} else if (strchr(a, ':') == strrchr(a, ':') && strchr(a, ':')) {
			port = strchr(a, ':');
			*port++ = '\0';
		}
		if (latch_parse_addr(a, &c->dns_upstream[c->n_dns_upstream], e, sizeof(e))) {
			snprintf(msg, msglen, "dns_upstream '%s' is not an address; write ADDR[:PORT],...", a);
			return -EINVAL;
		}
		if (port && latch_parse_uint(port, 1, 65535, &p)) {
			snprintf(msg, msglen, "dns_upstream port '%s' must be 1..65535", port);
			return -EINVAL;
		}
		c->dns_upstream_port[c->n_dns_upstream++] = p;
	}
	if (!c->n_dns_upstream) {
		snprintf(msg, msglen, "dns_upstream is empty; give at least one ADDR[:PORT]");
		return -EINVAL;
	}
	return 0;
}

static int set_key(struct latch_conf *c, int k, const char *v, char *msg, size_t msglen)
{
	char e[LATCH_ERR_MAX];
	uint32_t u;

	switch (k) {
	case K_POOL:
		return parse_prefix(v, AF_INET, 8, 30, &c->pool4, &c->pool4_len, msg, msglen);
	case K_POOL6:
		return parse_prefix(v, AF_INET6, 16, 64, &c->pool6, &c->pool6_len, msg, msglen);
	case K_UPLINK:
		if (!*v || strlen(v) >= IF_NAMESIZE || strpbrk(v, "/ \t")) {
			snprintf(msg, msglen, "uplink '%s' is not an interface name", v);
			return -EINVAL;
		}
		strcpy(c->uplink, v);
		return 0;
	case K_GW:
	case K_GW6: {
		struct latch_addr *a = k == K_GW ? &c->gateway4 : &c->gateway6;

		if (latch_parse_addr(v, a, e, sizeof(e)) || a->family != (k == K_GW ? AF_INET : AF_INET6)) {
			snprintf(msg, msglen, "%s '%s' is not an %s address", keys[k], v, k == K_GW ? "IPv4" : "IPv6");
			return -EINVAL;
		}
		return 0;
	}
	case K_TABLE:
	case K_PRIO:
		/* stay clear of local (255), main (254), default (253) and the 32-bit edge */
		if (latch_parse_uint(v, k == K_TABLE ? 256 : 1, k == K_TABLE ? 0x7fff0000 : 32765, &u)) {
			snprintf(msg, msglen, "%s '%s' must be a number in %s", keys[k], v,
				 k == K_TABLE ? "256..2147418112" : "1..32765 (before the main table's rule)");
			return -EINVAL;
		}
		if (k == K_TABLE)
			c->table_base = u;
		else
			c->rule_priority = u;
		return 0;
	case K_DNS_UP:
		return parse_upstreams(c, v, msg, msglen);
	case K_TTL_MIN:
	case K_TTL_MAX:
		if (latch_parse_uint(v, 1, 86400, &u)) {
			snprintf(msg, msglen, "%s '%s' must be seconds, 1..86400", keys[k], v);
			return -EINVAL;
		}
		*(k == K_TTL_MIN ? &c->dns_ttl_min : &c->dns_ttl_max) = u;
		return 0;
	case K_BACKUP:
		if (latch_parse_uint(v, 0, 86400, &c->backup_interval)) {
			snprintf(msg, msglen, "backup_interval '%s' must be seconds, 0..86400 (0: only on down)", v);
			return -EINVAL;
		}
		return 0;
	case K_PROFILE:
		if (!*v || strlen(v) >= sizeof(c->profile) || strchr(v, '/') || strstr(v, "..")) {
			snprintf(msg, msglen, "profile '%s' is not a profile name", v);
			return -EINVAL;
		}
		strcpy(c->profile, v);
		return 0;
	case K_IMAGES:
		if (v[0] != '/' || strlen(v) >= sizeof(c->images)) {
			snprintf(msg, msglen, "images '%s' must be an absolute path", v);
			return -EINVAL;
		}
		strcpy(c->images, v);
		return 0;
	}
	return -EINVAL;
}

int latch_conf_parse_file(const char *path, struct latch_conf *c, char *err, size_t errlen)
{
	bool seen[K_COUNT] = { false };
	char line[1024], msg[LATCH_ERR_MAX];
	struct stat st;
	int lineno = 0, ret = 0;
	FILE *f;

	conf_defaults(c);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : latch_errf_at(err, errlen, -EINVAL, path, 0, "cannot open: %s", strerror(errno));
	if (fstat(fileno(f), &st)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "not a regular file");
		goto out;
	}
	if (st.st_uid != 0) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "owned by uid %u, not root; chown root: it decides where sandbox "
						  "traffic goes",
			    (unsigned)st.st_uid);
		goto out;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "writable by group or others (mode %04o); chmod go-w",
			    (unsigned)(st.st_mode & 07777));
		goto out;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq, *key, *val;
		int k;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "line longer than %zu characters", sizeof(line) - 2);
			goto out;
		}
		if ((s = strchr(line, '#')))
			*s = '\0';
		s = trim(line);
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "expected 'key = value', got '%s'", s);
			goto out;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		for (k = 0; k < K_COUNT; k++)
			if (!strcmp(key, keys[k]))
				break;
		if (k == K_COUNT) {
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno,
				    "unknown key '%s'; known: pool, pool6, uplink, gateway, gateway6, table_base, "
				    "rule_priority, images, dns_upstream, dns_ttl_min, dns_ttl_max, profile, backup_interval",
				    key);
			goto out;
		}
		if (seen[k]) {
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "'%s' given twice", key);
			goto out;
		}
		seen[k] = true;
		if (set_key(c, k, val, msg, sizeof(msg))) {
			ret = latch_errf_at(err, errlen, -EINVAL, path, lineno, "%s", msg);
			goto out;
		}
	}
	if (ferror(f)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "read error");
		goto out;
	}
	if ((c->gateway4.family || c->gateway6.family) && !*c->uplink)
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "a gateway needs an uplink; add 'uplink = DEV'");
	else if (c->gateway6.family && !c->pool6.family)
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0,
				    "gateway6 without pool6; add 'pool6 = PREFIX/LEN' or drop gateway6");
	else if (c->dns_ttl_min > c->dns_ttl_max)
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "dns_ttl_min (%u) is above dns_ttl_max (%u)", c->dns_ttl_min,
			    c->dns_ttl_max);
out:
	fclose(f);
	return ret;
}

int latch_conf_load(struct latch_conf *c, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret;

	if (latch_path(path, sizeof(path), "etc/latch/latch.conf"))
		return latch_errf_at(err, errlen, -EINVAL, "latch.conf", 0, "LATCH_ROOT is too long");
	ret = latch_conf_parse_file(path, c, err, errlen);
	if (ret == -ENOENT) {
		conf_defaults(c);
		return 0;
	}
	return ret;
}

uint32_t latch_conf_pool_size(const struct latch_conf *c)
{
	int bits = 30 - c->pool4_len;

	if (c->pool6.family && 64 - c->pool6_len < bits)
		bits = 64 - c->pool6_len;
	if (bits > 16) /* MACs and tables are finite too; 65536 sandboxes is plenty */
		bits = 16;
	return 1u << bits;
}
