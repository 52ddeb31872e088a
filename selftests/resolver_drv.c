// SPDX-License-Identifier: GPL-2.0-only
/*
 * resolver_drv.c - one latch resolver in an event loop, for live_resolver.sh.
 *
 *   resolver_drv --listen ADDR [--listen ADDR] --port N --upstream ADDR[:PORT]...
 *                --guest-dev DEV --guest ADDR [--guest ADDR]... [--rate N --burst N]
 *                [--allow NAME]... [--wildcard DOMAIN]... [--exempt CIDR]... [--ttl-min S]
 *                [--ttl-max S] [--timeout-ms MS] [--tcp-idle-ms MS] [--tcp-clients N]
 *                [--tcp-queries N] [--lookup NAME]... [--empty-port N] [--unlearnable NAME]
 *
 * Every callback becomes one line on stdout (line-buffered), so the test can
 * grep what the resolver decided:
 *   answered QNAME TTL ADDR...
 *   refused QNAME QTYPE REASON
 *   lookup NAME TTL ADDR...        or  lookup NAME failed WHY
 * "ready" once the sockets are open; SIGUSR1 flushes the cache ("flushed");
 * SIGTERM prints "stats queries=... failed=..." and exits 0.  --empty-port
 * adds a second resolver on the same addresses whose policy allows nothing
 * (its lines start with "r2 "): two resolvers in one loop must not mix.
 * SIGUSR2 prints the stats line without exiting.
 *
 * The rebinding filter is common/'s latch_addr_nonpublic(): private,
 * loopback, link-local, CGNAT, metadata, multicast and reserved addresses
 * are refused, unless an --exempt CIDR covers them, as a CIDR entry of a profile does in latchd.
 * answered() takes every report, but those for an --unlearnable name, which
 * it refuses as latchd does when it can't write a learned entry.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <ldns/ldns.h>

#include "resolver/resolver.h"
#include "loader/loader.h"

#define NAMES_MAX 64

struct drv_policy {
	const char *tag; /* line prefix */
	const char *allow[NAMES_MAX];
	int n_allow;
	const char *wild[NAMES_MAX];
	int n_wild;
	struct latch_addr exempt[NAMES_MAX];
	int exempt_len[NAMES_MAX], n_exempt;
	const char *unlearnable;
};

static bool name_allowed(void *arg, const char *name)
{
	const struct drv_policy *p = arg;
	size_t n = strlen(name);

	for (int i = 0; i < p->n_allow; i++)
		if (!strcmp(p->allow[i], name))
			return true;
	/* "*.DOMAIN": every name below DOMAIN, never DOMAIN itself */
	for (int i = 0; i < p->n_wild; i++) {
		size_t d = strlen(p->wild[i]);

		if (n > d + 1 && name[n - d - 1] == '.' && !strcmp(name + n - d, p->wild[i]))
			return true;
	}
	return false;
}

static bool in_prefix(const struct latch_addr *net, int bits, const struct latch_addr *a)
{
	int full = bits / 8;

	if (net->family != a->family || memcmp(net->bytes, a->bytes, full))
		return false;
	return !(bits % 8) || !((net->bytes[full] ^ a->bytes[full]) & (0xff00 >> (bits % 8)));
}

/* The daemon's rebinding filter, as latchd wires it: not public, unless a CIDR entry covers it. */
static const char *addr_refused(void *arg, const struct latch_addr *a)
{
	const struct drv_policy *p = arg;
	const char *why = latch_addr_nonpublic(a);

	for (int i = 0; why && i < p->n_exempt; i++)
		if (in_prefix(&p->exempt[i], p->exempt_len[i], a))
			return NULL;
	return why;
}

static void print_addrs(const struct latch_addr *addrs, int n)
{
	char text[INET6_ADDRSTRLEN];

	for (int i = 0; i < n; i++) {
		latch_addr_format(&addrs[i], text, sizeof(text));
		printf(" %s", text);
	}
	printf("\n");
}

static int answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	const struct drv_policy *p = arg;

	printf("%sanswered %s %u", p->tag, qname, ttl);
	print_addrs(addrs, n);
	return p->unlearnable && !strcmp(p->unlearnable, qname) ? -EAGAIN : 0;
}

static void refused(void *arg, const char *qname, uint16_t qtype, const char *reason)
{
	const struct drv_policy *p = arg;
	char *t = ldns_rr_type2str(qtype);

	printf("%srefused %s %s %s\n", p->tag, qname[0] ? qname : "-", t ? t : "?", reason);
	free(t);
}

static void looked_up(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl, const char *why)
{
	if (n < 0) {
		printf("lookup %s failed %s\n", name, why);
		return;
	}
	printf("lookup %s %u", name, ttl);
	print_addrs(addrs, n);
}

struct drv {
	struct event_base *base;
	struct latch_resolver *r[2];
};

static void on_term(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(((struct drv *)arg)->base);
}

static void on_flush(evutil_socket_t sig, short what, void *arg)
{
	struct drv *d = arg;

	latch_resolver_flush(d->r[0]);
	printf("flushed\n");
}

static void print_stats(const struct latch_resolver *r)
{
	struct latch_resolver_stats st;

	latch_resolver_stats(r, &st);
	printf("stats queries=%llu answered=%llu refused=%llu upstream_sent=%llu cache_hits=%llu failed=%llu "
	       "foreign=%llu tcp_cut=%llu\n",
	       (unsigned long long)st.queries, (unsigned long long)st.answered, (unsigned long long)st.refused,
	       (unsigned long long)st.upstream_sent, (unsigned long long)st.cache_hits, (unsigned long long)st.failed,
	       (unsigned long long)st.foreign, (unsigned long long)st.tcp_cut);
}

static void on_stats(evutil_socket_t sig, short what, void *arg)
{
	print_stats(((struct drv *)arg)->r[0]);
}

static int parse_upstream(const char *s, struct latch_addr *a, uint16_t *port, char *err, size_t errlen)
{
	char buf[80];
	const char *host = s, *p = NULL;
	char *c;

	*port = 53;
	snprintf(buf, sizeof(buf), "%s", s);
	if (buf[0] == '[') { /* [V6]:PORT */
		c = strchr(buf, ']');
		if (!c)
			return latch_errf(err, errlen, -EINVAL, "upstream '%s': no ']'", s);
		*c = 0;
		host = buf + 1;
		if (c[1] == ':')
			p = c + 2;
	} else if ((c = strchr(buf, ':')) && !strchr(c + 1, ':')) { /* V4:PORT; a bare V6 has several */
		*c = 0;
		host = buf;
		p = c + 1;
	} else {
		host = buf;
	}
	if (latch_parse_addr(host, a, err, errlen))
		return -EINVAL;
	return p ? latch_parse_port(p, port, err, errlen) : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: resolver_drv --listen ADDR --port N --upstream ADDR[:PORT] --guest-dev DEV\n"
			"       --guest ADDR [--rate N --burst N] [--allow NAME]... [--wildcard DOMAIN]...\n"
			"       [--exempt CIDR]... [--ttl-min S] [--ttl-max S] [--timeout-ms MS] [--tcp-idle-ms MS]\n"
			"       [--tcp-clients N] [--tcp-queries N] [--lookup NAME]... [--empty-port N]\n"
			"       [--unlearnable NAME]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct drv_policy pol = { .tag = "" }, empty = { .tag = "r2 " };
	struct latch_resolver_opts o = { .ttl_min = 30, .ttl_max = 300 };
	const char *lookups[NAMES_MAX];
	int n_lookups = 0;
	uint16_t empty_port = 0;
	uint32_t tcp_clients = 0, tcp_queries = 0;
	char err[LATCH_ERR_MAX];
	struct drv d = { 0 };
	struct event *ev_term, *ev_int, *ev_usr1, *ev_usr2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int ret = 0;

		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--listen") && o.n_listen < LATCH_RESOLVER_LISTEN_MAX)
			ret = latch_parse_addr(v, &o.listen[o.n_listen++], err, sizeof(err));
		else if (!strcmp(a, "--port"))
			ret = latch_parse_port(v, &o.port, err, sizeof(err));
		else if (!strcmp(a, "--upstream") && o.n_upstream < LATCH_RESOLVER_UPSTREAM_MAX) {
			ret = parse_upstream(v, &o.upstream[o.n_upstream], &o.upstream_port[o.n_upstream], err,
					     sizeof(err));
			o.n_upstream++;
		} else if (!strcmp(a, "--allow") && pol.n_allow < NAMES_MAX)
			pol.allow[pol.n_allow++] = v;
		else if (!strcmp(a, "--wildcard") && pol.n_wild < NAMES_MAX)
			pol.wild[pol.n_wild++] = v;
		else if (!strcmp(a, "--exempt") && pol.n_exempt < NAMES_MAX) {
			struct latch_addr *x = &pol.exempt[pol.n_exempt];
			int fam = strchr(v, ':') ? AF_INET6 : AF_INET;

			ret = latch_parse_prefix(v, fam, 0, fam == AF_INET ? 32 : 128, x, &pol.exempt_len[pol.n_exempt],
						 err, sizeof(err));
			pol.n_exempt++;
		} else if (!strcmp(a, "--guest-dev"))
			snprintf(o.guest.dev, sizeof(o.guest.dev), "%s", v);
		else if (!strcmp(a, "--guest") && o.guest.n_addr < LATCH_RESOLVER_GUEST_ADDRS_MAX)
			ret = latch_parse_addr(v, &o.guest.addr[o.guest.n_addr++], err, sizeof(err));
		else if (!strcmp(a, "--rate"))
			ret = latch_parse_uint(v, 1, 10000000, &o.guest.rate);
		else if (!strcmp(a, "--burst"))
			ret = latch_parse_uint(v, 1, 10000000, &o.guest.burst);
		else if (!strcmp(a, "--tcp-queries"))
			ret = latch_parse_uint(v, 1, 100000, &tcp_queries);
		else if (!strcmp(a, "--ttl-min"))
			ret = latch_parse_uint(v, 0, 86400, &o.ttl_min);
		else if (!strcmp(a, "--ttl-max"))
			ret = latch_parse_uint(v, 1, 86400, &o.ttl_max);
		else if (!strcmp(a, "--timeout-ms"))
			ret = latch_parse_uint(v, 1, 60000, &o.timeout_ms);
		else if (!strcmp(a, "--tcp-idle-ms"))
			ret = latch_parse_uint(v, 1, 600000, &o.tcp_idle_ms);
		else if (!strcmp(a, "--tcp-clients"))
			ret = latch_parse_uint(v, 1, 4096, &tcp_clients);
		else if (!strcmp(a, "--lookup") && n_lookups < NAMES_MAX)
			lookups[n_lookups++] = v;
		else if (!strcmp(a, "--unlearnable"))
			pol.unlearnable = v;
		else if (!strcmp(a, "--empty-port"))
			ret = latch_parse_port(v, &empty_port, err, sizeof(err));
		else
			usage();
		if (ret) {
			fprintf(stderr, "resolver_drv: %s %s: %s\n", a, v, err);
			return 2;
		}
	}
	if (!o.n_listen || !o.port || !o.n_upstream)
		usage();
	o.tcp_clients_max = tcp_clients;
	o.tcp_conn_queries = tcp_queries;
	o.policy = (struct latch_resolver_policy){ &pol, name_allowed, addr_refused, answered, refused };

	d.base = event_base_new();
	if (!d.base)
		return 1;
	d.r[0] = latch_resolver_new(d.base, &o, err, sizeof(err));
	if (!d.r[0]) {
		fprintf(stderr, "resolver_drv: %s\n", err);
		return 1;
	}
	if (empty_port) {
		o.port = empty_port;
		o.policy.arg = &empty;
		d.r[1] = latch_resolver_new(d.base, &o, err, sizeof(err));
		if (!d.r[1]) {
			fprintf(stderr, "resolver_drv: %s\n", err);
			return 1;
		}
	}
	for (int i = 0; i < n_lookups; i++) {
		int ret = latch_resolver_lookup(d.r[0], lookups[i], looked_up, NULL);

		if (ret)
			printf("lookup %s failed %s\n", lookups[i], strerror(-ret));
	}
	ev_term = evsignal_new(d.base, SIGTERM, on_term, &d);
	ev_int = evsignal_new(d.base, SIGINT, on_term, &d);
	ev_usr1 = evsignal_new(d.base, SIGUSR1, on_flush, &d);
	ev_usr2 = evsignal_new(d.base, SIGUSR2, on_stats, &d);
	if (!ev_term || !ev_int || !ev_usr1 || !ev_usr2 || event_add(ev_term, NULL) || event_add(ev_int, NULL) ||
	    event_add(ev_usr1, NULL) || event_add(ev_usr2, NULL))
		return 1;
	printf("ready\n");
	event_base_dispatch(d.base);

	print_stats(d.r[0]);
	latch_resolver_free(d.r[0]);
	latch_resolver_free(d.r[1]);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_usr1);
	event_free(ev_usr2);
	event_base_free(d.base);
	return 0;
}
