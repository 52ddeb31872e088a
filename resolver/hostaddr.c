// SPDX-License-Identifier: GPL-2.0-only
/*
 * hostaddr.c - the host's own addresses, which no answer may carry.
 *
 * A name that resolves to an address of the host (its uplink address,
 * another sandbox's host address, a service's address on a dummy link)
 * would point the guest at the host itself.  Which addresses those are
 * changes while latchd runs for days: DHCP renews the uplink, sandboxes come
 * and go with their host addresses, an operator adds one.  So the set is
 * read from the kernel (an RTM_GETADDR dump, through libnl-route) and read
 * again after any address event the kernel multicasts (RTNLGRP_IPV4_IFADDR,
 * RTNLGRP_IPV6_IFADDR), or after events were lost (ENOBUFS).  The events
 * only mark the set stale; the next answer that needs it reads it whole
 * again, so the set can never drift from the kernel's by a missed delta.
 * A read that fails leaves the set unknown, and unknown refuses every
 * address (fail closed) until a read succeeds.
 *
 * The same socket follows link events (RTNLGRP_LINK): the guest's link may
 * be made, or made again with a new index, while the resolver runs, and its
 * TCP listeners must be bound to it before the guest's first connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/rtnl.h>

#include "resolver/dns.h"

static int addr_cmp(const void *x, const void *y)
{
	const struct latch_addr *a = x, *b = y;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	return memcmp(a->bytes, b->bytes, sizeof(a->bytes));
}

/* Append one netlink address (IPv4 or IPv6, full length) to the set. */
static void set_add(struct latch_addr *set, int *n, int max, struct nl_addr *na)
{
	int fam = na ? nl_addr_get_family(na) : 0;
	unsigned int len = na ? nl_addr_get_len(na) : 0;

	if (*n >= max || !((fam == AF_INET && len == 4) || (fam == AF_INET6 && len == 16)))
		return;
	memset(&set[*n], 0, sizeof(set[*n]));
	set[*n].family = fam;
	memcpy(set[*n].bytes, nl_addr_get_binary_addr(na), len);
	(*n)++;
}

/* Read every address of the host again: local and broadcast, IPv4 and IPv6. */
static int hostaddrs_read(struct hostaddrs *h)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_cache *cache = NULL;
	struct latch_addr *set = NULL;
	struct nl_object *o;
	int n = 0, max, ret = -ENOMEM;

	if (!sk)
		return -ENOMEM;
	if (nl_connect(sk, NETLINK_ROUTE) || rtnl_addr_alloc_cache(sk, &cache)) {
		ret = -EIO;
		goto out;
	}
	max = nl_cache_nitems(cache) * 2;
	set = calloc(max ? max : 1, sizeof(*set));
	if (!set)
		goto out;
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *ra = (struct rtnl_addr *)o;

		set_add(set, &n, max, rtnl_addr_get_local(ra));
		set_add(set, &n, max, rtnl_addr_get_broadcast(ra));
	}
	qsort(set, n, sizeof(*set), addr_cmp);
	free(h->addr);
	h->addr = set;
	h->n = n;
	set = NULL;
	ret = 0;
out:
	free(set);
	nl_cache_free(cache);
	nl_socket_free(sk);
	return ret;
}

/*
 * Address and link events: drain them; any of them (or a lost one) makes the
 * set stale, and the guest's link is looked up again.
 */
static void hostaddrs_event(evutil_socket_t fd, short what, void *arg)
{
	struct latch_resolver *r = arg;
	struct hostaddrs *h = &r->host;
	char buf[8192];

	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		/* a message, or ENOBUFS: the kernel dropped some for us, so we can't know what changed */
		h->dirty = true;
		if (n == 0)
			break;
	}
	if (h->dirty)
		dns_guest_link(r, true);
}

int dns_hostaddrs_open(struct latch_resolver *r, char *err, size_t errlen)
{
	struct hostaddrs *h = &r->host;
	int ret;

	h->events = nl_socket_alloc();
	if (!h->events)
		return latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
	nl_socket_disable_seq_check(h->events);
	/* subscribed before the first read: a change during the read marks the set stale again */
	if (nl_connect(h->events, NETLINK_ROUTE) ||
	    nl_socket_add_memberships(h->events, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_LINK, 0) ||
	    nl_socket_set_nonblocking(h->events))
		return latch_errf(err, errlen, -EIO, "resolver: netlink: can't follow the host's addresses");
	h->ev = event_new(r->base, nl_socket_get_fd(h->events), EV_READ | EV_PERSIST, hostaddrs_event, r);
	if (!h->ev || event_add(h->ev, NULL))
		return latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
	ret = hostaddrs_read(h);
	if (ret)
		return latch_errf(err, errlen, ret, "resolver: netlink: can't read the host's addresses");
	return 0;
}

void dns_hostaddrs_close(struct latch_resolver *r)
{
	struct hostaddrs *h = &r->host;

	if (h->ev)
		event_free(h->ev);
	nl_socket_free(h->events);
	free(h->addr);
	memset(h, 0, sizeof(*h));
}

bool dns_hostaddr_is_local(struct latch_resolver *r, const struct latch_addr *a)
{
	struct hostaddrs *h = &r->host;
	struct latch_addr key;

	if (h->dirty) {
		h->dirty = false;
		h->unknown = hostaddrs_read(h) != 0;
	}
	if (h->unknown)
		return true;
	memset(&key, 0, sizeof(key));
	key.family = a->family;
	memcpy(key.bytes, a->bytes, a->family == AF_INET ? 4 : 16);
	return bsearch(&key, h->addr, h->n, sizeof(*h->addr), addr_cmp) != NULL;
}
