// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_env.c - the sandbox's environment (its kit's URLs, placeholders and
 * proxy settings) in a file the guest's shells read.
 *
 * `latch exec` hands the environment to each command itself (the agent's
 * LAGENT_EXEC_ENV); a shell on the guest's console, or anything it starts,
 * reads LATCH_VM_ENV_FILE through /etc/profile.  The file is written through
 * the agent, with the text as an argument (the agent gives commands no
 * stdin), and replaced in one rename.  It holds placeholders, never a key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

/* `export NAME='VALUE'`, the value single-quoted (a ' inside becomes '\''). */
static void export_line(FILE *f, const char *entry)
{
	const char *eq = strchr(entry, '=');

	fprintf(f, "export %.*s='", (int)(eq - entry), entry);
	for (const char *p = eq + 1; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputs("'\n", f);
}

int latch_vm_set_env(const char *name, const char *const *env, char *err, size_t errlen)
{
	static const char script[] = "umask 022 && mkdir -p /etc/profile.d && "
				     "if [ -n \"$1\" ]; then printf '%s' \"$1\" > " LATCH_VM_ENV_FILE ".new && "
				     "mv " LATCH_VM_ENV_FILE ".new " LATCH_VM_ENV_FILE "; "
				     "else rm -f " LATCH_VM_ENV_FILE "; fi";
	struct latch_vm_exec_opts eo = { .timeout_ms = 10000 };
	struct latch_vm_exec_result r;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	f = open_memstream(&text, &len);
	if (!f)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	if (env && env[0])
		fprintf(f, "# latch: the sandbox's environment from its kit (on the host: latch env %s)\n", name);
	for (int i = 0; env && env[i]; i++) {
		if (!strchr(env[i], '=')) {
			fclose(f);
			free(text);
			return latch_errf(err, errlen, -EINVAL, "environment entry %d is not NAME=VALUE", i);
		}
		export_line(f, env[i]);
	}
	if (fclose(f)) {
		free(text);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	{
		const char *argv[] = { "/bin/sh", "-c", script, "sh", text, NULL };

		ret = latch_vm_exec(name, argv, &eo, -1, -1, &r, err, errlen);
	}
	free(text);
	if (ret)
		return ret;
	if (r.status)
		return latch_errf(err, errlen, -EIO, "writing %s in the guest of %s failed (status %d)",
				  LATCH_VM_ENV_FILE, name, r.status);
	return 0;
}
