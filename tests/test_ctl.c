// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_ctl.c - latchd's ops, named once (ctl/ops.c).
 *
 * Invariant: every op has one name that both ends use, the lookup finds
 * exactly the ops of the list and nothing else, and docs/latchd.md's table
 * of ops lists each of them and no other (a renamed or added op can't leave
 * the documentation behind).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

Test(ctl, every_op_has_one_name_and_the_lookup_finds_it)
{
	char list[512];

	for (int i = 0; i < LATCHD_OP_COUNT; i++) {
		const char *name = latchd_op_name(i);
		json_t *req = latchd_request(i);

		cr_assert(name, "op %d has no name", i);
		cr_expect_eq(latchd_op_lookup(name), i, "%s", name);
		cr_expect_str_eq(json_string_value(json_object_get(req, "op")), name);
		json_decref(req);
		for (int j = 0; j < i; j++)
			cr_expect_str_neq(latchd_op_name(j), name);
	}
	/* controls: what is no op */
	cr_expect_eq(latchd_op_lookup("pin"), -1);
	cr_expect_eq(latchd_op_lookup("room_"), -1);
	cr_expect_eq(latchd_op_lookup(""), -1);
	cr_expect_eq(latchd_op_lookup(NULL), -1);
	cr_expect_null(latchd_op_name(LATCHD_OP_COUNT));
	cr_expect_null(latchd_request(LATCHD_OP_COUNT));
	latchd_op_list(list, sizeof(list));
	cr_expect_str_eq(list, "ping, rescan, reload, switch, kit, backend, room_open, room_ready, room_done, grant, "
			       "grants, approve, deny, verify_names");
}

/* Each `{"op":"NAME"` that opens a row of docs/latchd.md's table of ops. */
static int documented_ops(char names[][32], int max)
{
	FILE *f = fopen("docs/latchd.md", "r");
	char line[4096];
	int n = 0;

	cr_assert(f, "docs/latchd.md: run the tests from the top of the tree");
	while (fgets(line, sizeof(line), f) && n < max)
		if (!strncmp(line, "| `{\"op\":\"", 10)) {
			const char *at = line + 10;
			size_t len = strcspn(at, "\"");

			cr_assert_lt(len, 32);
			memcpy(names[n], at, len);
			names[n++][len] = 0;
		}
	fclose(f);
	return n;
}

Test(ctl, docs_latchd_md_lists_every_op_and_no_other)
{
	char names[64][32];
	int n = documented_ops(names, 64);

	cr_assert_eq(n, LATCHD_OP_COUNT, "docs/latchd.md lists %d ops, ctl/ctl.h %d", n, LATCHD_OP_COUNT);
	for (int i = 0; i < n; i++)
		cr_expect_neq(latchd_op_lookup(names[i]), -1, "docs/latchd.md lists op '%s', which ctl/ctl.h lacks",
			      names[i]);
}
