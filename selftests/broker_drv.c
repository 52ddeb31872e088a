// SPDX-License-Identifier: GPL-2.0-only
/*
 * broker_drv.c - the broker engine (broker) in an event loop, for
 * selftests/live_broker.sh and bench/broker.sh.
 *
 *   broker_drv CONFIG.json
 *
 * CONFIG:
 *   { "hosts": { "NAME": ["ADDR", ...] },          static answers for the resolve
 *                                                   callback (absent: the engine's evdns)
 *     "sandboxes": [ { "name": "sb1", "listen": "ADDR" or ["ADDR", "ADDR6"], "port": N, "guests": ["ADDR"],
 *                      "allow": ["NAME"],           CONNECT names the policy allows ("NAME": ports 443
 *                                                   and 80, "NAME:PORT": that one)
 *                      "routes": [ { "name", "placeholder", "methods": [], "paths": [],
 *                                    "meter": true|false,
 *                                    "upstreams": [ { "name", "url", "secret_file", "secret_var",
 *                                                     "header", "scheme", "ca_file", "base_path" } ] } ] } ] }
 *
 * Every audit event and meter call becomes one JSON line on stdout
 * (line-buffered): {"event":"audit",...}, {"event":"meter-request",...},
 * {"event":"meter-end","how":...}.  "ready" once every listener is open.
 * Commands on stdin, one a line: `switch SANDBOX ROUTE UPSTREAM`, `remove
 * SANDBOX ROUTE`, `allow SANDBOX NAME`, `disallow SANDBOX NAME` (the
 * policy's CONNECT names, as a grant's deadline changes them), `stats`,
 * `timeouts REQUEST_IDLE_MS HELLO_MS` (as latchd's reload sets them; 0: the default),
 * `answer N STATUS JSON`; each answers "ok ..." or "error ...".  A sandbox with "local": true takes /latch/... requests:
 * each prints {"event":"local","n":N,"method","path","query","body",
 * "content_type","peer"} and waits for `answer N ...`; a guest that leaves
 * first prints {"event":"local-gone","n":N}.  SIGTERM
 * exits 0.  BROKER_QUIET counts audit events without printing them.  BROKER_CONNS_MAX sets the engine's guest connections per sandbox.
 * BROKER_GUEST_IDLE_MS its guest connections' idle timeout (live_broker: seconds, not a minute);
 * BROKER_REQUEST_IDLE_MS and BROKER_HELLO_MS the waits for the rest of a head or body and for a
 * tunnel's ClientHello (live_broker: a second or two).
 * BROKER_METERED_HOLD_MAX the metered bodies a sandbox holds at once (live_broker: 8 MiB, not 64).
 *
 * The test meter (the spend-cap seam, issue 12) refuses a JSON body whose
 * max_tokens is over 100000 (429) and a request to /v1/batches (403), and
 * reports the model it read.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "broker/broker.h"

#define DRV_SANDBOXES 4
#define DRV_NAMES 32

struct drv_sandbox {
	struct latch_http_sandbox *sb;
	const char *name;
	const char *allow[DRV_NAMES];
	int n_allow;
};

static struct event_base *base;
static struct latch_http *engine;
static struct drv_sandbox sandboxes[DRV_SANDBOXES];
static int n_sandboxes;
static json_t *hosts;

static void print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(o);
}

static bool quiet; /* BROKER_QUIET: the benchmark counts audit events instead of printing them */
static unsigned long audited;

static void audit(void *arg, const struct latch_http_event *ev)
{
	json_t *o;

	audited++;
	if (quiet)
		return;
	o = latch_http_event_fields(ev);
	json_object_set_new(o, "event", json_string("audit"));
	json_object_set_new(o, "sandbox", json_string(ev->sandbox));
	json_object_set_new(o, "kind", json_string(ev->kind));
	if (ev->reason)
		json_object_set_new(o, "reason", json_string(ev->reason));
	print_json(o);
}

static bool name_allowed(void *arg, const char *name, uint16_t port)
{
	struct drv_sandbox *d = arg;

	/* "NAME" takes 443 and 80, as a profile entry without ports; "NAME:PORT" that port alone */
	for (int i = 0; i < d->n_allow; i++) {
		const char *colon = strchr(d->allow[i], ':');
		size_t n = colon ? (size_t)(colon - d->allow[i]) : strlen(d->allow[i]);

		if (strlen(name) == n && !strncmp(d->allow[i], name, n) &&
		    (colon ? (uint16_t)atoi(colon + 1) == port : port == 443 || port == 80))
			return true;
	}
	return false;
}

struct pending {
	latch_http_resolved_cb cb;
	void *cbarg;
	char name[254];
	struct latch_addr addrs[8];
	int n;
};

static void deliver(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;

	p->cb(p->cbarg, p->name, p->addrs, p->n, 300, p->n < 0 ? "nxdomain" : NULL);
	free(p);
}

/* The "hosts" table as a resolver: answers later from the loop, as latchd's resolver does. */
static int resolve(void *arg, const char *name, latch_http_resolved_cb cb, void *cbarg)
{
	json_t *list = json_object_get(hosts, name), *v;
	struct pending *p = calloc(1, sizeof(*p));
	char err[LATCH_ERR_MAX];
	size_t i;

	if (!p)
		return -ENOMEM;
	p->cb = cb;
	p->cbarg = cbarg;
	snprintf(p->name, sizeof(p->name), "%s", name);
	if (!latch_parse_addr(name, &p->addrs[0], err, sizeof(err))) /* an address answers itself */
		p->n = 1;
	json_array_foreach(list, i, v) {
		if (p->n < 8 && json_is_string(v) &&
		    !latch_parse_addr(json_string_value(v), &p->addrs[p->n], err, sizeof(err)))
			p->n++;
	}
	if (!p->n)
		p->n = -1;
	return event_base_once(base, -1, EV_TIMEOUT, deliver, p, NULL);
}

/* ------------------------------------------------------------ local endpoints (/latch/...) */

#define DRV_LOCALS 64
static struct latch_http_local *locals[DRV_LOCALS]; /* waiting for `answer N` */

static void local_request(void *arg, struct latch_http_local *req, const struct latch_http_local_request *rq)
{
	char peer[64];
	int n;

	for (n = 0; n < DRV_LOCALS && locals[n]; n++)
		;
	if (n == DRV_LOCALS) {
		latch_http_local_answer(req, 503, "{\"error\":\"driver: too many waiting\"}");
		return;
	}
	locals[n] = req;
	latch_addr_format(rq->peer, peer, sizeof(peer));
	print_json(json_pack("{s:s, s:i, s:s, s:s, s:s, s:s%, s:s, s:s}", "event", "local", "n", n, "method",
			     rq->method, "path", rq->path, "query", rq->query, "body", rq->body, rq->body_len,
			     "content_type", rq->content_type, "peer", peer));
}

static void local_gone(void *arg, struct latch_http_local *req)
{
	for (int n = 0; n < DRV_LOCALS; n++)
		if (locals[n] == req) {
			locals[n] = NULL;
			print_json(json_pack("{s:s, s:i}", "event", "local-gone", "n", n));
		}
}

/* `answer N STATUS JSON`: the waiting local request N gets its answer. */
static void local_answer(const char *line)
{
	int n, status, off = 0;

	if (sscanf(line, "answer %d %d %n", &n, &status, &off) < 2 || !off || n < 0 || n >= DRV_LOCALS || !locals[n]) {
		printf("error no such waiting local request: %s\n", line);
		return;
	}
	latch_http_local_answer(locals[n], status, line + off);
	locals[n] = NULL;
	printf("ok answered %d\n", n);
}

/* ------------------------------------------------------------ the test meter */

/* What the meter saw of each exchange: its bytes, their FNV-1a in order, and the head before any byte. */
static struct {
	uint64_t bytes, fnv;
	int heads;
	bool head_first;
} meter_seen[1024];

static void meter_start(long token)
{
	memset(&meter_seen[token % 1024], 0, sizeof(meter_seen[0]));
	meter_seen[token % 1024].fnv = 0xcbf29ce484222325ULL; /* FNV-1a's offset basis */
}

static int meter_request(void *arg, const struct latch_http_meter_request *rq, void **token, char *refusal, size_t len)
{
	json_t *body = json_loadb(rq->body, rq->body_len, 0, NULL);
	json_int_t max_tokens = json_integer_value(json_object_get(body, "max_tokens"));
	const char *model = json_string_value(json_object_get(body, "model"));
	static long next_token = 1;

	print_json(json_pack("{s:s, s:s, s:s, s:s, s:I, s:s?, s:I}", "event", "meter-request", "route", rq->route,
			     "method", rq->method, "path", rq->path, "body_len", (json_int_t)rq->body_len, "model",
			     model, "max_tokens", max_tokens));
	json_decref(body);
	if (!strcmp(rq->path, "/v1/batches")) { /* what a metered route never allows: a 403, not a 429 */
		snprintf(refusal, len, "latch: the test meter prices no batch; POST /v1/batches is not forwarded");
		return LATCH_HTTP_METER_FORBID;
	}
	if (max_tokens > 100000) {
		snprintf(refusal, len,
			 "latch: spend cap: max_tokens %lld could cost more than the test cap allows; "
			 "lower max_tokens",
			 (long long)max_tokens);
		return -1;
	}
	*token = (void *)next_token;
	meter_start(next_token++);
	return 0;
}

static void meter_response(void *arg, void *token, int status, const void *data, size_t len)
{
	typeof(meter_seen[0]) *m = &meter_seen[(long)token % 1024];

	if (!data) {
		m->head_first = !m->heads++ && !m->bytes;
		return;
	}
	for (size_t i = 0; i < len; i++)
		m->fnv = (m->fnv ^ ((const unsigned char *)data)[i]) * 0x100000001b3ULL;
	m->bytes += len;
}

static void meter_end(void *arg, void *token, enum latch_http_end how)
{
	typeof(meter_seen[0]) *m = &meter_seen[(long)token % 1024];
	char fnv[17];

	snprintf(fnv, sizeof(fnv), "%016llx", (unsigned long long)m->fnv);
	print_json(json_pack("{s:s, s:I, s:s, s:I, s:s, s:b}", "event", "meter-end", "token", (json_int_t)(long)token,
			     "how", latch_http_end_name(how), "response_bytes", (json_int_t)m->bytes, "response_fnv",
			     fnv, "head_first", m->head_first && m->heads == 1));
}

static const struct latch_http_meter test_meter = {
	.request = meter_request,
	.response = meter_response,
	.end = meter_end,
	.body_max = 1 << 20,
};

/* ------------------------------------------------------------ config */

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int read_secret(const char *path, char *buf, size_t len, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, len);
	close(fd);
	if (r < 0)
		return -errno;
	while (r && (buf[r - 1] == '\n' || buf[r - 1] == '\r'))
		r--;
	*n = r;
	return 0;
}

static int add_route(struct drv_sandbox *d, json_t *jr, char *err, size_t errlen)
{
	struct latch_http_route r = { .name = str(jr, "name"), .placeholder = str(jr, "placeholder") };
	static char secrets[LATCH_HTTP_UPSTREAMS_MAX][1100];
	json_t *v;
	size_t i;
	int ret;

	json_array_foreach(json_object_get(jr, "methods"), i, v)
		if (r.n_methods < LATCH_HTTP_METHODS_MAX)
			r.methods[r.n_methods++] = json_string_value(v);
	json_array_foreach(json_object_get(jr, "paths"), i, v)
		if (r.n_paths < LATCH_HTTP_PATHS_MAX)
			r.paths[r.n_paths++] = json_string_value(v);
	if (json_is_true(json_object_get(jr, "meter")))
		r.meter = &test_meter;
	json_array_foreach(json_object_get(jr, "upstreams"), i, v) {
		struct latch_http_upstream *u = &r.upstreams[r.n_upstreams];

		if (r.n_upstreams == LATCH_HTTP_UPSTREAMS_MAX)
			break;
		u->name = str(v, "name");
		u->url = str(v, "url");
		u->header = str(v, "header");
		u->scheme = str(v, "scheme");
		u->ca_file = str(v, "ca_file");
		u->base_path = str(v, "base_path");
		u->secret_var = str(v, "secret_var");
		if (str(v, "secret_file") &&
		    !read_secret(str(v, "secret_file"), secrets[r.n_upstreams], 1024, &u->secret_len))
			u->secret = secrets[r.n_upstreams];
		r.n_upstreams++;
	}
	ret = latch_http_route_add(d->sb, &r, err, errlen);
	for (int k = 0; k < LATCH_HTTP_UPSTREAMS_MAX; k++) /* the engine has its own copy */
		explicit_bzero(secrets[k], sizeof(secrets[k]));
	return ret;
}

static int load(const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je), *js, *v;
	size_t i, k;

	if (!root)
		return latch_errf(err, errlen, -EINVAL, "%s:%d: %s", path, je.line, je.text);
	hosts = json_incref(json_object_get(root, "hosts"));
	json_array_foreach(json_object_get(root, "sandboxes"), i, js) {
		struct latch_http_sandbox_opts o = { .name = str(js, "name") };
		struct drv_sandbox *d = &sandboxes[n_sandboxes];
		uint32_t port = 0;

		if (n_sandboxes == DRV_SANDBOXES)
			return latch_errf(err, errlen, -EINVAL, "%s: at most %d sandboxes", path, DRV_SANDBOXES);
		/* "listen": one address, or a list of one of each family */
		json_t *jl = json_object_get(js, "listen");

		if (json_is_string(jl))
			jl = json_pack("[O]", jl);
		else
			json_incref(jl);
		json_array_foreach(jl, k, v)
			if (o.n_listen < LATCH_HTTP_LISTEN_MAX &&
			    !latch_parse_addr(json_string_value(v) ?: "", &o.listen[o.n_listen], err, errlen))
				o.n_listen++;
		json_decref(jl);
		if (!o.name || !o.n_listen)
			return latch_errf(err, errlen, -EINVAL, "%s: sandbox %zu needs a name and a listen address",
					  path, i);
		port = json_integer_value(json_object_get(js, "port"));
		o.port = port;
		json_array_foreach(json_object_get(js, "guests"), k, v)
			if (o.n_guests < LATCH_HTTP_GUESTS_MAX &&
			    !latch_parse_addr(json_string_value(v), &o.guests[o.n_guests], err, errlen))
				o.n_guests++;
		json_array_foreach(json_object_get(js, "allow"), k, v)
			if (d->n_allow < DRV_NAMES)
				d->allow[d->n_allow++] = json_string_value(v);
		o.arg = d;
		o.name_allowed = name_allowed;
		o.resolve = hosts ? resolve : NULL;
		o.audit = audit;
		if (json_is_true(json_object_get(js, "local"))) {
			o.local = local_request;
			o.local_gone = local_gone;
		}
		d->name = o.name;
		d->sb = latch_http_sandbox_new(engine, &o, err, errlen);
		if (!d->sb)
			return -EINVAL;
		n_sandboxes++;
		json_array_foreach(json_object_get(js, "routes"), k, v)
			if (add_route(d, v, err, errlen))
				return -EINVAL;
	}
	/* root (and the strings the sandboxes point at) lives as long as the driver */
	return 0;
}

/* ------------------------------------------------------------ commands */

static struct drv_sandbox *find(const char *name)
{
	for (int i = 0; i < n_sandboxes; i++)
		if (!strcmp(sandboxes[i].name, name))
			return &sandboxes[i];
	return NULL;
}

static void command(char *line)
{
	char a[64], b[64], c[64] = "", err[LATCH_ERR_MAX];
	struct drv_sandbox *d;
	int n = sscanf(line, "%*s %63s %63s %63s", a, b, c);

	if (!strncmp(line, "answer ", 7)) {
		local_answer(line);
		return;
	}
	if (!strncmp(line, "timeouts ", 9)) {
		unsigned req, hello;

		if (sscanf(line + 9, "%u %u", &req, &hello) != 2) {
			printf("error timeouts REQUEST_IDLE_MS HELLO_MS\n");
			return;
		}
		latch_http_set_timeouts(engine, req, hello);
		printf("ok timeouts %u %u\n", req, hello);
		return;
	}
	if (!strncmp(line, "stats", 5)) {
		struct latch_http_stats s;

		latch_http_stats(engine, &s);
		printf("ok stats audited=%lu accepted=%llu requests=%llu refused=%llu forwarded=%llu tunnels=%llu connects=%llu "
		       "reused=%llu guest_conns=%d upstream_conns=%d idle=%d timeouts=%llu\n",
		       audited, (unsigned long long)s.accepted, (unsigned long long)s.requests,
		       (unsigned long long)s.refused, (unsigned long long)s.forwarded, (unsigned long long)s.tunnels,
		       (unsigned long long)s.upstream_connects, (unsigned long long)s.upstream_reused, s.guest_conns,
		       s.upstream_conns, s.idle_upstream_conns, (unsigned long long)s.timeouts);
		return;
	}
	if (n < 2 || !(d = find(a))) {
		printf("error unknown command or sandbox: %s\n", line);
		return;
	}
	if (!strncmp(line, "switch ", 7)) {
		if (latch_http_route_switch(d->sb, b, !strcmp(c, "-") ? "" : c, err, sizeof(err)))
			printf("error %s\n", err);
		else
			printf("ok switched %s %s\n", b, c);
	} else if (!strncmp(line, "disallow ", 9)) {
		int k = 0;

		for (int i = 0; i < d->n_allow; i++)
			if (strcmp(d->allow[i], b))
				d->allow[k++] = d->allow[i];
		printf(k < d->n_allow ? "ok disallowed %s\n" : "error %s was not allowed\n", b);
		d->n_allow = k;
	} else if (!strncmp(line, "allow ", 6)) {
		if (d->n_allow < DRV_NAMES && (d->allow[d->n_allow] = strdup(b))) /* kept for the driver's life */
			printf("ok allowed %s\n", d->allow[d->n_allow++]);
		else
			printf("error too many names\n");
	} else if (!strncmp(line, "remove ", 7)) {
		printf(latch_http_route_remove(d->sb, b) ? "error no route %s\n" : "ok removed %s\n", b);
	} else {
		printf("error unknown command: %s\n", line);
	}
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	static struct evbuffer *in;
	char *line;

	if (!in)
		in = evbuffer_new();
	if (evbuffer_read(in, fd, 4096) <= 0) {
		event_del(arg);
		return;
	}
	while ((line = evbuffer_readln(in, NULL, EVBUFFER_EOL_LF))) {
		command(line);
		free(line);
	}
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	struct event *ev_term, *ev_int, *ev_in;

	if (argc != 2) {
		fprintf(stderr, "usage: broker_drv CONFIG.json\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	quiet = getenv("BROKER_QUIET") != NULL;
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	/* BROKER_CONNS_MAX: the benchmark holds more idle connections than the default allows */
	struct latch_http_opts ho = {
		.conns_max = getenv("BROKER_CONNS_MAX") ? atoi(getenv("BROKER_CONNS_MAX")) : 0,
		.guest_idle_ms = getenv("BROKER_GUEST_IDLE_MS") ? atoi(getenv("BROKER_GUEST_IDLE_MS")) : 0,
		.metered_hold_max = getenv("BROKER_METERED_HOLD_MAX") ? atoi(getenv("BROKER_METERED_HOLD_MAX")) : 0,
		.connect_ms = getenv("BROKER_CONNECT_MS") ? atoi(getenv("BROKER_CONNECT_MS")) : 0,
		.request_idle_ms = getenv("BROKER_REQUEST_IDLE_MS") ? atoi(getenv("BROKER_REQUEST_IDLE_MS")) : 0,
		.hello_ms = getenv("BROKER_HELLO_MS") ? atoi(getenv("BROKER_HELLO_MS")) : 0,
	};

	engine = base ? latch_http_new(base, &ho, err, sizeof(err)) : NULL;
	if (!engine) {
		fprintf(stderr, "broker_drv: %s\n", err);
		return 1;
	}
	if (load(argv[1], err, sizeof(err))) {
		fprintf(stderr, "broker_drv: %s\n", err);
		return 1;
	}
	ev_term = evsignal_new(base, SIGTERM, on_term, NULL);
	ev_int = evsignal_new(base, SIGINT, on_term, NULL);
	ev_in = event_new(base, 0, EV_READ | EV_PERSIST, on_stdin, event_self_cbarg());
	if (!ev_term || !ev_int || !ev_in || event_add(ev_term, NULL) || event_add(ev_int, NULL))
		return 1;
	event_add(ev_in, NULL); /* stdin may be a file or /dev/null: then there are no commands */
	printf("ready\n");
	event_base_dispatch(base);
	latch_http_free(engine);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_in);
	event_base_free(base);
	return 0;
}
