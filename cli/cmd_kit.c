// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_kit.c - `latch kits`, `latch kit check FILE`, and a sandbox's kit:
 * `latch kit NAME secrets` (hand latchd the keys of this environment again)
 * and `latch kit NAME backend CREDENTIAL ALTERNATIVE` (switch a credential
 * to another upstream; the sandbox's URL and placeholder stay).
 *
 * `kits` lists the kits as `kosa8 agent kits` does: built-ins and the files
 * in /etc/latch/kits, each loaded and checked, with the network it adds and
 * where its keys are.  `kit check FILE` loads one file exactly as `latch up`
 * will and says what it would give a sandbox, starting nothing.  Neither
 * prints a secret: a key is "set" or "missing", never its value.
 *
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "cli/cli.h"
#include "kit/kit.h"
#include "loader/loader.h"
#include "profile/profile.h"
#include "sandbox/sandbox.h"

#define NETWORK_WIDTH 35

/* ---- what a kit gives, as JSON */

static json_t *string_array(char *const *v, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* NAME first, then where its requests go and whether its key is there. */
static json_t *upstream_json(const char *name, const struct latch_kit_upstream *up)
{
	char url[LATCH_KIT_HOST_MAX + LATCH_KIT_PATH_MAX + 32], why[LATCH_ERR_MAX];
	enum latch_secret_state st = latch_kit_secret_state(up, NULL, why, sizeof(why));
	json_t *o;

	latch_kit_upstream_url(up, url, sizeof(url));
	o = json_pack("{s:s, s:s, s:s, s:i, s:b, s:s, s:s, s:s}", "name", name, "upstream", url, "host", up->host,
		      "port", up->port, "tls", up->tls, "header", up->header, "scheme", up->scheme, "provider",
		      latch_provider_name(up->provider));
	if (up->ca_file[0])
		json_object_set_new(o, "ca_file", json_string(up->ca_file));
	if (up->secret_var[0])
		json_object_set_new(o, "secret", json_pack("{s:s}", "env", up->secret_var));
	else if (up->secret_file[0])
		json_object_set_new(o, "secret", json_pack("{s:s}", "file", up->secret_file));
	json_object_set_new(o, "secret_state", json_string(latch_secret_state_name(st)));
	if (why[0])
		json_object_set_new(o, "secret_problem", json_string(why));
	return o;
}

static json_t *cred_json(const struct latch_kit_cred *cr)
{
	json_t *o = upstream_json(cr->name, &cr->up), *env = json_array(), *alts = json_array();
	json_t *methods = json_array(), *paths = json_array(), *caps = json_object();

	for (int i = 0; i < cr->n_methods; i++)
		json_array_append_new(methods, json_string(cr->methods[i]));
	for (int i = 0; i < cr->n_paths; i++)
		json_array_append_new(paths, json_string(cr->paths[i]));
	for (int i = 0; i < cr->n_env; i++)
		json_array_append_new(env,
				      json_pack("{s:s, s:s}", "name", cr->env[i].name, "template", cr->env[i].value));
	for (int i = 0; i < cr->n_alts; i++)
		json_array_append_new(alts, upstream_json(cr->alts[i].name, &cr->alts[i].up));
	if (cr->caps.requests_per_hour)
		json_object_set_new(caps, "requests_per_hour", json_integer(cr->caps.requests_per_hour));
	if (cr->caps.requests_per_day)
		json_object_set_new(caps, "requests_per_day", json_integer(cr->caps.requests_per_day));
	if (cr->caps.microdollars_per_day)
		json_object_set_new(caps, "microdollars_per_day", json_integer(cr->caps.microdollars_per_day));
	/* methods [] is every method but TRACE and CONNECT */
	json_object_set_new(o, "methods", methods);
	json_object_set_new(o, "paths", paths);
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "caps", caps);
	json_object_set_new(o, "alternatives", alts);
	return o;
}

/* The names of the variables the sandbox gets, in order. */
static json_t *env_names(const struct latch_kit *kit)
{
	static const char *const own[] = { "HTTPS_PROXY", "HTTP_PROXY", "https_proxy",
					   "http_proxy",  "NO_PROXY",	"no_proxy" };
	json_t *a = json_array();

	for (int i = 0; i < kit->n_creds; i++)
		for (int e = 0; e < kit->creds[i].n_env; e++)
			json_array_append_new(a, json_string(kit->creds[i].env[e].name));
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		json_array_append_new(a, json_string(own[i]));
	return a;
}

/* What the kit installs: each package, its pin, and the bins the kit names (none: package.json's). */
static json_t *setup_json(const struct latch_kit *kit)
{
	json_t *a = json_array();

	for (int i = 0; i < kit->n_setup; i++) {
		const struct latch_kit_npm *p = &kit->setup[i];
		json_t *bins = json_array();

		for (int b = 0; b < p->n_bins; b++)
			json_array_append_new(bins, json_string(p->bins[b]));
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:o}", "npm", p->name, "version", p->version,
						   "integrity", p->integrity, "bin", bins));
	}
	return a;
}

static json_t *kit_json(const struct latch_kit *kit)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:b}", "name", kit->name, "description", kit->description, "source",
			      kit->source, "builtin", kit->builtin);
	json_t *creds = json_array();

	json_object_set_new(o, "command", string_array(kit->command, kit->n_command));
	json_object_set_new(o, "network", string_array(kit->egress, kit->n_egress));
	json_object_set_new(o, "keys", json_string(kit->n_creds ? "brokered" : "none"));
	for (int i = 0; i < kit->n_creds; i++)
		json_array_append_new(creds, cred_json(&kit->creds[i]));
	json_object_set_new(o, "credentials", creds);
	json_object_set_new(o, "env", env_names(kit));
	json_object_set_new(o, "setup", setup_json(kit));
	if (kit->warning[0])
		json_object_set_new(o, "warning", json_string(kit->warning));
	return o;
}

/* ---- latch kits */

/* "set", "missing" or "-": whether every key the kit names is there (the first problem wins). */
static const char *kit_secrets_word(const struct latch_kit *kit)
{
	enum latch_secret_state worst = LATCH_SECRET_NONE;

	for (int i = 0; i < kit->n_creds; i++) {
		enum latch_secret_state st = latch_kit_secret_state(&kit->creds[i].up, NULL, NULL, 0);

		if (worst == LATCH_SECRET_NONE || (worst == LATCH_SECRET_SET && st != LATCH_SECRET_SET))
			worst = st;
	}
	return worst == LATCH_SECRET_NONE ? "-" : latch_secret_state_name(worst);
}

/* registry.npmjs.org:443,statsig.anthr.. as in kosa8's NETWORK column. */
static void network_column(const struct latch_kit *kit, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < kit->n_egress && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? "," : "", kit->egress[i]);
	if (!kit->n_egress)
		snprintf(buf, len, "none");
	if (strlen(buf) > NETWORK_WIDTH)
		strcpy(buf + NETWORK_WIDTH - 2, "..");
}

int cmd_kits(int argc, char **argv)
{
	char dir[PATH_MAX], err[LATCH_ERR_MAX], net[1024], setup[16];
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));
	char first_err[LATCH_ERR_MAX] = "";
	struct latch_kit_info *list;
	json_t *out, *arr;
	int n, n_bad = 0, rc = LATCH_EXIT_OK;

	if (argc > 1)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch kits");
	if (latch_kit_list(o.dir, &list, &n, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	arr = json_array();
	if (!latch_json)
		printf("%-10s %-*s %-9s %-8s %-9s %s\n", "KIT", NETWORK_WIDTH, "NETWORK", "KEYS", "SECRETS", "SETUP",
		       "DESCRIPTION");
	for (int i = 0; i < n; i++) {
		struct latch_kit *kit =
			latch_sandbox_kit_verdict(latch_kit_load(list[i].name, &o, err, sizeof(err)), err, sizeof(err));
		json_t *k;

		if (!kit) {
			/* a file that doesn't load takes its built-in's place all the same: `up` would refuse it */
			rc = LATCH_EXIT_FAILED;
			if (!n_bad++)
				snprintf(first_err, sizeof(first_err), "%s", err);
			if (!latch_json && list[i].file)
				printf("%-10s %-*s %-9s %-8s %-9s INVALID: see `latch kit check %s/%s.yaml`\n",
				       list[i].name, NETWORK_WIDTH, "-", "-", "-", "-", dir, list[i].name);
			else if (!latch_json)
				printf("%-10s %-*s %-9s %-8s %-9s INVALID\n", list[i].name, NETWORK_WIDTH, "-", "-",
				       "-", "-");
			if (!latch_json)
				fprintf(stderr, "latch: %s\n", err);
			json_array_append_new(arr, json_pack("{s:s, s:b, s:b, s:s}", "name", list[i].name, "builtin",
							     list[i].builtin, "file", list[i].file, "error", err));
			continue;
		}
		network_column(kit, net, sizeof(net));
		if (kit->n_setup)
			snprintf(setup, sizeof(setup), "%d pinned", kit->n_setup);
		if (!latch_json)
			printf("%-10s %-*s %-9s %-8s %-9s %s\n", kit->name, NETWORK_WIDTH, net,
			       kit->n_creds ? "brokered" : "none", kit_secrets_word(kit), kit->n_setup ? setup : "-",
			       kit->description);
		k = kit_json(kit);
		json_object_set_new(k, "file", json_boolean(list[i].file));
		json_object_set_new(k, "shadows_builtin", json_boolean(list[i].file && list[i].builtin));
		json_object_set_new(k, "secrets", json_string(kit_secrets_word(kit)));
		json_array_append_new(arr, k);
		latch_kit_free(kit);
	}
	free(list);
	if (!latch_json)
		printf("\nbrokered: the key stays on this machine and the sandbox holds a placeholder\n"
		       "secrets: whether this shell's environment (or the secret_file) has the key; never its value\n"
		       "setup: npm packages pinned by exact version and sha512, verified on this machine before "
		       "install\n"
		       "kits in %s override built-ins of the same name\n",
		       dir);
	out = json_pack("{s:s, s:o}", "dir", dir, "kits", arr);
	latch_json_out(out);
	/* a failed --json document says why at the top, as every command's does (text said it per kit) */
	if (n_bad && latch_json)
		latch_err(rc, "%d kit%s would be refused: %s", n_bad, n_bad > 1 ? "s" : "", first_err);
	return rc;
}

/* ---- latch kit check FILE */

static void print_upstream(const char *what, const struct latch_kit_upstream *up)
{
	char url[LATCH_KIT_HOST_MAX + LATCH_KIT_PATH_MAX + 32], why[LATCH_ERR_MAX];
	enum latch_secret_state st = latch_kit_secret_state(up, NULL, why, sizeof(why));
	const char *key = up->secret_var[0] ? up->secret_var : up->secret_file;

	latch_kit_upstream_url(up, url, sizeof(url));
	printf("latch:   %s %s: key in %s%s%s%s, provider %s", what, url, up->header, up->scheme[0] ? " as \"" : "",
	       up->scheme, up->scheme[0] ? "KEY\"" : "", latch_provider_name(up->provider));
	if (up->ca_file[0])
		printf(", CA %s", up->ca_file);
	if (st == LATCH_SECRET_NONE)
		printf("; no key (a model server on this host)\n");
	else
		printf("; %s%s is %s%s%s\n", up->secret_var[0] ? "" : "secret_file ", key, latch_secret_state_name(st),
		       why[0] ? ": " : "", why);
}

static void print_cred(const struct latch_kit_cred *cr)
{
	const char *key = cr->up.secret_var[0] ? cr->up.secret_var : cr->up.secret_file;

	printf("latch: brokering %s -> %s (the sandbox holds a placeholder, never the key)\n", key, cr->up.host);
	printf("latch:   route /%s: ", cr->name);
	if (!cr->n_methods)
		printf("any method but TRACE and CONNECT");
	for (int m = 0; m < cr->n_methods; m++)
		printf("%s%s", m ? "," : "", cr->methods[m]);
	printf(" under");
	for (int p = 0; p < cr->n_paths; p++)
		printf("%s %s", p ? "," : "", cr->paths[p]);
	if (cr->caps.requests_per_hour || cr->caps.requests_per_day || cr->caps.microdollars_per_day)
		printf("; caps %u/hour %u/day $%llu.%06llu/day (0: latch.conf's)", cr->caps.requests_per_hour,
		       cr->caps.requests_per_day, (unsigned long long)(cr->caps.microdollars_per_day / 1000000),
		       (unsigned long long)(cr->caps.microdollars_per_day % 1000000));
	printf("\n");
	print_upstream("upstream", &cr->up);
	for (int a = 0; a < cr->n_alts; a++) {
		char what[64];

		snprintf(what, sizeof(what), "alternative %s", cr->alts[a].name);
		print_upstream(what, &cr->alts[a].up);
	}
}

static void print_check(const struct latch_kit *kit)
{
	printf("latch: kit %s (%s)%s%s\n", kit->name, kit->source, kit->description[0] ? ": " : "", kit->description);
	if (kit->n_command) {
		printf("latch: command:");
		for (int i = 0; i < kit->n_command; i++)
			printf(" %s", kit->command[i]);
		printf("\n");
	}
	if (kit->n_egress) {
		printf("latch: network: the sandbox's profile, and");
		for (int i = 0; i < kit->n_egress; i++)
			printf("%s %s", i ? "," : "", kit->egress[i]);
		printf("\n");
	} else {
		printf("latch: network: the sandbox's profile; the kit adds nothing\n");
	}
	for (int i = 0; i < kit->n_creds; i++)
		print_cred(&kit->creds[i]);
	for (int i = 0; i < kit->n_setup; i++) {
		const struct latch_kit_npm *p = &kit->setup[i];

		printf("latch: setup: npm %s@%s, verified by %.20s... before install; bins:", p->name, p->version,
		       p->integrity);
		for (int b = 0; b < p->n_bins; b++)
			printf(" %s", p->bins[b]);
		printf("%s\n", p->n_bins ? "" : " its package.json's");
	}
	printf("latch: the sandbox gets");
	for (int i = 0; i < kit->n_creds; i++)
		for (int e = 0; e < kit->creds[i].n_env; e++)
			printf(" %s=%s", kit->creds[i].env[e].name, kit->creds[i].env[e].value);
	printf(" HTTPS_PROXY HTTP_PROXY NO_PROXY (and lower-case)");
	if (kit->n_creds)
		printf(", with {{url}} = http://HOST_ADDR:PORT/CREDENTIAL");
	printf("\nlatch: kit %s is valid; nothing was started\n", kit->name);
}

static int kit_check(const char *path)
{
	char dir[PATH_MAX], err[LATCH_ERR_MAX];
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));
	struct latch_kit *kit =
		latch_sandbox_kit_verdict(latch_kit_load_file(path, &o, err, sizeof(err)), err, sizeof(err));
	json_t *out;

	if (!kit)
		return latch_err(errno == ENOMEM ? LATCH_EXIT_FAILED : LATCH_EXIT_USAGE, "%s", err);
	if (!latch_json) {
		if (kit->warning[0])
			fprintf(stderr, "latch: warning: %s\n", kit->warning);
		print_check(kit);
	}
	out = json_pack("{s:b, s:o}", "ok", 1, "kit", kit_json(kit));
	latch_json_out(out);
	latch_kit_free(kit);
	return LATCH_EXIT_OK;
}

/* ---- latch kit NAME secrets | backend CREDENTIAL ALT */

/* NAME's kit state and kit, or the exit code (printed). */
static int sandbox_kit_or_fail(const char *name, struct latch_kit_state *st, struct latch_kit **kit)
{
	char err[LATCH_ERR_MAX];
	int ret;

	if (latch_parse_name(name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_need_root("kit"))
		return LATCH_EXIT_USAGE;
	if (!latch_sandbox_exists(name))
		return latch_err_no_sandbox("sandbox", name);
	ret = latch_sandbox_kit(name, st, kit, err, sizeof(err));
	if (ret == -ENOENT)
		return latch_err(LATCH_EXIT_USAGE, "sandbox %s has no kit; give it one with `latch up %s --kit K`",
				 name, name);
	if (ret)
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	return 0;
}

void latch_kit_again_print(const char *name, const char *kit, const char *said, json_t *kit_json)
{
	json_t *out = json_pack("{s:s, s:s}", "sandbox", name, "action", "keys handed again");

	if (kit_json)
		json_object_set_new(out, "kit", kit_json);
	if (!latch_json)
		printf("%s: %skit %s's keys handed to latchd again\n", name, said, kit);
	latch_json_out(out);
}

/*
 * Hand NAME's kit (KIT, taken) to latchd again with this environment's keys
 * (after a latchd restart), switching to the stored profile if its network
 * changed.  0 or an exit code, printed.
 */
static int kit_again(const char *name, struct latch_kit *kit, const char *said)
{
	char err[LATCH_SANDBOX_ERR_MAX];
	json_t *out = json_object();
	int rc = latch_sandbox_kit_give(name, kit, true, out, &latch_say, err, sizeof(err));

	if (rc) {
		latch_kit_free(kit);
		json_decref(out);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	latch_kit_again_print(name, kit->name, said, json_incref(json_object_get(out, "kit")));
	latch_kit_free(kit);
	json_decref(out);
	return 0;
}

/* Hand latchd the keys of this environment again (after a latchd restart, or a new key). */
static int kit_secrets(const char *name)
{
	struct latch_kit_state st;
	struct latch_kit *kit;
	int rc = sandbox_kit_or_fail(name, &st, &kit);

	if (rc)
		return rc;
	if (st.stopped) {
		latch_kit_free(kit);
		return latch_err(LATCH_EXIT_USAGE, "sandbox %s is down; `latch up %s` hands its keys", name, name);
	}
	return kit_again(name, kit, "");
}

/* Send credential CRED's requests to alternative ALT ("-": its own upstream); URL and placeholder stay. */
static int kit_backend(const char *name, const char *cred, const char *alt)
{
	struct latch_kit_state st;
	struct latch_kit_state_cred *sc;
	const struct latch_kit_cred *cr;
	struct latch_kit *kit;
	char err[LATCH_ERR_MAX];
	bool known = !strcmp(alt, "-"), applied;
	int rc = sandbox_kit_or_fail(name, &st, &kit);

	if (rc)
		return rc;
	cr = latch_kit_cred_find(kit, cred);
	sc = latch_kit_state_cred(&st, cred);
	for (int a = 0; cr && a < cr->n_alts; a++)
		known |= !strcmp(cr->alts[a].name, alt);
	if (!cr || !sc || !known) {
		char names[256] = "";

		for (int a = 0; cr && a < cr->n_alts; a++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), ", %s", cr->alts[a].name);
		latch_kit_free(kit);
		return !cr || !sc ?
			       latch_err(LATCH_EXIT_USAGE, "kit %s of %s has no credential '%s'", st.kit, name, cred) :
			       latch_err(LATCH_EXIT_USAGE,
					 "credential %s has no alternative '%s'; give one of: -%s (- is its own "
					 "upstream)",
					 cred, alt, names);
	}
	latch_kit_free(kit);
	if (latch_sandbox_kit_backend(name, &st, cred, strcmp(alt, "-") ? alt : "", &applied, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	if (!latch_json)
		printf("%s: credential %s now goes to %s%s; the sandbox's URL and placeholder are unchanged\n", name,
		       cred, strcmp(alt, "-") ? alt : "its own upstream",
		       applied ? "" : " (stored; latchd is not running and applies it when it starts)");
	latch_json_out(json_pack("{s:s, s:s, s:s, s:b}", "sandbox", name, "credential", cred, "alternative",
				 sc->backend, "applied", applied));
	return 0;
}

/* ---- latch kit fetch KIT, latch kit pin KIT NAME@VERSION */

/* Fetch and verify every installer of KIT (a name, or a file as `kit check` reads it) into the cache. */
static int kit_fetch(const char *name)
{
	char dir[PATH_MAX], err[LATCH_SANDBOX_ERR_MAX];
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));
	struct latch_npm_tarball t[LATCH_KIT_SETUP_MAX];
	struct latch_kit *kit;
	json_t *pkgs;

	if (latch_need_root("kit"))
		return LATCH_EXIT_USAGE;
	kit = strchr(name, '/') ?
		      latch_sandbox_kit_verdict(latch_kit_load_file(name, &o, err, sizeof(err)), err, sizeof(err)) :
		      latch_sandbox_kit_open_checked(name, err, sizeof(err));
	if (!kit)
		return latch_err(errno == ENOMEM ? LATCH_EXIT_FAILED : LATCH_EXIT_USAGE, "%s", err);
	if (latch_sandbox_setup_fetch(kit, t, &latch_say, err, sizeof(err))) {
		latch_kit_free(kit);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	pkgs = json_array();
	for (int i = 0; i < kit->n_setup; i++) {
		json_t *bins = json_array();

		for (int b = 0; b < t[i].n_bins; b++)
			json_array_append_new(bins, json_pack("{s:s, s:s}", "name", t[i].bins[b].name, "path",
							      t[i].bins[b].path));
		json_array_append_new(pkgs, json_pack("{s:s, s:s, s:s, s:b, s:I, s:o}", "npm", kit->setup[i].name,
						      "version", kit->setup[i].version, "file", t[i].file, "cached",
						      t[i].cached, "bytes", (json_int_t)t[i].size, "bin", bins));
	}
	latch_sandbox_setup_close(kit, t);
	if (!latch_json && !kit->n_setup)
		printf("kit %s installs nothing (it has no setup)\n", kit->name);
	else if (!latch_json)
		printf("kit %s: %d installer%s verified and cached\n", kit->name, kit->n_setup,
		       kit->n_setup == 1 ? "" : "s");
	latch_json_out(json_pack("{s:s, s:o}", "kit", kit->name, "setup", pkgs));
	latch_kit_free(kit);
	return LATCH_EXIT_OK;
}

static int kit_pin(const char *kit, const char *spec)
{
	char path[PATH_MAX], integrity[LATCH_NPM_INTEGRITY_MAX + 1], err[LATCH_SANDBOX_ERR_MAX];
	bool fixable;
	int ret;

	if (latch_need_root("kit"))
		return LATCH_EXIT_USAGE;
	ret = latch_sandbox_kit_pin(kit, spec, path, sizeof(path), integrity, &latch_say, err, sizeof(err));
	/* what the user can fix in the words given (2), or what failed on the way, the registry or a write (1) */
	fixable = ret == -EINVAL || ret == -ENOENT || ret == -EPERM || ret == -ELOOP;
	if (ret)
		return latch_err(fixable ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "%s", err);
	if (!latch_json)
		printf("kit %s: %s pinned (%s) in %s; `latch kit fetch %s` fetches and verifies it\n", kit, spec,
		       integrity, path, kit);
	latch_json_out(
		json_pack("{s:s, s:s, s:s, s:s}", "kit", kit, "pinned", spec, "integrity", integrity, "file", path));
	return LATCH_EXIT_OK;
}

/* Install NAME's kit's setup into its running guest, every installer verified first. */
static int kit_setup(const char *name)
{
	struct latch_kit_state st;
	struct latch_kit *kit;
	char err[LATCH_SANDBOX_ERR_MAX];
	int rc = sandbox_kit_or_fail(name, &st, &kit);

	if (rc)
		return rc;
	if (latch_sandbox_kit_setup(name, kit, &latch_say, err, sizeof(err))) {
		latch_kit_free(kit);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	if (!latch_json)
		printf("%s: kit %s's setup installed (%d package%s)\n", name, kit->name, kit->n_setup,
		       kit->n_setup == 1 ? "" : "s");
	latch_json_out(json_pack("{s:s, s:s, s:i}", "sandbox", name, "kit", kit->name, "installed", kit->n_setup));
	latch_kit_free(kit);
	return LATCH_EXIT_OK;
}

int cmd_kit(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "check"))
		return kit_check(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "fetch"))
		return kit_fetch(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "pin"))
		return kit_pin(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[2], "secrets"))
		return kit_secrets(argv[1]);
	if (argc == 3 && !strcmp(argv[2], "setup"))
		return kit_setup(argv[1]);
	if (argc == 5 && !strcmp(argv[2], "backend"))
		return kit_backend(argv[1], argv[3], argv[4]);
	return latch_err(LATCH_EXIT_USAGE,
			 "usage: latch kit check FILE | kit fetch KIT | kit pin KIT NAME@VERSION | kit NAME setup | "
			 "kit NAME secrets | "
			 "kit NAME backend CREDENTIAL ALTERNATIVE|-");
}
