// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_reasons.c - the reason codes have one list, and everything names them from it.
 *
 * bpf/latch_abi.h's LATCH_REASONS() generates the enum; latch_reason_name()
 * must give each code the list's name, codes must be unique, and the
 * operator's table in docs/maps.md must carry every row with its code, so
 * that a reason added to the list and not documented fails here.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/sandbox.h"

static const struct {
	int code;
	const char *name;
} list[] = {
#define R(id, code, name, text) { LATCH_##id, name },
	LATCH_REASONS(R)
#undef R
};
#define N_REASONS (sizeof(list) / sizeof(list[0]))

Test(reasons, loader_names_come_from_the_list)
{
	for (size_t i = 0; i < N_REASONS; i++)
		cr_expect_str_eq(latch_reason_name(list[i].code), list[i].name, "code %d", list[i].code);
	cr_expect_str_eq(latch_reason_name(0), "unknown");
	cr_expect_str_eq(latch_reason_name(-199), "unknown");
	cr_expect_str_eq(latch_reason_name(LATCH_DROP_LAST - 1), "unknown");
}

Test(reasons, codes_and_names_are_unique_and_fill_their_slots)
{
	for (size_t i = 0; i < N_REASONS; i++) {
		int slot = latch_counter_slot(list[i].code, 0);

		cr_expect_neq(slot, 0, "%s has no counter slot of its own", list[i].name);
		for (size_t j = i + 1; j < N_REASONS; j++) {
			cr_expect_neq(list[i].code, list[j].code, "%s and %s share a code", list[i].name, list[j].name);
			cr_expect_str_neq(list[i].name, list[j].name);
			cr_expect_neq(slot, latch_counter_slot(list[j].code, 0), "%s and %s share a counter slot",
				      list[i].name, list[j].name);
		}
	}
}

Test(reasons, docs_maps_md_lists_every_reason_with_its_code)
{
	FILE *f = fopen("docs/maps.md", "r");
	char *text = NULL, row[160];
	size_t cap = 0;
	ssize_t n;

	cr_assert_not_null(f, "run from the top of the tree: docs/maps.md not found");
	n = getdelim(&text, &cap, '\0', f);
	fclose(f);
	cr_assert_gt(n, 0);
	for (size_t i = 0; i < N_REASONS; i++) {
		snprintf(row, sizeof(row), "| `%s` | %d |", list[i].name, list[i].code);
		cr_expect_not_null(strstr(text, row), "docs/maps.md has no row starting \"%s\"", row);
	}
	free(text);
}
