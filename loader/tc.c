// SPDX-License-Identifier: GPL-2.0-only
/*
 * tc.c - clsact hook, latch's cls_bpf filters, and reading every filter back.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <string.h>

#include "loader/sandbox.h"
#include "loader/tc.h"

static void hook_init(struct bpf_tc_hook *h, int ifindex, enum bpf_tc_attach_point where)
{
	memset(h, 0, sizeof(*h));
	h->sz = sizeof(*h);
	h->ifindex = ifindex;
	h->attach_point = where;
}

int latch_tc_hook_create(int ifindex, bool *created)
{
	struct bpf_tc_hook h;
	int err;

	*created = false;
	/* Look first: creating over an existing clsact makes the kernel complain aloud. */
	err = latch_tc_list(ifindex, false, NULL, 0);
	if (err >= 0)
		return 0;
	if (err != -ENOENT)
		return err;
	hook_init(&h, ifindex, BPF_TC_INGRESS | BPF_TC_EGRESS);
	err = bpf_tc_hook_create(&h);
	*created = err == 0;
	/* clsact already there (someone else's, or ours from before): use it */
	return err == -EEXIST ? 0 : err;
}

int latch_tc_hook_destroy(int ifindex)
{
	struct bpf_tc_hook h;

	hook_init(&h, ifindex, BPF_TC_INGRESS | BPF_TC_EGRESS);
	return bpf_tc_hook_destroy(&h);
}

int latch_tc_attach(int ifindex, bool egress, int prog_fd, bool replace)
{
	struct bpf_tc_hook h;
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = LATCH_TC_HANDLE, .priority = LATCH_TC_PRIORITY, .prog_fd = prog_fd,
		    .flags = replace ? BPF_TC_F_REPLACE : 0);

	hook_init(&h, ifindex, egress ? BPF_TC_EGRESS : BPF_TC_INGRESS);
	return bpf_tc_attach(&h, &o);
}

int latch_tc_detach(int ifindex, bool egress)
{
	struct bpf_tc_hook h;
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = LATCH_TC_HANDLE, .priority = LATCH_TC_PRIORITY);

	hook_init(&h, ifindex, egress ? BPF_TC_EGRESS : BPF_TC_INGRESS);
	return bpf_tc_detach(&h, &o);
}

struct dump_ctx {
	struct latch_tc_filter *out;
	int max;
	int n;
};

static int on_filter(struct nl_msg *msg, void *arg)
{
	struct dump_ctx *d = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct tcmsg *t = nlmsg_data(nlh);
	struct nlattr *tb[TCA_MAX + 1], *ob[TCA_BPF_MAX + 1];
	struct latch_tc_filter f = { 0 };

	if (nlh->nlmsg_type != RTM_NEWTFILTER)
		return NL_OK;
	if (nlmsg_parse(nlh, sizeof(*t), tb, TCA_MAX, NULL) < 0)
		return NL_OK;
	/* The kernel reports a filter's chain head too: it has no handle. */
	if (!t->tcm_handle)
		return NL_OK;
	f.prio = TC_H_MAJ(t->tcm_info) >> 16;
	f.handle = t->tcm_handle;
	if (tb[TCA_KIND])
		nla_strlcpy(f.kind, tb[TCA_KIND], sizeof(f.kind));
	if (!strcmp(f.kind, "bpf") && tb[TCA_OPTIONS] &&
	    nla_parse_nested(ob, TCA_BPF_MAX, tb[TCA_OPTIONS], NULL) == 0) {
		if (ob[TCA_BPF_ID])
			f.prog_id = nla_get_u32(ob[TCA_BPF_ID]);
		if (ob[TCA_BPF_FLAGS])
			f.direct_action = nla_get_u32(ob[TCA_BPF_FLAGS]) & TCA_BPF_FLAG_ACT_DIRECT;
	}
	if (d->n < d->max) {
		/* keep run order: insertion sort by priority */
		int i = d->n;

		while (i > 0 && d->out[i - 1].prio > f.prio) {
			d->out[i] = d->out[i - 1];
			i--;
		}
		d->out[i] = f;
	}
	d->n++;
	return NL_OK;
}

struct qdisc_match {
	int ifindex;
	int found;
};

static int on_qdisc(struct nl_msg *m, void *arg)
{
	struct qdisc_match *q = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(m);
	struct tcmsg *t = nlmsg_data(nlh);

	if (nlh->nlmsg_type == RTM_NEWQDISC && t->tcm_ifindex == q->ifindex && t->tcm_parent == TC_H_CLSACT)
		q->found++;
	return NL_OK;
}

/* A filter dump on a missing clsact succeeds empty, so ask for the qdisc. */
static int clsact_present(struct nl_sock *sk, int ifindex)
{
	struct tcmsg t = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETQDISC, NLM_F_DUMP);
	struct qdisc_match q = { .ifindex = ifindex };
	struct nl_cb *cb;
	int err;

	if (!msg)
		return -ENOMEM;
	nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO);
	err = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (err < 0)
		return -EIO;
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_qdisc, &q);
	err = nl_recvmsgs(sk, cb);
	nl_cb_put(cb);
	return err < 0 ? -EIO : q.found;
}

int latch_tc_list(int ifindex, bool egress, struct latch_tc_filter *out, int max)
{
	struct tcmsg t = {
		.tcm_family = AF_UNSPEC,
		.tcm_ifindex = ifindex,
		.tcm_parent = TC_H_MAKE(TC_H_CLSACT, egress ? TC_H_MIN_EGRESS : TC_H_MIN_INGRESS),
	};
	struct dump_ctx d = { .out = out, .max = max };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = NULL;
	struct nl_cb *cb = NULL;
	int err;

	if (!sk)
		return -ENOMEM;
	err = nl_connect(sk, NETLINK_ROUTE);
	if (err < 0) {
		err = -EIO;
		goto out;
	}
	err = clsact_present(sk, ifindex);
	if (err <= 0) {
		err = err ? err : -ENOENT;
		goto out;
	}
	msg = nlmsg_alloc_simple(RTM_GETTFILTER, NLM_F_DUMP);
	if (!msg) {
		err = -ENOMEM;
		goto out;
	}
	nlmsg_append(msg, &t, sizeof(t), NLMSG_ALIGNTO);
	if (nl_send_auto(sk, msg) < 0) {
		err = -EIO;
		goto out;
	}
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb) {
		err = -ENOMEM;
		goto out;
	}
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_filter, &d);
	err = nl_recvmsgs(sk, cb) < 0 ? -EIO : d.n;
out:
	nl_cb_put(cb);
	nlmsg_free(msg);
	nl_socket_free(sk);
	return err;
}
