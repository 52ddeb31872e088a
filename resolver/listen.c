// SPDX-License-Identifier: GPL-2.0-only
/*
 * listen.c - the resolver's listening sockets and its clients: who may ask
 * (the guest's addresses on the guest's link, nobody else, and no trace of
 * the others), UDP datagrams in batches, TCP connections and the limits
 * that keep one client from holding the resolver (bytes and queries in
 * flight, idle time, concurrent connections, queries per connection and the
 * sandbox's query rate, which cut a connection).  Every client message goes
 * through client_query(), which decides it or hands it to the cache or an
 * upstream.
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
#include <net/if.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <ldns/ldns.h>

#include "resolver/dns.h"

#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62 /* Linux 5.0; glibc 2.36 does not name it */
#endif

/* ------------------------------------------------------------ replies to clients */

static bool udp_batch_add(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len);

void dns_client_send(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len)
{
	if (c->kind == CL_UDP) {
		/* a full socket buffer loses the reply, as UDP may; never wait for it */
		if (!udp_batch_add(r, c, wire, len))
			sendto(c->fd, wire, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&c->peer,
			       c->peerlen);
		return;
	}
	if (c->tc) {
		uint8_t hdr[2] = { len >> 8, len & 0xff };
		struct evbuffer *out = bufferevent_get_output(c->tc->bev);

		evbuffer_add(out, hdr, 2);
		evbuffer_add(out, wire, len);
	}
}

/* ------------------------------------------------------------ who may ask */

/*
 * Bind each TCP listener to the guest's link, so that a connection arriving
 * on any other link finds no listener.  Returns 0 when every listener is
 * bound to the link as last looked up.
 */
static int listeners_bind(struct latch_resolver *r)
{
	int ret = 0;

	for (int i = 0; i < r->n_l; i++) {
		struct listener *l = &r->l[i];
		int idx = r->guest_ifindex;

		if (!l->tcp || l->tcp_bound == idx)
			continue;
		/* index 0 would unbind it: then accept refuses everything until the link is back */
		if (idx && setsockopt(evconnlistener_get_fd(l->tcp), SOL_SOCKET, SO_BINDTOIFINDEX, &idx, sizeof(idx))) {
			ret = -errno;
			continue;
		}
		l->tcp_bound = idx;
	}
	return ret;
}

/*
 * The guest's link index, looked up by name: forced, or when the last look
 * is GUEST_RELOOK_MS old (a link made, or made again, after the resolver
 * started has a new index).  0 when there is no such link.
 */
int dns_guest_link(struct latch_resolver *r, bool force)
{
	uint64_t now = latch_now_ms();

	if (r->o.guest.gated)
		return 0; /* no link to follow: the gate decides who reaches us */
	/* no link yet: nothing to protect by waiting, and the guest's first query should not be lost */
	if (force || !r->guest_ifindex || now - r->guest_looked_ms >= GUEST_RELOOK_MS) {
		r->guest_looked_ms = now;
		r->guest_ifindex = (int)if_nametoindex(r->o.guest.dev);
	}
	listeners_bind(r);
	return r->guest_ifindex;
}

static bool guest_addr(const struct latch_resolver *r, const struct sockaddr_storage *ss)
{
	const void *bytes = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
						       (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	size_t len = ss->ss_family == AF_INET ? 4 : 16;

	for (int i = 0; i < r->o.guest.n_addr; i++)
		if (r->o.guest.addr[i].family == ss->ss_family && !memcmp(r->o.guest.addr[i].bytes, bytes, len))
			return true;
	return false;
}

/*
 * A datagram's sender and the link it came in on (IP_PKTINFO): the guest's
 * address on the guest's link, or nobody we answer.  The address is checked
 * first, so only a datagram claiming the guest's address from elsewhere can
 * make us look the link up again: once a second at most while the link is
 * known, each time while it is not (then there is no guest to answer yet).
 */
static bool from_guest(struct latch_resolver *r, const struct sockaddr_storage *peer, int ifindex)
{
	if (r->o.guest.gated)
		return true;
	if (!guest_addr(r, peer))
		return false;
	if (ifindex && ifindex == r->guest_ifindex)
		return true;
	return ifindex && dns_guest_link(r, false) == ifindex;
}

/*
 * The sandbox's query rate, GCRA: rate_tat_ns is when the bucket is full
 * again.  A UDP query (must = false) takes a token when there is one and
 * passes anyway; a TCP query (must = true) passes only with one.
 */
static bool rate_take(struct latch_resolver *r, bool must)
{
	uint64_t now = latch_now_ns(), cost = r->rate_cost_ns;

	if (r->rate_tat_ns < now)
		r->rate_tat_ns = now;
	if (r->rate_tat_ns - now > (uint64_t)(r->o.guest.burst - 1) * cost)
		return !must;
	r->rate_tat_ns += cost;
	return true;
}

/* ------------------------------------------------------------ client queries */

/* A header-only reply, for queries that can't be parsed (or shouldn't be). */
static void dns_client_raw(struct latch_resolver *r, const struct client *c, const uint8_t *q, uint8_t rcode)
{
	uint8_t h[DNS_HDR] = { q[0], q[1], 0x80 | (q[2] & 0x79), 0x80 | rcode };

	dns_client_send(r, c, h, sizeof(h));
	r->st.failed++;
}

/*
 * One message from a client.  Only A, AAAA and CNAME are answered: ANY
 * would return whatever the upstream has, TXT/NULL/MX... are the usual
 * tunnels, and HTTPS/SVCB carry ipv4hint/ipv6hint addresses that would
 * reach the guest without passing the rebinding filter or being learned.
 */
static void client_query(struct latch_resolver *r, const struct client *c, const uint8_t *buf, size_t len)
{
	char name[LATCH_RESOLVER_NAME_MAX] = "";
	struct client cc = *c;
	struct question cq;
	struct centry *e;
	const char *why;
	uint16_t udp_size;
	uint32_t left;

	r->st.queries++;
	switch (dns_query_read(buf, len, &cq, &udp_size)) {
	case 0:
		break;
	case -EBADMSG:
		r->st.failed++;
		return;
	case -EOPNOTSUPP:
		dns_client_raw(r, c, buf, LDNS_RCODE_NOTIMPL);
		return;
	default:
		dns_client_raw(r, c, buf, LDNS_RCODE_FORMERR);
		return;
	}
	if (cc.kind == CL_UDP)
		cc.max = dns_udp_reply_max(&cq, udp_size);
	if (cq.qclass != LDNS_RR_CLASS_IN) {
		dns_client_refuse(r, &cc, &cq, "", "qclass");
		return;
	}
	/* the name first: for a tunnel query the audit log should say whose name it was */
	why = dns_name_judge(r, cq.qname, cq.qlen, name, sizeof(name));
	if (why) {
		dns_client_refuse(r, &cc, &cq, name, why);
		return;
	}
	if (cq.qtype != LDNS_RR_TYPE_A && cq.qtype != LDNS_RR_TYPE_AAAA && cq.qtype != LDNS_RR_TYPE_CNAME) {
		dns_client_refuse(r, &cc, &cq, name, "qtype");
		return;
	}
	e = dns_cache_get(r, name, cq.qtype, &left);
	if (e) {
		r->st.cache_hits++;
		dns_client_answer(r, &cc, &cq, name, &e->a, left, e);
		return;
	}
	if (dns_query_start(r, name, cq.qtype, &cc, &cq, NULL)) {
		r->st.failed++;
		dns_client_reply(r, &cc, &cq, LDNS_RCODE_SERVFAIL, NULL, 0);
	}
}

/* The interface a datagram came in on, from its IP_PKTINFO or IPV6_PKTINFO; 0 when it has none. */
static int arrival_ifindex(struct msghdr *m)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			return pi.ipi_ifindex;
		}
		if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi6;

			memcpy(&pi6, CMSG_DATA(cm), sizeof(pi6));
			return (int)pi6.ipi6_ifindex;
		}
	}
	return 0;
}

/*
 * One wakeup's datagrams, in and out, on the stack of udp_read(): read with
 * one recvmmsg(), answered with one sendmmsg().  A cached answer costs about
 * a microsecond of our own work and several of the kernel's, a good part of
 * it the two system calls per query; batches pay them once.
 */
struct udp_batch {
	int fd;
	int n_out;
	struct mmsghdr in[UDP_BATCH], out[UDP_BATCH];
	struct iovec in_iov[UDP_BATCH], out_iov[UDP_BATCH];
	struct sockaddr_storage peer[UDP_BATCH], out_peer[UDP_BATCH];
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} ctl[UDP_BATCH];
	uint8_t in_buf[UDP_BATCH][UDP_BUF];
	uint8_t out_buf[UDP_BATCH][EDNS_SIZE];
};

/* A reply to a UDP client of the batch being read goes out with the batch; any other right away. */
static bool udp_batch_add(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len)
{
	struct udp_batch *b = r->udp_batch;
	int i;

	if (!b || b->fd != c->fd || b->n_out == UDP_BATCH || len > sizeof(b->out_buf[0]))
		return false;
	i = b->n_out++;
	memcpy(b->out_buf[i], wire, len);
	memcpy(&b->out_peer[i], &c->peer, c->peerlen);
	b->out_iov[i] = (struct iovec){ b->out_buf[i], len };
	b->out[i].msg_hdr = (struct msghdr){
		.msg_name = &b->out_peer[i], .msg_namelen = c->peerlen, .msg_iov = &b->out_iov[i], .msg_iovlen = 1
	};
	return true;
}

static void udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	struct latch_resolver *r = l->r;
	struct udp_batch batch, *b = &batch; /* 170 KiB of stack, used and gone within this call */

	b->fd = fd;
	for (int i = 0; i < UDP_BATCH; i++) {
		b->in_iov[i] = (struct iovec){ b->in_buf[i], sizeof(b->in_buf[i]) };
		b->in[i].msg_hdr = (struct msghdr){
			.msg_name = &b->peer[i], .msg_iov = &b->in_iov[i], .msg_iovlen = 1, .msg_control = b->ctl[i].buf
		};
	}
	/* UDP_BURST at most per wakeup, so one sandbox can't starve the others */
	for (int round = 0; round < UDP_BURST / UDP_BATCH; round++) {
		int n;

		for (int i = 0; i < UDP_BATCH; i++) {
			b->in[i].msg_hdr.msg_namelen = sizeof(b->peer[i]);
			b->in[i].msg_hdr.msg_controllen = sizeof(b->ctl[i].buf);
		}
		n = recvmmsg(fd, b->in, UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		b->n_out = 0;
		r->udp_batch = b;
		for (int i = 0; i < n; i++) {
			struct client c = { .kind = CL_UDP, .fd = fd, .max = UDP_PLAIN };

			memcpy(&c.peer, &b->peer[i], sizeof(c.peer));
			c.peerlen = b->in[i].msg_hdr.msg_namelen;
			if (!from_guest(r, &c.peer, arrival_ifindex(&b->in[i].msg_hdr))) {
				r->st.foreign++; /* no answer, no audit entry: it is not the sandbox asking */
				continue;
			}
			rate_take(r, false);
			if (b->in[i].msg_hdr.msg_flags & MSG_TRUNC) { /* bigger than UDP_BUF: dropped, not truncated */
				r->st.queries++;
				r->st.failed++;
				continue;
			}
			client_query(r, &c, b->in_buf[i], b->in[i].msg_len);
		}
		r->udp_batch = NULL;
		/* a full socket buffer loses replies, as UDP may; never wait for it */
		if (b->n_out)
			sendmmsg(fd, b->out, b->n_out, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < UDP_BATCH)
			break;
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

/* A connection being cut: closed once its answers so far are out (or its idle time passes). */
static void tcp_conn_drained(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *tc = arg;

	if (tc->cut && !tc->outstanding && !evbuffer_get_length(bufferevent_get_output(bev)))
		dns_tcp_conn_close(tc);
}

void dns_tcp_conn_resume(struct tcp_conn *tc)
{
	if (tc->cut) {
		tcp_conn_drained(tc->bev, tc);
		return;
	}
	if (!tc->paused || tc->outstanding >= TCP_CONN_QUERIES)
		return;
	tc->paused = false;
	bufferevent_enable(tc->bev, EV_READ);
	/* queries may be waiting in the input already; no new bytes would wake us for them */
	bufferevent_trigger(tc->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static void tcp_conn_event(struct bufferevent *bev, short what, void *arg);

/*
 * Cut a TCP connection that asked for more than it may: the kernel charged
 * it one token for its SYN, so these limits are what charges its queries.
 * Nothing more is read from it; the answers it was owed go out, then it is
 * closed.
 */
static void tcp_conn_cut(struct tcp_conn *tc, const char *why)
{
	struct latch_resolver *r = tc->r;

	r->st.tcp_cut++;
	tc->cut = tc->paused = true;
	bufferevent_disable(tc->bev, EV_READ);
	evbuffer_drain(bufferevent_get_input(tc->bev), evbuffer_get_length(bufferevent_get_input(tc->bev)));
	bufferevent_setcb(tc->bev, NULL, tcp_conn_drained, tcp_conn_event, tc);
	if (r->o.policy.refused)
		r->o.policy.refused(r->o.policy.arg, "", 0, why);
	tcp_conn_drained(tc->bev, tc); /* may close it */
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
		if (++tc->asked > tc->r->o.tcp_conn_queries) {
			tcp_conn_cut(tc, "tcp-queries");
			return;
		}
		if (!rate_take(tc->r, true)) {
			tcp_conn_cut(tc, "tcp-rate");
			return;
		}
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

	/* idle only counts when nothing is in flight for it (and a cut connection reads no more) */
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && tc->outstanding && !tc->cut) {
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
	struct sockaddr_storage peer;
	struct tcp_conn *tc;

	/*
	 * The guest's address, through a listener bound to the guest's link.
	 * An unbound listener (the link was missing, or is new) can't say where
	 * a connection came from: it is closed, and the listener bound for the
	 * next one.  Foreign connections never take a slot.
	 */
	memset(&peer, 0, sizeof(peer));
	memcpy(&peer, sa, (size_t)salen < sizeof(peer) ? (size_t)salen : sizeof(peer));
	if (!r->o.guest.gated && (!guest_addr(r, &peer) || !r->guest_ifindex || l->tcp_bound != r->guest_ifindex)) {
		if (guest_addr(r, &peer))
			dns_guest_link(r, false);
		r->st.foreign++;
		close(fd);
		return;
	}
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

static int listen_socket(const struct latch_addr *a, uint16_t port, int type, int ifindex, char *err, size_t errlen)
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
	/* who may ask: the arrival link of every datagram, the link of every connection */
	if (type == SOCK_DGRAM &&
	    (a->family == AF_INET ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) :
				    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one))))
		goto fail;
	if (type == SOCK_STREAM && ifindex && setsockopt(fd, SOL_SOCKET, SO_BINDTOIFINDEX, &ifindex, sizeof(ifindex)))
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
		ret = listen_socket(&o->listen[i], o->port, SOCK_DGRAM, 0, err, errlen);
		if (ret < 0)
			return ret;
		l->udp_fd = ret;
		l->udp_ev = event_new(r->base, l->udp_fd, EV_READ | EV_PERSIST, udp_read, l);
		l->tcp_pause = evtimer_new(r->base, tcp_accept_resume, l);
		if (!l->udp_ev || !l->tcp_pause || event_add(l->udp_ev, NULL))
			return latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
		fd = listen_socket(&o->listen[i], o->port, SOCK_STREAM, r->guest_ifindex, err, errlen);
		if (fd < 0)
			return fd;
		l->tcp_bound = r->guest_ifindex;
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
