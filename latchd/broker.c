// SPDX-License-Identifier: GPL-2.0-only
/*
 * broker.c - the credential broker in latchd: one engine (broker) on
 * latchd's event loop, and for each sandbox with a kit a listener on its
 * host address(es) whose routes are the kit's credentials.
 *
 * What a sandbox's broker serves comes from its kit state (kit.h:
 * var/lib/latch/policy/NAME.kit, written by the CLI): the kit, the port,
 * the placeholders the guest holds, the alternative each credential was
 * switched to, and whether the sandbox is stopped.  Keys come from two
 * places: `secret_file`s, which latchd reads itself, and `secret: VAR`s,
 * which only the `latch up` (or `latch kit NAME secrets`) that has them in
 * its environment can hand over, on the root-only socket.  A route whose
 * key is missing answers with a refusal that names the variable.  Once the
 * routes are made the engine holds the only copy of each key (locked pages,
 * left out of core dumps, wiped with the route); the buffers they passed
 * through are wiped where the bytes pass (latchd_broker_harden() says which), and
 * latchd is made undumpable.
 *
 * CONNECT is allowed to the names the sandbox's policy allows (its profile,
 * overlay and kit; sandbox.c).  Those names and the kit's upstreams are
 * looked up by latchd's own resolver (confine.c), which admits each address
 * latchd may reach to its confinement before the engine connects.  Every
 * decision goes to the audit log as kind route, refused or other, under
 * audit/'s rate limit (latchd_broker_event_audit(), rooms' too).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "ctl/ctl.h"
#include "latchd/latchd.h"
#include "latchd/grant.h"
#include "latchd/room.h"
#include "broker/broker.h"
#include "kit/kit.h"

/* One route's key as the broker got it, for ping and the audit (never the key). */
struct route_info {
	char name[LATCH_KIT_CRED_NAME_MAX + 1];
	char secret_var[LATCH_KIT_VAR_MAX + 1]; /* "" for a secret_file */
	const char *secret; /* "set", "missing" */
	char backend[LATCH_KIT_CRED_NAME_MAX + 1];
};

struct broker {
	struct latch_kit *kit; /* NULL: no kit; the listener only takes the sandbox's asks (/latch/grant) */
	struct latch_kit_state st;
	struct latch_http_sandbox *http; /* NULL while stopped, or when it could not listen */
	struct latch_pentry *egress; /* the kit's egress_allow, as profile entries */
	int n_egress;
	struct route_info routes[LATCH_KIT_CREDS_MAX];
	int n_routes;
	char why[LATCH_ERR_MAX]; /* why there is no listener, when there is none */
};

void latchd_broker_harden(void)
{
	struct rlimit none = { 0, 0 };

	/*
	 * Keys pass through buffers on their way into the engine's locked
	 * pages, and upstreams may echo them back.  Those buffers are wiped
	 * where the bytes pass (the control socket's request, control.c; the
	 * upstream's response as it is parsed, and OpenSSL's plaintext,
	 * broker) or when jansson frees them; and latchd leaves no core
	 * dump and admits no ptrace or /proc/PID/mem but root's.  (Wiping every
	 * libevent free instead cost a fifth of a request's CPU.)
	 */
	prctl(PR_SET_DUMPABLE, 0);
	setrlimit(RLIMIT_CORE, &none);
	latch_json_wipe_frees();
}

/* latch.conf's limits on what the broker holds for the spend meter, and its waits: at start and at each reload */
void latchd_broker_limits(struct latchd *ld)
{
	latch_http_set_metered_limits(ld->http, ld->conf.broker_body_max << 20, ld->conf.broker_metered_hold_max << 20);
	latch_http_set_timeouts(ld->http, ld->conf.broker_request_idle * 1000, ld->conf.broker_hello_timeout * 1000);
}

int latchd_broker_init(struct latchd *ld, char *err, size_t errlen)
{
	ld->http = latch_http_new(ld->base, NULL, err, errlen);
	if (!ld->http)
		return -errno;
	latchd_broker_limits(ld);
	return 0;
}

void latchd_broker_fini(struct latchd *ld)
{
	latch_http_free(ld->http);
	ld->http = NULL;
}

/* ---- the engine's callbacks for a sandbox */

static bool broker_name_allowed(void *arg, const char *name, uint16_t port)
{
	return latchd_sandbox_name_port_allowed(arg, name, port);
}

int latchd_broker_kit_ports(const struct latch_kit *kit, const char *name, struct latch_entry *ports)
{
	memset(ports, 0, sizeof(*ports));
	ports->proto = LATCH_PROTO_TCP;
	for (int i = 0; kit && i < kit->n_creds; i++)
		for (int a = -1; a < kit->creds[i].n_alts; a++) {
			const struct latch_kit_upstream *up = a < 0 ? &kit->creds[i].up : &kit->creds[i].alts[a].up;

			if (!strcmp(up->host, name) && ports->n_ports < LATCH_RULES_MAX) {
				ports->ports[ports->n_ports].lo = ports->ports[ports->n_ports].hi = up->port;
				ports->n_ports++;
			}
		}
	return ports->n_ports;
}

/*
 * The ports latchd may connect to NAME on for sandbox s: those of the kit's
 * upstreams named NAME, else 443 for a CONNECT to a name of its policy.
 * -ENOENT for any other name.
 */
static int resolve_ports(const struct sandbox *s, const char *name, struct latch_entry *ports)
{
	if (latchd_broker_kit_ports(s->broker ? s->broker->kit : NULL, name, ports))
		return 0;
	if (!latchd_sandbox_name_port_allowed((void *)s, name, 443))
		return -ENOENT;
	ports->ports[0].lo = ports->ports[0].hi = 443;
	ports->n_ports = 1;
	return 0;
}

/*
 * Through latchd's own resolver (confine.c): each address latchd may reach
 * is admitted to its confinement before the engine connects; the engine
 * then drops a CONNECT name's non-public addresses itself.
 */
static int broker_resolve(void *arg, const char *name, latch_http_resolved_cb cb, void *cbarg)
{
	struct sandbox *s = arg;
	struct latch_entry ports;

	if (resolve_ports(s, name, &ports))
		return -ENOENT;
	return latchd_confine_lookup(s->ld, s->name, name, &ports, cb, cbarg);
}

/* "path has a . or .. segment" -> "path-has-a-or-segment": an audit token beside the text */
static void reason_token(const char *text, char *buf, size_t len)
{
	size_t n = snprintf(buf, len, "latchd.broker.");
	bool dash = false;

	for (const char *p = text; *p && n + 2 < len; p++) {
		char ch = *p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p;

		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
			if (dash && buf[n - 1] != '.')
				buf[n++] = '-';
			buf[n++] = ch;
			dash = false;
		} else {
			dash = true;
		}
	}
	buf[n] = '\0';
}

void latchd_broker_event_audit(struct latchd *ld, const char *who, const struct latch_http_event *ev)
{
	bool refused = !strcmp(ev->kind, "refused");
	char reason[AUDIT_TOKEN_MAX + 1];

	if (!latchd_audit_wanted(ld, who, ev->kind))
		return;
	if (refused)
		reason_token(ev->reason ? ev->reason : "refused", reason, sizeof(reason));
	else
		snprintf(reason, sizeof(reason), "latchd.broker.%s", !strcmp(ev->kind, "route") ? "route" : "connect");
	latchd_audit(ld, who, ev->kind, refused ? "deny" : "allow", reason, latch_http_event_fields(ev));
}

static void broker_audit(void *arg, const struct latch_http_event *ev)
{
	struct sandbox *s = arg;

	latchd_broker_event_audit(s->ld, s->name, ev);
}

/* ---- building a sandbox's broker */

static void broker_free(struct broker *b)
{
	if (!b)
		return;
	latch_http_sandbox_free(b->http); /* closes its connections and wipes every key */
	latch_kit_free(b->kit);
	free(b->egress);
	explicit_bzero(&b->st, sizeof(b->st));
	free(b);
}

/* The kit named in the state, from $LATCH_ROOT/etc/latch/kits or the built-ins. */
static struct latch_kit *kit_of(const char *name, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct latch_kit_opts o = { 0 };

	if (!latch_kit_dir(dir, sizeof(dir)))
		o.dir = dir;
	return latch_kit_load(name, &o, err, errlen);
}

static void warn_line(const char *line, void *arg)
{
	latchd_log("%s: %s", (const char *)arg, line);
}

/*
 * The keys the CLI handed over: {"ROUTE": "KEY", ...} where ROUTE is a
 * credential ("openai") or one of its alternatives ("openai/groq") whose
 * kit says `secret: VAR`.  Anything else is refused whole.
 */
static int take_handed(const struct latch_kit *kit, json_t *handed, struct latch_kit_secrets *sec, char *err,
		       size_t errlen)
{
	const char *route;
	json_t *v;

	json_object_foreach(handed, route, v) {
		const struct latch_kit_upstream *up = NULL;
		char cred[LATCH_KIT_CRED_NAME_MAX + 1];
		const char *slash = strchr(route, '/');
		const struct latch_kit_cred *cr;
		int ret;

		snprintf(cred, sizeof(cred), "%.*s", slash ? (int)(slash - route) : (int)strlen(route), route);
		cr = latch_kit_cred_find(kit, cred);
		if (cr && !slash)
			up = &cr->up;
		for (int a = 0; cr && slash && a < cr->n_alts; a++)
			if (!strcmp(cr->alts[a].name, slash + 1))
				up = &cr->alts[a].up;
		if (!up || !up->secret_var[0] || !json_is_string(v))
			return latch_errf(err, errlen, -EINVAL, "kit %s has no route %s whose key comes from latch up",
					  kit->name, route);
		ret = latch_kit_secrets_set(sec, route, json_string_value(v), json_string_length(v), up->secret_var,
					    err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* "https://host:port" of UP, without its base path (the engine puts that before each path). */
static void url_of(const struct latch_kit_upstream *up, char *buf, size_t len)
{
	struct latch_kit_upstream bare = *up;

	bare.base_path[0] = '\0';
	latch_kit_upstream_url(&bare, buf, len);
}

/*
 * The other forms UP's provider's own clients send the key in, each taken
 * as the placeholder and answered upstream in the same form.  Anthropic:
 * Claude Code sends x-api-key, the TypeScript SDK (1.17) Authorization:
 * Bearer, and the API reads either.  OpenAI's clients send only
 * Authorization: Bearer, Gemini's (@google/genai) only x-goog-api-key; a
 * key in Gemini's query (?key=) stays refused: it would be in the URL, which
 * logs keep.  Only for the provider's own header and scheme: a kit that
 * chose another form (a proxy in front of the API) gets that form alone.
 */
static void client_forms(const struct latch_kit_upstream *up, struct latch_http_upstream *u)
{
	static const struct latch_http_form x_api_key = { "x-api-key", "" }, bearer = { "Authorization", "Bearer " };

	if (up->provider != LATCH_PROVIDER_ANTHROPIC)
		return;
	if (!strcasecmp(up->header, "x-api-key") && !up->scheme[0])
		u->also[u->n_also++] = bearer;
	else if (!strcasecmp(up->header, "Authorization") && !strcmp(up->scheme, "Bearer "))
		u->also[u->n_also++] = x_api_key;
}

/* UP as the engine's upstream; the strings point into UP, URL and SEC. */
static void engine_upstream(const char *name, const struct latch_kit_upstream *up, const char *route,
			    const struct latch_kit_secrets *sec, char *url, size_t urllen,
			    struct latch_http_upstream *u)
{
	url_of(up, url, urllen);
	*u = (struct latch_http_upstream){ .name = name,
					   .url = url,
					   .header = up->header,
					   .scheme = up->scheme,
					   .ca_file = up->ca_file[0] ? up->ca_file : NULL,
					   .base_path = up->base_path };
	client_forms(up, u);
	u->secret = latch_kit_secret_get(sec, route, &u->secret_len);
	if (!u->secret) /* the refusal names where the key should have come from */
		u->secret_var = up->secret_var[0] ? up->secret_var : up->secret_file;
}

/* One credential's route on the sandbox's listener. */
int latchd_broker_route_add(struct latchd *ld, struct latch_http_sandbox *hs, const char *who,
			    const struct latch_kit_cred *cr, const char *placeholder,
			    const struct latch_kit_secrets *sec, char *err, size_t errlen)
{
	char urls[LATCH_HTTP_UPSTREAMS_MAX][LATCH_KIT_HOST_MAX + 16];
	struct latch_http_meter meter;
	struct latch_http_route r = {
		.name = cr->name, .placeholder = placeholder, .n_methods = cr->n_methods, .n_paths = cr->n_paths
	};
	char route[LATCH_KIT_ROUTE_MAX + 1];

	for (int i = 0; i < cr->n_methods; i++)
		r.methods[i] = cr->methods[i];
	for (int i = 0; i < cr->n_paths; i++)
		r.paths[i] = cr->paths[i];
	engine_upstream("", &cr->up, cr->name, sec, urls[0], sizeof(urls[0]), &r.upstreams[r.n_upstreams++]);
	for (int a = 0; a < cr->n_alts && r.n_upstreams < LATCH_HTTP_UPSTREAMS_MAX; a++) {
		if (!cr->alts[a].up.tls) {
			latchd_log("%s: alternative %s of %s: the broker does not serve plain-http upstreams yet; "
				   "left out",
				   who, cr->alts[a].name, cr->name);
			continue;
		}
		snprintf(route, sizeof(route), "%s/%s", cr->name, cr->alts[a].name);
		engine_upstream(cr->alts[a].name, &cr->alts[a].up, route, sec, urls[r.n_upstreams], sizeof(urls[0]),
				&r.upstreams[r.n_upstreams]);
		r.n_upstreams++;
	}
	if (latchd_meter_route(ld, who, cr, &meter))
		r.meter = &meter; /* the engine keeps a copy, and releases it with the route */
	return latch_http_route_add(hs, &r, err, errlen);
}

/* One credential's route on the sandbox's listener, on the alternative it was switched to. */
static int add_route(struct sandbox *s, struct broker *b, const struct latch_kit_cred *cr,
		     const struct latch_kit_secrets *sec, char *err, size_t errlen)
{
	struct latch_kit_state_cred *sc = latch_kit_state_cred(&b->st, cr->name);
	struct route_info *ri = &b->routes[b->n_routes];
	size_t len;
	int ret;

	if (!sc)
		return latch_errf(err, errlen, -ESTALE,
				  "credential %s has no placeholder in the sandbox's kit state (the kit changed since "
				  "`latch up`); `latch down` and `latch up --kit %s` give it one",
				  cr->name, b->kit->name);
	ret = latchd_broker_route_add(s->ld, b->http, s->name, cr, sc->placeholder, sec, err, errlen);
	if (ret)
		return ret;
	if (sc->backend[0] && latch_http_route_switch(b->http, cr->name, sc->backend, err, errlen))
		latchd_log("%s: %s (its own upstream serves meanwhile)", s->name, err);
	snprintf(ri->name, sizeof(ri->name), "%s", cr->name);
	snprintf(ri->secret_var, sizeof(ri->secret_var), "%s", cr->up.secret_var);
	ri->secret = latch_kit_secret_get(sec, cr->name, &len) ? "set" : "missing";
	snprintf(ri->backend, sizeof(ri->backend), "%s", sc->backend);
	b->n_routes++;
	return 0;
}

/* The listener on the sandbox's host address(es), serving its guest address(es) only. */
static struct latch_http_sandbox *listen_for(struct sandbox *s, uint16_t port, char *err, size_t errlen)
{
	struct latch_http_sandbox_opts o = { .name = s->name,
					     .port = port,
					     .arg = s,
					     .name_allowed = broker_name_allowed,
					     .resolve = broker_resolve,
					     .audit = broker_audit,
					     /* /latch/grant: the sandbox asks for a grant (grant_ask.c) */
					     .local = latchd_grant_ask_local,
					     .local_gone = latchd_grant_ask_gone };
	const struct latch_config *c = &s->cfg;

	if (c->flags & LATCH_CFG_HAVE_IP4) {
		o.listen[o.n_listen].family = o.guests[o.n_guests].family = AF_INET;
		memcpy(&o.listen[o.n_listen++].v4, &c->host_ip4, 4);
		memcpy(&o.guests[o.n_guests++].v4, &c->guest_ip4, 4);
	}
	if (c->flags & LATCH_CFG_HAVE_IP6) {
		o.listen[o.n_listen].family = o.guests[o.n_guests].family = AF_INET6;
		memcpy(o.listen[o.n_listen++].bytes, c->host_ip6, 16);
		memcpy(o.guests[o.n_guests++].bytes, c->guest_ip6, 16);
	}
	if (!o.n_listen) {
		latch_errf(err, errlen, -EINVAL, "the sandbox has no host address to listen on");
		return NULL;
	}
	return latch_http_sandbox_new(s->ld->http, &o, err, errlen);
}

/* Does the kernel (the sandbox's config map, read now) admit port as a host service? */
static bool admits(const struct sandbox *s, uint16_t port)
{
	struct latch_config cfg;

	if (latch_sandbox_read_config(s->sb, &cfg))
		return false;
	for (int i = 0; i < cfg.n_host_ports && i < LATCH_HOST_PORTS_MAX; i++)
		if (ntohs(cfg.host_ports[i]) == port)
			return true;
	return false;
}

/*
 * Build sandbox s's broker from its kit state, with the keys in HANDED
 * (may be NULL) and those of its secret_files.  *out is NULL when the
 * sandbox has no kit.  A stopped sandbox's kit still has its egress_allow,
 * but no listener and no key.
 */
static int broker_build(struct sandbox *s, json_t *handed, struct broker **out, char *err, size_t errlen)
{
	struct latch_kit_secrets sec = { 0 };
	char ext[LATCH_PROFILE_NAME_MAX + 1], src[LATCH_KIT_NAME_MAX + 8];
	struct broker *b;
	int ret;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	ret = latch_kit_state_read(s->name, &b->st, err, errlen);
	if (ret == -ENOENT && admits(s, s->ld->conf.broker_port)) {
		/* no kit, but the kernel admits the broker's port: a listener that only takes asks */
		b->st.port = s->ld->conf.broker_port;
		b->http = listen_for(s, b->st.port, b->why, sizeof(b->why));
		*out = b;
		return 0;
	}
	if (ret) {
		free(b);
		return ret == -ENOENT ? 0 : ret;
	}
	b->kit = kit_of(b->st.kit, err, errlen);
	if (!b->kit) {
		ret = -errno;
		goto fail;
	}
	snprintf(src, sizeof(src), "kit:%s", b->kit->name);
	ret = latch_profile_parse(b->kit->egress_text ? b->kit->egress_text : "", src, &b->egress, &b->n_egress, ext,
				  sizeof(ext), err, errlen);
	if (ret)
		goto fail;
	if (b->st.stopped) {
		snprintf(b->why, sizeof(b->why), "the sandbox is stopped");
		*out = b;
		return 0;
	}
	ret = latch_kit_secrets_read_files(b->kit, &sec, warn_line, s->name, err, errlen);
	if (!ret && handed)
		ret = take_handed(b->kit, handed, &sec, err, errlen);
	if (ret)
		goto fail;
	b->http = listen_for(s, b->st.port, b->why, sizeof(b->why));
	if (!b->http) {
		/* the kit's egress still joins the policy; its requests find no listener (closed, not open) */
		latch_kit_secrets_wipe(&sec);
		*out = b;
		return 0;
	}
	for (int i = 0; i < b->kit->n_creds && !ret; i++)
		ret = add_route(s, b, &b->kit->creds[i], &sec, err, errlen);
	latch_kit_secrets_wipe(&sec); /* the engine has its own copies now, or none */
	if (ret)
		goto fail;
	*out = b;
	return 0;
fail:
	latch_kit_secrets_wipe(&sec);
	broker_free(b);
	return ret;
}

/* ---- the sandbox's side */

void latchd_broker_open(struct sandbox *s)
{
	char err[LATCH_ERR_MAX];
	int ret;

	latchd_broker_close(s);
	ret = broker_build(s, NULL, &s->broker, err, sizeof(err));
	if (ret)
		latchd_log("%s: kit not served: %s", s->name, err);
	else if (s->broker && !s->broker->kit)
		latchd_log("%s: no kit; %s port %u for the sandbox's asks", s->name,
			   s->broker->http ? "listening on" : "no listener on", s->broker->st.port);
	else if (s->broker && !s->broker->http && !s->broker->st.stopped)
		latchd_log("%s: kit %s: no listener: %s", s->name, s->broker->kit->name, s->broker->why);
	else if (s->broker && s->broker->http)
		latchd_log("%s: broker for kit %s on port %u (%d route(s)); keys from `latch up` are handed again by "
			   "`latch kit %s secrets`",
			   s->name, s->broker->kit->name, s->broker->st.port, s->broker->n_routes, s->name);
}

void latchd_broker_close(struct sandbox *s)
{
	broker_free(s->broker);
	s->broker = NULL;
}

void latchd_broker_forget(struct sandbox *s)
{
	char err[LATCH_ERR_MAX];

	latchd_broker_close(s);
	if (latch_kit_state_remove(s->name, err, sizeof(err)))
		latchd_log("%s: %s", s->name, err);
}

int latchd_broker_kit_egress(const struct sandbox *s, struct latch_pentry **out, int *n)
{
	const struct broker *b = s->broker;

	*out = NULL;
	*n = 0;
	if (!b || !b->n_egress)
		return 0;
	*out = malloc(b->n_egress * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	memcpy(*out, b->egress, b->n_egress * sizeof(**out));
	*n = b->n_egress;
	return 0;
}

json_t *latchd_broker_json(const struct sandbox *s)
{
	const struct broker *b = s->broker;
	json_t *routes;

	if (!b)
		return json_null();
	routes = json_array();
	for (int i = 0; i < b->n_routes; i++)
		json_array_append_new(routes, json_pack("{s:s, s:s, s:s?, s:s}", "name", b->routes[i].name, "secret",
							b->routes[i].secret, "secret_var",
							b->routes[i].secret_var[0] ? b->routes[i].secret_var : NULL,
							"backend", b->routes[i].backend));
	return json_pack("{s:s?, s:i, s:b, s:b, s:s?, s:o, s:i}", "kit", b->kit ? b->kit->name : NULL, "port",
			 b->st.port, "stopped", b->st.stopped, "listening", b->http != NULL, "why",
			 b->why[0] ? b->why : NULL, "routes", routes, "egress", b->n_egress);
}

/* Does the kit's egress differ from what the sandbox's policy was composed with? */
static bool egress_differs(const struct sandbox *s)
{
	const struct broker *b = s->broker;
	int n = b ? b->n_egress : 0;

	if (n != s->n_extra)
		return true;
	for (int i = 0; i < n; i++) {
		char x[512], y[512];

		latch_pentry_format(&b->egress[i], x, sizeof(x));
		latch_pentry_format(&s->extra[i], y, sizeof(y));
		if (strcmp(x, y))
			return true;
	}
	return false;
}

/* ---- the socket's ops */

/*
 * {"op":"kit","sandbox":S,"secrets":{ROUTE:KEY}}: serve S's kit as its kit
 * state now says, with these keys (and its secret_files); a sandbox without
 * a kit state, or a stopped one, has its broker closed and its keys wiped.
 */
void latchd_broker_op_kit(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	json_t *handed = json_object_get(req, "secrets"), *missing;
	char err[LATCH_ERR_MAX];
	struct broker *b = NULL;
	struct sandbox *s;
	int ret;

	if (!name || (handed && !json_is_object(handed)))
		return latchd_control_reply_error(c, "kit needs \"sandbox\" (and \"secrets\" an object)");
	latchd_sandboxes_scan(ld); /* a sandbox attached a moment ago */
	s = latchd_sandbox_find(ld, name);
	if (!s)
		return latchd_control_reply_error(c, "no sandbox '%s'", name);
	/* the old listener goes first: the new one binds the same address and port */
	latchd_broker_close(s);
	ret = broker_build(s, handed, &b, err, sizeof(err));
	s->broker = b;
	if (ret) {
		latchd_log("%s: kit not served: %s", s->name, err);
		latchd_audit(ld, s->name, "kit", "fail", "latchd.kit.hand", json_pack("{s:s}", "error", err));
		return latchd_control_reply_error(c, "%s: %s", s->name, err);
	}
	missing = json_array();
	for (int i = 0; b && i < b->n_routes; i++)
		if (!strcmp(b->routes[i].secret, "missing"))
			json_array_append_new(missing,
					      json_string(b->routes[i].secret_var[0] ? b->routes[i].secret_var :
										       b->routes[i].name));
	latchd_audit(ld, s->name, "kit", b && b->http ? "hand" : "stop",
		     b && b->http ? "latchd.kit.hand" : "latchd.kit.stop",
		     json_pack("{s:s?, s:i, s:O}", "kit", b && b->kit ? b->kit->name : NULL, "routes",
			       b ? b->n_routes : 0, "missing", missing));
	latchd_control_reply(c, json_pack("{s:b, s:o, s:o, s:b}", "ok", 1, "broker", latchd_broker_json(s), "missing",
					  missing, "egress_changed", egress_differs(s)));
}

/* {"op":"backend","sandbox":S,"credential":C,"alternative":A}: A "" is the credential's own upstream. */
void latchd_broker_op_backend(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	const char *cred = json_string_value(json_object_get(req, "credential"));
	const char *alt = json_string_value(json_object_get(req, "alternative"));
	struct sandbox *s = name ? latchd_sandbox_find(ld, name) : NULL;
	char err[LATCH_ERR_MAX];

	if (!name || !cred || !alt)
		return latchd_control_reply_error(c, "backend needs \"sandbox\", \"credential\" and \"alternative\"");
	if (!s || !s->broker || !s->broker->http)
		return latchd_control_reply_error(c, "%s: no broker is serving (no kit, or the sandbox is stopped)",
						  name);
	if (latch_http_route_switch(s->broker->http, cred, alt, err, sizeof(err)))
		return latchd_control_reply_error(c, "%s", err);
	for (int i = 0; i < s->broker->n_routes; i++)
		if (!strcmp(s->broker->routes[i].name, cred))
			snprintf(s->broker->routes[i].backend, sizeof(s->broker->routes[i].backend), "%s", alt);
	latchd_audit(ld, s->name, "kit", "backend", "latchd.kit.backend",
		     json_pack("{s:s, s:s}", "credential", cred, "alternative", *alt ? alt : "(its own)"));
	latchd_control_reply(c, json_pack("{s:b, s:s, s:s}", "ok", 1, "credential", cred, "alternative", alt));
}
