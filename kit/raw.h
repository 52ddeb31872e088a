/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * raw.h - a kit file as read, before any check (private to kit/).
 *
 * schema.c fills these: libcyaml loads every field the schema names (strings
 * as written, NULL when absent), and a walk of libyaml's document tree adds
 * what a libcyaml schema can't describe, each credential's `env` (a mapping
 * whose keys are the kit's to choose), and names the keys latch does not
 * read.  validate.c turns a raw kit into a struct latch_kit or refuses it.
 */
#ifndef LATCH_KIT_RAW_H
#define LATCH_KIT_RAW_H

#include <stdint.h>

#include "kit/kit.h"

struct raw_caps {
	uint32_t *requests_per_hour; /* NULL: not given */
	uint32_t *requests_per_day;
	char *dollars_per_day; /* a decimal, read as text: money is never a float */
};

struct raw_alt {
	char *name, *upstream, *base_path, *secret, *secret_file, *header, *scheme, *provider, *ca_file;
};

struct raw_env {
	char *name, *value;
	int line;
};

struct raw_priced {
	char *method, *path;
	char *dollars_per_request; /* a decimal, read as text */
};

struct raw_cred {
	char *name, *upstream, *secret, *secret_file, *header, *scheme, *provider, *ca_file;
	char **methods;
	unsigned methods_count;
	char **paths;
	unsigned paths_count;
	struct raw_caps *caps;
	struct raw_alt *alternatives;
	unsigned alternatives_count;
	struct raw_priced *priced_endpoints;
	unsigned priced_endpoints_count;
	char **allow_provider_tools;
	unsigned allow_provider_tools_count;
};

struct raw_setup {
	char *npm, *version, *integrity;
	char **bin;
	unsigned bin_count;
};

struct raw_kit {
	char *name, *description, *provider;
	char **command;
	unsigned command_count;
	char **egress_allow;
	unsigned egress_allow_count;
	struct raw_cred *credentials;
	unsigned credentials_count;
	struct raw_setup *setup;
	unsigned setup_count;
};

/* What the document walk found beside libcyaml. */
struct raw_doc {
	struct raw_env **env; /* env[i]: credential i's variables, in order */
	int *n_env;
	int n_creds;
	int *env_line; /* line of credential i's `env:` (0: none) */
	char unknown[LATCH_ERR_MAX]; /* "image, setup, credential \"x\": pass_env" */
};

/*
 * Read TEXT: its document tree first (a syntax error, an alias, or an env
 * that is not a mapping of one-line values is `SOURCE:LINE: ...`), then
 * libcyaml with the schema (a wrong type is `SOURCE:LINE: FIELD: ...`).
 * 0 or -errno with one line in err; on success free both with kit_raw_free().
 */
int kit_raw_read(const char *text, size_t len, const char *source, struct raw_kit **kit, struct raw_doc *doc, char *err,
		 size_t errlen);
void kit_raw_free(struct raw_kit *kit, struct raw_doc *doc);

/* What a check reports against: the kit's file, the credential (where), and the caller's error buffer. */
struct kit_ctx {
	const char *source;
	char where[128]; /* `credential "x": ` and so on, or "" */
	char *err;
	size_t errlen;
};

/* One refusal: `SOURCE: WHERE MESSAGE` into c->err; returns -EINVAL. */
__attribute__((format(printf, 2, 3))) int kit_fail(struct kit_ctx *c, const char *fmt, ...);
/* Is S an HTTP token (a method's or a header name's characters)? */
bool kit_token_ok(const char *s);
/* A plain absolute path prefix into OUT ('/' trailing dropped); ALLOW_EMPTY for a base_path. */
int kit_check_path(struct kit_ctx *c, const char *field, const char *s, bool allow_empty, char *out, size_t outlen);
/* metered.c: a credential's caps, priced_endpoints and allow_provider_tools; 0 or kit_fail()'s -EINVAL. */
int kit_check_caps(struct kit_ctx *c, const struct raw_caps *r, struct latch_kit_caps *caps);
int kit_check_priced(struct kit_ctx *c, const struct raw_cred *r, struct latch_kit_cred *cr);
int kit_check_tools(struct kit_ctx *c, const struct raw_cred *r, struct latch_kit_cred *cr);

/* npm.c: the kit's setup entries into kit->setup; 0 or kit_fail()'s -EINVAL. */
int kit_check_setup(struct kit_ctx *c, const struct raw_kit *raw, struct latch_kit *kit);

/* validate.c: check RAW and build the kit; 0 or -errno with one line in err. */
int kit_build(const struct raw_kit *raw, const struct raw_doc *doc, const char *source, const char *default_name,
	      const struct latch_kit_opts *opts, struct latch_kit *kit, char *err, size_t errlen);

/*
 * load.c: PATH whole into *text (NUL-terminated, *len bytes), refusing a link
 * (O_NOFOLLOW), a file latch_file_check(KIND) refuses, and more than MAX
 * bytes.  -ENOENT without a message when there is no such file.  A secret's
 * buffer is the caller's to wipe.
 */
int kit_read_checked(const char *path, enum latch_file_kind kind, size_t max, char **text, size_t *len, char *err,
		     size_t errlen);

/* Is S an environment variable's name: [A-Za-z_][A-Za-z0-9_]*, at most LATCH_KIT_VAR_MAX? */
bool kit_var_name_ok(const char *s);

#endif
