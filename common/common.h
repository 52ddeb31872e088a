/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * common.h - the base every latch module may use, and that uses none of them.
 *
 * Errors: every function that can fail on input takes (err, errlen) and
 * writes one line there that names what was wrong and how to fix it;
 * latch_errf() is the one way to write it.  Paths: everything latch keeps on
 * disk lives under $LATCH_ROOT (unset: /), so tests move it all at once.
 * Files: one atomic write, one opener for every file latch trusts (config,
 * secrets, profiles, kits, state),
 * and one declarative `key = value` reader (a table per struct, in the
 * manner of Redis's config table) for latch.conf and the state files.
 * Addresses and names: the parsers an operator's words go through, and the
 * DNS name rules and rebinding filter the resolver, the broker and the
 * profiles share.  Time: one monotonic clock.
 */
#ifndef LATCH_COMMON_H
#define LATCH_COMMON_H

#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define LATCH_NAME_MAX 32 /* sandbox names: 1-32 of a-z, 0-9, '-' */
#define LATCH_ERR_MAX 512

/* ---- errors ---- */

/*
 * Write one line into err (when there is room for it) and return ret: the
 * way every function that takes (err, errlen) reports a failure.
 */
__attribute__((format(printf, 4, 5))) int latch_errf(char *err, size_t errlen, int ret, const char *fmt, ...);
/* A sqlite result code as -errno (SQLITE_OK: 0); the audit log's and the ledger's. */
int latch_sqlite_errno(int rc);
/* latch_errf() for a caller that has its own varargs. */
int latch_verrf(char *err, size_t errlen, int ret, const char *fmt, va_list ap);
/* The same for a file: `FILE:LINE: message`, or `FILE: message` when line is 0. */
__attribute__((format(printf, 6, 7))) int latch_errf_at(char *err, size_t errlen, int ret, const char *file, int line,
							const char *fmt, ...);

/* ---- paths ---- */

/* every path latch keeps things at, as a suffix for latch_path() */
#include "common/paths.h"

/*
 * $LATCH_ROOT/SUFFIX, or /SUFFIX without it; the suffix is e.g.
 * "var/lib/latch/sandboxes".  Returns 0 or -ENAMETOOLONG.
 */
__attribute__((format(printf, 3, 4))) int latch_path(char *buf, size_t len, const char *fmt, ...);
/* mkdir -p: every missing level of dir is made with mode.  0 or -errno. */
int latch_mkdirs(const char *dir, mode_t mode);

/* ---- files ---- */

/*
 * Replace path with data in one step: a temp file beside it, written and
 * fsynced, renamed over it.  A reader sees the old file or the new one,
 * never half of either.  0 or -errno.
 */
int latch_write_atomic(const char *path, mode_t mode, const void *data, size_t len);

/* What latch_file_check() and latch_open_trusted() ask of a file. */
enum latch_file_kind {
	LATCH_FILE_CONFIG, /* owned by root (or the caller), writable by nobody else */
	LATCH_FILE_SECRET, /* the same, and readable by nobody else either (0600) */
	LATCH_FILE_PLAIN, /* latch's own state: a regular file; owner and mode not asked */
};
/*
 * Refuse a config or secrets file that someone else could have written (or,
 * for a secret, read): a symbolic link, not a regular file, owned by another
 * user, or with group/other permission bits.  st is the file's fstat or
 * lstat (never stat: that would follow a link).  0, or the errno of
 * latch_open_trusted() with `PATH: ...; run FIX` in err.
 */
int latch_file_check(const char *path, const struct stat *st, enum latch_file_kind kind, char *err, size_t errlen);
/*
 * Open a file latch trusts (latch.conf, a profile, a kit, a secret, the
 * price table, a state file) for reading: the one way to do it, so every
 * reader refuses the same things with the same errno:
 *   -ENOENT  no such file; err untouched (the caller says whether that is fine)
 *   -ELOOP   a symbolic link (a link could point anywhere)
 *   -EINVAL  not a regular file: a FIFO (never waited on), a device, a directory
 *   -EPERM   owned by another user than root or the caller, writable by group
 *            or others, or (LATCH_FILE_SECRET) readable by them
 *   other    the errno of open(2) or fstat(2), as "cannot open: ..."
 * Each refusal writes `PATH: ...` with the fix in err; what names the file
 * in the link's line ("a profile": "... a profile must be a regular file";
 * NULL: no name).  Returns the descriptor (O_CLOEXEC), or -errno; st, when
 * not NULL, gets the file's fstat.
 */
int latch_open_trusted(const char *path, enum latch_file_kind kind, const char *what, struct stat *st, char *err,
		       size_t errlen);

/* ---- key = value files ---- */

enum latch_kv_type {
	LATCH_KV_STRING, /* char[size] at offset */
	LATCH_KV_UINT, /* uint32_t at offset, min..max */
	LATCH_KV_ADDR4, /* struct latch_addr at offset, IPv4 */
	LATCH_KV_ADDR6, /* struct latch_addr at offset, IPv6 */
	LATCH_KV_MAC, /* uint8_t[6] at offset */
	LATCH_KV_CUSTOM, /* parse() decides */
	LATCH_KV_SECONDS, /* uint32_t seconds at offset, min..max: a duration (60, 90s, 5m, 1h) */
	LATCH_KV_MIB, /* uint32_t MiB at offset, min..max MiB: a size (32, 512M, 1G) */
	LATCH_KV_LIST, /* LATCH_KV_CUSTOM that may repeat: parse() gets each line, print() writes them all */
};

/*
 * One key of a `key = value` file: its name, where its value goes in the
 * struct, and how it is checked.  A table of these is the whole description
 * of a file format; latch_kv_read() and latch_kv_write() both walk it.
 */
struct latch_kv_key {
	const char *name;
	enum latch_kv_type type;
	size_t offset, size; /* of the field in the struct */
	uint32_t min, max; /* LATCH_KV_UINT, LATCH_KV_SECONDS, LATCH_KV_MIB */
	/* LATCH_KV_CUSTOM: store value into obj, or return -EINVAL with a line in msg */
	int (*parse)(void *obj, const char *value, char *msg, size_t msglen);
	/* LATCH_KV_CUSTOM, for latch_kv_write(): print the value (nothing: key left out) */
	void (*print)(FILE *f, const void *obj);
	const char *help; /* how to write the value, for the error line */
};

#define LATCH_KV_FIELD(type, field) offsetof(type, field), sizeof(((type *)0)->field)
#define LATCH_KV_STR(key, type, field, help)                                              \
	{                                                                                 \
		key, LATCH_KV_STRING, LATCH_KV_FIELD(type, field), 0, 0, NULL, NULL, help \
	}
#define LATCH_KV_U32(key, type, field, lo, hi, help)                                      \
	{                                                                                 \
		key, LATCH_KV_UINT, LATCH_KV_FIELD(type, field), lo, hi, NULL, NULL, help \
	}
#define LATCH_KV_SECS(key, type, field, lo, hi)                                              \
	{                                                                                    \
		key, LATCH_KV_SECONDS, LATCH_KV_FIELD(type, field), lo, hi, NULL, NULL, NULL \
	}
#define LATCH_KV_MIBS(key, type, field, lo, hi)                                          \
	{                                                                                \
		key, LATCH_KV_MIB, LATCH_KV_FIELD(type, field), lo, hi, NULL, NULL, NULL \
	}
#define LATCH_KV_A4(key, type, field)                                                                 \
	{                                                                                             \
		key, LATCH_KV_ADDR4, LATCH_KV_FIELD(type, field), 0, 0, NULL, NULL, "an IPv4 address" \
	}
#define LATCH_KV_A6(key, type, field)                                                                 \
	{                                                                                             \
		key, LATCH_KV_ADDR6, LATCH_KV_FIELD(type, field), 0, 0, NULL, NULL, "an IPv6 address" \
	}
#define LATCH_KV_MACADDR(key, type, field)                                                                          \
	{                                                                                                           \
		key, LATCH_KV_MAC, LATCH_KV_FIELD(type, field), 0, 0, NULL, NULL, "a MAC such as 52:54:00:12:34:56" \
	}
#define LATCH_KV_FN(key, parse_fn, print_fn)                               \
	{                                                                  \
		key, LATCH_KV_CUSTOM, 0, 0, 0, 0, parse_fn, print_fn, NULL \
	}

#define LATCH_KV_LIST_FN(key, parse_fn, print_fn)                        \
	{                                                                \
		key, LATCH_KV_LIST, 0, 0, 0, 0, parse_fn, print_fn, NULL \
	}

/* Flags of latch_kv_read(). */
#define LATCH_KV_SAFE_FILE (1u << 0) /* latch_file_check(LATCH_FILE_CONFIG) first */
#define LATCH_KV_UNKNOWN_OK (1u << 1) /* skip unknown keys (a newer latch wrote them) */
#define LATCH_KV_TRAILING_COMMENT (1u << 2) /* "key = value # note": '#' after a blank ends the value */

/*
 * Read path into obj (which the caller has filled with defaults): blank lines
 * and '#' lines are skipped, every other line is `key = value`.  Unknown keys
 * (without LATCH_KV_UNKNOWN_OK), repeated keys and bad values are refused
 * with `FILE:LINE: ...`; an unknown key's line offers the nearest known key
 * and points at doc, the format's man page ("latch.conf(5)"; NULL: it lists
 * the keys).  Returns 0, -ENOENT (no file; err untouched), or -EINVAL/-EPERM
 * with a line in err.
 */
int latch_kv_read(const char *path, const struct latch_kv_key *keys, int n_keys, unsigned flags, const char *doc,
		  void *obj, char *err, size_t errlen);
/* The same over text already read (and checked) by the caller; text is cut into lines in place. */
int latch_kv_parse(const char *path, char *text, const struct latch_kv_key *keys, int n_keys, unsigned flags,
		   const char *doc, void *obj, char *err, size_t errlen);
/*
 * Write obj as `key = value` lines under a '#' header line, atomically
 * (latch_write_atomic).  Empty strings and unset addresses are left out.
 */
int latch_kv_write(const char *path, mode_t mode, const char *header, const struct latch_kv_key *keys, int n_keys,
		   const void *obj, char *err, size_t errlen);

/* ---- per-sandbox state ---- */

/*
 * Each sandbox's state on the host, one file per owner: the owning module
 * says what its fields are (a key table); this API owns the rest, the same
 * for all of them: where the file is, that it is root's and 0600 in a 0700
 * directory, the one atomic write (a reader sees the old file or the new
 * one), the `key = value` format (a list is its key repeated), and the
 * refusal of a file someone else could have written.  No lock: each file
 * has one writer at a time (the CLI under the lifecycle lock, or latchd).
 */
enum latch_state_kind {
	LATCH_STATE_PROFILE, /* policy/NAME.profile: the profile it runs (profile/) */
	LATCH_STATE_KIT, /* policy/NAME.kit: kit, port, placeholders; read as a secret (kit/) */
	LATCH_STATE_LEARNED, /* policy/NAME.learned: the names its resolver answered (latchd/) */
	LATCH_STATE_GRANTS, /* policy/NAME.grants: its asks and active grants (latchd/) */
	LATCH_STATE_VM, /* sandboxes/NAME/sandbox: a VM sandbox's slot and guest (vm/) */
	LATCH_STATE_AGENT, /* policy/NAME.agent: the `latch agent run` that owns it (sandbox/) */
	LATCH_STATE_KINDS
};

/* One kind's format, as its owner gives it. */
struct latch_state_format {
	const struct latch_kv_key *keys;
	int n_keys;
	unsigned flags; /* latch_kv_read()'s: LATCH_KV_UNKNOWN_OK for a file a newer latch may have written */
	/*
	 * The file as an older latch wrote it (NULL: there is none), read when
	 * its first line is not `KEY = ...` of one of keys; text is the whole
	 * file, writable.  0 or -EINVAL with `PATH:LINE: ...` in err.
	 */
	int (*legacy)(const char *path, char *text, void *obj, char *err, size_t errlen);
};

/* The file of sandbox NAME's state of KIND.  0, -EINVAL (not a sandbox name) or -ENAMETOOLONG. */
int latch_state_file_path(const char *name, enum latch_state_kind kind, char *buf, size_t len);
/*
 * Read it into obj (which the caller has filled with defaults).  0, -ENOENT
 * (none; err untouched), -EPERM (a link, or a file others could have
 * written, or read for a secret), -EINVAL (not a regular file, or not in the
 * format), -EFBIG; each refusal with one line in err naming the file.
 */
int latch_state_file_read(const char *name, enum latch_state_kind kind, const struct latch_state_format *fmt, void *obj,
			  char *err, size_t errlen);
/* Replace it with obj, atomically, 0600 (its directory made 0700).  0 or -errno with a line in err. */
int latch_state_file_write(const char *name, enum latch_state_kind kind, const struct latch_state_format *fmt,
			   const char *header, const void *obj, char *err, size_t errlen);
/* The file's bytes, checked the same way (a legacy reader's input, a test's fixture); *text is malloc'd, NUL-ended. */
int latch_state_file_read_raw(const char *name, enum latch_state_kind kind, char **text, size_t *len, char *err,
			      size_t errlen);
int latch_state_file_write_raw(const char *name, enum latch_state_kind kind, const void *data, size_t len, char *err,
			       size_t errlen);
/* Remove it; 0 when it is already gone. */
int latch_state_file_remove(const char *name, enum latch_state_kind kind, char *err, size_t errlen);
/*
 * The sandbox is gone: remove what was kept of it under its name (profile,
 * learned names, grants, an agent run's owner mark), so a new sandbox of the name inherits nothing.
 * Its kit and VM record have their own removal (they undo more than a file).
 * 0, or the first error with a line in err (it goes on with the others).
 */
int latch_state_forget(const char *name, char *err, size_t errlen);

/* ---- text from someone untrusted, shown to a person ---- */

/*
 * Text that another party wrote and latch shows a person inside words of its
 * own (a sandbox's reason for a grant, quoted in a notification): valid UTF-8
 * of at most max bytes, one line, and nothing that could end latch's quoting
 * or make the text read otherwise than its characters: no control character
 * (C0, DEL, C1), no double quote or a lookalike of one (U+201C-201F, U+2033,
 * U+FF02), no line or paragraph separator (U+2028, U+2029), no text-direction
 * control (U+061C, U+200E-200F, U+202A-202E, U+2066-2069), no invisible
 * character (U+00AD, U+180E, U+200B-200D, U+2060-2064, U+FEFF, U+FFF9-FFFB,
 * the tags U+E0000-E007F).  Everything else passes unchanged: an apostrophe,
 * "café", any script.  0, or -EINVAL with one line in err that names what
 * (e.g. "the reason") and the first character refused by its code point and
 * byte offset, never the text itself.
 */
int latch_text_check(const char *what, const char *s, size_t max, char *err, size_t errlen);
/*
 * s as latch_text_check() would pass it, for output: every character it
 * refuses written as \u{XXXX} and every byte that is not UTF-8 as \x{XX}
 * (no quote, no control), the rest unchanged.  Always terminated; cut at a
 * character, never inside one or an escape.  0, or -ENOSPC when it was cut.
 */
int latch_text_escape(const char *s, char *out, size_t len);

/* ---- time ---- */

/*
 * Now on CLOCK_MONOTONIC, in nanoseconds or milliseconds: the one clock of
 * every deadline, timeout and interval latch measures (never the wall clock,
 * which can step).  Its zero is arbitrary: compare two readings, never show
 * one.  Milliseconds are signed so that "deadline - now" may go below zero.
 */
uint64_t latch_now_ns(void);
int64_t latch_now_ms(void);

/* ---- hashing ---- */

/*
 * FNV-1a over LEN bytes, going on from H: start from LATCH_FNV1A_INIT, and
 * feed several fields by passing each result on.  The one hash of latch's
 * user-space tables (audit rate limits, the resolver cache, learned names,
 * profile names, policy writes).
 */
#define LATCH_FNV1A_INIT 2166136261u
uint32_t latch_fnv1a(uint32_t h, const void *data, size_t len);

/* ---- addresses, names, numbers ---- */

struct latch_addr {
	int family; /* AF_INET or AF_INET6; 0 when unset */
	union {
		struct in_addr v4;
		struct in6_addr v6;
		uint8_t bytes[16];
	};
};

int latch_parse_addr(const char *s, struct latch_addr *a, char *err, size_t errlen);
void latch_addr_format(const struct latch_addr *a, char *buf, size_t len);
/* "ADDR/LEN" of the given family (AF_INET or AF_INET6), len in min..max, host bits zero. */
int latch_parse_prefix(const char *s, int family, int min, int max, struct latch_addr *a, int *len, char *err,
		       size_t errlen);
int latch_parse_mac(const char *s, uint8_t mac[6], char *err, size_t errlen);
/* A decimal number in min..max: 0, -EINVAL (not a number) or -ERANGE. */
int latch_parse_uint(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/*
 * A decimal amount as a count of millionths: "5", "5.00", "0.075" and
 * "$5.25" (a leading '$' is allowed) give 5000000, 5000000, 75000 and
 * 5250000.  At most 6 decimals, no sign, no exponent, no blanks; at most max.
 * Money in latch is integer micro-dollars (and prices micro-dollars per
 * million tokens), so no float ever holds an amount.  0, -EINVAL or -ERANGE.
 */
int latch_parse_micros(const char *s, int64_t max, int64_t *out);

/*
 * Durations and sizes: one grammar each, for every option, latch.conf key
 * and kit field (latch(8), "Durations and sizes").  A value is decimal
 * digits and at most one unit: no sign, blank, fraction, hex, exponent, nan
 * or inf, and a value too large for 64 bits is -ERANGE, never wrapped.
 *
 * A duration: N (seconds), Nms, Ns, Nm, Nh or Nd.  latch_parse_duration_ms()
 * is for the fields where a part of a second means something (a room's
 * deadline); latch_parse_seconds() refuses one ("1500ms").  Each writes
 * `WHAT: 'S' is not a duration (60, 90s, 5m, 1h)` or `WHAT: 'S' is out of
 * range; give MIN to MAX` in err.  0, -EINVAL or -ERANGE.
 */
int latch_parse_duration_ms(const char *what, const char *s, uint64_t min_ms, uint64_t max_ms, uint64_t *ms, char *err,
			    size_t errlen);
int latch_parse_seconds(const char *what, const char *s, uint32_t min_s, uint32_t max_s, uint32_t *secs, char *err,
			size_t errlen);
/* latch_parse_seconds() into milliseconds, without a message (max_s at most 49 days). */
int latch_parse_duration(const char *s, uint32_t min_s, uint32_t max_s, uint32_t *ms);
/*
 * A size: N, or N followed by K, M, G or T (either case; binary: 1K is
 * 1024).  A bare N counts in UNIT bytes (1, or 1 << 20 for a key in MiB),
 * and a value must be a whole number of UNITs.  Into bytes, min..max, with
 * the same kind of line in err.  0, -EINVAL or -ERANGE.
 */
int latch_parse_size(const char *what, const char *s, uint64_t unit, uint64_t min, uint64_t max, uint64_t *bytes,
		     char *err, size_t errlen);
/* 90000 -> "90s", 3600000 -> "1h"; 1 << 30 -> "1G": the largest unit that is exact. */
void latch_format_duration(uint64_t ms, char *buf, size_t len);
void latch_format_size(uint64_t bytes, char *buf, size_t len);
/* A sandbox name: 1-LATCH_NAME_MAX characters of a-z, 0-9 and '-'. */
int latch_parse_name(const char *s, char *err, size_t errlen);
/*
 * The name of a file latch looks up in one of its directories (a profile, a
 * kit): 1-64 characters, no '/', no leading '.', nothing that could walk out
 * of the directory.  what names the kind for the error ("profile", "kit").
 */
int latch_parse_file_name(const char *what, const char *s, char *err, size_t errlen);

/*
 * One option of a command, written once: getopt's entry (latch_opt_getopt),
 * the line its help prints and the completion's word.  A table ends with a
 * row whose name is NULL.
 */
struct latch_opt {
	const char *name; /* "dev" is --dev */
	int key; /* what getopt returns for it; 0: the command reads it by hand, at its place */
	const char *arg; /* its argument as the help names it ("IFACE"); NULL: it takes none */
	const char *help;
	bool has_short; /* -KEY is the option too ("-v, --verbose") */
};
struct option;
/*
 * getopt_long()'s LONGOPTS[MAX] and OPTSTRING[LEN] from OPTS, the rows with
 * a key (IN_ORDER: options stop at the first word that is none, "+").
 * 0, or -ENOSPC when they don't fit.
 */
int latch_opt_getopt(const struct latch_opt *opts, bool in_order, struct option *longopts, size_t max, char *optstring,
		     size_t len);
/* "--name ARG" or "-k, --name ARG", as help and the JSON help show the option. */
void latch_opt_spelling(const struct latch_opt *o, char *buf, size_t len);

/* ---- DNS names and the rebinding filter ---- */

/*
 * The resolver, the broker and the profiles must agree on what a name is, or
 * a name could be allowed in one spelling and asked for in another: all go
 * through latch_dns_name_normalize().  latch_addr_nonpublic() is the DNS
 * rebinding filter: an allowed public name must not be able to point the
 * sandbox at the host's LAN, loopback or a cloud metadata service.  Pure
 * functions, no I/O, so tests/ can hold every corner.
 */
#define LATCH_DNS_NAME_MAX 253
#define LATCH_DNS_LABEL_MAX 63

/*
 * Lowercase IN, drop one trailing dot and check it is a host name: labels of
 * 1-63 characters of a-z, 0-9, '-' and '_', none starting or ending with '-',
 * 253 characters at most.  Returns 0 or -EINVAL (also when OUT is too small).
 */
int latch_dns_name_normalize(const char *in, char *out, size_t len);

/* Why IN is not a host name ("has an empty label", ...), or NULL when it is. */
const char *latch_dns_name_problem(const char *in);

/*
 * Does NAME fall under the wildcard "*.DOMAIN"?  Both normalized (compared
 * without regard to case all the same).  A wildcard covers every name below
 * DOMAIN, at any depth, but never DOMAIN itself.
 */
bool latch_wildcard_match(const char *domain, const char *name);

/*
 * NULL when A may be the answer to a public name; otherwise one stable word
 * saying why not: "unspecified", "loopback", "private", "cgnat", "link-local",
 * "metadata", "multicast", "reserved" (192.0.0.0/24, 240/4, ::/8...),
 * "benchmarking" (198.18.0.0/15), "ipv4-mapped", or "nat64", "6to4" and
 * "teredo" when the IPv4 address they embed is not public.  The
 * documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
 * 2001:db8::/32) count as public: the tests use them as the internet.
 * The host's own addresses change at run time and are not judged here: the
 * resolver refuses them itself.
 */
const char *latch_addr_nonpublic(const struct latch_addr *a);

#endif
