// SPDX-License-Identifier: GPL-2.0-only
/*
 * confine.c - latchd in a cgroup of its own, under the room programs.
 *
 * A broker that someone talks into SSRF must still not reach the LAN, the
 * host's own services or a metadata address.  So latchd moves itself, before
 * it opens a single socket, into <cgroup2>/$LATCH_CGROUP/latchd, a room whose
 * policy latchd writes itself (loader/cgroup.h: LATCH_CFG_LATCHD): its DNS
 * upstreams, permanently; and every address latchd looks up to connect to
 * (a kit route's upstream, a name a sandbox may CONNECT to) through
 * latchd_confine_lookup(), installed before the caller gets it, with the TTL as
 * deadline and the name's ports.  An address that is not public
 * (latch_addr_nonpublic: loopback, private, link-local, metadata...), one
 * of the host's own or one on a link of the host (the LAN, by the kernel's
 * route lookup) is never installed, unless the route names it as an address
 * literally; it is still handed on, so a connect to it is refused by the
 * kernel (EPERM, counted in latchd's slot) and the refusal is audited here.
 * Answers from latchd's listeners (sent from one of their ports) pass; the
 * gate of the room services sits on the same cgroup's ingress.
 *
 * latchd's own lookups go through a resolver of their own on 127.76.0.0,
 * which no room can stamp packets for (the gate drops everything sent
 * there) and which answers nobody; it keeps every address of an answer, so
 * that this file, not the rebinding filter, decides what latchd may reach.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "latchd/latchd.h"
#include "latchd/room.h"

#define EXPLICIT_TTL_S 3600 /* a literal address of a route, installed again on each lookup */

struct confine {
	struct latch_cg_set *set;
	struct latch_cg_room *room; /* latchd's slot */
	int cgroup_fd;
	struct latch_resolver *res; /* latchd's own lookups */
	uint64_t dropped; /* the kernel's refusals already audited */
};

static struct latch_sandbox *confine_sb(struct latchd *ld)
{
	return ld->confine && ld->confine->room ? latch_cg_room_sandbox(ld->confine->room) : NULL;
}

/* The DNS upstreams as latchd's permanent policy (at start and at every reload). */
int latchd_confine_upstreams(struct latchd *ld, char *err, size_t errlen)
{
	struct latch_policy_spec specs[LATCH_RESOLVER_UPSTREAM_MAX] = { 0 };
	struct latch_sandbox *sb = confine_sb(ld);

	if (!sb)
		return 0;
	for (int i = 0; i < ld->n_upstream; i++) {
		struct latch_entry *e = &specs[i].entry;

		e->addr = ld->upstream[i];
		e->prefixlen = ld->upstream[i].family == AF_INET ? 32 : 128;
		e->proto = LATCH_PROTO_ANY; /* UDP, and TCP for long answers */
		e->n_ports = 1;
		e->ports[0].lo = e->ports[0].hi = ld->upstream_port[i] ? ld->upstream_port[i] : 53;
		specs[i].origin = LATCH_ORIGIN_PROFILE;
	}
	return latch_policy_switch(sb, specs, ld->n_upstream, false, err, errlen);
}

int latchd_confine_start(struct latchd *ld, const uint16_t *ports, int n_ports, char *err, size_t errlen)
{
	struct confine *c = calloc(1, sizeof(*c));
	struct latch_cg_posture p;
	char dir[PATH_MAX], procs[PATH_MAX + 16], pid[24];
	int rc = -EINVAL, fd;

	if (!c)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	c->cgroup_fd = -1;
	ld->confine = c;
	if (latch_cg_dir(dir, sizeof(dir), "latchd"))
		return latch_errf(err, errlen, -ENOENT,
				  "no cgroup2 mount: latchd cannot confine itself "
				  "(mount cgroup2, or start latchd --unconfined)");
	if (latch_mkdirs(dir, 0755) || (c->cgroup_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return latch_errf(err, errlen, -errno, "cannot make %s: %s", dir, strerror(errno));
	c->set = latch_cg_open(err, errlen);
	if (!c->set)
		return -EINVAL;
	c->room = latch_cg_latchd_new(c->set, c->cgroup_fd, ports, n_ports, err, errlen);
	if (!c->room || latchd_confine_upstreams(ld, err, errlen) || latch_cg_room_attach(c->room, err, errlen))
		return -EINVAL;
	if (latch_cg_gate_attach(c->set, c->cgroup_fd, err, errlen))
		return -EINVAL;
	/* in, before any socket: a socket keeps the cgroup it was made in for its packets */
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0) {
		rc = latch_errf(err, errlen, -errno, "cannot move latchd into %s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	latch_cg_room_posture(c->room, &p);
	if (!p.enforced)
		return latch_errf(err, errlen, -EPERM, "latchd's confinement did not verify: %s", p.why);
	latchd_log("confined in %s: %d upstream(s), %d listener port(s)", dir, ld->n_upstream, n_ports);
	return 0;
}

static bool own_name_allowed(void *arg, const char *name)
{
	return false; /* it answers nobody: the gate lets nothing reach it anyway */
}

static const char *own_addr_refused(void *arg, const struct latch_addr *a)
{
	return NULL; /* every address reaches latchd_confine_lookup(), which decides */
}

int latchd_confine_resolver(struct latchd *ld, char *err, size_t errlen)
{
	/* on the room service network: the gate admits nobody's packets to its address */
	struct latch_resolver_opts o = { .port = 53, .n_listen = 1, .guest.gated = true, .report_all = true };

	if (!ld->confine) { /* --unconfined: the lookups all the same, with nothing to install them in */
		ld->confine = calloc(1, sizeof(*ld->confine));
		if (!ld->confine)
			return latch_errf(err, errlen, -ENOMEM, "out of memory");
		ld->confine->cgroup_fd = -1;
	}
	o.listen[0].family = AF_INET;
	o.listen[0].v4.s_addr = htonl(LATCH_ROOM_SERVICE_NET);
	o.n_upstream = ld->n_upstream;
	memcpy(o.upstream, ld->upstream, sizeof(o.upstream));
	memcpy(o.upstream_port, ld->upstream_port, sizeof(o.upstream_port));
	o.ttl_min = ld->conf.dns_ttl_min;
	o.ttl_max = ld->conf.dns_ttl_max;
	o.policy = (struct latch_resolver_policy){ .name_allowed = own_name_allowed, .addr_refused = own_addr_refused };
	if (ld->confine->res)
		return latch_resolver_reconfigure(ld->confine->res, &o, err, errlen);
	ld->confine->res = latch_resolver_new(ld->base, &o, err, errlen);
	return ld->confine->res ? 0 : -errno;
}

/* Why latchd may not reach A, or NULL. */
static const char *confine_refused(const struct latch_addr *a)
{
	const char *why = latch_addr_nonpublic(a);
	int kind;

	if (why)
		return why;
	kind = latch_route_kind(a);
	return kind == LATCH_ROUTE_LOCAL  ? "host" :
	       kind == LATCH_ROUTE_ONLINK ? "lan" :
	       kind < 0			  ? "no-route-answer" : /* fail closed */
					    NULL;
}

struct latchd_confine_lookup {
	struct latchd *ld;
	char who[LATCH_NAME_MAX + 1];
	char name[LATCH_DNS_NAME_MAX + 1];
	struct latch_entry ports;
	struct latch_addr literal; /* family 0: a name */
	latch_http_resolved_cb cb;
	void *cbarg;
};

/* Install what latchd may reach of ADDRS (EXPLICIT: the route named it), audit the rest. */
static void confine_install(struct latchd_confine_lookup *lk, const struct latch_addr *addrs, int n, uint32_t ttl,
			    bool explicit)
{
	struct latch_sandbox *sb = confine_sb(lk->ld);
	uint64_t expires = latch_now_boot_ns() + (uint64_t)ttl * NS_PER_S;
	char err[LATCH_ERR_MAX], a[INET6_ADDRSTRLEN], code[AUDIT_TOKEN_MAX];

	for (int i = 0; i < n; i++) {
		const char *why = explicit ? NULL : confine_refused(&addrs[i]);
		struct latch_entry e;

		latch_addr_format(&addrs[i], a, sizeof(a));
		if (why) {
			/* unconfined, nothing refuses it: the entry says so */
			snprintf(code, sizeof(code), "latchd.confine.%s", why);
			latchd_audit(lk->ld, lk->who, "confine", sb ? "deny" : "unconfined", code,
				     json_pack("{s:s, s:s, s:i}", "name", lk->name, "address", a, "port",
					       lk->ports.n_ports ? lk->ports.ports[0].lo : 0));
			continue;
		}
		latch_profile_address_entry(&addrs[i], &lk->ports, &e);
		if (sb && latch_policy_learn_needed(sb, &e, expires, LATCH_ORIGIN_LEARNED) > 0 &&
		    latch_policy_learn(sb, &e, expires, LATCH_ORIGIN_LEARNED, err, sizeof(err)))
			latchd_log("confine: %s (%s): %s", lk->name, a, err);
	}
}

static void confine_resolved(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			     const char *why)
{
	struct latchd_confine_lookup *lk = arg;

	if (n > 0)
		confine_install(lk, addrs, n, ttl, false);
	lk->cb(lk->cbarg, name, addrs, n, ttl, why);
	free(lk);
}

static void confine_literal(evutil_socket_t fd, short what, void *arg)
{
	struct latchd_confine_lookup *lk = arg;

	confine_install(lk, &lk->literal, 1, EXPLICIT_TTL_S, true);
	lk->cb(lk->cbarg, lk->name, &lk->literal, 1, EXPLICIT_TTL_S, NULL);
	free(lk);
}

int latchd_confine_lookup(struct latchd *ld, const char *who, const char *name, const struct latch_entry *ports,
			  latch_http_resolved_cb cb, void *cbarg)
{
	struct latchd_confine_lookup *lk = calloc(1, sizeof(*lk));
	char err[LATCH_ERR_MAX];
	int rc;

	if (!lk)
		return -ENOMEM;
	lk->ld = ld;
	snprintf(lk->who, sizeof(lk->who), "%s", who);
	snprintf(lk->name, sizeof(lk->name), "%s", name);
	lk->ports = *ports;
	lk->cb = cb;
	lk->cbarg = cbarg;
	/* an address the route names literally: latchd may reach it, whatever it is */
	if (!latch_parse_addr(name, &lk->literal, err, sizeof(err)))
		rc = event_base_once(ld->base, -1, EV_TIMEOUT, confine_literal, lk, NULL) ? -ENOMEM : 0;
	else if (ld->confine && ld->confine->res)
		rc = latch_resolver_lookup(ld->confine->res, name, confine_resolved, lk);
	else
		rc = -ENOTCONN;
	if (rc)
		free(lk);
	return rc;
}

/* Every tick: what the kernel refused latchd since the last one goes to the audit log. */
void latchd_confine_tick(struct latchd *ld)
{
	struct latch_sandbox *sb = confine_sb(ld);
	struct latch_counter c[LATCH_COUNTER_SLOTS];
	json_t *reasons;
	uint64_t total = 0;

	if (!sb || latch_sandbox_counters(sb, c))
		return;
	reasons = json_object();
	for (int r = LATCH_DROP_LAST; r <= LATCH_DROP_MALFORMED; r++)
		for (int k = 0; k < LATCH_DIR_COUNT; k++) {
			uint64_t n = c[latch_counter_slot(r, k)].packets;

			total += n;
			if (n)
				json_object_set_new(reasons, latch_reason_name(r), json_integer(n));
		}
	if (total > ld->confine->dropped)
		latchd_audit(ld, "latchd", "confine", "deny", "latchd.confine.kernel",
			     json_pack("{s:I, s:I, s:o}", "refused", (json_int_t)(total - ld->confine->dropped),
				       "total", (json_int_t)total, "reasons", reasons));
	else
		json_decref(reasons);
	ld->confine->dropped = total;
}

void latchd_confine_prune(struct latchd *ld, uint64_t before_ns)
{
	struct latch_sandbox *sb = confine_sb(ld);

	if (sb)
		latch_policy_prune_resolved(sb, before_ns);
}

/* latchd stops: its cgroup, slot and programs stay (the next latchd sweeps the slot and takes a new one). */
void latchd_confine_stop(struct latchd *ld)
{
	struct confine *c = ld->confine;

	if (!c)
		return;
	latch_resolver_free(c->res);
	if (c->room)
		latch_cg_room_close(c->room);
	latch_cg_close(c->set);
	if (c->cgroup_fd >= 0)
		close(c->cgroup_fd);
	free(c);
	ld->confine = NULL;
}
