// SPDX-License-Identifier: GPL-2.0-only
/*
 * opt.c - getopt_long()'s tables made from a command's option table, so
 * that a command accepts exactly the options its help lists (they were two
 * lists once, in two files, and could drift).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "common/common.h"

int latch_opt_getopt(const struct latch_opt *opts, bool in_order, struct option *longopts, size_t max, char *optstring,
		     size_t len)
{
	size_t n = 0, o = 0;

	if (!max || len < 2)
		return -ENOSPC;
	if (in_order)
		optstring[o++] = '+';
	for (; opts && opts->name; opts++) {
		if (!opts->key)
			continue;
		if (n + 1 >= max || o + 3 > len - 1)
			return -ENOSPC;
		longopts[n++] =
			(struct option){ opts->name, opts->arg ? required_argument : no_argument, NULL, opts->key };
		if (opts->has_short) {
			optstring[o++] = (char)opts->key;
			if (opts->arg)
				optstring[o++] = ':';
		}
	}
	longopts[n] = (struct option){ 0 };
	optstring[o] = '\0';
	return 0;
}

void latch_opt_spelling(const struct latch_opt *o, char *buf, size_t len)
{
	char short_name[5] = "";

	if (o->has_short)
		snprintf(short_name, sizeof(short_name), "-%c, ", (char)o->key);
	snprintf(buf, len, "%s--%s%s%s", short_name, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}
