/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * config.h - latch.conf, the host's settings, read in one place.
 *
 * /etc/latch/latch.conf is `key = value` lines ('#' starts a comment).  It
 * says which pool the sandboxes' /30s come from, which uplink allowed traffic
 * leaves by, which routing tables and rule priority latch may use, which
 * upstream DNS servers latchd asks and how long learned answers live, the
 * profile `latch up` starts with, how often latchd backs guest state up, the
 * port of the credential broker on each sandbox's host address, the spend
 * caps of credentialed requests (budget_*, docs/budget.md), and the caps and
 * notifier of grants (grant_*, notify_*, docs/grants.md).  The
 * file must be owned by root and writable by nobody else; every error reads
 * `file:line: message`.  LATCH_ROOT moves it (common.h's latch_path()).
 *
 * Modules never read the file themselves: they get a struct latch_conf.
 */
#ifndef LATCH_CONFIG_H
#define LATCH_CONFIG_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

#define LATCH_CONF_UPSTREAM_MAX 4
#define LATCH_CONF_TTL_MIN 30
#define LATCH_CONF_TTL_MAX 3600
/* Containment starts at research: sealed is one command away, forced for `latch task`. */
#define LATCH_CONF_PROFILE "research"
#define LATCH_CONF_BACKUP_INTERVAL 600
/*
 * The credential broker's port on each sandbox's host address: no
 * well-known service uses it, so a host daemon bound to the wildcard address
 * is unlikely to be in the way of the broker's listener.
 */
#define LATCH_CONF_BROKER_PORT 8119
#define LATCH_CONF_BROKER_BODY_MAX 32 /* MiB: Anthropic's largest request; OpenAI's and Gemini's are smaller or alike */
#define LATCH_CONF_BROKER_METERED_HOLD_MAX 64 /* MiB */
#define LATCH_CONF_BROKER_REQUEST_IDLE 30 /* s: the rest of a head or body (nginx waits 60) */
#define LATCH_CONF_BROKER_HELLO_TIMEOUT 10 /* s: a CONNECT tunnel's ClientHello */

/*
 * Spend caps, by provider in budget/'s order (openai, anthropic, gemini,
 * other); LATCH_CONF_NO_CAP is none.  latchd hands them to budget/ as its
 * struct budget_caps; a kit credential may override the per-sandbox ones.
 */
#define LATCH_CONF_PROVIDERS 4
#define LATCH_CONF_OTHER 3 /* the provider the bare defaults leave uncapped */
#define LATCH_CONF_NO_CAP (-1)
struct latch_conf_caps {
	int64_t requests_per_hour; /* in any 3600 s */
	int64_t requests_per_day; /* in any 86400 s */
	int64_t micros_per_day; /* micro-dollars in any 86400 s */
};
/* Kagebox's defaults for each sandbox, and four sandboxes' worth host-wide; "other" is uncapped. */
#define LATCH_CONF_BUDGET_REQUESTS_PER_HOUR 240
#define LATCH_CONF_BUDGET_REQUESTS_PER_DAY 2000
#define LATCH_CONF_BUDGET_MICROS_PER_DAY 5000000
#define LATCH_CONF_BUDGET_HOST_FACTOR 4
/* The essay's grants: 60 s unless asked, 5 min at most, eight an hour; a person has 2 min to decide. */
#define LATCH_CONF_GRANT_DEFAULT 60
#define LATCH_CONF_GRANT_MAX 300
#define LATCH_CONF_GRANTS_PER_HOUR 8
#define LATCH_CONF_GRANT_ASK_WAIT 120
#define LATCH_CONF_GRANT_ASKS_PENDING 2
#define LATCH_CONF_NOTIFY_TIMEOUT 10
#define LATCH_CONF_NOTIFY_RETRIES 2

struct latch_conf {
	char path[PATH_MAX]; /* the file read, or "" when none exists */
	struct latch_addr pool4; /* network of the v4 pool, carved into /30s */
	int pool4_len; /* its prefix length, 8..30 */
	struct latch_addr pool6; /* family 0: no IPv6; else carved into /64s */
	int pool6_len; /* 16..64 */
	char uplink[IF_NAMESIZE]; /* "" when no uplink: `unreachable default` */
	struct latch_addr gateway4; /* next hop on the uplink (family 0: none, on-link) */
	struct latch_addr gateway6;
	uint32_t table_base; /* sandbox i routes in table table_base + i */
	uint32_t rule_priority; /* priority of the `from SUBNET` rules */
	char images[PATH_MAX]; /* image cache; one directory per image name */
	/* latchd's resolver: where allowed names are asked (none: /etc/resolv.conf's) */
	struct latch_addr dns_upstream[LATCH_CONF_UPSTREAM_MAX];
	uint16_t dns_upstream_port[LATCH_CONF_UPSTREAM_MAX];
	int n_dns_upstream;
	uint32_t dns_ttl_min, dns_ttl_max; /* learned entries live this long, clamped */
	char profile[65]; /* the profile `latch up` starts a sandbox with */
	uint32_t backup_interval; /* seconds between latchd's guest state backups; 0: only on down */
	uint32_t broker_port; /* the broker listens here on a kit sandbox's host address */
	uint32_t broker_body_max; /* MiB: the largest metered request body the broker holds for the meter */
	uint32_t broker_metered_hold_max; /* MiB: what one sandbox's metered bodies in flight hold at once */
	uint32_t broker_request_idle; /* s: a guest silent in the middle of a head or body is closed */
	uint32_t broker_hello_timeout; /* s: a tunnel whose ClientHello has not come is closed */
	struct latch_conf_caps budget_sandbox[LATCH_CONF_PROVIDERS]; /* each sandbox's requests to a provider */
	struct latch_conf_caps budget_host[LATCH_CONF_PROVIDERS]; /* every sandbox's together */
	/* grants (docs/grants.md): timed openings of host names the host resolves */
	uint32_t grant_default; /* seconds, when neither the ask nor --for says */
	uint32_t grant_max; /* seconds, the longest grant */
	uint32_t grants_per_hour; /* grants made or approved per sandbox in any hour */
	uint32_t grant_ask_wait; /* seconds an ask waits for a person, then it is denied */
	uint32_t grant_asks_per_hour; /* asks per sandbox in any hour, whatever became of them */
	uint32_t grant_asks_pending; /* asks per sandbox waiting at once */
	char notify_command[PATH_MAX]; /* a program given each ask as JSON on stdin; "" none */
	char notify_url[1024]; /* each ask POSTed there as JSON; "" none */
	uint32_t notify_timeout; /* seconds for one notifier run or one POST */
	uint32_t notify_retries; /* POSTs again after a failure */
	/* kit setup (docs/kits.md): where npm installers are fetched, verified on the host */
	char npm_registry[512]; /* https://HOST[:PORT][/PATH], no trailing '/' */
	char npm_ca_file[PATH_MAX]; /* "" : the system's CA store */
};

/* Defaults when the file says nothing (the v4 pool is not for tests). */
#define LATCH_CONF_POOL4 "10.213.0.0/16"
#define LATCH_CONF_TABLE_BASE 21300
#define LATCH_CONF_RULE_PRIORITY 10213
#define LATCH_CONF_NPM_REGISTRY "https://registry.npmjs.org"

/*
 * Read the config ($LATCH_ROOT/etc/latch/latch.conf).  A missing file gives
 * the defaults.  Returns 0, or -errno with `file:line: message` in err.
 */
int latch_conf_load(struct latch_conf *c, char *err, size_t errlen);
/* Parse one file; what latch_conf_load() uses, and what tests can call. */
int latch_conf_parse_file(const char *path, struct latch_conf *c, char *err, size_t errlen);

/*
 * The name of key i of the key table, NULL past the last: what the shipped
 * config/latch.conf and latch.conf(5) must list (tests/test_conf_file.c).
 */
const char *latch_conf_key(size_t i);

/* Number of sandboxes the pool has room for. */
uint32_t latch_conf_pool_size(const struct latch_conf *c);

#endif
