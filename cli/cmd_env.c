// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_env.c - `latch env NAME`: what a sandbox is given by its kit, one
 * NAME=VALUE a line: each credential's variables ({{url}} and its
 * placeholder), then HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and lower-case).
 * The same lines `latch exec` puts in a command's environment and the
 * default image's shells read from /etc/profile.d/latch.sh.  They hold
 * placeholders, never a key; a sandbox without a kit is given nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kit/kit.h"
#include "loader/loader.h"
#include "sandbox/sandbox.h"

/* A line as text: bytes a terminal would act on are shown as \xNN. */
static void print_escaped(const char *s)
{
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch < 0x20 || ch >= 0x7f || ch == '\\')
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('\n');
}

int cmd_env(int argc, char **argv)
{
	struct latch_kit_state st = { 0 };
	char err[LATCH_ERR_MAX], **env;
	json_t *arr;
	int n, ret;

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch env NAME");
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_need_root("env"))
		return LATCH_EXIT_USAGE;
	if (!latch_sandbox_exists(argv[1]))
		return latch_err_no_sandbox("sandbox", argv[1]);
	ret = latch_sandbox_env(argv[1], &env, &n, &st, err, sizeof(err));
	if (ret)
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	arr = json_array();
	for (int i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');

		if (!latch_json)
			print_escaped(env[i]);
		json_array_append_new(arr,
				      json_pack("{s:s%, s:s}", "name", env[i], (size_t)(eq - env[i]), "value", eq + 1));
	}
	latch_kit_env_free(env);
	latch_json_out(json_pack("{s:s, s:o, s:i, s:o}", "sandbox", argv[1], "kit",
				 st.kit[0] ? json_string(st.kit) : json_null(), "port", st.port, "env", arr));
	explicit_bzero(&st, sizeof(st));
	return 0;
}
