/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * lazy_resolve.h - the descriptor of a lazily loaded library, shared by the
 * stubs scripts/lazy_stubs.sh generates and their resolver
 * (scripts/lazy_resolve.c).  Part of the `latch` binary's build, not of a
 * module.
 */
#ifndef LATCH_LAZY_RESOLVE_H
#define LATCH_LAZY_RESOLVE_H

struct latch_lazy_lib {
	const char *soname; /* what dlopen() is given */
	const char *const *names; /* the functions the binary calls, in table order */
	void **tab; /* the stubs jump through it: resolver entries, then the functions */
	int n;
};

#endif
