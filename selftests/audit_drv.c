// SPDX-License-Identifier: GPL-2.0-only
/*
 * audit_drv.c - appends to the audit log through the audit module, with its
 * real anchors (the systemd journal and the file), for live_audit.sh.
 *
 *   audit_drv PATH N     append N entries (sandbox "drv", kind "test"), then close
 *
 * Prints "appended FIRST..LAST".  The test runs it against a journald of its
 * own, in a mount namespace of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"

int main(int argc, char **argv)
{
	struct audit_opts o = { 0 };
	char err[256] = "";
	struct audit_log *log;
	int64_t first = 0, last = 0;
	int n;

	if (argc != 3 || (n = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: audit_drv PATH N\n");
		return 2;
	}
	log = audit_open(argv[1], &o, err, sizeof(err));
	if (!log) {
		fprintf(stderr, "audit_drv: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct audit_entry e = { .sandbox = "drv", .kind = "test", .decision = "allow", .reason = "test.drv" };
		char fields[64];
		int rc;

		snprintf(fields, sizeof(fields), "{\"i\":%d}", i);
		e.fields = fields;
		rc = audit_append(log, &e);
		if (rc == -EAGAIN)
			continue; /* the rate limit: counted, rides on the next */
		if (rc) {
			fprintf(stderr, "audit_drv: append: %s\n", audit_error(log));
			audit_close(log);
			return 1;
		}
		if (!first)
			first = e.id;
		last = e.id;
	}
	audit_close(log);
	printf("appended %lld..%lld\n", (long long)first, (long long)last);
	return 0;
}
