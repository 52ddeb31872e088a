// SPDX-License-Identifier: GPL-2.0-only
/*
 * listen.c - the resolver's listening sockets and its clients: UDP
 * datagrams, TCP connections and the limits that keep one client from
 * holding the resolver (bytes in flight, queries in flight, idle time,
 * concurrent connections).  Every client message goes through
 * client_query(), which decides it or hands it to the cache or an upstream.
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

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <ldns/ldns.h>

#include "broker/dns/dns.h"

/* ------------------------------------------------------------ replies to clients */

void dns_client_send(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len)
{
	if (c->kind == CL_UDP) {
		/* a full socket buffer loses the reply, as UDP may; never wait for it */
		sendto(c->fd, wire, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&c->peer, c->peerlen);
		return;
	}
	if (c->tc) {
		uint8_t hdr[2] = { len >> 8, len & 0xff };
		struct evbuffer *out = bufferevent_get_output(c->tc->bev);

		evbuffer_add(out, hdr, 2);
		evbuffer_add(out, wire, len);
	}
}

/* ------------------------------------------------------------ client queries */

/*
 * One message from a client.  Only A, AAAA and CNAME are answered: ANY
 * would return whatever the upstream has, TXT/NULL/MX... are the usual
 * tunnels, and HTTPS/SVCB carry ipv4hint/ipv6hint addresses that would
 * reach the guest without passing the rebinding filter or being learned.
 */
static void client_query(struct latch_resolver *r, const struct client *c, const uint8_t *buf, size_t len)
{
	char name[LATCH_RESOLVER_NAME_MAX] = "";
	ldns_pkt *cq = NULL;
	const ldns_rr *qrr;
	struct centry *e;
	uint16_t qtype;
	uint32_t left;
	int ret;

	r->st.queries++;
	/* too short to answer, or a response (never answer those: no loops, no reflection) */
	if (len < DNS_HDR || (buf[2] & 0x80)) {
		r->st.failed++;
		return;
	}
	if (((buf[2] >> 3) & 0xf) != LDNS_PACKET_QUERY) {
		dns_client_raw(r, c, buf, LDNS_RCODE_NOTIMPL);
		return;
	}
	if (ldns_wire2pkt(&cq, buf, len) != LDNS_STATUS_OK || ldns_pkt_qdcount(cq) != 1 ||
	    ldns_rr_list_rr_count(ldns_pkt_question(cq)) != 1) {
		ldns_pkt_free(cq);
		dns_client_raw(r, c, buf, LDNS_RCODE_FORMERR);
		return;
	}
	struct client cc = *c;

	if (cc.kind == CL_UDP)
		cc.max = ldns_pkt_edns(cq) && ldns_pkt_edns_udp_size(cq) > UDP_PLAIN ?
				 (ldns_pkt_edns_udp_size(cq) < EDNS_SIZE ? ldns_pkt_edns_udp_size(cq) : EDNS_SIZE) :
				 UDP_PLAIN;
	qrr = ldns_rr_list_rr(ldns_pkt_question(cq), 0);
	qtype = ldns_rr_get_type(qrr);
	if (ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN) {
		dns_client_refuse(r, &cc, cq, "", qtype, "qclass");
		goto out;
	}
	if (dns_name_text(ldns_rr_owner(qrr), name, sizeof(name))) {
		dns_client_refuse(r, &cc, cq, "", qtype, "qname");
		goto out;
	}
	/* the name first: for a tunnel query the audit log should say whose name it was */
	if (!r->o.policy.name_allowed(r->o.policy.arg, name)) {
		dns_client_refuse(r, &cc, cq, name, qtype, "not-allowed");
		goto out;
	}
	if (qtype != LDNS_RR_TYPE_A && qtype != LDNS_RR_TYPE_AAAA && qtype != LDNS_RR_TYPE_CNAME) {
		dns_client_refuse(r, &cc, cq, name, qtype, "qtype");
		goto out;
	}
	e = dns_cache_get(r, name, qtype, &left);
	if (e) {
		r->st.cache_hits++;
		dns_client_answer(r, &cc, cq, name, qtype, &e->a, left);
		goto out;
	}
	ret = dns_query_start(r, name, qtype, &cc, cq, NULL);
	if (ret == 0)
		return; /* cq is the query's now */
	r->st.failed++;
	dns_client_reply(r, &cc, cq, LDNS_RCODE_SERVFAIL, NULL, 0);
out:
	ldns_pkt_free(cq);
}

static void udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	uint8_t buf[UDP_BUF];

	for (int i = 0; i < UDP_BURST; i++) {
		struct client c = { .kind = CL_UDP, .fd = fd, .peerlen = sizeof(c.peer), .max = UDP_PLAIN };
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&c.peer, &c.peerlen);

		if (n < 0)
			return;
		if ((size_t)n > sizeof(buf)) {
			l->r->st.queries++;
			l->r->st.failed++;
			continue;
		}
		client_query(l->r, &c, buf, n);
	}
}

/* ------------------------------------------------------------ TCP clients */

void dns_tcp_conn_close(struct tcp_conn *tc)
{
	struct latch_resolver *r = tc->r;
	struct query *q;

	/* its queries still finish (and fill the cache); their replies go nowhere */
	TAILQ_FOREACH(q, &r->queries, link)
		if (q->c.kind == CL_TCP && q->c.tc == tc)
			q->c.tc = NULL;
	bufferevent_free(tc->bev);
	TAILQ_REMOVE(&r->conns, tc, link);
	r->n_conns--;
	free(tc);
}

void dns_tcp_conn_resume(struct tcp_conn *tc)
{
	if (!tc->paused || tc->outstanding >= TCP_CONN_QUERIES)
		return;
	tc->paused = false;
	bufferevent_enable(tc->bev, EV_READ);
	/* queries may be waiting in the input already; no new bytes would wake us for them */
	bufferevent_trigger(tc->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static void tcp_conn_read(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *tc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct client c = { .kind = CL_TCP, .fd = -1, .tc = tc, .max = 65535 };

	while (!tc->paused) {
		uint8_t hdr[2];
		size_t len;

		if (evbuffer_copyout(in, hdr, 2) < 2)
			return;
		len = (hdr[0] << 8) | hdr[1];
		if (len < DNS_HDR) {
			tc->r->st.queries++;
			tc->r->st.failed++;
			dns_tcp_conn_close(tc);
			return;
		}
		if (evbuffer_get_length(in) < 2 + len)
			return;
		client_query(tc->r, &c, evbuffer_pullup(in, 2 + len) + 2, len);
		evbuffer_drain(in, 2 + len);
		if (evbuffer_get_length(bufferevent_get_output(bev)) > TCP_OUT_MAX) {
			dns_tcp_conn_close(tc); /* it asks and never reads */
			return;
		}
		if (tc->outstanding >= TCP_CONN_QUERIES) {
			tc->paused = true;
			bufferevent_disable(bev, EV_READ);
		}
	}
}

static void tcp_conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct tcp_conn *tc = arg;

	/* idle only counts when nothing is in flight for it */
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && tc->outstanding) {
		bufferevent_enable(bev, EV_READ);
		return;
	}
	dns_tcp_conn_close(tc);
}

static void tcp_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct listener *l = arg;
	struct latch_resolver *r = l->r;
	struct timeval idle = dns_ms_tv(r->o.tcp_idle_ms);
	struct tcp_conn *tc;

	if (r->n_conns >= r->o.tcp_clients_max) {
		close(fd);
		return;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		close(fd);
		return;
	}
	tc->r = r;
	tc->bev = bufferevent_socket_new(r->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!tc->bev) {
		close(fd);
		free(tc);
		return;
	}
	TAILQ_INSERT_TAIL(&r->conns, tc, link);
	r->n_conns++;
	bufferevent_setcb(tc->bev, tcp_conn_read, NULL, tcp_conn_event, tc);
	bufferevent_set_timeouts(tc->bev, &idle, &idle);
	bufferevent_setwatermark(tc->bev, EV_READ, 0, 2 + 65535);
	if (bufferevent_enable(tc->bev, EV_READ))
		dns_tcp_conn_close(tc);
}

static void tcp_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(((struct listener *)arg)->tcp);
}

static void tcp_accept_error(struct evconnlistener *lev, void *arg)
{
	struct listener *l = arg;
	struct timeval tv = dns_ms_tv(ACCEPT_PAUSE_MS);

	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
		evconnlistener_disable(lev);
		evtimer_add(l->tcp_pause, &tv);
	}
}

/* ------------------------------------------------------------ sockets */

static int listen_socket(const struct latch_addr *a, uint16_t port, int type, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = dns_addr_sockaddr(a, port, &ss);
	char text[INET6_ADDRSTRLEN];
	int one = 1, fd, ret;

	latch_addr_format(a, text, sizeof(text));
	fd = socket(a->family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "resolver: socket for %s: %s", text, strerror(errno));
	/*
	 * FREEBIND: latchd may start the resolver before the sandbox's address
	 * is up.  SO_REUSEADDR on TCP only: it lets a restarted latchd listen
	 * despite TIME_WAIT, but on UDP it would let a second socket bind the
	 * same address and port and take a share of the queries.
	 */
	if ((type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) ||
	    (a->family == AF_INET && setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one))) ||
	    (a->family == AF_INET6 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) ||
				       setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof(one)))))
		goto fail;
	if (bind(fd, (struct sockaddr *)&ss, sl))
		goto fail;
	if (type == SOCK_STREAM && listen(fd, 64))
		goto fail;
	return fd;
fail:
	ret = -errno;
	latch_errf(err, errlen, ret, "resolver: %s %s port %u: %s", type == SOCK_STREAM ? "tcp" : "udp", text, port,
		   strerror(errno));
	close(fd);
	return ret;
}

/* Open the UDP and TCP sockets of every listen address and register them. */
int dns_listeners_open(struct latch_resolver *r, char *err, size_t errlen)
{
	const struct latch_resolver_opts *o = &r->o;
	int ret;

	for (int i = 0; i < o->n_listen; i++) {
		struct listener *l = &r->l[i];
		int fd;

		l->r = r;
		l->udp_fd = -1;
		r->n_l++;
		ret = listen_socket(&o->listen[i], o->port, SOCK_DGRAM, err, errlen);
		if (ret < 0)
			return ret;
		l->udp_fd = ret;
		l->udp_ev = event_new(r->base, l->udp_fd, EV_READ | EV_PERSIST, udp_read, l);
		l->tcp_pause = evtimer_new(r->base, tcp_accept_resume, l);
		if (!l->udp_ev || !l->tcp_pause || event_add(l->udp_ev, NULL))
			return latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
		fd = listen_socket(&o->listen[i], o->port, SOCK_STREAM, err, errlen);
		if (fd < 0)
			return fd;
		/* backlog 0: listen() was called already */
		l->tcp = evconnlistener_new(r->base, tcp_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
					    fd);
		if (!l->tcp) {
			close(fd);
			return latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
		}
		evconnlistener_set_error_cb(l->tcp, tcp_accept_error);
	}
	return 0;
}

void dns_listeners_close(struct latch_resolver *r)
{
	for (int i = 0; i < r->n_l; i++) {
		struct listener *l = &r->l[i];

		if (l->udp_ev)
			event_free(l->udp_ev);
		if (l->udp_fd >= 0)
			close(l->udp_fd);
		if (l->tcp)
			evconnlistener_free(l->tcp);
		if (l->tcp_pause)
			event_free(l->tcp_pause);
	}
	r->n_l = 0;
}
