// SPDX-License-Identifier: GPL-2.0-only
/*
 * testnet.c - a private network namespace for BPF_PROG_TEST_RUN.
 *
 * The from-guest program asks the kernel's routing whether the host would
 * forward a packet (bpf_fib_lookup), and a test run judges a frame as if it
 * arrived on lo of the caller's namespace.  Run in the host's namespace, a
 * verdict would then depend on that host's routes and forwarding switch.
 * latch_testnet_enter() gives the caller a namespace of its own in which
 * every verdict is known: forwarding on, every destination routed out of a
 * veth (IPv4 and IPv6), and the given addresses on that veth.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader/sandbox.h"

static int write_sysctl(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -errno;
	ok = write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	close(fd);
	return ok ? 0 : -EIO;
}

static int link_up(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = NULL, *change = rtnl_link_alloc();
	int r = rtnl_link_get_kernel(sk, 0, name, &l);

	if (!r && change) {
		rtnl_link_set_flags(change, IFF_UP);
		r = rtnl_link_change(sk, l, change, 0);
	}
	rtnl_link_put(l);
	rtnl_link_put(change);
	return r;
}

static int route_default(struct nl_sock *sk, int family, int ifindex)
{
	struct rtnl_route *rt = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *dst = nl_addr_build(family, NULL, 0);
	int r = -ENOMEM;

	if (rt && nh && dst) {
		nl_addr_set_prefixlen(dst, 0);
		rtnl_route_set_family(rt, family);
		rtnl_route_set_dst(rt, dst);
		rtnl_route_set_scope(rt, RT_SCOPE_LINK);
		rtnl_route_nh_set_ifindex(nh, ifindex);
		rtnl_route_add_nexthop(rt, nh);
		nh = NULL; /* the route owns it now */
		r = rtnl_route_add(sk, rt, NLM_F_CREATE);
	}
	nl_addr_put(dst);
	if (nh)
		rtnl_route_nh_free(nh);
	rtnl_route_put(rt);
	return r;
}

static int add_local(struct nl_sock *sk, int ifindex, const char *text)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = NULL;
	int r = nl_addr_parse(text, AF_UNSPEC, &local);

	if (!r && a) {
		rtnl_addr_set_ifindex(a, ifindex);
		rtnl_addr_set_local(a, local);
		rtnl_addr_set_flags(a, IFA_F_NODAD);
		r = rtnl_addr_add(sk, a, 0);
	}
	nl_addr_put(local);
	rtnl_addr_put(a);
	return r;
}

int latch_testnet_enter(const char *const *local_addrs, int n, char *err, size_t errlen)
{
	struct nl_sock *sk;
	int r, ifindex;

	if (unshare(CLONE_NEWNET))
		return latch_errf(err, errlen, -errno, "unshare(CLONE_NEWNET): %s (run as root)", strerror(errno));
	r = write_sysctl("/proc/sys/net/ipv4/ip_forward", "1");
	if (!r)
		r = write_sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1");
	if (r)
		return latch_errf(err, errlen, r, "cannot turn forwarding on in the test namespace: %s", strerror(-r));
	sk = nl_socket_alloc();
	if (!sk)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	r = nl_connect(sk, NETLINK_ROUTE);
	if (!r)
		r = link_up(sk, "lo");
	if (!r)
		r = rtnl_link_veth_add(sk, "lt-test0", "lt-test1", getpid());
	if (!r)
		r = link_up(sk, "lt-test1");
	if (!r)
		r = link_up(sk, "lt-test0");
	ifindex = if_nametoindex("lt-test0");
	if (!r)
		r = route_default(sk, AF_INET, ifindex);
	if (!r)
		r = route_default(sk, AF_INET6, ifindex);
	for (int i = 0; i < n && !r; i++)
		r = add_local(sk, ifindex, local_addrs[i]);
	nl_socket_free(sk);
	if (r)
		return latch_errf(err, errlen, -EIO, "cannot set up the test namespace: %s", nl_geterror(r));
	return 0;
}
