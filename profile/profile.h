/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile.h - egress profiles: named allowlists of hosts, wildcards and CIDRs.
 *
 * A profile is a text file in the Kagebox format, one entry a line:
 *
 *	pypi.org			hosts, ports 443 and 80 when none are given
 *	api.example.com:443,8443	ports and ranges (8000-8100)
 *	*.readthedocs.io:443		every name below the domain, not the domain
 *	203.0.113.0/24:443/tcp		addresses and prefixes, IPv6 as [2001:db8::/32]:443
 *	# extends: research		the base this one builds on (one per file)
 *
 * NAME is looked up as DIR/NAME.txt first, then among the built-ins compiled
 * from profile/profiles/NAME.txt; `open` is built in by code and means no policy.
 * Files must be regular, owned by root (or the euid, for unprivileged tests)
 * and writable by nobody else, because they decide where sandbox traffic
 * goes.  Any bad line fails the whole load:
 * a profile is never half applied.  Errors read `FILE:LINE: message`
 * (`builtin:NAME` for a built-in).  docs/profiles.md is the user's guide.
 */
#ifndef LATCH_PROFILE_H
#define LATCH_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"
#include "loader/loader.h"

#define LATCH_PROFILE_NAME_MAX 64
#define LATCH_PROFILE_DEPTH_MAX 16 /* profiles in one extends chain */
#define LATCH_PROFILE_ENTRIES_MAX 65536 /* entries of a loaded profile, chain and overlay */
#define LATCH_PROFILE_FILE_MAX (16 * 1024 * 1024) /* bytes of one profile file: 65,536 entries fit */
#define LATCH_PROFILE_LINE_MAX 1024
#define LATCH_PROFILE_OPEN "open"

enum latch_pentry_kind { LATCH_PENTRY_HOST, LATCH_PENTRY_WILDCARD, LATCH_PENTRY_CIDR };

/*
 * One entry.  name and source point into the same allocation as the entries
 * array (a profile of 65,536 lines is 8 MB, not 32: the memory a load touches
 * was most of its time), so they live as long as the array, and move with it.
 */
struct latch_pentry {
	enum latch_pentry_kind kind;
	int line;
	const char *name; /* HOST: normalized host; WILDCARD: the domain under "*."; CIDR: "" */
	const char *source; /* file path or "builtin:NAME"; a path over 127 bytes keeps its tail after "..." */
	/* CIDR: address, prefixlen, proto, ports.  HOST/WILDCARD: only proto, n_ports and ports used */
	struct latch_entry entry;
};

struct latch_profile_index; /* host and wildcard names, hashed (profile.c) */

struct latch_profile {
	char name[LATCH_PROFILE_NAME_MAX + 1];
	bool open; /* the built-in "open": no policy at all (uncontained) */
	struct latch_pentry *entries; /* the extends chain, base first, then the overlay */
	int n;
	/* made by latch_profile_load, freed by latch_profile_free; moves with entries */
	struct latch_profile_index *index;
};

struct latch_profile_info {
	char name[LATCH_PROFILE_NAME_MAX + 1];
	bool builtin;
	bool file;
};

/* 1..64 chars of [A-Za-z0-9._-], no "/" and no "..", not starting with '.' or '-'. */
int latch_profile_name_check(const char *name, char *err, size_t errlen);

/*
 * Pure: parse one text.  EXTENDS (may be NULL) gets the `# extends:` name
 * or "".  On error *out is NULL, *n is 0 and err holds `SOURCE:LINE:
 * message`.  The caller frees *out.
 */
int latch_profile_parse(const char *text, const char *source, struct latch_pentry **out, int *n, char *extends,
			size_t extlen, char *err, size_t errlen);

/*
 * Load profile NAME: dir/NAME.txt if it exists, else the built-in of that name
 * (DIR may be NULL: built-ins only); follow `# extends:` (unknown profile and
 * cycles refused, naming the chain, depth limit 16), then layer the overlay
 * file (may be NULL or not exist: no overlay).  For `open` the overlay is
 * still checked but adds nothing.  Returns 0 or -errno with one line in err:
 * -EINVAL bad text, -ENOENT unknown profile, -ELOOP cycle, depth or symlink,
 * -EPERM unsafe owner or mode, -EFBIG/-E2BIG too big.  On error *out is
 * empty and needs no free.
 */
int latch_profile_load(const char *dir, const char *name, const char *overlay, struct latch_profile *out, char *err,
		       size_t errlen);

/* Accepts a zeroed or freed profile. */
void latch_profile_free(struct latch_profile *p);

/*
 * Built-ins plus every DIR/NAME.txt, sorted by name, each once; caller frees
 * *out.  A file whose name is not a valid profile name is skipped; a file
 * that shadows a built-in is listed once with both flags set.  DIR may be
 * NULL or missing.
 */
int latch_profile_list(const char *dir, struct latch_profile_info **out, int *n, char *err, size_t errlen);

/*
 * Does the name match a HOST entry exactly or a WILDCARD?  ports_out gets the
 * union of the matching entries' ports (coalesced; past LATCH_RULES_MAX ranges
 * the highest are dropped, never widened), proto the first match's proto.
 * Matches of another proto than the first are left out of the union rather
 * than lending it their ports: walk them with latch_profile_next_match().
 * false when nothing matches, when NAME is not a host name, and always for
 * `open` (the caller checks p->open: open has no entries to match).
 */
bool latch_profile_match(const struct latch_profile *p, const char *name, struct latch_entry *ports_out);

/* The next HOST or WILDCARD entry after AFTER (NULL: from the start) that NAME matches, or NULL. */
const struct latch_pentry *latch_profile_next_match(const struct latch_profile *p, const char *name,
						    const struct latch_pentry *after);

/* The canonical spelling of an entry: "pypi.org:443,80", "*.example.com:443/tcp", "[2001:db8::/32]:443". */
void latch_pentry_format(const struct latch_pentry *pe, char *buf, size_t len);

/*
 * The active profile of sandbox NAME, kept in its state file
 * (LATCH_STATE_PROFILE, `profile = NAME`; a file of an older latch, the name
 * alone, is read too).  The stored name, or -ENOENT when the sandbox has none
 * (no named policy), or another -errno when the file is refused.
 */
int latch_profile_state_read(const char *name, char *profile, size_t len);
/*
 * Store it atomically; "" removes it.  What latchd learned under it is
 * latchd's to remove (latch_state_forget() when the sandbox is gone).
 */
int latch_profile_state_write(const char *name, const char *profile, char *err, size_t errlen);

/*
 * ---- The policy union (compose.c) ----
 *
 * A switch replaces a sandbox's whole permanent policy.  What the new
 * generation holds is the union below, built by a pure function so that
 * every rule of it can be tested without a kernel.  In this order (it is the
 * order of the output, and an earlier spec keeps its origin on a tie):
 *
 *  1. the profile's CIDR entries (the extends chain and the overlay),
 *     permanent, origin PROFILE;
 *  2. the extra entries (a kit's egress_allow, parsed as profile lines):
 *     their CIDRs likewise, permanent, origin PROFILE;
 *  3. host names of 1 and 2 as the caller resolved them just now: one spec
 *     per address, with the name's ports and proto and the TTL as deadline,
 *     origin HOSTNAME.  A name whose lookup failed adds nothing;
 *  4. learned answers: kept only while their deadline plus the grace period
 *     has not passed, and only if the new policy still allows the name; they
 *     take the ports the new policy gives that name (not those they were
 *     learned under) and keep their deadline, origin LEARNED.  A name the
 *     profile and extras both allow gets one spec from each (the kernel
 *     takes the union of their ports).  Under `open` none is kept: open
 *     needs no entries;
 *  5. the live generation's own rules (latch_policy_list()):
 *     - timed ones (grants, `allow --for`) are left where they are: a switch
 *       never touches the timed maps, so they survive it untouched;
 *     - hand-added ones (origin EGRESS, `latch egress allow`) are carried
 *       with their deadline;
 *     - learned ones are carried only when carry_live_learned is set (at
 *       startup, when the names of answers given before a crash may be
 *       missing from learned[]): nameless, the next switch drops them;
 *     - everything else (the old profile's entries and host names, learned
 *       answers, which 4 re-adds when still allowed) is rebuilt from 1-4.
 *
 * Identical specs (same address or prefix, proto and port list) are folded
 * into the first, as the loader folds rules: a permanent rule beats a
 * deadline, otherwise the later deadline wins and brings its origin.  Specs
 * that only overlap (other ports on the same address) are left to the loader,
 * which merges them rule by rule.  `open` is handed through in out->open.
 */

/* The kernel entry for one address of a name: that name's ports and proto, a /32 or /128. */
void latch_profile_address_entry(const struct latch_addr *a, const struct latch_entry *ports, struct latch_entry *e);

/* A host name of the profile or the extras, as resolved just now. */
struct latch_compose_host {
	const struct latch_pentry *pe; /* its entry: ports and proto */
	const struct latch_addr *addr;
	int n; /* 0: the lookup failed */
	uint64_t expires_ns; /* boot clock: the lookup's time plus its TTL */
};

/* An answer the resolver gave the guest: one address of one name. */
struct latch_compose_learned {
	const char *name; /* normalized */
	struct latch_addr addr;
	uint64_t expires_ns; /* boot clock */
};

struct latch_compose_in {
	const struct latch_profile *profile; /* loaded, overlay included */
	const struct latch_pentry *extra; /* may be NULL */
	int n_extra;
	const struct latch_compose_host *hosts;
	int n_hosts;
	const struct latch_compose_learned *learned;
	int n_learned;
	const struct latch_policy_item *live; /* the live generation, as latch_policy_list() gave it */
	int n_live;
	bool carry_live_learned;
	uint64_t now_ns; /* boot clock */
	uint64_t grace_ns; /* a learned answer is kept until its deadline plus this */
};

/* How many specs each source gave (before folding), and what was left out and why. */
struct latch_compose_counts {
	int profile; /* 1: CIDR entries */
	int extra; /* 2: CIDR entries */
	int hostname; /* 3: addresses */
	int learned; /* 4: answers kept (a name matched by both profile and extras counts once) */
	int carried_egress; /* 5: hand-added rules */
	int carried_learned; /* 5: nameless learned rules (carry_live_learned) */
	int learned_expired; /* 4: past deadline plus grace */
	int learned_refused; /* 4: the new policy does not allow the name, or it is open */
	int live_timed; /* 5: left in the timed maps */
	int live_rebuilt; /* 5: not carried; 1-4 rebuild what is still allowed */
	int folded; /* identical specs folded into an earlier one */
};

struct latch_compose_out {
	struct latch_policy_spec *specs; /* for latch_policy_switch() */
	int n;
	bool open;
	struct latch_compose_counts counts;
};

/*
 * Would the union carry this rule of the live generation (rule 5)?  A caller
 * may hand compose only these; the counts of what was left alone and
 * rebuilt then say nothing of the rest.
 */
bool latch_compose_live_wanted(const struct latch_policy_item *it, bool carry_live_learned);

/*
 * A latch_policy_list() callback that keeps, in a growing array, the live
 * rules latch_compose_live_wanted() wants: hand items and n to
 * latch_compose_in.live, then free(items).  rc is -ENOMEM when one could
 * not be kept (the walk goes on; the caller must not compose then).
 */
struct latch_compose_live {
	struct latch_policy_item *items;
	int n, cap;
	bool carry_live_learned;
	int walked; /* every rule the walk saw */
	int rc;
};
int latch_compose_live_keep(const struct latch_policy_item *it, void *arg);

/* Build the union; 0, or -ENOMEM with *out empty.  Nothing in *in is changed or kept. */
int latch_profile_compose(const struct latch_compose_in *in, struct latch_compose_out *out);
/* Accepts a zeroed or freed out. */
void latch_compose_out_free(struct latch_compose_out *out);

#endif
