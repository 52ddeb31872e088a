// SPDX-License-Identifier: GPL-2.0-only
/*
 * link.c - a container's interface, its host end and its addresses.
 *
 * As CNI chaining plugins for veth models do (Cilium's generic-veth): the
 * interface CNI_IFNAME inside CNI_NETNS is a veth whose IFLA_LINK is its
 * peer's ifindex here.  An ifindex alone could name a veth of another
 * container whose peer happens to carry the same number, so the host end
 * must point back the same way: its IFLA_LINK is the container interface's
 * ifindex, and its peer's netns id is CNI_NETNS's.  The addresses come from
 * prevResult (the main plugin's word); the MAC from the kernel, and must be
 * the one prevResult names when it names one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni/cni.h"

/* What the kernel says of one link: its type, its peer ifindex, its MAC, its peer's netns id. */
struct link_seen {
	int ifindex, peer, peer_nsid;
	bool veth;
	uint8_t mac[6];
};

static int link_read(struct nl_sock *sk, int ifindex, const char *name, struct link_seen *s)
{
	struct rtnl_link *l = NULL;
	struct nl_addr *a;
	const char *type;
	int32_t nsid;
	int ret;

	ret = rtnl_link_get_kernel(sk, ifindex, name, &l);
	if (ret < 0)
		return ret == -NLE_OBJ_NOTFOUND || ret == -NLE_NODEV ? -ENODEV : -EIO;
	memset(s, 0, sizeof(*s));
	s->ifindex = rtnl_link_get_ifindex(l);
	s->peer = rtnl_link_get_link(l);
	type = rtnl_link_get_type(l);
	s->veth = type && !strcmp(type, "veth");
	s->peer_nsid = rtnl_link_get_link_netnsid(l, &nsid) ? -1 : nsid;
	a = rtnl_link_get_addr(l);
	if (a && nl_addr_get_len(a) == 6)
		memcpy(s->mac, nl_addr_get_binary_addr(a), 6);
	rtnl_link_put(l);
	return 0;
}

static int nsid_cb(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[NETNSA_MAX + 1];

	if (nlmsg_parse(nlmsg_hdr(msg), sizeof(struct rtgenmsg), tb, NETNSA_MAX, NULL) == 0 && tb[NETNSA_NSID])
		*(int *)arg = nla_get_s32(tb[NETNSA_NSID]);
	return NL_OK;
}

/* The id this netns gives the netns of FD (RTM_GETNSID), or -1 when it has none. */
static int netns_id(struct nl_sock *sk, int fd)
{
	struct rtgenmsg g = { .rtgen_family = AF_UNSPEC };
	struct nl_msg *m = nlmsg_alloc_simple(RTM_GETNSID, NLM_F_REQUEST);
	int id = -1;

	if (!m)
		return -1;
	if (nlmsg_append(m, &g, sizeof(g), NLMSG_ALIGNTO) || nla_put_u32(m, NETNSA_FD, (uint32_t)fd) ||
	    nl_send_auto(sk, m) < 0) {
		nlmsg_free(m);
		return -1;
	}
	nlmsg_free(m);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, nsid_cb, &id);
	nl_recvmsgs_default(sk);
	return id;
}

static struct nl_sock *route_socket(void)
{
	struct nl_sock *sk = nl_socket_alloc();

	if (sk && nl_connect(sk, NETLINK_ROUTE)) {
		nl_socket_free(sk);
		sk = NULL;
	}
	return sk;
}

/* CNI_IFNAME as seen inside CNI_NETNS (entered and left again on this thread). */
static int container_side(const struct latch_cni_env *env, int target, struct link_seen *c, struct latch_cni_error *e)
{
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ret = 0;
	struct nl_sock *sk;

	if (self < 0)
		return latch_cni_fail(e, LATCH_CNI_E_IO, -errno, "latch: cannot open this netns: %s", strerror(errno));
	if (setns(target, CLONE_NEWNET)) {
		ret = -errno;
		close(self);
		return latch_cni_fail(e, LATCH_CNI_E_IO, ret, "latch: cannot enter CNI_NETNS %s: %s", env->netns,
				      strerror(-ret));
	}
	sk = route_socket();
	if (!sk)
		ret = latch_cni_fail(e, LATCH_CNI_E_IO, -EIO, "latch: no netlink socket in %s", env->netns);
	else if ((ret = link_read(sk, 0, env->ifname, c)))
		latch_cni_fail(e, LATCH_CNI_E_UNKNOWN, ret, "latch: no interface %s in %s; the main plugin made none",
			       env->ifname, env->netns);
	nl_socket_free(sk);
	/* back home before anything else: the enforcement is attached from here */
	if (setns(self, CLONE_NEWNET)) {
		close(self);
		fprintf(stderr, "latch: cannot return to the runtime's netns: %s\n", strerror(errno));
		_exit(1);
	}
	close(self);
	return ret;
}

int latch_cni_link_find(const struct latch_cni_env *env, const json_t *prev, struct latch_cni_link *l,
			struct latch_cni_error *e)
{
	int target, ret, nsid;
	struct link_seen c, h;
	struct nl_sock *sk;
	uint8_t prev_mac[6];

	memset(l, 0, sizeof(*l));
	if ((ret = latch_cni_prev_addrs(env, prev, l, e)))
		return ret;
	memcpy(prev_mac, l->mac, 6);
	target = open(env->netns, O_RDONLY | O_CLOEXEC);
	if (target < 0)
		return latch_cni_fail(e, LATCH_CNI_E_UNKNOWN, -errno, "latch: CNI_NETNS %s: %s", env->netns,
				      strerror(errno));
	ret = container_side(env, target, &c, e);
	if (!ret && !c.veth)
		ret = latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EOPNOTSUPP,
				     "latch: %s in %s is no veth; latch-cni chains after veth plugins (bridge, ptp)",
				     env->ifname, env->netns);
	sk = ret ? NULL : route_socket();
	if (!ret && !sk)
		ret = latch_cni_fail(e, LATCH_CNI_E_IO, -EIO, "latch: no netlink socket");
	if (!ret && link_read(sk, c.peer, NULL, &h))
		ret = latch_cni_fail(e, LATCH_CNI_E_UNKNOWN, -ENODEV,
				     "latch: the peer of %s (ifindex %d) is not in this netns; run latch-cni in the "
				     "runtime's netns, after the main plugin",
				     env->ifname, c.peer);
	if (!ret) {
		nsid = netns_id(sk, target);
		if (!h.veth || h.peer != c.ifindex || nsid < 0 || h.peer_nsid != nsid)
			ret = latch_cni_fail(e, LATCH_CNI_E_UNKNOWN, -ENODEV,
					     "latch: ifindex %d here is not the peer of %s in %s (its peer: ifindex "
					     "%d, netns id %d; wanted %d, %d)",
					     h.ifindex, env->ifname, env->netns, h.peer, h.peer_nsid, c.ifindex, nsid);
	}
	nl_socket_free(sk);
	close(target);
	if (ret)
		return ret;
	if (memcmp(prev_mac, "\0\0\0\0\0\0", 6) && memcmp(prev_mac, c.mac, 6))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: prevResult's mac for %s is not the one the kernel has; the main "
				      "plugin's result is stale",
				      env->ifname);
	memcpy(l->mac, c.mac, 6);
	l->host_ifindex = h.ifindex;
	if (!if_indextoname(h.ifindex, l->host_ifname))
		return latch_cni_fail(e, LATCH_CNI_E_UNKNOWN, -ENODEV, "latch: ifindex %d vanished", h.ifindex);
	return 0;
}
