// SPDX-License-Identifier: GPL-2.0-only
/*
 * config.c - read latch.conf into a struct latch_conf.
 *
 * The config decides where sandbox traffic may be routed, so it is held to
 * the same standard as a secrets file: owned by root, writable by nobody
 * else, unknown or repeated keys refused.  The keys are one table
 * (conf_keys[]); common/kv.c reads the file through it.  Checks that need
 * the live system (does the uplink exist?) are left to the moment it is used.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"

static void conf_defaults(struct latch_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->pool4.family = AF_INET;
	inet_pton(AF_INET, "10.213.0.0", &c->pool4.v4);
	c->pool4_len = 16;
	c->table_base = LATCH_CONF_TABLE_BASE;
	c->rule_priority = LATCH_CONF_RULE_PRIORITY;
	latch_path(c->images, sizeof(c->images), LATCH_IMAGES_DIR);
	c->dns_ttl_min = LATCH_CONF_TTL_MIN;
	c->dns_ttl_max = LATCH_CONF_TTL_MAX;
	strcpy(c->profile, LATCH_CONF_PROFILE);
	c->backup_interval = LATCH_CONF_BACKUP_INTERVAL;
	c->grant_default = LATCH_CONF_GRANT_DEFAULT;
	c->grant_max = LATCH_CONF_GRANT_MAX;
	c->grants_per_hour = c->grant_asks_per_hour = LATCH_CONF_GRANTS_PER_HOUR;
	c->grant_ask_wait = LATCH_CONF_GRANT_ASK_WAIT;
	c->grant_asks_pending = LATCH_CONF_GRANT_ASKS_PENDING;
	c->notify_timeout = LATCH_CONF_NOTIFY_TIMEOUT;
	c->notify_retries = LATCH_CONF_NOTIFY_RETRIES;
	strcpy(c->npm_registry, LATCH_CONF_NPM_REGISTRY);
	c->broker_port = LATCH_CONF_BROKER_PORT;
	c->broker_body_max = LATCH_CONF_BROKER_BODY_MAX;
	c->broker_metered_hold_max = LATCH_CONF_BROKER_METERED_HOLD_MAX;
	c->broker_request_idle = LATCH_CONF_BROKER_REQUEST_IDLE;
	c->broker_hello_timeout = LATCH_CONF_BROKER_HELLO_TIMEOUT;
	for (int p = 0; p < LATCH_CONF_PROVIDERS; p++) {
		bool capped = p != LATCH_CONF_OTHER;
		int64_t f = LATCH_CONF_BUDGET_HOST_FACTOR;

		c->budget_sandbox[p] = (struct latch_conf_caps){
			capped ? LATCH_CONF_BUDGET_REQUESTS_PER_HOUR : LATCH_CONF_NO_CAP,
			capped ? LATCH_CONF_BUDGET_REQUESTS_PER_DAY : LATCH_CONF_NO_CAP,
			capped ? LATCH_CONF_BUDGET_MICROS_PER_DAY : LATCH_CONF_NO_CAP,
		};
		c->budget_host[p] = (struct latch_conf_caps){
			capped ? f * LATCH_CONF_BUDGET_REQUESTS_PER_HOUR : LATCH_CONF_NO_CAP,
			capped ? f * LATCH_CONF_BUDGET_REQUESTS_PER_DAY : LATCH_CONF_NO_CAP,
			capped ? f * LATCH_CONF_BUDGET_MICROS_PER_DAY : LATCH_CONF_NO_CAP,
		};
	}
}

static int parse_pool(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	return latch_parse_prefix(v, AF_INET, 8, 30, &c->pool4, &c->pool4_len, msg, msglen);
}

static int parse_pool6(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	return latch_parse_prefix(v, AF_INET6, 16, 64, &c->pool6, &c->pool6_len, msg, msglen);
}

static int parse_uplink(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if (!*v || strlen(v) >= IF_NAMESIZE || strpbrk(v, "/ \t"))
		return latch_errf(msg, msglen, -EINVAL, "uplink '%s' is not an interface name", v);
	strcpy(c->uplink, v);
	return 0;
}

/* One "ADDR", "ADDR:PORT" or "[ADDR6]:PORT" of dns_upstream. */
static int parse_upstream(struct latch_conf *c, char *a, char *msg, size_t msglen)
{
	char *port = NULL, *end;
	uint32_t p = 53;

	if (c->n_dns_upstream == LATCH_CONF_UPSTREAM_MAX)
		return latch_errf(msg, msglen, -EINVAL, "dns_upstream: at most %d servers", LATCH_CONF_UPSTREAM_MAX);
	if (*a == '[') {
		end = strchr(a, ']');
		if (!end || (end[1] && end[1] != ':'))
			return latch_errf(msg, msglen, -EINVAL, "dns_upstream '%s': write [IPV6]:PORT", a);
		*end = '\0';
		port = end[1] ? end + 2 : NULL;
		a++;
	} else if (strchr(a, ':') == strrchr(a, ':') && strchr(a, ':')) {
		port = strchr(a, ':');
		*port++ = '\0';
	}
	if (latch_parse_addr(a, &c->dns_upstream[c->n_dns_upstream], NULL, 0))
		return latch_errf(msg, msglen, -EINVAL, "dns_upstream '%s' is not an address; write ADDR[:PORT],...",
				  a);
	if (port && latch_parse_uint(port, 1, 65535, &p))
		return latch_errf(msg, msglen, -EINVAL, "dns_upstream port '%s' must be 1..65535", port);
	c->dns_upstream_port[c->n_dns_upstream++] = p;
	return 0;
}

/* "ADDR", "ADDR:PORT" or "[ADDR6]:PORT", comma-separated, at most LATCH_CONF_UPSTREAM_MAX. */
static int parse_upstreams(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;
	char buf[512], *save = NULL, *tok;

	if (strlen(v) >= sizeof(buf))
		return latch_errf(msg, msglen, -EINVAL, "dns_upstream is too long");
	strcpy(buf, v);
	c->n_dns_upstream = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		for (char *e = tok + strlen(tok); e > tok && (e[-1] == ' ' || e[-1] == '\t');)
			*--e = '\0';
		if (parse_upstream(c, tok, msg, msglen))
			return -EINVAL;
	}
	if (!c->n_dns_upstream)
		return latch_errf(msg, msglen, -EINVAL, "dns_upstream is empty; give at least one ADDR[:PORT]");
	return 0;
}

static int parse_profile(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if (latch_parse_file_name("profile", v, msg, msglen))
		return -EINVAL;
	snprintf(c->profile, sizeof(c->profile), "%s", v);
	return 0;
}

static int parse_images(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if (v[0] != '/' || strlen(v) >= sizeof(c->images))
		return latch_errf(msg, msglen, -EINVAL, "images '%s' must be an absolute path", v);
	strcpy(c->images, v);
	return 0;
}

/* The notifier runs as root with every ask: an absolute path, run as it is (no shell, no arguments). */
static int parse_notify_command(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if (v[0] != '/' || strpbrk(v, " \t") || strlen(v) >= sizeof(c->notify_command))
		return latch_errf(msg, msglen, -EINVAL,
				  "notify_command '%s' must be the absolute path of one program (no arguments; it "
				  "reads the ask as JSON on stdin)",
				  v);
	strcpy(c->notify_command, v);
	return 0;
}

static int parse_notify_url(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if ((strncmp(v, "https://", 8) && strncmp(v, "http://", 7)) || strpbrk(v, " \t") ||
	    strlen(v) >= sizeof(c->notify_url))
		return latch_errf(msg, msglen, -EINVAL, "notify_url '%s' must be an http:// or https:// URL", v);
	strcpy(c->notify_url, v);
	return 0;
}

/* Installers are only as good as the channel's integrity hash, but a plain-text registry is still refused. */
static int parse_npm_registry(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;
	size_t n = strlen(v);

	while (n > 8 && v[n - 1] == '/')
		n--;
	if (strncmp(v, "https://", 8) || n <= 8 || strpbrk(v, " \t?#") || n >= sizeof(c->npm_registry))
		return latch_errf(msg, msglen, -EINVAL,
				  "npm_registry '%s' must be an https:// URL without a query, e.g. %s", v,
				  LATCH_CONF_NPM_REGISTRY);
	memcpy(c->npm_registry, v, n);
	c->npm_registry[n] = '\0';
	return 0;
}

static int parse_npm_ca_file(void *obj, const char *v, char *msg, size_t msglen)
{
	struct latch_conf *c = obj;

	if (v[0] != '/' || strlen(v) >= sizeof(c->npm_ca_file))
		return latch_errf(msg, msglen, -EINVAL, "npm_ca_file '%s' must be an absolute path", v);
	strcpy(c->npm_ca_file, v);
	return 0;
}

/*
 * A spend cap: `VALUE` or a comma-separated list of `[PROVIDER:]VALUE`.  A
 * bare VALUE sets openai, anthropic and gemini; PROVIDER:VALUE sets one
 * (and wins over the bare value, wherever it stands).  VALUE is a number
 * (dollars, with up to 6 decimals, for the dollar caps) or `none`.
 */
enum { CAP_HOUR, CAP_DAY, CAP_MICROS };
static const char *const conf_providers[LATCH_CONF_PROVIDERS] = { "openai", "anthropic", "gemini", "other" };

static int64_t *cap_field(struct latch_conf_caps *c, int kind)
{
	return kind == CAP_HOUR ? &c->requests_per_hour : kind == CAP_DAY ? &c->requests_per_day : &c->micros_per_day;
}

static int cap_value(const char *key, int kind, const char *v, int64_t *out, char *msg, size_t msglen)
{
	uint32_t n;

	if (!strcmp(v, "none")) {
		*out = LATCH_CONF_NO_CAP;
		return 0;
	}
	if (kind == CAP_MICROS && !latch_parse_micros(v, 1000000000000LL, out))
		return 0;
	if (kind != CAP_MICROS && !latch_parse_uint(v, 0, 1000000000, &n)) {
		*out = n;
		return 0;
	}
	return latch_errf(msg, msglen, -EINVAL, "%s '%s' must be %s, or none", key, v,
			  kind == CAP_MICROS ? "dollars such as 5 or 2.50" : "a number of requests, 0..1000000000");
}

static int parse_caps(struct latch_conf *c, const char *key, bool host, int kind, const char *v, char *msg,
		      size_t msglen)
{
	int64_t vals[LATCH_CONF_PROVIDERS], bare = 0;
	bool given[LATCH_CONF_PROVIDERS] = { false }, bare_given = false;
	char buf[256], *save = NULL, *tok;

	if (strlen(v) >= sizeof(buf))
		return latch_errf(msg, msglen, -EINVAL, "%s is too long", key);
	strcpy(buf, v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon, *val;
		int p = -1;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		for (char *e = tok + strlen(tok); e > tok && (e[-1] == ' ' || e[-1] == '\t');)
			*--e = '\0';
		colon = strchr(tok, ':');
		val = colon ? colon + 1 : tok;
		if (colon) {
			*colon = '\0';
			for (int i = 0; i < LATCH_CONF_PROVIDERS; i++)
				if (!strcmp(tok, conf_providers[i]))
					p = i;
			if (p < 0)
				return latch_errf(msg, msglen, -EINVAL,
						  "%s: unknown provider '%s'; write openai, anthropic, gemini or other",
						  key, tok);
		}
		if ((p < 0 && bare_given) || (p >= 0 && given[p]))
			return latch_errf(msg, msglen, -EINVAL, "%s gives %s twice", key, p < 0 ? "a bare value" : tok);
		if (cap_value(key, kind, val, p < 0 ? &bare : &vals[p], msg, msglen))
			return -EINVAL;
		if (p < 0)
			bare_given = true;
		else
			given[p] = true;
	}
	if (!bare_given && !given[0] && !given[1] && !given[2] && !given[3])
		return latch_errf(msg, msglen, -EINVAL, "%s is empty; write e.g. 5, or anthropic:10, openai:5", key);
	for (int p = 0; p < LATCH_CONF_PROVIDERS; p++) {
		struct latch_conf_caps *caps = host ? &c->budget_host[p] : &c->budget_sandbox[p];

		if (given[p])
			*cap_field(caps, kind) = vals[p];
		else if (bare_given && p != LATCH_CONF_OTHER)
			*cap_field(caps, kind) = bare;
	}
	return 0;
}

#define CAPS_KEY(fn, key, host, kind)                                     \
	static int fn(void *obj, const char *v, char *msg, size_t msglen) \
	{                                                                 \
		return parse_caps(obj, key, host, kind, v, msg, msglen);  \
	}
CAPS_KEY(parse_rph, "budget_requests_per_hour", false, CAP_HOUR)
CAPS_KEY(parse_rpd, "budget_requests_per_day", false, CAP_DAY)
CAPS_KEY(parse_dpd, "budget_dollars_per_day", false, CAP_MICROS)
CAPS_KEY(parse_host_rph, "budget_host_requests_per_hour", true, CAP_HOUR)
CAPS_KEY(parse_host_rpd, "budget_host_requests_per_day", true, CAP_DAY)
CAPS_KEY(parse_host_dpd, "budget_host_dollars_per_day", true, CAP_MICROS)

/* stay clear of local (255), main (254), default (253) and the 32-bit edge */
static const struct latch_kv_key conf_keys[] = {
	LATCH_KV_FN("pool", parse_pool, NULL),
	LATCH_KV_FN("pool6", parse_pool6, NULL),
	LATCH_KV_FN("uplink", parse_uplink, NULL),
	LATCH_KV_A4("gateway", struct latch_conf, gateway4),
	LATCH_KV_A6("gateway6", struct latch_conf, gateway6),
	LATCH_KV_U32("table_base", struct latch_conf, table_base, 256, 0x7fff0000, "a number in 256..2147418112"),
	LATCH_KV_U32("rule_priority", struct latch_conf, rule_priority, 1, 32765,
		     "a number in 1..32765 (before the main table's rule)"),
	LATCH_KV_FN("images", parse_images, NULL),
	LATCH_KV_FN("dns_upstream", parse_upstreams, NULL),
	LATCH_KV_SECS("dns_ttl_min", struct latch_conf, dns_ttl_min, 1, 86400),
	LATCH_KV_SECS("dns_ttl_max", struct latch_conf, dns_ttl_max, 1, 86400),
	LATCH_KV_FN("profile", parse_profile, NULL),
	LATCH_KV_SECS("backup_interval", struct latch_conf, backup_interval, 0, 86400), /* 0: only on down */
	/* 53 is the resolver's, and below 1024 a port is some system service's */
	LATCH_KV_U32("broker_port", struct latch_conf, broker_port, 1024, 65535, "a TCP port, 1024..65535"),
	LATCH_KV_MIBS("broker_body_max", struct latch_conf, broker_body_max, 1, 1024),
	LATCH_KV_MIBS("broker_metered_hold_max", struct latch_conf, broker_metered_hold_max, 1, 4095),
	LATCH_KV_SECS("broker_request_idle", struct latch_conf, broker_request_idle, 1, 3600),
	LATCH_KV_SECS("broker_hello_timeout", struct latch_conf, broker_hello_timeout, 1, 600),
	LATCH_KV_FN("budget_requests_per_hour", parse_rph, NULL),
	LATCH_KV_FN("budget_requests_per_day", parse_rpd, NULL),
	LATCH_KV_FN("budget_dollars_per_day", parse_dpd, NULL),
	LATCH_KV_FN("budget_host_requests_per_hour", parse_host_rph, NULL),
	LATCH_KV_FN("budget_host_requests_per_day", parse_host_rpd, NULL),
	LATCH_KV_FN("budget_host_dollars_per_day", parse_host_dpd, NULL),
	LATCH_KV_SECS("grant_default", struct latch_conf, grant_default, 1, 3600),
	LATCH_KV_SECS("grant_max", struct latch_conf, grant_max, 1, 3600),
	LATCH_KV_U32("grants_per_hour", struct latch_conf, grants_per_hour, 0, 1000, "a number of grants, 0..1000"),
	LATCH_KV_SECS("grant_ask_wait", struct latch_conf, grant_ask_wait, 1, 3600),
	LATCH_KV_U32("grant_asks_per_hour", struct latch_conf, grant_asks_per_hour, 0, 1000,
		     "a number of asks, 0..1000 (0: the sandbox may not ask)"),
	LATCH_KV_U32("grant_asks_pending", struct latch_conf, grant_asks_pending, 1, 100, "a number of asks, 1..100"),
	LATCH_KV_FN("notify_command", parse_notify_command, NULL),
	LATCH_KV_FN("notify_url", parse_notify_url, NULL),
	LATCH_KV_SECS("notify_timeout", struct latch_conf, notify_timeout, 1, 120),
	LATCH_KV_U32("notify_retries", struct latch_conf, notify_retries, 0, 5, "a number of retries, 0..5"),
	LATCH_KV_FN("npm_registry", parse_npm_registry, NULL),
	LATCH_KV_FN("npm_ca_file", parse_npm_ca_file, NULL),
};

/* What no single key can say: the keys that depend on each other. */
static int check_whole(const char *path, const struct latch_conf *c, char *err, size_t errlen)
{
	if ((c->gateway4.family || c->gateway6.family) && !*c->uplink)
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "a gateway needs an uplink; add 'uplink = DEV'");
	if (c->gateway6.family && !c->pool6.family)
		return latch_errf_at(err, errlen, -EINVAL, path, 0,
				     "gateway6 without pool6; add 'pool6 = PREFIX/LEN' or drop gateway6");
	if (c->grant_default > c->grant_max)
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "grant_default (%u s) is above grant_max (%u s)",
				     c->grant_default, c->grant_max);
	if (c->broker_metered_hold_max < c->broker_body_max)
		return latch_errf_at(err, errlen, -EINVAL, path, 0,
				     "broker_metered_hold_max (%u MiB) is below broker_body_max (%u MiB): a body of "
				     "that size could never be held; raise broker_metered_hold_max",
				     c->broker_metered_hold_max, c->broker_body_max);
	if (c->dns_ttl_min > c->dns_ttl_max)
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "dns_ttl_min (%u) is above dns_ttl_max (%u)",
				     c->dns_ttl_min, c->dns_ttl_max);
	return 0;
}

int latch_conf_parse_file(const char *path, struct latch_conf *c, char *err, size_t errlen)
{
	int ret;

	conf_defaults(c);
	ret = latch_kv_read(path, conf_keys, sizeof(conf_keys) / sizeof(conf_keys[0]),
			    LATCH_KV_SAFE_FILE | LATCH_KV_TRAILING_COMMENT, "latch.conf(5)", c, err, errlen);
	if (ret)
		return ret;
	snprintf(c->path, sizeof(c->path), "%s", path);
	return check_whole(path, c, err, errlen);
}

const char *latch_conf_key(size_t i)
{
	return i < sizeof(conf_keys) / sizeof(conf_keys[0]) ? conf_keys[i].name : NULL;
}

int latch_conf_load(struct latch_conf *c, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret;

	if (latch_path(path, sizeof(path), LATCH_CONF_FILE))
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
