// SPDX-License-Identifier: GPL-2.0-only
/*
 * The placeholder's forms (broker/check.c, hb_placeholder_check): a route
 * whose provider's clients send the key in two headers (Anthropic's:
 * x-api-key, and Authorization: Bearer from its TypeScript SDK) takes the
 * placeholder in either, says which, and refuses it in both at once or in any
 * other header, naming that header.  The forwarding itself (the key upstream
 * in the form used, once) is selftests/live_kit_broker.sh's.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "broker/check.h"

#define PH "latch-placeholder-00112233445566778899aabbccddeeff"
#define PH_OTHER "latch-placeholder-ffeeddccbbaa99887766554433221100"

static const char *const phs[] = { PH, PH_OTHER };
static const struct hb_ph_form bearer[] = { { "Authorization", "Bearer " } };

/* A head of NAME: VALUE pairs (n of them) for GET /anthropic/v1/messages. */
static void head_of(struct hb_head *hd, const char *const *nv, int n)
{
	static const char target[] = "/anthropic/v1/messages";

	memset(hd, 0, sizeof(*hd));
	strcpy(hd->method, "GET");
	hd->target = target;
	hd->target_len = sizeof(target) - 1;
	for (int i = 0; i < n; i++) {
		hd->h[i] = (struct hb_header){ .name = nv[2 * i],
					       .name_len = strlen(nv[2 * i]),
					       .value = nv[2 * i + 1],
					       .value_len = strlen(nv[2 * i + 1]) };
	}
	hd->n = n;
}

/* The anthropic route: x-api-key, and Authorization: Bearer beside it (or not: n_also 0). */
static enum hb_refusal check(const char *const *nv, int n, int n_also, struct hb_ph_seen *seen)
{
	struct hb_ph_rule rule = { .header = "x-api-key",
				   .scheme = "",
				   .placeholder = PH,
				   .placeholders = phs,
				   .n_placeholders = 2,
				   .also = bearer,
				   .n_also = n_also };
	struct hb_head hd;

	head_of(&hd, nv, n);
	return hb_placeholder_check(&hd, &rule, seen);
}

Test(ph_forms, the_placeholder_in_x_api_key_is_the_kits_form)
{
	const char *nv[] = { "X-Api-Key", PH, "Anthropic-Version", "2023-06-01" };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 2, 1, &seen), HB_OK);
	cr_assert_eq(seen.form, 0);
}

/* invariant: Bearer is a form of its own, told apart, so the key goes upstream in it and nowhere else */
Test(ph_forms, the_placeholder_as_bearer_is_the_other_form)
{
	const char *nv[] = { "authorization", "Bearer " PH };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 1, 1, &seen), HB_OK);
	cr_assert_eq(seen.form, 1);
	/* control: a route whose provider has one form refuses it there, naming the header */
	cr_assert_eq(check(nv, 1, 0, &seen), HB_PH_OTHER_HEADER);
	cr_assert(seen.where && seen.where->name_len == 13 && !strncmp(seen.where->name, "authorization", 13));
}

/* invariant: never two forms at once: the upstream would get the key twice, or choose */
Test(ph_forms, the_placeholder_in_both_forms_is_refused_naming_both)
{
	const char *nv[] = { "x-api-key", PH, "Authorization", "Bearer " PH };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 2, 1, &seen), HB_PH_OTHER_HEADER);
	cr_assert(seen.first && !strncmp(seen.first->name, "x-api-key", seen.first->name_len));
	cr_assert(seen.where && !strncmp(seen.where->name, "Authorization", seen.where->name_len));
	/* control: the same form twice is one form */
	const char *twice[] = { "x-api-key", PH, "X-API-KEY", PH };

	cr_assert_eq(check(twice, 2, 1, &seen), HB_OK);
	cr_assert_eq(seen.form, 0);
}

Test(ph_forms, the_placeholder_in_an_unrelated_header_is_refused_naming_it)
{
	const char *nv[] = { "x-api-key", PH, "X-Goog-Api-Key", PH };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 2, 1, &seen), HB_PH_OTHER_HEADER);
	cr_assert_null(seen.first); /* the refusal names it alone, not as a second form */
	cr_assert(seen.where && !strncmp(seen.where->name, "X-Goog-Api-Key", seen.where->name_len));
}

Test(ph_forms, another_form_with_a_non_placeholder_is_only_dropped)
{
	const char *nv[] = { "Authorization", "Bearer sk-something-else", "x-api-key", PH };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 2, 1, &seen), HB_OK);
	cr_assert_eq(seen.form, 0);
}

Test(ph_forms, a_wrong_placeholder_in_the_other_form_is_named)
{
	const char *wrong[] = { "Authorization", "Bearer latch-placeholder-0123456789abcdef0123456789abcdef" };
	const char *other[] = { "Authorization", "Bearer " PH_OTHER };
	struct hb_ph_seen seen;

	cr_assert_eq(check(wrong, 1, 1, &seen), HB_PH_WRONG);
	cr_assert(seen.presented && !strncmp(seen.presented, "latch-placeholder-0123", 22));
	/* another route's placeholder of this sandbox in the other form: wrong, as in the kit's form */
	cr_assert_eq(check(other, 1, 1, &seen), HB_PH_WRONG);
	cr_assert_eq(seen.presented_len, strlen(PH_OTHER));
}

Test(ph_forms, basic_auth_sends_the_key_in_the_kits_form)
{
	/* base64("x:" PH) */
	const char *nv[] = { "Authorization",
			     "Basic eDpsYXRjaC1wbGFjZWhvbGRlci0wMDExMjIzMzQ0NTU2Njc3ODg5OWFhYmJjY2RkZWVmZg==" };
	struct hb_ph_seen seen;

	cr_assert_eq(check(nv, 1, 1, &seen), HB_OK);
	cr_assert_eq(seen.form, 0);
}
