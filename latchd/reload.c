// SPDX-License-Identifier: GPL-2.0-only
/*
 * reload.c - latch.conf and every active profile, read at start and again
 * on SIGHUP or the control socket's reload: swapped in only when all of
 * them are valid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latchd/latchd.h"
#include "latchd/room.h"

/* /etc/resolv.conf's nameservers, when latch.conf names no dns_upstream. */
static int upstreams_from_resolv_conf(struct latch_addr *a, uint16_t *port, int max)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], e[LATCH_ERR_MAX];
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		char addr[128];

		if (sscanf(line, " nameserver %127s", addr) == 1 && !latch_parse_addr(addr, &a[n], e, sizeof(e)))
			port[n++] = 53;
	}
	fclose(f);
	return n;
}

_Static_assert(LATCH_CONF_UPSTREAM_MAX == LATCH_RESOLVER_UPSTREAM_MAX,
	       "latch.conf's upstreams go to the resolver as they are");

/* Read latch.conf into c and the upstreams; nothing of latchd changes on failure. */
int latchd_read_conf(struct latch_conf *c, struct latch_addr *up, uint16_t *up_port, int *n_up, char *err,
		     size_t errlen)
{
	int rc = latch_conf_load(c, err, errlen);

	if (rc)
		return rc;
	if (c->n_dns_upstream) {
		*n_up = c->n_dns_upstream;
		memcpy(up, c->dns_upstream, sizeof(c->dns_upstream));
		memcpy(up_port, c->dns_upstream_port, sizeof(c->dns_upstream_port));
	} else {
		*n_up = upstreams_from_resolv_conf(up, up_port, LATCH_RESOLVER_UPSTREAM_MAX);
	}
	return 0;
}

/*
 * SIGHUP: read latch.conf and every active profile; when all are valid, swap
 * them in (resolvers reconfigured, profiles switched).  One bad file changes
 * nothing anywhere, and says why.
 */
int latchd_reload(struct latchd *ld, char *err, size_t errlen)
{
	struct latch_conf c;
	struct latch_addr up[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t up_port[LATCH_RESOLVER_UPSTREAM_MAX];
	char why[LATCH_ERR_MAX];
	int n_up = 0, n = 0, i = 0;
	struct latch_profile *loaded;
	bool ups_changed;

	if (latchd_read_conf(&c, up, up_port, &n_up, why, sizeof(why))) {
		latchd_log_err("reload refused, nothing changed: %s", why);
		latchd_audit(ld, "latchd", "config", "refuse", "latchd.reload", json_pack("{s:s}", "error", why));
		snprintf(err, errlen, "reload refused, nothing changed: %s", why);
		return -EINVAL;
	}
	for (struct sandbox *s = ld->sandboxes; s; s = s->next)
		n++;
	loaded = calloc(n ? n : 1, sizeof(*loaded));
	if (!loaded) {
		snprintf(err, errlen, "reload refused, nothing changed: out of memory");
		return -ENOMEM;
	}
	for (struct sandbox *s = ld->sandboxes; s; s = s->next, i++) {
		if (!s->have_profile)
			continue;
		if (latchd_switch_load_profile(ld, s->prof.name, &loaded[i], why, sizeof(why))) {
			latchd_log_err("reload refused, nothing changed: %s: %s", s->name, why);
			latchd_audit(ld, "latchd", "config", "refuse", "latchd.reload",
				     json_pack("{s:s, s:s}", "sandbox", s->name, "error", why));
			snprintf(err, errlen, "reload refused, nothing changed: %s: %s", s->name, why);
			for (int k = 0; k < n; k++)
				latch_profile_free(&loaded[k]);
			free(loaded);
			return -EINVAL;
		}
	}
	/* all valid: swap */
	ups_changed = n_up != ld->n_upstream || memcmp(ld->upstream, up, sizeof(up)) ||
		      memcmp(ld->upstream_port, up_port, sizeof(up_port));
	ld->conf = c;
	latchd_broker_limits(ld);
	ld->n_upstream = n_up;
	memcpy(ld->upstream, up, sizeof(up));
	memcpy(ld->upstream_port, up_port, sizeof(up_port));
	/*
	 * latchd's own policy is switched only when its DNS upstreams changed:
	 * the switch drops the brokers' upstream addresses its lookups had
	 * admitted, and with them the pooled connections to them, until the
	 * engine looks each name up again.
	 */
	if ((ups_changed && latchd_confine_upstreams(ld, why, sizeof(why))) ||
	    latchd_confine_resolver(ld, why, sizeof(why)))
		latchd_log("reload: latchd's own policy: %s", why);
	i = 0;
	for (struct sandbox *s = ld->sandboxes; s; s = s->next, i++) {
		struct latch_resolver_opts o;

		if (s->res) {
			latchd_sandbox_resolver_opts(s, &o);
			if (latch_resolver_reconfigure(s->res, &o, why, sizeof(why)))
				latchd_log("%s: resolver: %s", s->name, why);
		}
		if (!s->have_profile)
			continue;
		if (s->sw || !s->res) {
			latchd_log("%s: a switch is running; the reloaded profile applies at the next one", s->name);
			latch_profile_free(&loaded[i]);
			continue;
		}
		latchd_switch_begin(s, &loaded[i], NULL, false);
	}
	free(loaded);
	latchd_sandboxes_scan(ld);
	latchd_audit(ld, "latchd", "config", "reload", "latchd.reload", json_pack("{s:i}", "upstreams", n_up));
	latchd_log("reloaded: %d upstream(s), %d sandbox(es)", n_up, n);
	return 0;
}

/*
 * latch.conf and the profiles, then the price table whatever their fate
 * (its caps as ld->conf now has them): 0, or -errno with the first refusal
 * in ERR.  SIGHUP and the control socket's reload (latchd --reload) both.
 */
int latchd_reload_all(struct latchd *ld, char *err, size_t errlen)
{
	char prices[LATCH_ERR_MAX];
	int rc = latchd_reload(ld, err, errlen);

	if (latchd_meter_reload(ld, prices, sizeof(prices)) && !rc) {
		snprintf(err, errlen, "%s", prices);
		rc = -EINVAL;
	}
	return rc;
}
