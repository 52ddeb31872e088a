// SPDX-License-Identifier: GPL-2.0-only
/*
 * audit.c - what latch-cni did, in the node's audit log, as `latch attach`
 * and `latch detach` record theirs (kind "attach"), with the container it
 * was for: the sandbox name alone says nothing to whoever reads the log.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "audit/audit.h"
#include "cni/cni.h"

void latch_cni_audit(const char *name, const char *decision, const char *reason, const struct latch_cni_env *env,
		     const char *device)
{
	char path[PATH_MAX], err[LATCH_ERR_MAX] = "";
	struct audit_entry e = { .sandbox = name, .kind = "attach", .decision = decision, .reason = reason };
	json_t *fields = json_pack("{s:s?, s:s?, s:s?}", "container_id", env->container_id, "ifname", env->ifname,
				   "device", device);
	struct audit_log *log;
	char *text;
	int rc;

	if (env->args && *env->args)
		json_object_set_new(fields, "cni_args", json_string(env->args));
	text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(fields);
	/* stderr is the runtime's log: the work is done, only its record is missing */
	if (latch_path(path, sizeof(path), LATCH_AUDIT_DB) || !(log = audit_open(path, NULL, err, sizeof(err)))) {
		fprintf(stderr, "latch: warning: %s; %s %s was done but not recorded\n", *err ? err : "no audit path",
			name, decision);
		free(text);
		return;
	}
	e.fields = text;
	rc = audit_append(log, &e);
	if (rc && rc != -EAGAIN)
		fprintf(stderr, "latch: warning: audit log %s: %s; %s %s was done but not recorded\n", path,
			audit_error(log), name, decision);
	audit_close(log);
	free(text);
}
