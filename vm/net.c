// SPDX-License-Identifier: GPL-2.0-only
/*
 * net.c - tap, addresses, routing table and rule of one VM sandbox,
 * through libnl-route; the masquerade is masq.c's (libnftables).
 *
 * The tap is made with TUNSETIFF + TUNSETPERSIST (the one thing rtnetlink
 * can't do for a tap) and everything after that is netlink.  "Already there"
 * counts as success everywhere, so `up` after a crash and `destroy` after a
 * half-finished `up` both converge.  A fib rule is added with NLM_F_EXCL,
 * because without it the kernel happily adds a second identical rule.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/if_tun.h>
#include <linux/ip.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/net.h"

/* libnl's codes are not errnos; keep the few that mean something to callers. */
static int nl2errno(int nle)
{
	switch (-nle) {
	case NLE_EXIST:
		return -EEXIST;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_NODEV:
		return -ENODEV;
	case NLE_PERM:
		return -EPERM;
	case NLE_NOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

static struct nl_sock *nl_open(char *err, size_t errlen)
{
	struct nl_sock *sk = nl_socket_alloc();
	int r;

	if (!sk) {
		latch_errf(err, errlen, 0, "out of memory");
		return NULL;
	}
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		latch_errf(err, errlen, 0, "rtnetlink: %s", nl_geterror(r));
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

/* An nl_addr for a latch_addr with a prefix length. */
static struct nl_addr *mkaddr(const struct latch_addr *a, int prefixlen)
{
	struct nl_addr *n = nl_addr_build(a->family, a->bytes, a->family == AF_INET ? 4 : 16);

	if (n)
		nl_addr_set_prefixlen(n, prefixlen);
	return n;
}

static struct nl_addr *mkdefault(int family)
{
	struct latch_addr z = { .family = family };

	return mkaddr(&z, 0);
}

bool latch_net_tap_exists(const char *tap)
{
	return if_nametoindex(tap) != 0;
}

static bool is_tap(const char *dev)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/class/net/%s/tun_flags", dev);
	return stat(path, &st) == 0;
}

int latch_net_tap_create(const char *tap, bool *created, char *err, size_t errlen)
{
	struct ifreq ifr = { 0 };
	int fd, ret;

	*created = false;
	if (strlen(tap) >= IF_NAMESIZE)
		return latch_errf(err, errlen, -ENAMETOOLONG, "tap name '%s' is longer than %d", tap, IF_NAMESIZE - 1);
	if (latch_net_tap_exists(tap)) {
		if (!is_tap(tap))
			return latch_errf(err, errlen, -EEXIST,
					  "device %s exists and is not a tap; latch will not take it over", tap);
		return 0;
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "/dev/net/tun: %s (modprobe tun)", strerror(errno));
	/* vnet_hdr is negotiated per attach by libvirt; no multiqueue: libvirt opens one queue */
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	strcpy(ifr.ifr_name, tap);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		ret = -errno;
		close(fd);
		return latch_errf(err, errlen, ret, "cannot create tap %s: %s", tap, strerror(-ret));
	}
	if (ioctl(fd, TUNSETPERSIST, 1) < 0) {
		ret = -errno;
		close(fd); /* not persistent yet: closing removes it */
		return latch_errf(err, errlen, ret, "cannot make tap %s persistent: %s", tap, strerror(-ret));
	}
	close(fd);
	*created = true;
	return 0;
}

int latch_net_tap_delete(const char *tap, char *err, size_t errlen)
{
	struct nl_sock *sk;
	struct rtnl_link *l;
	int r;

	if (!latch_net_tap_exists(tap))
		return 0;
	if (!is_tap(tap))
		return latch_errf(err, errlen, -EEXIST, "device %s is not a tap; not deleting it", tap);
	sk = nl_open(err, errlen);
	if (!sk)
		return -EIO;
	l = rtnl_link_alloc();
	rtnl_link_set_name(l, tap);
	r = rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	nl_socket_free(sk);
	if (r < 0 && -r != NLE_NODEV && -r != NLE_OBJ_NOTFOUND)
		return latch_errf(err, errlen, nl2errno(r), "cannot delete %s: %s", tap, nl_geterror(r));
	return 0;
}

/* /proc/sys/net/ipv6/conf/DEV/KEY: libnl 3.7 has no setter for inet6 devconf. */
void vm_net_sysctl_dev(const char *family, const char *dev, const char *key, const char *val)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s", family, dev, key);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, val, strlen(val)) < 0) {
		/* best effort: the filter drops what these would act on anyway */
	}
	close(fd);
}

static int link_up(struct nl_sock *sk, const char *dev, bool forward, char *err, size_t errlen)
{
	struct rtnl_link *l = NULL, *ch;
	int r;

	r = rtnl_link_get_kernel(sk, 0, dev, &l);
	if (r < 0)
		return latch_errf(err, errlen, nl2errno(r), "%s: %s", dev, nl_geterror(r));
	ch = rtnl_link_alloc();
	rtnl_link_set_flags(ch, IFF_UP);
	if (forward)
		rtnl_link_inet_set_conf(ch, IPV4_DEVCONF_FORWARDING, 1);
	/* the guest is no router and no redirector of ours */
	rtnl_link_inet_set_conf(ch, IPV4_DEVCONF_ACCEPT_REDIRECTS, 0);
	rtnl_link_inet_set_conf(ch, IPV4_DEVCONF_SEND_REDIRECTS, 0);
	r = rtnl_link_change(sk, l, ch, 0);
	rtnl_link_put(ch);
	rtnl_link_put(l);
	if (r < 0)
		return latch_errf(err, errlen, nl2errno(r), "cannot bring %s up: %s", dev, nl_geterror(r));
	return 0;
}

static int addr_add(struct nl_sock *sk, int ifindex, const struct latch_addr *a, int len, char *err, size_t errlen)
{
	struct rtnl_addr *ad = rtnl_addr_alloc();
	struct nl_addr *na = mkaddr(a, len);
	int r;

	if (!ad || !na) {
		rtnl_addr_put(ad);
		nl_addr_put(na);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	rtnl_addr_set_ifindex(ad, ifindex);
	rtnl_addr_set_local(ad, na);
	if (a->family == AF_INET6)
		rtnl_addr_set_flags(ad, IFA_F_NODAD);
	r = rtnl_addr_add(sk, ad, 0);
	rtnl_addr_put(ad);
	nl_addr_put(na);
	if (r < 0 && -r != NLE_EXIST) {
		char buf[INET6_ADDRSTRLEN];

		inet_ntop(a->family, a->bytes, buf, sizeof(buf));
		return latch_errf(err, errlen, nl2errno(r), "cannot add %s/%d: %s", buf, len, nl_geterror(r));
	}
	return 0;
}

/*
 * One route in the sandbox's table.  dst NULL is the default route; ifindex 0
 * with no gateway makes it `unreachable`.
 */
static struct rtnl_route *mkroute(int family, uint32_t table, const struct latch_addr *dst, int dstlen, int ifindex,
				  const struct latch_addr *gw)
{
	struct rtnl_route *rt = rtnl_route_alloc();
	struct nl_addr *d = dst ? mkaddr(dst, dstlen) : mkdefault(family);

	if (!rt || !d) {
		rtnl_route_put(rt);
		nl_addr_put(d);
		return NULL;
	}
	rtnl_route_set_family(rt, family);
	rtnl_route_set_table(rt, table);
	rtnl_route_set_dst(rt, d);
	nl_addr_put(d);
	rtnl_route_set_protocol(rt, RTPROT_STATIC);
	if (!ifindex) {
		rtnl_route_set_type(rt, RTN_UNREACHABLE);
		rtnl_route_set_scope(rt, RT_SCOPE_UNIVERSE);
		return rt;
	}
	rtnl_route_set_type(rt, RTN_UNICAST);
	rtnl_route_set_scope(rt, gw && gw->family ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK);
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();

	if (!nh) {
		rtnl_route_put(rt);
		return NULL;
	}
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (gw && gw->family) {
		struct nl_addr *g = mkaddr(gw, gw->family == AF_INET ? 32 : 128);

		if (g) {
			rtnl_route_nh_set_gateway(nh, g);
			nl_addr_put(g);
		}
	}
	rtnl_route_add_nexthop(rt, nh);
	return rt;
}

static int route_apply(struct nl_sock *sk, struct rtnl_route *rt, bool add)
{
	int r;

	if (!rt)
		return -NLE_NOMEM;
	r = add ? rtnl_route_add(sk, rt, NLM_F_REPLACE) : rtnl_route_delete(sk, rt, 0);
	rtnl_route_put(rt);
	if (!add && r < 0 && (-r == NLE_OBJ_NOTFOUND || -r == NLE_NODEV))
		r = 0;
	return r;
}

static struct rtnl_rule *mkrule(const struct latch_net_opts *o, int family)
{
	struct rtnl_rule *ru = rtnl_rule_alloc();
	struct nl_addr *src = family == AF_INET ? mkaddr(&o->subnet4, 30) : mkaddr(&o->subnet6, 64);

	if (!ru || !src) {
		rtnl_rule_put(ru);
		nl_addr_put(src);
		return NULL;
	}
	rtnl_rule_set_family(ru, family);
	rtnl_rule_set_src(ru, src);
	nl_addr_put(src);
	rtnl_rule_set_table(ru, o->table);
	rtnl_rule_set_prio(ru, o->rule_priority);
	rtnl_rule_set_action(ru, FR_ACT_TO_TBL);
	return ru;
}

static int rule_apply(struct nl_sock *sk, const struct latch_net_opts *o, int family, bool add)
{
	struct rtnl_rule *ru = mkrule(o, family);
	int r;

	if (!ru)
		return -NLE_NOMEM;
	if (add) {
		r = rtnl_rule_add(sk, ru, NLM_F_EXCL);
		if (r < 0 && -r == NLE_EXIST)
			r = 0;
	} else {
		/* delete every copy, in case something added one without EXCL */
		for (int i = 0; i < 16; i++) {
			r = rtnl_rule_delete(sk, ru, 0);
			if (r < 0)
				break;
		}
		if (r < 0 && (-r == NLE_OBJ_NOTFOUND || -r == NLE_NOADDR || -r == NLE_FAILURE))
			r = 0;
	}
	rtnl_rule_put(ru);
	return r;
}

static int routes(struct nl_sock *sk, const struct latch_net_opts *o, int tapidx, int upidx, bool add)
{
	int r, ret = 0;

	r = route_apply(sk, mkroute(AF_INET, o->table, &o->subnet4, 30, tapidx, NULL), add);
	ret = ret ?: r;
	r = route_apply(sk, mkroute(AF_INET, o->table, NULL, 0, upidx, upidx ? &o->gateway4 : NULL), add);
	ret = ret ?: r;
	if (o->subnet6.family) {
		r = route_apply(sk, mkroute(AF_INET6, o->table, &o->subnet6, 64, tapidx, NULL), add);
		ret = ret ?: r;
		/* latch enables no IPv6 forwarding: without a gateway6 the v6 default stays unreachable */
		int up6 = o->gateway6.family ? upidx : 0;

		r = route_apply(sk, mkroute(AF_INET6, o->table, NULL, 0, up6, up6 ? &o->gateway6 : NULL), add);
		ret = ret ?: r;
	}
	return ret;
}

static void down_quiet(struct nl_sock *sk, const struct latch_net_opts *o)
{
	char e[LATCH_ERR_MAX];
	int upidx = *o->uplink ? (int)if_nametoindex(o->uplink) : 0;

	rule_apply(sk, o, AF_INET, false);
	if (o->subnet6.family)
		rule_apply(sk, o, AF_INET6, false);
	routes(sk, o, if_nametoindex(o->tap), upidx, false);
	if (*o->uplink)
		vm_net_masq_del(o, e, sizeof(e));
}

int latch_net_up(const struct latch_net_opts *o, char *err, size_t errlen)
{
	int tapidx = if_nametoindex(o->tap), upidx = 0, r, ret;
	bool guard_uplink = false;
	struct nl_sock *sk;

	if (!tapidx)
		return latch_errf(err, errlen, -ENODEV, "tap %s is gone", o->tap);
	if (*o->uplink && !(upidx = if_nametoindex(o->uplink)))
		return latch_errf(err, errlen, -ENODEV, "uplink '%s' (latch.conf) does not exist on this host",
				  o->uplink);
	sk = nl_open(err, errlen);
	if (!sk)
		return -EIO;
	vm_net_sysctl_dev("ipv6", o->tap, "accept_ra", "0");
	vm_net_sysctl_dev("ipv6", o->tap, "autoconf", "0");
	vm_net_sysctl_dev("ipv6", o->tap, "accept_redirects", "0");
	ret = link_up(sk, o->tap, upidx != 0, err, errlen);
	if (ret)
		goto fail;
	if (upidx) {
		/* replies come in on the uplink and are forwarded to the tap */
		guard_uplink = !vm_net_forwarding_on(o->uplink);
		ret = link_up(sk, o->uplink, true, err, errlen);
		if (ret)
			goto fail;
	}
	ret = addr_add(sk, tapidx, &o->host4, 30, err, errlen);
	if (!ret && o->subnet6.family)
		ret = addr_add(sk, tapidx, &o->host6, 64, err, errlen);
	if (ret)
		goto fail;
	r = routes(sk, o, tapidx, upidx, true);
	if (r < 0) {
		ret = latch_errf(err, errlen, nl2errno(r), "cannot add routes to table %u: %s", o->table,
				 nl_geterror(r));
		goto fail;
	}
	r = rule_apply(sk, o, AF_INET, true);
	if (!r && o->subnet6.family)
		r = rule_apply(sk, o, AF_INET6, true);
	if (r < 0) {
		ret = latch_errf(err, errlen, nl2errno(r), "cannot add rule from %s lookup %u: %s", o->tap, o->table,
				 nl_geterror(r));
		goto fail;
	}
	if (upidx) {
		ret = vm_net_masq_add(o, guard_uplink, err, errlen);
		if (ret)
			goto fail;
	}
	nl_socket_free(sk);
	return 0;
fail:
	down_quiet(sk, o);
	nl_socket_free(sk);
	return ret;
}

int latch_net_down(const struct latch_net_opts *o, char *err, size_t errlen)
{
	int upidx = *o->uplink ? (int)if_nametoindex(o->uplink) : 0;
	struct nl_sock *sk = nl_open(err, errlen);
	int r, ret = 0;

	if (!sk)
		return -EIO;
	r = rule_apply(sk, o, AF_INET, false);
	if (!r && o->subnet6.family)
		r = rule_apply(sk, o, AF_INET6, false);
	if (r < 0)
		ret = latch_errf(err, errlen, nl2errno(r), "cannot remove the rule for table %u: %s", o->table,
				 nl_geterror(r));
	/* routes via a device that is gone went with it */
	r = routes(sk, o, if_nametoindex(o->tap), upidx, false);
	if (r < 0 && !ret)
		ret = latch_errf(err, errlen, nl2errno(r), "cannot remove routes of table %u: %s", o->table,
				 nl_geterror(r));
	if (*o->uplink) {
		r = vm_net_masq_del(o, err, errlen);
		ret = ret ?: r;
	}
	nl_socket_free(sk);
	return ret;
}

/* --- overlap with the host's own networks -------------------------------- */

static bool overlaps(const struct latch_addr *a, int alen, struct nl_addr *b)
{
	int blen = nl_addr_get_prefixlen(b), n = alen < blen ? alen : blen;
	const uint8_t *bb = nl_addr_get_binary_addr(b);

	if (nl_addr_get_family(b) != a->family)
		return false;
	for (int i = 0; i < n; i++) {
		uint8_t m = 0x80 >> (i % 8);

		if ((a->bytes[i / 8] & m) != (bb[i / 8] & m))
			return false;
	}
	return true;
}

struct free_ctx {
	const struct latch_addr *subnet;
	int len;
	struct nl_cache *links;
	char what[128];
};

static void addr_free_cb(struct nl_object *obj, void *arg)
{
	struct free_ctx *c = arg;
	struct rtnl_addr *ad = (struct rtnl_addr *)obj;
	struct nl_addr *local = rtnl_addr_get_local(ad);
	char dev[IF_NAMESIZE] = "?", buf[INET6_ADDRSTRLEN + 8];

	if (*c->what || !local)
		return;
	/* the address's own network: 192.0.2.2/24 covers 192.0.2.0/24 */
	if (!overlaps(c->subnet, c->len, local))
		return;
	rtnl_link_i2name(c->links, rtnl_addr_get_ifindex(ad), dev, sizeof(dev));
	nl_addr2str(local, buf, sizeof(buf));
	snprintf(c->what, sizeof(c->what), "address %s on %s", buf, dev);
}

static void route_free_cb(struct nl_object *obj, void *arg)
{
	struct free_ctx *c = arg;
	struct rtnl_route *rt = (struct rtnl_route *)obj;
	struct nl_addr *dst = rtnl_route_get_dst(rt);
	char buf[INET6_ADDRSTRLEN + 8];

	if (*c->what || !dst || nl_addr_get_prefixlen(dst) == 0 || rtnl_route_get_table(rt) != RT_TABLE_MAIN)
		return;
	if (rtnl_route_get_type(rt) != RTN_UNICAST || !overlaps(c->subnet, c->len, dst))
		return;
	nl_addr2str(dst, buf, sizeof(buf));
	snprintf(c->what, sizeof(c->what), "route %s in the main table", buf);
}

int latch_net_check_free(const struct latch_addr *subnet, int len, char *err, size_t errlen)
{
	struct free_ctx c = { .subnet = subnet, .len = len };
	struct nl_cache *cache;
	struct nl_sock *sk = nl_open(err, errlen);
	char a[INET6_ADDRSTRLEN];
	int r;

	if (!sk)
		return -EIO;
	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &c.links);
	if (r < 0)
		goto nlerr;
	r = rtnl_addr_alloc_cache(sk, &cache);
	if (r < 0)
		goto nlerr;
	nl_cache_foreach(cache, addr_free_cb, &c);
	nl_cache_free(cache);
	r = rtnl_route_alloc_cache(sk, subnet->family, 0, &cache);
	if (r < 0)
		goto nlerr;
	nl_cache_foreach(cache, route_free_cb, &c);
	nl_cache_free(cache);
	nl_cache_free(c.links);
	nl_socket_free(sk);
	if (!*c.what)
		return 0;
	inet_ntop(subnet->family, subnet->bytes, a, sizeof(a));
	return latch_errf(err, errlen, -EADDRINUSE,
			  "%s/%d overlaps the host's %s; give latch.conf a 'pool' this host does not use", a, len,
			  c.what);
nlerr:
	if (c.links)
		nl_cache_free(c.links);
	nl_socket_free(sk);
	return latch_errf(err, errlen, nl2errno(r), "rtnetlink: %s", nl_geterror(r));
}

/* --- observation --------------------------------------------------------- */

struct obs_ctx {
	const struct latch_net_opts *o;
	struct latch_net_observed *obs;
};

static void rule_cb(struct nl_object *obj, void *arg)
{
	struct obs_ctx *c = arg;
	struct rtnl_rule *ru = (struct rtnl_rule *)obj;
	struct nl_addr *src = rtnl_rule_get_src(ru);
	int fam = rtnl_rule_get_family(ru);
	const struct latch_addr *want = fam == AF_INET ? &c->o->subnet4 : &c->o->subnet6;

	if (rtnl_rule_get_table(ru) != c->o->table || !src || !want->family)
		return;
	if (nl_addr_get_prefixlen(src) != (fam == AF_INET ? 30 : 64) ||
	    memcmp(nl_addr_get_binary_addr(src), want->bytes, fam == AF_INET ? 4 : 16))
		return;
	if (fam == AF_INET)
		c->obs->rule4 = true;
	else
		c->obs->rule6 = true;
}

static void route_cb(struct nl_object *obj, void *arg)
{
	struct obs_ctx *c = arg;
	struct rtnl_route *rt = (struct rtnl_route *)obj;
	struct nl_addr *dst = rtnl_route_get_dst(rt);

	if (rtnl_route_get_table(rt) != c->o->table || rtnl_route_get_family(rt) != AF_INET)
		return;
	if (dst && nl_addr_get_prefixlen(dst) != 0)
		return;
	c->obs->default4 = true;
	c->obs->unreachable4 = rtnl_route_get_type(rt) == RTN_UNREACHABLE;
}

int latch_net_observe(const struct latch_net_opts *o, struct latch_net_observed *obs)
{
	struct obs_ctx c = { o, obs };
	struct nl_cache *cache;
	struct rtnl_link *l = NULL;
	char e[LATCH_ERR_MAX];
	struct nl_sock *sk;

	memset(obs, 0, sizeof(*obs));
	sk = nl_open(e, sizeof(e));
	if (!sk)
		return -EIO;
	if (rtnl_link_get_kernel(sk, 0, o->tap, &l) == 0) {
		obs->tap = true;
		obs->up = rtnl_link_get_flags(l) & IFF_UP;
		rtnl_link_put(l);
	}
	if (rtnl_rule_alloc_cache(sk, AF_UNSPEC, &cache) == 0) {
		nl_cache_foreach(cache, rule_cb, &c);
		nl_cache_free(cache);
	}
	if (rtnl_route_alloc_cache(sk, AF_INET, 0, &cache) == 0) {
		nl_cache_foreach(cache, route_cb, &c);
		nl_cache_free(cache);
	}
	if (*o->uplink && vm_net_nft_table_exists()) {
		struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
		char a[INET6_ADDRSTRLEN], cmd[256];

		if (nft) {
			nft_ctx_buffer_output(nft);
			nft_ctx_buffer_error(nft);
			inet_ntop(AF_INET, &o->subnet4.v4, a, sizeof(a));
			snprintf(cmd, sizeof(cmd), "get element inet " LATCH_NFT_TABLE " masq4 { %s/30 . \"%s\" }", a,
				 o->uplink);
			obs->masq4 = nft_run_cmd_from_buffer(nft, cmd) == 0;
			nft_ctx_free(nft);
		}
	}
	nl_socket_free(sk);
	return 0;
}
