/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kit.h - kits: what a sandbox is given to work with, without its keys.
 *
 * A kit is a YAML file in kosa8's shape (docs/kits.md is the user's guide):
 *
 *	name: weather
 *	description: A shell that can call a weather API without holding its key
 *	egress_allow: [docs.example.com]	profile entries, joined to the sandbox's policy
 *	credentials:				each one a route on the sandbox's broker
 *	  - name: weather
 *	    upstream: https://api.example.com
 *	    secret: WEATHER_API_KEY		from the environment of `latch up`
 *	    header: Authorization
 *	    scheme: "Bearer "
 *	    methods: [GET]
 *	    paths: [/v1/forecast]
 *	    env:
 *	      WEATHER_API_URL: "{{url}}"	http://HOST_ADDR:PORT/weather
 *	      WEATHER_API_KEY: "{{placeholder}}"	latch-placeholder-<32 hex>
 *
 * A kosa8 kit file loads unchanged: the fields latch does not read are named
 * in one warning (struct latch_kit.warning), never refused.  latch adds
 * secret_file, ca_file, provider, caps and alternatives.  Every check runs at
 * load time, and the first failure is one line in err that names the file,
 * the credential and the fix, e.g.
 *
 *	./weather.yaml: credential "weather": env must give the sandbox {{placeholder}} in some variable
 *
 * Kit NAME is $LATCH_ROOT/etc/latch/kits/NAME.yaml when that file exists
 * (root-owned, writable by nobody else, not a link), else the built-in of
 * that name (compiled from kit/kits/NAME.yaml): claude, codex, gemini, shell.
 *
 * The sandbox holds a placeholder per credential, never the key.  Secrets
 * live in struct latch_kit_secrets: pages of their own, locked, left out of
 * core dumps and forks, wiped before they are freed.  Nothing here prints a
 * secret or writes one anywhere.
 */
#ifndef LATCH_KIT_H
#define LATCH_KIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "profile/profile.h"

#define LATCH_KIT_NAME_MAX 64 /* kit names: latch_parse_file_name("kit") */
#define LATCH_KIT_CRED_NAME_MAX 32 /* credential and alternative names: 1-32 of a-z, 0-9, '-' */
#define LATCH_KIT_ROUTE_MAX (2 * LATCH_KIT_CRED_NAME_MAX + 1) /* "cred" or "cred/alt" */
#define LATCH_KIT_DESC_MAX 256
#define LATCH_KIT_CREDS_MAX 16
#define LATCH_KIT_ALTS_MAX 8 /* alternatives of one credential */
#define LATCH_KIT_EGRESS_MAX 256 /* egress_allow entries */
#define LATCH_KIT_COMMAND_MAX 64 /* words of command */
#define LATCH_KIT_METHODS_MAX 16
#define LATCH_KIT_PATHS_MAX 32
#define LATCH_KIT_ENV_MAX 16 /* variables of one credential */
#define LATCH_KIT_HOST_MAX 253
#define LATCH_KIT_PATH_MAX 255 /* a path prefix, a base path */
#define LATCH_KIT_FILE_PATH_MAX 255 /* ca_file, secret_file */
#define LATCH_KIT_HEADER_MAX 64
#define LATCH_KIT_SCHEME_MAX 32
#define LATCH_KIT_METHOD_MAX 16
#define LATCH_KIT_VAR_MAX 64 /* an environment variable's name */
#define LATCH_KIT_ENV_VALUE_MAX 512 /* an env template */
#define LATCH_KIT_PRICED_MAX 16 /* priced_endpoints of one credential */
#define LATCH_KIT_PRICED_STARS 4 /* '*'s in one priced endpoint's path */
#define LATCH_KIT_FILE_MAX (256 * 1024) /* bytes of a kit file */
#define LATCH_KIT_SECRET_MAX 8192 /* bytes of one secret */
#define LATCH_KIT_SETUP_MAX 8 /* setup entries: the packages a kit installs */
#define LATCH_NPM_NAME_MAX 214 /* npm's own limit, scope included */
#define LATCH_NPM_VERSION_MAX 64
#define LATCH_SHA512_LEN 64
#define LATCH_NPM_INTEGRITY_MAX 100 /* "sha512-" and 88 base64 characters */
#define LATCH_NPM_BINS_MAX 8 /* commands one package links into the guest's PATH */
#define LATCH_NPM_BIN_NAME_MAX 64

/* Who bills a credential's requests: budget/ keeps caps per provider. */
enum latch_provider {
	LATCH_PROVIDER_OTHER,
	LATCH_PROVIDER_OPENAI,
	LATCH_PROVIDER_ANTHROPIC,
	LATCH_PROVIDER_GEMINI,
};
/* "other", "openai", "anthropic", "gemini": the spelling kits and budget/ use. */
const char *latch_provider_name(enum latch_provider p);

/*
 * Tools that have the provider itself fetch from a URL the request chooses
 * (the guest's data would leave through the provider, past the sandbox's
 * profile): refused on a metered route unless the credential's
 * allow_provider_tools names them.  The spend meter reads them in the
 * request body (budget/budget.h, enum budget_fetch_tool: the same names).
 */
enum latch_kit_tool {
	LATCH_KIT_TOOL_WEB_FETCH, /* Anthropic's web_fetch tool */
	LATCH_KIT_TOOL_MCP, /* a remote MCP server: Anthropic's mcp_servers, OpenAI Responses' mcp tool */
	LATCH_KIT_TOOL_URL_CONTEXT, /* Gemini's url_context tool */
	LATCH_KIT_TOOLS,
};
/* "web_fetch", "mcp", "url_context". */
const char *latch_kit_tool_name(enum latch_kit_tool t);

/*
 * An endpoint the spend meter can't price (a batch, an upload, images,
 * video), allowed on the route at a fixed price a request: without one, a
 * metered route refuses it.
 */
struct latch_kit_priced {
	char method[LATCH_KIT_METHOD_MAX + 1]; /* upper case, one of the credential's methods */
	char path[LATCH_KIT_PATH_MAX + 1]; /* exact, under one of its paths; '*' is one or more bytes but '/' */
	uint64_t microdollars; /* dollars_per_request: "5.00" is 5,000,000; 0 is free */
};

/* A credential's own caps, over latch.conf's provider defaults.  0: not set here. */
struct latch_kit_caps {
	uint32_t requests_per_hour;
	uint32_t requests_per_day;
	uint64_t microdollars_per_day; /* dollars_per_day: "12.50" is 12,500,000; no floats */
};

/*
 * Where a route's requests go and what authenticates them there: a
 * credential's upstream, or one of its alternatives.
 */
struct latch_kit_upstream {
	char host[LATCH_KIT_HOST_MAX + 1]; /* lower-case name, or an address without brackets */
	uint16_t port; /* 443 unless the URL says */
	bool tls; /* false only for an alternative on a loopback model server */
	char base_path[LATCH_KIT_PATH_MAX + 1]; /* put before the request's path ("" for a credential) */
	char ca_file[LATCH_KIT_FILE_PATH_MAX + 1]; /* "" : the system's CA store */
	char secret_var[LATCH_KIT_VAR_MAX + 1]; /* secret: VAR (from latch up's environment) */
	char secret_file[LATCH_KIT_FILE_PATH_MAX + 1]; /* or secret_file: PATH; both "": no key (loopback only) */
	char header[LATCH_KIT_HEADER_MAX + 1]; /* where the secret goes */
	char scheme[LATCH_KIT_SCHEME_MAX + 1]; /* put before it, e.g. "Bearer " */
	enum latch_provider provider;
};

/* "https://api.example.com" or "https://[2001:db8::1]:8443", for messages and JSON. */
void latch_kit_upstream_url(const struct latch_kit_upstream *up, char *buf, size_t len);

struct latch_kit_alt {
	char name[LATCH_KIT_CRED_NAME_MAX + 1];
	struct latch_kit_upstream up;
};

struct latch_kit_env {
	char name[LATCH_KIT_VAR_MAX + 1];
	char value[LATCH_KIT_ENV_VALUE_MAX + 1]; /* the template, {{url}} and {{placeholder}} unexpanded */
};

/* One credential: a route on the sandbox's broker, /NAME under the broker's URL. */
struct latch_kit_cred {
	char name[LATCH_KIT_CRED_NAME_MAX + 1];
	struct latch_kit_upstream up;
	/* upper-case; none given: every method but TRACE and CONNECT (n_methods 0) */
	char methods[LATCH_KIT_METHODS_MAX][LATCH_KIT_METHOD_MAX + 1];
	int n_methods;
	/* absolute prefixes, matched on segment boundaries; none given: "/" */
	char paths[LATCH_KIT_PATHS_MAX][LATCH_KIT_PATH_MAX + 1];
	int n_paths;
	struct latch_kit_env env[LATCH_KIT_ENV_MAX]; /* in the file's order */
	int n_env;
	struct latch_kit_caps caps;
	struct latch_kit_alt alts[LATCH_KIT_ALTS_MAX];
	int n_alts;
	struct latch_kit_priced priced[LATCH_KIT_PRICED_MAX]; /* priced_endpoints, in the file's order */
	int n_priced;
	unsigned provider_tools; /* allow_provider_tools: bits 1u << enum latch_kit_tool */
};

/*
 * One installer of a kit's `setup`: an npm package pinned to an exact
 * version and the registry's sha512 integrity.  Its tarball is fetched and
 * checked on the host (kit/setup.c) and nothing else about it is trusted.
 */
struct latch_kit_npm {
	char name[LATCH_NPM_NAME_MAX + 1]; /* "@scope/name" or "name" */
	char version[LATCH_NPM_VERSION_MAX + 1]; /* exact: 1.2.3, 0.171.0-linux-x64 */
	char integrity[LATCH_NPM_INTEGRITY_MAX + 1]; /* "sha512-<base64>", as written */
	unsigned char sha512[LATCH_SHA512_LEN]; /* the same, decoded */
	/* bin: paths in the package, each linked under its base name; none: package.json's bin */
	char bins[LATCH_NPM_BINS_MAX][LATCH_KIT_PATH_MAX + 1];
	int n_bins;
};

struct latch_kit {
	char name[LATCH_KIT_NAME_MAX + 1];
	char description[LATCH_KIT_DESC_MAX + 1];
	char source[PATH_MAX]; /* the file, or "builtin:NAME" */
	bool builtin;
	char **command; /* the agent's command line (n_command words), or NULL */
	int n_command;
	char **egress; /* egress_allow, as written; checked by the profile parser */
	int n_egress;
	/* the same entries one a line: the text latchd layers over the sandbox's profile */
	char *egress_text;
	struct latch_kit_cred *creds;
	int n_creds;
	struct latch_kit_npm *setup; /* what the kit installs in the guest, in order */
	int n_setup;
	/* "" or the one warning: the fields of the file latch does not read */
	char warning[LATCH_ERR_MAX];
};

struct latch_kit_opts {
	const char *dir; /* NULL: $LATCH_ROOT/etc/latch/kits */
};

/* $LATCH_ROOT/etc/latch/kits.  0 or -ENAMETOOLONG. */
int latch_kit_dir(char *buf, size_t len);

/*
 * Kit NAME: DIR/NAME.yaml if it exists, else the built-in.  A file's `name:`,
 * when given, must be NAME.  NULL with errno set and one line in err:
 * ENOENT (no such kit; err lists the kits), EINVAL (a bad field), EPERM or
 * ELOOP (an unsafe file or a link), EFBIG, ENOMEM.
 */
struct latch_kit *latch_kit_load(const char *name, const struct latch_kit_opts *opts, char *err, size_t errlen);
/*
 * One file (what `latch kit check FILE` reads), through the reader
 * latch_kit_load() uses: a file in the kits directory must carry its file's
 * name, as there; elsewhere a kit without `name:` takes the file's.
 */
struct latch_kit *latch_kit_load_file(const char *path, const struct latch_kit_opts *opts, char *err, size_t errlen);
/*
 * Pure: LEN bytes of YAML named SOURCE in messages.  DEFAULT_NAME is the
 * kit's name when the text gives none (NULL: the text must).
 */
struct latch_kit *latch_kit_parse(const char *text, size_t len, const char *source, const char *default_name,
				  const struct latch_kit_opts *opts, char *err, size_t errlen);
/* Accepts NULL. */
void latch_kit_free(struct latch_kit *kit);

/* The credential of that name, or NULL. */
const struct latch_kit_cred *latch_kit_cred_find(const struct latch_kit *kit, const char *name);

struct latch_kit_info {
	char name[LATCH_KIT_NAME_MAX + 1];
	bool builtin; /* compiled in */
	bool file; /* DIR/NAME.yaml exists (and takes the built-in's place) */
};
/*
 * Built-ins and every DIR/NAME.yaml whose NAME is a valid kit name, sorted,
 * each once.  DIR may be NULL (built-ins only) or missing.  Caller frees *out.
 */
int latch_kit_list(const char *dir, struct latch_kit_info **out, int *n, char *err, size_t errlen);

/* ---- setup: a kit's npm installers, fetched and verified on the host (npm.c, setup.c) */

/* npm's name rules: "name" or "@scope/name", lower-case URL-safe, at most 214. */
bool latch_npm_name_ok(const char *s);
/* A bin's path: relative, inside the package, of plain characters, no "." or ".." component. */
bool latch_npm_bin_path_ok(const char *s);
/* An exact semver version (1.2.3, 1.2.3-rc.1, 0.171.0-linux-x64): no range, tag or "latest". */
bool latch_npm_version_ok(const char *s);
/* "sha512-<88 base64>" into its 64 bytes.  0 or -EINVAL (sha1, another hash, bad base64). */
int latch_npm_integrity_parse(const char *s, unsigned char sha512[LATCH_SHA512_LEN]);
/* npm's layout: REGISTRY/NAME/-/BASE-VERSION.tgz.  0 or -ENAMETOOLONG. */
int latch_npm_tarball_url(const char *registry, const struct latch_kit_npm *p, char *buf, size_t len);

#define LATCH_NPM_TARBALL_MAX (512ull << 20) /* the largest tarball fetched (Claude Code's is 196 MB) */
#define LATCH_NPM_TIMEOUT 900 /* s: one tarball's whole fetch */

/* Where installers come from: latch.conf's npm_registry and npm_ca_file. */
struct latch_npm_source {
	const char *registry; /* https://HOST[/PATH] */
	const char *ca_file; /* NULL or "": the system's CA store */
	const char *cache_dir; /* NULL: $LATCH_ROOT/var/lib/latch/cache/npm */
	uint32_t timeout; /* s; 0: LATCH_NPM_TIMEOUT */
};

/* A command the package gives: /usr/local/bin/NAME -> the package's PATH. */
struct latch_npm_bin {
	char name[LATCH_NPM_BIN_NAME_MAX + 1];
	char path[LATCH_KIT_PATH_MAX + 1]; /* relative, inside the package */
};

/* A tarball whose bytes matched the pin's sha512: install from fd, never from a path. */
struct latch_npm_tarball {
	int fd; /* read-only, at offset 0; -1: none */
	uint64_t size;
	bool cached; /* it was in the cache (and was hashed again) */
	char file[PATH_MAX]; /* the cache file it is (messages only) */
	struct latch_npm_bin bins[LATCH_NPM_BINS_MAX];
	int n_bins;
};

/*
 * P's tarball, verified.  From the cache when it is there (a root-owned 0600
 * file named by the hash, hashed again now: a mismatch removes it and is
 * refused); else fetched from SRC's registry over verified TLS (https only,
 * 3 redirects, LATCH_NPM_TARBALL_MAX, the timeout), hashed as it arrives
 * into an unnamed file of the cache directory that gets its name only when
 * the hash matched, so a mismatch keeps nothing.  Then package.json is read
 * from it (its name and version must be P's) for the bins, unless the kit
 * names them.  0 with *out (close it with latch_npm_tarball_close), or
 * -errno with one line in err naming the package (a mismatch: -EBADMSG with
 * the expected and the got hash).
 */
int latch_npm_fetch(const struct latch_kit_npm *p, const struct latch_npm_source *src, struct latch_npm_tarball *out,
		    char *err, size_t errlen);
/* Accepts a closed one. */
void latch_npm_tarball_close(struct latch_npm_tarball *t);
/*
 * What `latch kit pin` asks the registry: NAME@VERSION's dist.integrity,
 * which must be sha512.  0 or -errno with one line in err.
 */
int latch_npm_registry_integrity(const struct latch_npm_source *src, const char *name, const char *version,
				 char out[LATCH_NPM_INTEGRITY_MAX + 1], char *err, size_t errlen);
/*
 * KIT's text (TEXT, LEN bytes, SOURCE in messages) with the setup entry of
 * package NAME pinned to VERSION and INTEGRITY: only those two values are
 * rewritten, the rest of the file stays byte for byte.  *out is
 * NUL-terminated, the caller's to free.  0 or -errno with one line in err
 * (-ENOENT: the kit installs no package NAME).
 */
int latch_kit_pin_text(const char *text, size_t len, const char *source, const char *name, const char *version,
		       const char *integrity, char **out, char *err, size_t errlen);
/* KIT's text: its built-in's, or its file's read again under the file checks.  Caller frees. */
int latch_kit_text(const struct latch_kit *kit, char **text, size_t *len, char *err, size_t errlen);
/* The built-in kit NAME's text, or NULL. */
const char *latch_kit_builtin_text(const char *name);

/* ---- placeholders */

#define LATCH_PLACEHOLDER_PREFIX "latch-placeholder-"
#define LATCH_PLACEHOLDER_RANDOM 16 /* bytes from getrandom: 128 bits */
#define LATCH_PLACEHOLDER_LEN (sizeof(LATCH_PLACEHOLDER_PREFIX) - 1 + 2 * LATCH_PLACEHOLDER_RANDOM)

/* A fresh placeholder, `latch-placeholder-` and 32 lower-case hex digits.  0 or -errno. */
int latch_placeholder_make(char out[LATCH_PLACEHOLDER_LEN + 1]);
/*
 * Is GIVEN (LEN bytes, not NUL-terminated) the placeholder?  The time it
 * takes does not depend on where the two differ, so a guest can't learn the
 * placeholder of another route (or sandbox) a byte at a time.
 */
bool latch_placeholder_equal(const char *given, size_t len, const char *placeholder);
/* One fresh placeholder per credential of KIT, into out[0..n_creds).  0 or -errno. */
int latch_kit_placeholders_make(const struct latch_kit *kit, char (*out)[LATCH_PLACEHOLDER_LEN + 1]);

/* ---- the sandbox's environment */

/*
 * The env the sandbox gets: each credential's variables with {{url}} =
 * http://HOST:PORT/CREDENTIAL (an IPv6 HOST in brackets) and {{placeholder}}
 * = placeholders[i] of credential i, then HTTPS_PROXY, HTTP_PROXY,
 * https_proxy and http_proxy = http://HOST:PORT, and NO_PROXY, no_proxy =
 * HOST (so a client talks to {{url}} directly, not through its own proxy).
 * A NULL-terminated array of "NAME=VALUE" (*n of them, without the NULL);
 * free it with latch_kit_env_free().  NULL with errno set on failure.
 */
char **latch_kit_env_render(const struct latch_kit *kit, const struct latch_addr *host, uint16_t port,
			    char (*placeholders)[LATCH_PLACEHOLDER_LEN + 1], int *n);
/* Wipes each line (they hold the placeholders) and frees it all.  Accepts NULL. */
void latch_kit_env_free(char **env);

/* ---- secrets */

/* One secret a kit names: a credential's (route "cred") or an alternative's ("cred/alt"). */
struct latch_kit_secret {
	char route[LATCH_KIT_ROUTE_MAX + 1];
	char *value; /* NULL: missing; else LEN bytes (and a NUL) in locked pages of its own */
	size_t len;
	bool locked; /* mlock() took (it may not, under RLIMIT_MEMLOCK) */
};
struct latch_kit_secrets {
	struct latch_kit_secret *v;
	int n;
};

/*
 * Store VALUE for ROUTE (replacing what it had) in pages of its own: locked
 * where RLIMIT_MEMLOCK allows, left out of core dumps (MADV_DONTDUMP) and of
 * forked children (MADV_WIPEONFORK).  A secret goes into a header, so bytes
 * below 0x20 (but a trailing newline, dropped) and 0x7f are refused, as are
 * empty and oversized ones: -EINVAL naming WHAT (the variable or the file),
 * never the value.  What latchd calls with a secret `latch up` handed it.
 */
int latch_kit_secrets_set(struct latch_kit_secrets *s, const char *route, const char *value, size_t len,
			  const char *what, char *err, size_t errlen);
/* ROUTE's secret, or NULL (missing, or no such route); *len gets its length. */
const char *latch_kit_secret_get(const struct latch_kit_secrets *s, const char *route, size_t *len);
/* explicit_bzero every value, unmap it, free the table; s is left empty.  Accepts NULL. */
void latch_kit_secrets_wipe(struct latch_kit_secrets *s);

/* What warn() gets: one line, without "latch: warning: ". */
typedef void (*latch_kit_warn_fn)(const char *line, void *arg);

/*
 * What `latch up` hands latchd: the value of every `secret: VAR` of KIT (its
 * credentials' and their alternatives') from ENVP (NULL: this process's
 * environment).  A variable that is not set (or empty) is a warning, as in
 * kosa8: "VAR is not set on the host; the agent may fail to authenticate";
 * its route is left out and refuses requests.  secret_file secrets are
 * latchd's to read (latch_kit_secrets_read_files).  0 or -errno (a value
 * that can't go into a header: -EINVAL naming the variable); on error *s is
 * wiped.
 */
int latch_kit_secrets_from_env(const struct latch_kit *kit, char *const *envp, struct latch_kit_secrets *s,
			       latch_kit_warn_fn warn, void *arg, char *err, size_t errlen);
/*
 * latchd's half: read every `secret_file: PATH` of KIT into s.  The file
 * must be a regular file (O_NOFOLLOW: no link), owned by root (or the
 * caller), mode 0600 or tighter (latch_file_check, LATCH_FILE_SECRET): an
 * unsafe file is -EPERM/-ELOOP with the fix; a missing one is a warning like
 * a missing variable.  0 or -errno; on error *s is wiped.
 */
int latch_kit_secrets_read_files(const struct latch_kit *kit, struct latch_kit_secrets *s, latch_kit_warn_fn warn,
				 void *arg, char *err, size_t errlen);

enum latch_secret_state {
	LATCH_SECRET_NONE, /* the upstream takes no key (a loopback model server) */
	LATCH_SECRET_SET, /* the variable is set, or the file is there and safe */
	LATCH_SECRET_MISSING, /* the variable is unset or empty, or there is no such file */
	LATCH_SECRET_UNSAFE, /* the file is a link, not root's, or readable by others: why says */
	LATCH_SECRET_UNKNOWN, /* the file can't be looked at by this user: why says */
};
/*
 * Whether UP's secret is there, without reading it (what `latch kits` and
 * `latch kit check` print: "set"/"missing", never a value).  ENVP as above.
 */
enum latch_secret_state latch_kit_secret_state(const struct latch_kit_upstream *up, char *const *envp, char *why,
					       size_t whylen);
/* "none", "set", "missing", "unsafe", "unknown". */
const char *latch_secret_state_name(enum latch_secret_state st);

/* ---- a sandbox's kit, on disk (state.c) */

/*
 * $LATCH_ROOT/var/lib/latch/policy/SANDBOX.kit, root's and 0600: which kit
 * the sandbox has, the broker's port, each credential's placeholder and the
 * alternative it was switched to, and whether the sandbox is stopped.  It
 * holds what the guest was given (so a latchd restart serves the same URLs
 * and placeholders), never a key.  The CLI writes it; latchd reads it.
 */
struct latch_kit_state_cred {
	char name[LATCH_KIT_CRED_NAME_MAX + 1];
	char placeholder[LATCH_PLACEHOLDER_LEN + 1];
	char backend[LATCH_KIT_CRED_NAME_MAX + 1]; /* "" : the credential's own upstream */
};
struct latch_kit_state {
	char kit[LATCH_KIT_NAME_MAX + 1];
	uint16_t port;
	bool stopped; /* `latch down`: latchd keeps no broker, and no key, for it */
	struct latch_kit_state_cred creds[LATCH_KIT_CREDS_MAX];
	int n_creds;
};

int latch_kit_state_path(const char *sandbox, char *buf, size_t len);
/*
 * Read it: -ENOENT (no message) when the sandbox has no kit; a file that is
 * not root's 0600, a link or not in latch's shape is refused with
 * `PATH:LINE: ...` in err.
 */
int latch_kit_state_read(const char *sandbox, struct latch_kit_state *st, char *err, size_t errlen);
/* Replace it atomically, 0600.  0 or -errno with a line in err. */
int latch_kit_state_write(const char *sandbox, const struct latch_kit_state *st, char *err, size_t errlen);
/* Remove it (no file is fine).  0 or -errno. */
int latch_kit_state_remove(const char *sandbox, char *err, size_t errlen);
/* Credential CRED's entry, or NULL. */
struct latch_kit_state_cred *latch_kit_state_cred(const struct latch_kit_state *st, const char *cred);
/*
 * The state of a sandbox given KIT: when OLD (may be NULL) is of the same
 * kit, each credential keeps its placeholder, its alternative (if the kit
 * still has it) and OLD's port, since the guest holds them; otherwise every
 * credential gets a fresh placeholder and the port is PORT.  Not stopped.
 * 0 or -errno (getrandom).
 */
int latch_kit_state_for(const struct latch_kit *kit, uint16_t port, const struct latch_kit_state *old,
			struct latch_kit_state *st);
/*
 * latch_kit_env_render() with ST's placeholders and port: what the sandbox
 * is given.  NULL with errno ESTALE when KIT has a credential ST has no
 * placeholder for (the kit file changed since `up`), else as the render.
 */
char **latch_kit_state_env(const struct latch_kit *kit, const struct latch_kit_state *st, const struct latch_addr *host,
			   int *n);

#endif
