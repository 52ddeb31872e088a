/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * internal.h - what the files of profile/ share and nobody else sees:
 *   parse.c    one text into entries (struct pvec: the entries and their strings)
 *   profile.c  files, built-ins, the extends chain, the overlay, listing
 *   match.c    the name index and matching
 */
#ifndef LATCH_PROFILE_INTERNAL_H
#define LATCH_PROFILE_INTERNAL_H

#include <stddef.h>

#include "profile/profile.h"

/*
 * Parsed entries, and the strings they point to (names, sources), in one
 * allocation: CAP entries, then an arena of ARENA bytes.  Both are sized from
 * the texts before parsing (an entry is at most a line, a name at most its
 * line's bytes), so nothing moves once pointed to, and free(v) frees all.
 */
struct pvec {
	struct latch_pentry *v;
	int n, cap;
	char *arena;
	size_t used, size;
};

/* parse.c */
int profile_pvec_init(struct pvec *pv, int cap, size_t arena);
void profile_pvec_free(struct pvec *pv);
/* Add TEXT's lines (an upper bound on its entries) and bytes (on their strings). */
void profile_text_size(const char *text, int *lines, size_t *bytes);
/*
 * Append TEXT's entries to PV, at most ROOM of them; EXTENDS gets the
 * `# extends:` name or "" and EXT_LINE its line.  PV NULL: the comments only.
 */
int profile_parse_text(const char *text, const char *source, struct pvec *pv, int room, char *extends, int *ext_line,
		       char *err, size_t errlen);

/* match.c */
struct latch_profile_index *profile_index_make(const struct latch_profile *p);
void profile_index_free(struct latch_profile_index *x);

#endif
