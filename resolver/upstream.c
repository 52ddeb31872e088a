// SPDX-License-Identifier: GPL-2.0-only
/*
 * upstream.c - the upstream client, and the host-side lookups latchd asks
 * for.
 *
 * Upstream queries go out from a fresh connected UDP socket each (a random
 * source port, and the kernel drops datagrams from anyone but the upstream)
 * with a fresh random ID, and a reply must match ID, source and question.
 * TC falls back to TCP to the same upstream; a timeout moves to the next.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <ldns/ldns.h>

#include "resolver/dns.h"

/* ------------------------------------------------------------ small helpers */

static int random_id(struct latch_resolver *r, uint16_t *id)
{
	if (r->rnd_left < 2) {
		/* GRND_NONBLOCK: before the pool is seeded, fail the query rather than stall every sandbox */
		if (getrandom(r->rnd, sizeof(r->rnd), GRND_NONBLOCK) != (ssize_t)sizeof(r->rnd))
			return -EAGAIN;
		r->rnd_left = sizeof(r->rnd);
	}
	r->rnd_left -= 2;
	memcpy(id, r->rnd + r->rnd_left, 2);
	return 0;
}

static bool sockaddr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x6 = (const void *)a, *y6 = (const void *)b;

	return x6->sin6_port == y6->sin6_port && !memcmp(&x6->sin6_addr, &y6->sin6_addr, 16);
}

/* ------------------------------------------------------------ lookups */

static int why_rank(const char *why)
{
	static const char *const order[] = { "no-address", "nxdomain",	  "unreachable", "servfail",
					     "timeout",	   "cname-chain", "cname-loop",	 "rebinding" };

	for (int i = 0; why && i < (int)(sizeof(order) / sizeof(order[0])); i++)
		if (!strcmp(why, order[i]))
			return i + 1;
	return why ? 1 : 0;
}

static void lookup_why(struct lookup *lk, const char *why)
{
	if (why_rank(why) > why_rank(lk->why))
		lk->why = why;
}

/*
 * Half of a lookup is in: keep what the rebinding filter passes and is not
 * the host's, less the addresses a CIDR entry covers (dns_addr_judge: they
 * are reached through that entry, on its ports only).
 */
static void lookup_part(struct lookup *lk, const struct answer *a, uint32_t ttl, const char *why)
{
	struct latch_resolver *r = lk->r;

	if (!a)
		lookup_why(lk, why ? why : "servfail");
	else if (a->chain_bad)
		lookup_why(lk, a->chain_bad);
	else if (a->rcode == LDNS_RCODE_NXDOMAIN)
		lookup_why(lk, "nxdomain");
	else if (!a->n_addrs)
		lookup_why(lk, "no-address");
	for (int i = 0; a && !a->chain_bad && i < a->n_addrs; i++) {
		bool learn;

		if (r->o.report_all)
			learn = true;
		else if (dns_addr_judge(r, &a->addrs[i], &learn)) {
			lk->n_refused++;
			continue;
		}
		if (ttl < lk->ttl)
			lk->ttl = ttl;
		if (!learn) {
			lk->n_exempt++;
			continue;
		}
		if (lk->n == LATCH_RESOLVER_ADDRS_MAX)
			break;
		lk->addrs[lk->n++] = a->addrs[i];
	}
	/* the callback always runs from the loop, even when both halves were cached */
	if (--lk->waiting == 0)
		event_active(lk->ev_done, EV_TIMEOUT, 0);
}

void dns_lookup_free(struct lookup *lk)
{
	TAILQ_REMOVE(&lk->r->lookups, lk, link);
	event_free(lk->ev_done);
	free(lk);
}

static void lookup_done(evutil_socket_t fd, short what, void *arg)
{
	struct lookup *lk = arg;
	latch_lookup_cb cb = lk->cb;
	void *cb_arg = lk->arg;
	char name[LATCH_RESOLVER_NAME_MAX];
	struct latch_addr addrs[LATCH_RESOLVER_ADDRS_MAX];
	int n = lk->n;
	bool found = lk->n || lk->n_exempt;
	uint32_t ttl = lk->ttl;
	const char *why = lk->n_refused ? "rebinding" : lk->why ? lk->why : "no-address";

	/* freed first: the callback may start another lookup or flush */
	memcpy(name, lk->name, sizeof(name));
	memcpy(addrs, lk->addrs, sizeof(addrs[0]) * n);
	dns_lookup_free(lk);
	if (found)
		cb(cb_arg, name, addrs, n, ttl, NULL);
	else
		cb(cb_arg, name, NULL, -1, 0, why);
}

/* ------------------------------------------------------------ upstream queries */

static void query_try(struct query *q);

static void query_stop_try(struct query *q)
{
	if (q->ev_read) {
		event_free(q->ev_read);
		q->ev_read = NULL;
	}
	if (q->fd >= 0) {
		close(q->fd);
		q->fd = -1;
	}
	if (q->bev) {
		bufferevent_free(q->bev);
		q->bev = NULL;
	}
	if (q->ev_timer)
		event_del(q->ev_timer);
}

void dns_query_free(struct query *q)
{
	struct latch_resolver *r = q->r;

	query_stop_try(q);
	if (q->ev_timer)
		event_free(q->ev_timer);
	TAILQ_REMOVE(&r->queries, q, link);
	r->n_queries--;
	if (q->c.kind == CL_TCP && q->c.tc) {
		q->c.tc->outstanding--;
		dns_tcp_conn_resume(q->c.tc);
	}
	ldns_rdf_deep_free(q->qname);
	free(q);
}

/* The end of a query: cache what the upstream said, then hand it on. */
static void query_done(struct query *q, const struct answer *a)
{
	struct latch_resolver *r = q->r;
	struct centry *e = NULL;

	query_stop_try(q);
	if (a)
		e = dns_cache_put(r, q->name, q->qtype, a);
	if (q->lk)
		lookup_part(q->lk, a, a ? a->ttl : 0, q->why ? q->why : "timeout");
	else if (q->c.kind == CL_UDP || q->c.tc)
		dns_client_answer(r, &q->c, &q->cq, q->name, a, a ? a->ttl : 0, e);
	dns_query_free(q);
}

static void query_next(struct query *q, const char *why)
{
	query_stop_try(q);
	q->why = why;
	query_try(q);
}

static int query_wire(struct query *q, uint8_t **wire, size_t *len)
{
	ldns_pkt *p;
	int ret = 0;

	if (random_id(q->r, &q->id))
		return -EAGAIN;
	/* a fresh packet: RD set, our OPT with DO clear, none of the client's options */
	p = ldns_pkt_query_new(ldns_rdf_clone(q->qname), q->qtype, LDNS_RR_CLASS_IN, LDNS_RD);
	if (!p)
		return -ENOMEM;
	ldns_pkt_set_id(p, q->id);
	ldns_pkt_set_edns_udp_size(p, EDNS_SIZE);
	ldns_pkt_set_edns_do(p, false);
	if (ldns_pkt2wire(wire, p, len) != LDNS_STATUS_OK)
		ret = -ENOMEM;
	ldns_pkt_free(p);
	return ret;
}

enum { REPLY_IGNORED, REPLY_TAKEN };

static void query_tcp_start(struct query *q);

/*
 * A message from the upstream of the current try.  Anything that does not
 * answer our question under our ID is ignored (the real reply may still
 * come).  Returns REPLY_TAKEN when q moved on (it may be freed by then).
 */
static int query_reply(struct query *q, const uint8_t *buf, size_t len, bool over_tcp)
{
	ldns_pkt *p = NULL;
	const ldns_rr *qrr;
	struct answer a;
	uint8_t rcode;

	if (len < DNS_HDR || ((buf[0] << 8) | buf[1]) != q->id || !(buf[2] & 0x80))
		return REPLY_IGNORED;
	if (ldns_wire2pkt(&p, buf, len) != LDNS_STATUS_OK)
		return REPLY_IGNORED;
	if (ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY || ldns_pkt_qdcount(p) != 1 ||
	    ldns_rr_list_rr_count(ldns_pkt_question(p)) != 1)
		goto ignored;
	qrr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	if (ldns_rr_get_type(qrr) != q->qtype || ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN ||
	    ldns_dname_compare(ldns_rr_owner(qrr), q->qname))
		goto ignored;
	if (ldns_pkt_tc(p)) {
		ldns_pkt_free(p);
		if (over_tcp)
			query_next(q, "servfail");
		else
			query_tcp_start(q);
		return REPLY_TAKEN;
	}
	rcode = ldns_pkt_get_rcode(p);
	if (rcode != LDNS_RCODE_NOERROR && rcode != LDNS_RCODE_NXDOMAIN) {
		ldns_pkt_free(p);
		query_next(q, "servfail");
		return REPLY_TAKEN;
	}
	if (dns_answer_from_pkt(q->r, p, q->qname, q->qtype, &a)) {
		ldns_pkt_free(p);
		query_next(q, "servfail");
		return REPLY_TAKEN;
	}
	ldns_pkt_free(p);
	query_done(q, &a);
	dns_answer_clear(&a);
	return REPLY_TAKEN;
ignored:
	ldns_pkt_free(p);
	return REPLY_IGNORED;
}

static void query_udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct query *q = arg;
	uint8_t buf[UDP_BUF];

	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage from;
		socklen_t fromlen = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&from, &fromlen);

		if (n < 0) {
			/* an ICMP unreachable on the connected socket: no server there */
			if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH)
				query_next(q, "unreachable");
			return;
		}
		if ((size_t)n > sizeof(buf) || !sockaddr_same(&from, &q->up))
			continue;
		if (query_reply(q, buf, n, false) == REPLY_TAKEN)
			return;
	}
}

static void query_timeout(evutil_socket_t fd, short what, void *arg)
{
	query_next(arg, "timeout");
}

static void query_tcp_read(struct bufferevent *bev, void *arg)
{
	struct query *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[2];
	size_t len;

	if (evbuffer_copyout(in, hdr, 2) < 2)
		return;
	len = (hdr[0] << 8) | hdr[1];
	if (evbuffer_get_length(in) < 2 + len)
		return;
	/* one exchange per connection: anything but the answer ends the try */
	if (query_reply(q, evbuffer_pullup(in, 2 + len) + 2, len, true) == REPLY_IGNORED)
		query_next(q, "servfail");
}

static void query_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		query_next(arg, "unreachable");
}

/* The answer did not fit in UDP: ask the same upstream again over TCP. */
static void query_tcp_start(struct query *q)
{
	struct latch_resolver *r = q->r;
	struct timeval tv = dns_ms_tv(r->o.timeout_ms);
	uint8_t *wire = NULL, hdr[2];
	size_t len;
	int fd;

	query_stop_try(q);
	fd = socket(q->up.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	q->bev = bufferevent_socket_new(r->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!q->bev) {
		close(fd);
		goto fail;
	}
	if (query_wire(q, &wire, &len))
		goto fail;
	hdr[0] = len >> 8;
	hdr[1] = len & 0xff;
	bufferevent_setcb(q->bev, query_tcp_read, NULL, query_tcp_event, q);
	if (bufferevent_write(q->bev, hdr, 2) || bufferevent_write(q->bev, wire, len) ||
	    bufferevent_socket_connect(q->bev, (struct sockaddr *)&q->up, q->uplen) ||
	    bufferevent_enable(q->bev, EV_READ))
		goto fail;
	free(wire);
	r->st.upstream_sent++;
	evtimer_add(q->ev_timer, &tv);
	return;
fail:
	free(wire);
	query_next(q, "unreachable");
}

static int query_udp_send(struct query *q, int up)
{
	struct latch_resolver *r = q->r;
	struct timeval tv = dns_ms_tv(r->o.timeout_ms);
	uint8_t *wire = NULL;
	size_t len;
	int ret;

	q->uplen = dns_addr_sockaddr(&r->o.upstream[up], r->o.upstream_port[up], &q->up);
	/* connected: a random source port, and the kernel filters other sources */
	q->fd = socket(q->up.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (q->fd < 0 || connect(q->fd, (struct sockaddr *)&q->up, q->uplen))
		return -errno;
	ret = query_wire(q, &wire, &len);
	if (ret)
		return ret;
	if (send(q->fd, wire, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len) {
		ret = -errno;
		free(wire);
		return ret ? ret : -EIO;
	}
	free(wire);
	r->st.upstream_sent++;
	q->ev_read = event_new(r->base, q->fd, EV_READ | EV_PERSIST, query_udp_read, q);
	if (!q->ev_read || event_add(q->ev_read, NULL) || evtimer_add(q->ev_timer, &tv))
		return -ENOMEM;
	return 0;
}

/* The next upstream in turn, until the tries run out; q may be freed on return. */
static void query_try(struct query *q)
{
	struct latch_resolver *r = q->r;

	while (q->tries < q->max_tries) {
		int up = q->tries++ % r->o.n_upstream;

		if (query_udp_send(q, up) == 0)
			return;
		query_stop_try(q);
		q->why = "unreachable";
	}
	query_done(q, NULL);
}

/* Start asking the upstreams; for a client (c, cq) or a lookup. */
int dns_query_start(struct latch_resolver *r, const char *name, uint16_t qtype, const struct client *c,
		    const struct question *cq, struct lookup *lk)
{
	struct query *q;

	if (r->n_queries >= PENDING_MAX)
		return -EBUSY;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->r = r;
	q->fd = -1;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->qname = ldns_dname_new_frm_str(name);
	q->ev_timer = evtimer_new(r->base, query_timeout, q);
	if (!q->qname || !q->ev_timer) {
		if (q->ev_timer)
			event_free(q->ev_timer);
		ldns_rdf_deep_free(q->qname);
		free(q);
		return -ENOMEM;
	}
	q->qtype = qtype;
	q->lk = lk;
	if (c)
		q->c = *c;
	if (cq)
		q->cq = *cq;
	/* at least two tries, so one lost datagram with one upstream is not a failure */
	q->max_tries = r->o.n_upstream < 2 ? 2 : r->o.n_upstream;
	TAILQ_INSERT_TAIL(&r->queries, q, link);
	r->n_queries++;
	if (c && c->kind == CL_TCP)
		c->tc->outstanding++;
	query_try(q);
	return 0;
}

int latch_resolver_lookup(struct latch_resolver *r, const char *name, latch_lookup_cb cb, void *arg)
{
	static const uint16_t types[2] = { LDNS_RR_TYPE_A, LDNS_RR_TYPE_AAAA };
	char norm[LATCH_RESOLVER_NAME_MAX];
	struct lookup *lk;
	ldns_rdf *d;
	int ret;

	if (!cb)
		return -EINVAL;
	/* the same spelling rules as a client's question, via the wire form */
	d = ldns_dname_new_frm_str(name);
	ret = d ? dns_name_text(d, norm, sizeof(norm)) : -EINVAL;
	ldns_rdf_deep_free(d);
	if (ret)
		return ret;
	if (r->n_queries + 2 > PENDING_MAX)
		return -EBUSY;
	lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->ev_done = event_new(r->base, -1, 0, lookup_done, lk);
	if (!lk->ev_done) {
		free(lk);
		return -ENOMEM;
	}
	lk->r = r;
	lk->cb = cb;
	lk->arg = arg;
	lk->ttl = UINT32_MAX;
	lk->waiting = 2;
	memcpy(lk->name, norm, sizeof(norm));
	TAILQ_INSERT_TAIL(&r->lookups, lk, link);
	for (int i = 0; i < 2; i++) {
		struct centry *e;
		uint32_t left;

		e = dns_cache_get(r, norm, types[i], &left);
		if (e) {
			r->st.cache_hits++;
			lookup_part(lk, &e->a, left, NULL);
		} else if (dns_query_start(r, norm, types[i], NULL, NULL, lk)) {
			lookup_part(lk, NULL, 0, "servfail");
		}
	}
	return 0;
}
