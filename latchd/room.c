// SPDX-License-Identifier: GPL-2.0-only
/*
 * room.c - latchd's services for rooms (`latch run --profile P | --kit K`).
 *
 * A room shares the host's network namespace, so its services live on an
 * address of its own, 127.76.A.B (docs/rooms.md): a filtering resolver on
 * port 53 that answers the names the room's profile and kit allow and
 * learns the answers into the room's maps, and, with a kit, a credential
 * broker on ROOM_BROKER_PORT whose routes are the kit's credentials.  The
 * room's egress program stamps what it sends there with the room's mark,
 * and the gate on latchd's own cgroup (confine.c) drops every packet to
 * 127.76.0.0/16 without its destination's mark: whatever reaches these
 * listeners was sent by that room.
 *
 * One room is one `latch run` on latchd's control socket, in three requests
 * on one connection (ctl/ctl.h's latchd_conn):
 *   room_open   before the room is made: its address, resolver and broker,
 *               and what its command is given (the kit's env);
 *   room_ready  its programs are attached: its profile's and kit's entries
 *               and host names (looked up here) go into its maps;
 *   room_done   the command ended: one audit entry of kind `room`, and the
 *               services go.  Rooms latchd does not serve come here too,
 *               for the audit entry alone.
 * A connection that closes first (latch run killed) takes its rooms along.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "latchd/latchd.h"
#include "latchd/room.h"
#include "broker/broker.h"
#include "kit/kit.h"

struct room_host {
	const struct latch_pentry *pe;
	struct latch_addr addr[LATCH_RESOLVER_ADDRS_MAX];
	int n;
	uint64_t expires_ns;
};

struct room_svc {
	struct latchd *ld;
	struct client *owner; /* the latch run's connection: the room goes with it */
	char name[LATCH_NAME_MAX + 1];
	unsigned index; /* 127.76.(index >> 8).(index & 255); 0 is latchd's own */
	struct latch_addr addr;
	struct latch_profile prof;
	struct latch_pentry *extra; /* the kit's egress_allow */
	int n_extra;
	struct latch_kit *kit;
	char (*placeholders)[LATCH_PLACEHOLDER_LEN + 1];
	struct latch_kit_secrets secrets;
	struct latch_resolver *res;
	struct latch_http_sandbox *broker;
	struct latch_sandbox *sb; /* the room's maps, from room_ready on */
	struct room_host *hosts;
	int n_hosts, waiting;
	struct client *ready_client; /* room_ready is answered when the names are in */
	int entries;
	uint64_t opened_ns;
	struct room_svc *next;
};

/* ---- what the room may ask for ---- */

/* Does the room's extra entry PE (a kit's egress_allow) name NAME: the host itself, or a name below a wildcard? */
static bool extra_names(const struct latch_pentry *pe, const char *name)
{
	size_t nl = strlen(name), dl = strlen(pe->name);

	return pe->kind == LATCH_PENTRY_HOST	 ? !strcmp(pe->name, name) :
	       pe->kind == LATCH_PENTRY_WILDCARD ? nl > dl + 1 && name[nl - dl - 1] == '.' &&
							   !strcmp(name + nl - dl, pe->name) :
						   false;
}

static bool extra_match(const struct room_svc *r, const char *name, struct latch_entry *ports)
{
	bool hit = false;

	for (int i = 0; i < r->n_extra; i++) {
		const struct latch_pentry *pe = &r->extra[i];

		if (!extra_names(pe, name))
			continue;
		if (ports && !hit)
			*ports = pe->entry;
		hit = true;
	}
	return hit;
}

static bool room_name_allowed(void *arg, const char *name)
{
	struct room_svc *r = arg;
	struct latch_entry ports;

	return r->prof.open || latch_profile_match(&r->prof, name, &ports) || extra_match(r, name, NULL);
}

/* CONNECT NAME:PORT from the room: the port is part of the match, entry by entry */
static bool room_connect_allowed(void *arg, const char *name, uint16_t port)
{
	struct room_svc *r = arg;
	const struct latch_pentry *pe = NULL;

	if (r->prof.open)
		return true;
	while ((pe = latch_profile_next_match(&r->prof, name, pe)))
		if (latchd_entry_takes_tcp(&pe->entry, port))
			return true;
	for (int i = 0; i < r->n_extra; i++)
		if (extra_names(&r->extra[i], name) && latchd_entry_takes_tcp(&r->extra[i].entry, port))
			return true;
	return false;
}

static const char *room_addr_refused(void *arg, const struct latch_addr *a)
{
	struct room_svc *r = arg;
	const char *why = latch_addr_nonpublic(a);

	return why && latchd_cidr_covers(&r->prof, a) ? NULL : why;
}

/* An answer the room gets: learned into its maps (under each matching entry's ports) before it leaves. */
static int room_answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	struct room_svc *r = arg;
	struct latch_entry ports[2], e;
	uint64_t expires = latch_now_boot_ns() + (uint64_t)ttl * NS_PER_S;
	char err[LATCH_ERR_MAX];
	int np = 0, ret = 0;

	if (!r->sb || r->prof.open)
		return 0;
	if (latch_profile_match(&r->prof, qname, &ports[np]))
		np++;
	if (extra_match(r, qname, &ports[np]))
		np++;
	for (int p = 0; p < np; p++)
		for (int i = 0; i < n; i++) {
			latch_profile_address_entry(&addrs[i], &ports[p], &e);
			if (latch_policy_learn_needed(r->sb, &e, expires, LATCH_ORIGIN_LEARNED) > 0 &&
			    latch_policy_learn(r->sb, &e, expires, LATCH_ORIGIN_LEARNED, err, sizeof(err))) {
				latchd_log("%s: %s: %s", r->name, qname, err);
				ret = -EIO; /* reported again on the next hit */
			}
		}
	return ret;
}

static void room_refused(void *arg, const char *qname, uint16_t qtype, const char *reason)
{
	struct room_svc *r = arg;

	latchd_audit_dns_refused(r->ld, r->name, qname, qtype, reason);
}

/* ---- the broker ---- */

/* The ports latchd may connect to NAME on for this room: its kit's upstreams there, and what its policy gives. */
static int upstream_ports(const struct room_svc *r, const char *name, struct latch_entry *ports)
{
	if (!latchd_broker_kit_ports(r->kit, name, ports) && !latch_profile_match(&r->prof, name, ports) &&
	    !extra_match(r, name, ports))
		return -ENOENT;
	return 0;
}

static int room_resolve(void *arg, const char *name, latch_http_resolved_cb cb, void *cbarg)
{
	struct room_svc *r = arg;
	struct latch_entry ports;

	if (upstream_ports(r, name, &ports))
		return -ENOENT;
	return latchd_confine_lookup(r->ld, r->name, name, &ports, cb, cbarg);
}

/* The broker's decisions, each an audit entry of kind route, other or refused. */
static void room_broker_audit(void *arg, const struct latch_http_event *ev)
{
	struct room_svc *r = arg;

	latchd_broker_event_audit(r->ld, r->name, ev);
}

/* The kit's credentials as the engine's routes, with the secrets latch run handed over. */
static int room_routes(struct room_svc *r, char *err, size_t errlen)
{
	for (int i = 0; i < r->kit->n_creds; i++) {
		int rc = latchd_broker_route_add(r->ld, r->broker, r->name, &r->kit->creds[i], r->placeholders[i],
						 &r->secrets, err, errlen);

		if (rc)
			return rc;
	}
	return 0;
}

static int room_broker_open(struct room_svc *r, char *err, size_t errlen)
{
	struct latchd *ld = r->ld;
	struct latch_http_sandbox_opts o = { .name = r->name,
					     .listen = { r->addr },
					     .n_listen = 1,
					     .port = ROOM_BROKER_PORT,
					     .n_guests = 1,
					     .arg = r,
					     .name_allowed = room_connect_allowed,
					     .resolve = room_resolve,
					     .audit = room_broker_audit };

	/* the room's own sockets reach its address from loopback's source; the gate says which room it is */
	latch_parse_addr("127.0.0.1", &o.guests[0], err, errlen);
	r->placeholders = calloc(r->kit->n_creds ? r->kit->n_creds : 1, sizeof(*r->placeholders));
	if (!r->placeholders || latch_kit_placeholders_make(r->kit, r->placeholders))
		return latch_errf(err, errlen, -ENOMEM, "cannot make the kit's placeholders");
	if (latch_kit_secrets_read_files(r->kit, &r->secrets, NULL, NULL, err, errlen))
		return -EPERM;
	r->broker = latch_http_sandbox_new(ld->http, &o, err, errlen);
	if (!r->broker)
		return -errno;
	return room_routes(r, err, errlen);
}

/* ---- the rooms ---- */

static struct room_svc *room_find(struct latchd *ld, const char *name)
{
	for (struct room_svc *r = ld->rooms; r; r = r->next)
		if (!strcmp(r->name, name))
			return r;
	return NULL;
}

static void room_free(struct room_svc *r)
{
	if (!r)
		return;
	latch_http_sandbox_free(r->broker); /* wipes the routes' secrets */
	latch_kit_secrets_wipe(&r->secrets);
	latch_resolver_free(r->res);
	latch_sandbox_free(r->sb);
	latch_profile_free(&r->prof);
	latch_kit_free(r->kit);
	free(r->extra);
	free(r->placeholders);
	free(r->hosts);
	free(r);
}

static void room_unlink(struct room_svc *r)
{
	for (struct room_svc **pp = &r->ld->rooms; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
}

/* The lowest free service address: 127.76.0.1 on (127.76.0.0 is latchd's own). */
static int room_index(struct latchd *ld)
{
	for (unsigned i = 1; i <= 0xffff; i++) {
		struct room_svc *r = ld->rooms;

		while (r && r->index != i)
			r = r->next;
		if (!r)
			return (int)i;
	}
	return -EBUSY;
}

static int room_kit_load(struct room_svc *r, const char *kit, json_t *secrets, char *err, size_t errlen)
{
	size_t i;
	json_t *s;

	r->kit = latch_kit_load(kit, NULL, err, errlen);
	if (!r->kit)
		return -errno;
	if (r->kit->egress_text &&
	    latch_profile_parse(r->kit->egress_text, r->kit->source, &r->extra, &r->n_extra, NULL, 0, err, errlen))
		return -EINVAL;
	json_array_foreach(secrets, i, s) {
		const char *route = json_string_value(json_object_get(s, "route"));
		const char *value = json_string_value(json_object_get(s, "value"));

		if (!route || !value ||
		    latch_kit_secrets_set(&r->secrets, route, value, strlen(value), route, err, errlen))
			return latch_errf(err, errlen, -EINVAL, "room_open: a secret without route or value");
	}
	return 0;
}

static json_t *room_env_json(struct room_svc *r)
{
	json_t *env = json_array();
	char **lines;
	int n = 0;

	if (!r->kit)
		return env;
	lines = latch_kit_env_render(r->kit, &r->addr, ROOM_BROKER_PORT, r->placeholders, &n);
	for (int i = 0; lines && i < n; i++)
		json_array_append_new(env, json_string(lines[i]));
	latch_kit_env_free(lines);
	return env;
}

void latchd_room_op_open(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "room"));
	const char *profile = json_string_value(json_object_get(req, "profile"));
	const char *kit = json_string_value(json_object_get(req, "kit"));
	struct latch_resolver_opts o;
	char err[LATCH_ERR_MAX], a[INET6_ADDRSTRLEN];
	struct room_svc *r;
	int idx = room_index(ld);

	if (!name || latch_parse_name(name, err, sizeof(err)) || strncmp(name, "room-", 5))
		return latchd_control_reply_error(c, "room_open needs \"room\": a room's name (room-PID-XXXX)");
	if (room_find(ld, name))
		return latchd_control_reply_error(c, "room %s is served already", name);
	if (idx < 0)
		return latchd_control_reply_error(c, "every room service address is taken (65535 rooms)");
	r = calloc(1, sizeof(*r));
	if (!r)
		return latchd_control_reply_error(c, "out of memory");
	r->ld = ld;
	r->owner = c;
	r->index = idx;
	r->opened_ns = latch_now_boot_ns();
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->addr.family = AF_INET;
	r->addr.v4.s_addr = htonl(LATCH_ROOM_SERVICE_NET | r->index);
	latch_addr_format(&r->addr, a, sizeof(a));
	if (latchd_switch_load_profile(ld, profile ? profile : "sealed", &r->prof, err, sizeof(err)) ||
	    (kit && room_kit_load(r, kit, json_object_get(req, "secrets"), err, sizeof(err))))
		goto fail;
	memset(&o, 0, sizeof(o));
	o.listen[o.n_listen++] = r->addr;
	o.port = 53; /* the room's programs know DNS by its port */
	o.guest.gated = true; /* the gate on latchd's cgroup admits only this room's packets to r->addr */
	o.n_upstream = ld->n_upstream;
	memcpy(o.upstream, ld->upstream, sizeof(o.upstream));
	memcpy(o.upstream_port, ld->upstream_port, sizeof(o.upstream_port));
	o.ttl_min = ld->conf.dns_ttl_min;
	o.ttl_max = ld->conf.dns_ttl_max;
	o.policy = (struct latch_resolver_policy){ .arg = r,
						   .name_allowed = room_name_allowed,
						   .addr_refused = room_addr_refused,
						   .answered = room_answered,
						   .refused = room_refused };
	r->res = latch_resolver_new(ld->base, &o, err, sizeof(err));
	if (!r->res || (r->kit && room_broker_open(r, err, sizeof(err))))
		goto fail;
	r->next = ld->rooms;
	ld->rooms = r;
	latchd_log("%s: serving on %s (profile %s%s%s)", r->name, a, r->prof.name, r->kit ? ", kit " : "",
		   r->kit ? r->kit->name : "");
	latchd_control_reply(c, json_pack("{s:b, s:s, s:s, s:i, s:i, s:o, s:i}", "ok", 1, "room", r->name, "address", a,
					  "dns_port", 53, "broker_port", r->kit ? ROOM_BROKER_PORT : 0, "env",
					  room_env_json(r), "mark",
					  (int)latch_room_mark_of(LATCH_ROOM_SERVICE_NET | r->index)));
	return;
fail:
	latchd_audit(ld, r->name, "room", "refuse", "latchd.room.open", json_pack("{s:s}", "error", err));
	room_free(r);
	latchd_control_reply(c, json_pack("{s:b, s:s}", "ok", 0, "error", err));
}

/* Every name is in (or failed): the room's policy, one switch; room_ready is answered. */
static void room_commit(struct room_svc *r)
{
	struct latch_compose_host *hosts = calloc(r->n_hosts ? r->n_hosts : 1, sizeof(*hosts));
	struct latch_compose_in in = { .profile = &r->prof,
				       .extra = r->extra,
				       .n_extra = r->n_extra,
				       .hosts = hosts,
				       .n_hosts = r->n_hosts,
				       .now_ns = latch_now_boot_ns() };
	struct latch_compose_out out = { 0 };
	char err[LATCH_ERR_MAX];
	json_t *names = json_array();
	int rc = hosts ? 0 : -ENOMEM;

	for (int i = 0; hosts && i < r->n_hosts; i++) {
		hosts[i] = (struct latch_compose_host){ .pe = r->hosts[i].pe,
							.addr = r->hosts[i].addr,
							.n = r->hosts[i].n,
							.expires_ns = r->hosts[i].expires_ns };
		json_array_append_new(names, json_pack("{s:s, s:i}", "name", r->hosts[i].pe->name, "addresses",
						       r->hosts[i].n));
	}
	if (!rc)
		rc = latch_profile_compose(&in, &out);
	if (!rc)
		rc = latch_policy_switch(r->sb, out.specs, out.n, out.open, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", strerror(-rc));
	r->entries = out.n;
	if (rc)
		latchd_control_reply(r->ready_client, json_pack("{s:b, s:s}", "ok", 0, "error", err));
	else
		latchd_control_reply(r->ready_client, json_pack("{s:b, s:i, s:o, s:b}", "ok", 1, "entries", out.n,
								"hosts", names, "uncontained", out.open));
	if (rc)
		json_decref(names);
	r->ready_client = NULL;
	latch_compose_out_free(&out);
	free(hosts);
}

struct room_lookup {
	struct latchd *ld;
	char room[LATCH_NAME_MAX + 1];
	int idx;
};

static void room_host_done(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			   const char *why)
{
	struct room_lookup *lk = arg;
	struct room_svc *r = room_find(lk->ld, lk->room);

	if (r && n > 0) {
		struct room_host *h = &r->hosts[lk->idx];

		h->n = n > LATCH_RESOLVER_ADDRS_MAX ? LATCH_RESOLVER_ADDRS_MAX : n;
		memcpy(h->addr, addrs, h->n * sizeof(*addrs));
		h->expires_ns = latch_now_boot_ns() + (uint64_t)ttl * NS_PER_S;
	}
	free(lk);
	if (r && --r->waiting == 0)
		room_commit(r);
}

void latchd_room_op_ready(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "room"));
	struct room_svc *r = name ? room_find(ld, name) : NULL;
	char err[LATCH_ERR_MAX];
	int total = 0;

	if (!r || r->owner != c)
		return latchd_control_reply_error(c, "no room %s opened on this connection", name ? name : "(none)");
	if (r->sb || r->ready_client)
		return latchd_control_reply_error(c, "room %s is ready already", r->name);
	r->sb = latch_cg_room_open(r->name, err, sizeof(err));
	if (!r->sb)
		return latchd_control_reply_error(c, "%s", err);
	for (int i = 0; i < r->prof.n; i++)
		total += r->prof.entries[i].kind == LATCH_PENTRY_HOST;
	for (int i = 0; i < r->n_extra; i++)
		total += r->extra[i].kind == LATCH_PENTRY_HOST;
	r->hosts = calloc(total ? total : 1, sizeof(*r->hosts));
	if (!r->hosts)
		return latchd_control_reply_error(c, "out of memory");
	for (int i = 0; i < r->prof.n + r->n_extra; i++) {
		const struct latch_pentry *pe = i < r->prof.n ? &r->prof.entries[i] : &r->extra[i - r->prof.n];

		if (pe->kind == LATCH_PENTRY_HOST)
			r->hosts[r->n_hosts++].pe = pe;
	}
	r->ready_client = c;
	latchd_control_wait(c);
	r->waiting = 1; /* held until every lookup is asked */
	for (int i = 0; i < r->n_hosts; i++) {
		struct room_lookup *lk = calloc(1, sizeof(*lk));

		if (!lk)
			continue;
		lk->ld = ld;
		lk->idx = i;
		snprintf(lk->room, sizeof(lk->room), "%s", r->name);
		r->waiting++;
		if (latch_resolver_lookup(r->res, r->hosts[i].pe->name, room_host_done, lk)) {
			r->waiting--;
			free(lk);
		}
	}
	if (--r->waiting == 0)
		room_commit(r);
}

/* room_done: the run's audit entry; the room's services, when latchd served it, go. */
void latchd_room_op_done(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "room"));
	json_t *result = json_object_get(req, "result");
	struct room_svc *r = name ? room_find(ld, name) : NULL;

	if (!name || !json_is_object(result))
		return latchd_control_reply_error(c, "room_done needs \"room\" and \"result\"");
	if (r && r->owner != c)
		return latchd_control_reply_error(c, "room %s was opened on another connection", name);
	json_object_set_new(result, "served", json_boolean(r != NULL));
	latchd_audit(ld, name, "room", json_is_true(json_object_get(result, "timed_out")) ? "timeout" : "exit",
		     "latch.room.run", json_incref(result));
	if (r) {
		room_unlink(r);
		room_free(r);
	}
	if (!json_is_true(json_object_get(req, "noreply")))
		latchd_control_reply(c, json_pack("{s:b}", "ok", 1));
}

void latchd_rooms_client_gone(struct latchd *ld, struct client *c)
{
	for (struct room_svc **pp = &ld->rooms; *pp;) {
		struct room_svc *r = *pp;

		if (r->owner != c) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		latchd_log("%s: its latch run went away; the room's services go", r->name);
		latchd_audit(ld, r->name, "room", "abandoned", "latch.room.gone",
			     json_pack("{s:f}", "served_s", (latch_now_boot_ns() - r->opened_ns) / 1e9));
		room_free(r);
	}
}

void latchd_rooms_stop(struct latchd *ld)
{
	while (ld->rooms) {
		struct room_svc *r = ld->rooms;

		ld->rooms = r->next;
		room_free(r);
	}
}
