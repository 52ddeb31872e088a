// SPDX-License-Identifier: GPL-2.0-only
/*
 * clone.c - throwaway clones: `latch task NAME -- CMD`.
 *
 * A clone is a fresh sandbox, task-N, made from the source's image, memory
 * and cpus, with the source's guest state restored into it: fresh when the
 * source's guest answers, else its last backup.  It gets no workspace, and
 * its policy is the empty one every new sandbox starts with (sealed: host
 * services only), whatever the source may reach.  The command runs with its
 * output on ours, and the clone is destroyed at the end, its backup purged,
 * also when the caller's stop flag is set half way (its signal handler
 * sets it; the waits here end with EINTR).  A SIGKILL leaves the clone
 * behind; `latch destroy task-N` removes it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vm/state.h"

static void say(const struct latch_vm_task_opts *o, const char *line)
{
	if (o->step)
		o->step(line, o->step_arg);
}

/* Bring the clone up, sealed, with the source's image and size; 0 or -errno with a line in err. */
static int clone_up(const struct latch_vm_task_opts *o, const struct latch_vm_state *src,
		    struct latch_vm_task_result *res, enum latch_vm_fail *fail, char *err, size_t errlen)
{
	static struct latch_vm_up_result up;
	struct latch_vm_up_opts uo = { .step = o->step, .step_arg = o->step_arg };
	char line[LATCH_ERR_MAX];
	int ret;

	snprintf(uo.name, sizeof(uo.name), "%s", res->clone);
	snprintf(uo.image, sizeof(uo.image), "%s", src->image);
	uo.memory_mib = src->memory_mib;
	uo.cpus = src->cpus;
	/* no workspace: a clone touches nothing of the host's but its services */
	snprintf(line, sizeof(line), "clone %s of %s, sealed", res->clone, o->source);
	say(o, line);
	ret = latch_vm_up(&uo, &up, fail, err, errlen);
	if (ret)
		return ret;
	if (!up.obs.pins || !up.obs.posture.enforced) {
		*fail = LATCH_VM_FAIL_POSTURE;
		return latch_errf(err, errlen, -EPERM, "enforcement on clone %s not verified", res->clone);
	}
	return 0;
}

int latch_vm_task(const struct latch_vm_task_opts *o, struct latch_vm_task_result *res, enum latch_vm_fail *fail,
		  char *err, size_t errlen)
{
	struct latch_vm_exec_opts eo = { .timeout_ms = o->timeout_ms };
	struct latch_vm_destroy_result dr;
	struct latch_vm_state src;
	char dir[PATH_MAX], e[LATCH_ERR_MAX], first[LATCH_ERR_MAX];
	enum latch_vm_fail f2;
	bool have_copy;
	int ret;

	memset(res, 0, sizeof(*res));
	*fail = LATCH_VM_FAIL_RUNTIME;
	if (latch_state_load(o->source, &src, e, sizeof(e))) {
		*fail = LATCH_VM_FAIL_NO_SANDBOX;
		return latch_errf(err, errlen, -ENOENT, "no VM sandbox '%s' (see `latch ls`)", o->source);
	}
	/* the source's memory, fresh when its guest runs, else its last backup */
	if (latch_vm_backup(o->source, NULL, NULL, res->state_note, sizeof(res->state_note))) {
		res->stale_state = true;
		snprintf(first, sizeof(first), "no fresh backup of %s (%.300s); using the last one if any", o->source,
			 res->state_note);
		say(o, first);
	}
	latch_vm_backup_dir(o->source, dir, sizeof(dir));
	have_copy = access(dir, F_OK) == 0;
	snprintf(res->clone, sizeof(res->clone), "task-%u", (unsigned int)getpid() % 100000);
	if (*o->stop)
		return -EINTR;

	ret = clone_up(o, &src, res, fail, err, errlen);
	if (ret && *fail == LATCH_VM_FAIL_INPUT) {
		res->removed = true; /* a name in use was not ours to remove; up made nothing */
		return *o->stop ? -EINTR : ret;
	}
	if (!ret && have_copy && !*o->stop && (ret = latch_vm_restore(res->clone, dir, NULL, e, sizeof(e))))
		latch_errf(err, errlen, ret, "restoring %s's state into %s: %s", o->source, res->clone, e);
	if (!ret && !*o->stop)
		ret = latch_vm_exec(res->clone, o->argv, &eo, STDOUT_FILENO, STDERR_FILENO, &res->run, err, errlen);
	if (*o->stop)
		ret = -EINTR;

	/* up rolled back whatever it made when it failed; this removes the rest, and the clone's backup */
	snprintf(first, sizeof(first), "%s", ret && ret != -EINTR ? err : "");
	res->removed = latch_vm_destroy(res->clone, true, &dr, &f2, e, sizeof(e)) == 0 ||
		       f2 == LATCH_VM_FAIL_NO_SANDBOX;
	if (!res->removed) {
		latch_errf(err, errlen, -EIO, "%s%sclone %s NOT removed: %s; `latch destroy --purge %s`", first,
			   *first ? "; " : "", res->clone, e, res->clone);
		ret = ret ?: -EIO;
	}
	return ret;
}
