// SPDX-License-Identifier: GPL-2.0-only
/*
 * hook.c - attach, replace and remove latch's two programs, as clsact
 * filters or as TCX links.
 *
 * The order is the point: the direction out of the guest is attached first,
 * and a replacement never leaves a moment in which neither the old nor the
 * new program runs (clsact: BPF_TC_F_REPLACE; TCX: bpf_link_update, or a new
 * link at the head of the chain before the old one goes).
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader/hook.h"

const char *const latch_prog_pin_names[LATCH_DIR_COUNT] = { "prog_from_guest", "prog_to_guest" };
const char *const latch_link_pin_names[LATCH_DIR_COUNT] = { "link_from_guest", "link_to_guest" };

static const char *const dir_words[LATCH_DIR_COUNT] = { "ingress", "egress" };

static int pin_link(const char *name, int dir, int link_fd, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (latch_pin_path(name, latch_link_pin_names[dir], path, sizeof(path)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "pin path too long");
	/* replacing latch's own link pin; the old link stays held by the caller's fd */
	unlink(path);
	if (bpf_obj_pin(link_fd, path))
		return latch_errf(err, errlen, -errno, "cannot pin %s: %s", path, strerror(errno));
	return 0;
}

static int attach_tcx(const char *name, int ifindex, const int prog_fd[LATCH_DIR_COUNT], char *err, size_t errlen)
{
	int link[LATCH_DIR_COUNT] = { -1, -1 }, rc = 0;

	for (int d = 0; d < LATCH_DIR_COUNT && !rc; d++) {
		link[d] = latch_tcx_link_create(ifindex, d == LATCH_DIR_TO_GUEST, prog_fd[d]);
		if (link[d] < 0)
			rc = latch_errf(err, errlen, link[d], "cannot attach a TCX link on %s: %s", dir_words[d],
					strerror(-link[d]));
		else
			rc = pin_link(name, d, link[d], err, errlen);
	}
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		if (rc && link[d] >= 0) {
			char path[PATH_MAX];

			bpf_link_detach(link[d]);
			if (!latch_pin_path(name, latch_link_pin_names[d], path, sizeof(path)))
				unlink(path);
		}
		if (link[d] >= 0)
			close(link[d]); /* the pin holds it now */
	}
	return rc;
}

static int attach_clsact(int ifindex, const int prog_fd[LATCH_DIR_COUNT], bool *own_qdisc, char *err, size_t errlen)
{
	bool attached[LATCH_DIR_COUNT] = { false, false };
	int e = latch_tc_hook_create(ifindex, own_qdisc);

	if (e)
		return latch_errf(err, errlen, e, "cannot add a clsact qdisc: %s", strerror(-e));
	for (int d = 0; d < LATCH_DIR_COUNT && !e; d++) {
		e = latch_tc_attach(ifindex, d == LATCH_DIR_TO_GUEST, prog_fd[d], false);
		attached[d] = !e;
	}
	if (!e)
		return 0;
	latch_errf(err, errlen, e, "cannot attach: %s%s", strerror(-e),
		   e == -EEXIST ? " (another filter holds latch's handle; is it attached under another name?)" : "");
	for (int d = 0; d < LATCH_DIR_COUNT; d++)
		if (attached[d])
			latch_tc_detach(ifindex, d == LATCH_DIR_TO_GUEST);
	if (*own_qdisc)
		latch_tc_hook_destroy(ifindex);
	*own_qdisc = false;
	return e;
}

int latch_hook_attach(const char *name, enum latch_tc_mode mode, int ifindex, const int prog_fd[LATCH_DIR_COUNT],
		      bool *own_qdisc, char *err, size_t errlen)
{
	*own_qdisc = false;
	if (mode == LATCH_TC_TCX)
		return attach_tcx(name, ifindex, prog_fd, err, errlen);
	return attach_clsact(ifindex, prog_fd, own_qdisc, err, errlen);
}

/* Is the link still attached to ifindex, at the head of its chain? */
static bool link_heads_chain(int link_fd, int ifindex, int dir, struct latch_tcx_link *info)
{
	struct latch_tcx_prog chain[1];

	if (latch_tcx_link_info(link_fd, info) || (int)info->ifindex != ifindex ||
	    info->egress != (dir == LATCH_DIR_TO_GUEST))
		return false;
	return latch_tcx_list(ifindex, info->egress, chain, 1) > 0 && chain[0].link_id == info->id;
}

static int replace_tcx(const char *name, int ifindex, int dir, int prog_fd, char *err, size_t errlen)
{
	struct latch_tcx_link info = { 0 };
	char path[PATH_MAX];
	int old = -1, fresh, rc;

	if (latch_pin_path(name, latch_link_pin_names[dir], path, sizeof(path)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "pin path too long");
	old = bpf_obj_get(path);
	if (old >= 0 && link_heads_chain(old, ifindex, dir, &info)) {
		/* the same link, a new program: one atomic swap */
		rc = bpf_link_update(old, prog_fd, NULL) ? -errno : 0;
		close(old);
		if (rc)
			return latch_errf(err, errlen, rc, "cannot update latch's TCX link on %s: %s", dir_words[dir],
					  strerror(-rc));
		return 0;
	}
	/* gone, detached, or something went ahead of it: a new link at the head first */
	fresh = latch_tcx_link_create(ifindex, dir == LATCH_DIR_TO_GUEST, prog_fd);
	if (fresh < 0) {
		if (old >= 0)
			close(old);
		return latch_errf(err, errlen, fresh, "cannot attach a TCX link on %s: %s", dir_words[dir],
				  strerror(-fresh));
	}
	rc = pin_link(name, dir, fresh, err, errlen);
	if (rc)
		bpf_link_detach(fresh);
	else if (old >= 0 && info.ifindex)
		bpf_link_detach(old); /* behind the new one, it never ran again */
	if (old >= 0)
		close(old);
	close(fresh);
	return rc;
}

int latch_hook_replace(const char *name, enum latch_tc_mode mode, int ifindex, const int prog_fd[LATCH_DIR_COUNT],
		       bool *created, char *err, size_t errlen)
{
	int e;

	*created = false;
	if (mode == LATCH_TC_TCX) {
		for (int d = 0; d < LATCH_DIR_COUNT; d++) {
			e = replace_tcx(name, ifindex, d, prog_fd[d], err, errlen);
			if (e)
				return e;
		}
		return 0;
	}
	e = latch_tc_hook_create(ifindex, created);
	if (e)
		return latch_errf(err, errlen, e, "cannot add a clsact qdisc: %s", strerror(-e));
	/* Replace in place: there is no moment without a filter. */
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		e = latch_tc_attach(ifindex, d == LATCH_DIR_TO_GUEST, prog_fd[d], true);
		if (e)
			return latch_errf(err, errlen, e, "cannot attach on %s: %s", dir_words[d], strerror(-e));
	}
	return 0;
}

void latch_hook_remove(const char *name, enum latch_tc_mode mode, int ifindex, bool own_qdisc)
{
	char path[PATH_MAX];

	/* link pins go in either mode: a sandbox switched between modes may have some */
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		int fd;

		if (latch_pin_path(name, latch_link_pin_names[d], path, sizeof(path)))
			continue;
		fd = bpf_obj_get(path);
		if (fd >= 0) {
			bpf_link_detach(fd);
			close(fd);
		}
		unlink(path);
	}
	if (mode == LATCH_TC_TCX || !ifindex)
		return;
	latch_tc_detach(ifindex, false);
	latch_tc_detach(ifindex, true);
	if (own_qdisc) {
		struct latch_tc_filter f[8];

		/* only when nobody else put a filter on it meanwhile */
		if (latch_tc_list(ifindex, false, f, 8) <= 0 && latch_tc_list(ifindex, true, f, 8) <= 0)
			latch_tc_hook_destroy(ifindex);
	}
}
