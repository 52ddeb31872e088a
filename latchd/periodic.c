// SPDX-License-Identifier: GPL-2.0-only
/*
 * periodic.c - the jobs latchd's one-second tick runs: each sandbox's host
 * names refreshed before their TTL runs out, its learned names written to
 * disk within a second of a change, and once a minute learned and host-name
 * rules pruned a grace period after their deadline (kernel and memory
 * alike); and the guest state backups.
 *
 * Every backup_interval seconds, each running VM sandbox's state directory
 * is copied to the host (what `down` does too), so a crash of the host or the
 * guest loses at most one interval of the agent's memory.  latchd never
 * talks to guests itself: it runs `latch --json backup --all` (guests and the
 * broker meet only through the kernel and the socket) and audits what that
 * reports.  The child's output goes to a memfd, read once it has exited.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "latchd/latchd.h"
#include "latchd/room.h"

#define PRUNE_INTERVAL_S 60

/* ---- guest state backups ---- */

/* The latch command beside this latchd (build/ or the install's bin directory), or $LATCH_BIN. */
static int latch_bin(char *buf, size_t len)
{
	const char *e = getenv("LATCH_BIN");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (e && *e)
		return snprintf(buf, len, "%s", e) < (int)len ? 0 : -ENAMETOOLONG;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -errno;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return snprintf(buf, len, "%s/latch", exe) < (int)len ? 0 : -ENAMETOOLONG;
}

static void backup_start(struct backup_child *b)
{
	char bin[PATH_MAX];
	pid_t pid;
	int out;

	if (latch_bin(bin, sizeof(bin)) || access(bin, X_OK)) {
		latchd_log("periodic backup: no latch command beside latchd (set LATCH_BIN)");
		return;
	}
	out = memfd_create("latch-backup", MFD_CLOEXEC);
	if (out < 0)
		return;
	pid = fork();
	if (pid == 0) {
		dup2(out, STDOUT_FILENO);
		execl(bin, bin, "--json", "backup", "--all", (char *)NULL);
		_exit(127);
	}
	if (pid < 0) {
		close(out);
		return;
	}
	b->pid = pid;
	b->out = out;
}

/* The child has exited: audit each sandbox it backed up. */
static void backup_finish(struct latchd *ld)
{
	struct backup_child *b = &ld->backup;
	json_error_t jerr;
	json_t *res, *one;
	size_t i;

	lseek(b->out, 0, SEEK_SET);
	res = json_loadfd(b->out, 0, &jerr);
	close(b->out);
	b->pid = 0;
	if (!res) {
		latchd_audit(ld, NULL, "backup", "fail", "latchd.backup.periodic",
			     json_pack("{s:s}", "error", "no report"));
		return;
	}
	json_array_foreach(json_object_get(res, "backups"), i, one) {
		const char *name = json_string_value(json_object_get(one, "sandbox"));
		bool good = json_is_true(json_object_get(one, "ok"));

		if (name)
			latchd_audit(ld, name, "backup", good ? "ok" : "fail", "latchd.backup.periodic", NULL);
	}
	json_decref(res);
}

static void backups_tick(struct latchd *ld, uint64_t now)
{
	struct backup_child *b = &ld->backup;
	int status;

	if (b->pid && waitpid(b->pid, &status, WNOHANG) == b->pid)
		backup_finish(ld);
	if (!ld->conf.backup_interval || b->pid ||
	    (b->last_ns && now < b->last_ns + (uint64_t)ld->conf.backup_interval * NS_PER_S))
		return;
	b->last_ns = now;
	backup_start(b);
}

/* ---- the tick ---- */

void latchd_periodic_run(struct latchd *ld, uint64_t now)
{
	backups_tick(ld, now);
	audit_tick(ld->audit); /* the audit log's head, if no deferred anchor took it (events.c) */
	latchd_notifier_tick(ld, now);
	for (struct sandbox *s = ld->sandboxes; s; s = s->next) {
		latchd_grants_tick(s, now);
		latchd_switch_refresh_hosts(s, now);
		if (s->learned_dirty)
			latchd_learned_save(s);
		if (ld->ticks % PRUNE_INTERVAL_S == 0 && now > RESOLVED_GRACE_NS) {
			latch_policy_prune_resolved(s->sb, now - RESOLVED_GRACE_NS);
			latch_names_prune(s->sb, now - RESOLVED_GRACE_NS);
			latchd_learned_prune(s, now);
		}
	}
	/* every upstream address latchd reached stays in its room's map until pruned, like a guest's answers */
	if (ld->ticks % PRUNE_INTERVAL_S == 0 && now > RESOLVED_GRACE_NS)
		latchd_confine_prune(ld, now - RESOLVED_GRACE_NS);
}

/* At shutdown: a backup in flight finishes on its own; collect it. */
void latchd_periodic_stop(struct latchd *ld)
{
	if (!ld->backup.pid)
		return;
	waitpid(ld->backup.pid, NULL, 0);
	backup_finish(ld);
}
