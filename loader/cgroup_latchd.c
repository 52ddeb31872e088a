// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_latchd.c - latchd confined by the room programs: latchd is a room
 * whose policy latchd writes itself (latchd/confine.c), in
 * <cgroup2>/$LATCH_CGROUP/latchd, with LATCH_CFG_LATCHD in its config (its
 * listeners' answers pass; what it opens goes by the policy alone) and the
 * gate of the room services on its ingress.  Also what `latch status` and
 * `latch doctor` read back of it, and the route question latchd asks
 * before it lets itself reach an address (the host's own, its LAN).
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/cgroup_int.h"

int latch_cg_dir(char *buf, size_t len, const char *sub)
{
	const char *name = getenv("LATCH_CGROUP");
	char line[1024], dir[512] = "", type[64];
	FILE *f = fopen("/proc/mounts", "re");
	int n;

	if (!name || !*name || latch_parse_name(name, NULL, 0))
		name = "latch";
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %511s %63s", dir, type) == 2 && !strcmp(type, "cgroup2"))
			break;
		else
			*dir = 0;
	if (f)
		fclose(f);
	if (!*dir)
		return -ENOENT;
	n = snprintf(buf, len, "%s/%s%s%s", dir, name, sub ? "/" : "", sub ? sub : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct latch_cg_room *latch_cg_latchd_new(struct latch_cg_set *set, int cgroup_fd, const uint16_t *ports, int n_ports,
					  char *err, size_t errlen)
{
	struct latch_sandbox_opts o = { .name = LATCH_CG_LATCHD };
	struct latch_cg_room *room;
	struct latch_config cfg;

	if (n_ports > LATCH_HOST_PORTS_MAX) {
		latch_errf(err, errlen, -E2BIG, "latchd listens on more than %d ports", LATCH_HOST_PORTS_MAX);
		errno = E2BIG;
		return NULL;
	}
	memcpy(o.host_ports, ports, n_ports * sizeof(*ports));
	o.n_host_ports = n_ports;
	latch_cg_room_sweep(set, LATCH_CG_LATCHD); /* the slot of a latchd before this one */
	room = latch_cg_room_new(set, &o, cgroup_fd, err, errlen);
	if (!room)
		return NULL;
	if (latch_sandbox_read_config(room->sb, &cfg) ||
	    (cfg.flags |= LATCH_CFG_LATCHD, latch_sandbox_write_config(room->sb, &cfg))) {
		latch_errf(err, errlen, -errno, "cannot mark latchd's slot: %s", strerror(errno));
		latch_cg_room_remove(room);
		errno = EIO;
		return NULL;
	}
	return room;
}

/* The pids in a cgroup directory's cgroup.procs, up to max; how many there are, or -errno. */
static int cgroup_pids(const char *dir, int *pids, int max)
{
	char path[PATH_MAX + 16];
	FILE *f;
	int n = 0, pid;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fscanf(f, "%d", &pid) == 1) {
		if (n < max)
			pids[n] = pid;
		n++;
	}
	fclose(f);
	return n;
}

int latch_cg_latchd_observe(struct latch_cg_latchd *out, char *err, size_t errlen)
{
	struct latch_cg_set *set;
	struct latch_cg_room room = { 0 };
	struct latch_room_owner owner;
	struct stat st;
	int fd[LATCH_MAP_COUNT], rc = 0;
	uint64_t gate[LATCH_ROOM_GATE_SLOTS];
	__u32 ids[8], cnt = 8, slot;

	memset(out, 0, sizeof(*out));
	if (latch_cg_dir(out->dir, sizeof(out->dir), "latchd"))
		return latch_errf(err, errlen, -ENOENT, "no cgroup2 mount: latchd cannot be confined here");
	room.cgroup_fd = open(out->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (room.cgroup_fd < 0 || fstat(room.cgroup_fd, &st)) {
		snprintf(out->why, sizeof(out->why), "%.120s does not exist (latchd never ran confined)", out->dir);
		goto out;
	}
	out->exists = true;
	out->n_pids = cgroup_pids(out->dir, out->pids, 8);
	set = latch_cg_open(err, errlen);
	if (!set) {
		rc = -EINVAL;
		goto out;
	}
	room.set = set;
	room.id = st.st_ino;
	snprintf(room.name, sizeof(room.name), "%s", LATCH_CG_LATCHD);
	if (loader_cg_map(set, CG_SLOTS) >= 0 && !bpf_map_lookup_elem(set->map_fd[CG_SLOTS], &room.id, &slot) &&
	    loader_cg_map(set, CG_OWNERS) >= 0 && !bpf_map_lookup_elem(set->map_fd[CG_OWNERS], &slot, &owner) &&
	    owner.cgroup_id == room.id) {
		char dir[PATH_MAX + 32];

		room.slot = slot;
		snprintf(dir, sizeof(dir), "%s/slots/%u", set->dir, slot);
		if (!loader_cg_maps_open(dir, fd))
			room.sb = latch_sandbox_adopt(LATCH_CG_LATCHD, fd);
	}
	if (room.sb) {
		struct latch_config cfg;

		latch_cg_room_posture(&room, &out->posture);
		out->latchd_flag = !latch_sandbox_read_config(room.sb, &cfg) && (cfg.flags & LATCH_CFG_LATCHD);
		out->entries = latch_sandbox_map_count(room.sb, LATCH_MAP_EXACT4) +
			       latch_sandbox_map_count(room.sb, LATCH_MAP_EXACT6) +
			       latch_sandbox_map_count(room.sb, LATCH_MAP_PREFIX4) +
			       latch_sandbox_map_count(room.sb, LATCH_MAP_PREFIX6) +
			       latch_sandbox_map_count(room.sb, LATCH_MAP_TIMED4) +
			       latch_sandbox_map_count(room.sb, LATCH_MAP_TIMED6);
		latch_sandbox_counters(room.sb, out->counters);
		latch_sandbox_free(room.sb);
	} else {
		snprintf(out->posture.why, sizeof(out->posture.why), "no room slot leads from its cgroup's id %llu",
			 (unsigned long long)room.id);
	}
	if (loader_cg_prog(set, CG_GATE) >= 0 &&
	    !bpf_prog_query(room.cgroup_fd, BPF_CGROUP_INET_INGRESS, 0, NULL, ids, &cnt))
		for (__u32 i = 0; i < cnt && i < 8; i++)
			out->gate = out->gate || ids[i] == loader_cg_prog_id(set->prog_fd[CG_GATE]);
	if (!latch_cg_gate_counters(set, gate))
		out->gate_dropped = gate[LATCH_ROOM_GATE_DROP];
	latch_cg_close(set);
	out->confined = out->posture.enforced && out->latchd_flag && out->gate && out->n_pids > 0;
	if (!*out->why)
		snprintf(out->why, sizeof(out->why), "%s",
			 !out->posture.enforced ? out->posture.why :
			 !out->latchd_flag	? "latchd's slot is not marked as latchd's" :
			 !out->gate		? "the room services' gate is not on latchd's cgroup" :
			 out->n_pids <= 0	? "no process in latchd's cgroup (latchd is not running)" :
						  "");
out:
	if (room.cgroup_fd >= 0)
		close(room.cgroup_fd);
	return rc;
}

/* ---- what an address is to this host ---- */

struct route_answer {
	int type; /* RTN_* */
	bool gateway; /* the route has a next hop */
	bool seen;
};

static int route_reply(struct nl_msg *msg, void *arg)
{
	struct route_answer *a = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct rtmsg *rtm = nlmsg_data(h);
	struct nlattr *tb[RTA_MAX + 1];

	if (h->nlmsg_type != RTM_NEWROUTE || nlmsg_parse(h, sizeof(*rtm), tb, RTA_MAX, NULL) < 0)
		return NL_SKIP;
	a->type = rtm->rtm_type;
	a->gateway = tb[RTA_GATEWAY] || tb[RTA_VIA] || tb[RTA_MULTIPATH];
	a->seen = true;
	return NL_OK;
}

int latch_route_kind(const struct latch_addr *addr)
{
	struct rtmsg rtm = { .rtm_family = addr->family };
	struct route_answer a = { 0 };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = NULL;
	int alen = addr->family == AF_INET ? 4 : 16, rc = -EIO;

	if (!sk || nl_connect(sk, NETLINK_ROUTE))
		goto out;
	msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	if (!msg || nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) ||
	    nla_put(msg, RTA_DST, alen, addr->family == AF_INET ? (const void *)&addr->v4 : addr->bytes))
		goto out;
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, route_reply, &a);
	if (nl_send_auto(sk, msg) < 0)
		goto out;
	rc = nl_recvmsgs_default(sk);
	if (rc < 0) /* no route at all: nowhere to connect to */
		rc = LATCH_ROUTE_NONE;
	else if (!a.seen)
		rc = -EIO;
	else
		rc = a.type == RTN_LOCAL   ? LATCH_ROUTE_LOCAL :
		     a.type != RTN_UNICAST ? LATCH_ROUTE_NONE :
		     a.gateway		   ? LATCH_ROUTE_GATEWAY :
					     LATCH_ROUTE_ONLINK;
out:
	nlmsg_free(msg);
	nl_socket_free(sk);
	return rc;
}
