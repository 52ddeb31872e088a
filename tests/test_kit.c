// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_kit.c - kits (kit/): kosa8's shape, the load-time checks, placeholders,
 * the sandbox's env and the secrets.
 *
 * A kit decides which keys a sandbox's requests carry and where, so these
 * tests hold it to: a kosa8 kit file loads unchanged (what latch does not
 * read is named in one warning); every bad field is refused whole with one
 * line naming the file, the credential and the fix; a placeholder is 128
 * random bits compared in constant time; a secret file that someone else
 * could read or swap (a link) is never read; and a file kit replaces the
 * built-in of its name.  Files live in a fresh mkdtemp directory owned by
 * the test's own uid, so no root is needed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget/budget.h"
#include "kit/kit.h"
#include "profile/profile.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SRC "./weather.yaml"

/* The seed's weather.yaml (shared/seeds/003), byte for byte. */
static const char weather[] = "# weather.yaml\n"
			      "name: weather\n"
			      "description: A shell that can call a weather API without holding its key\n"
			      "image: alpine:latest\n"
			      "command: [sh]\n"
			      "egress_allow:\n"
			      "  - docs.example.com\n"
			      "credentials:\n"
			      "  - name: weather\n"
			      "    upstream: https://api.example.com\n"
			      "    secret: WEATHER_API_KEY\n"
			      "    header: Authorization\n"
			      "    scheme: \"Bearer \"\n"
			      "    methods: [GET]\n"
			      "    paths: [/v1/forecast]\n"
			      "    env:\n"
			      "      WEATHER_API_URL: \"{{url}}\"\n"
			      "      WEATHER_API_KEY: \"{{placeholder}}\"\n";

static char dir[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	strcpy(dir, "/tmp/latch-kit-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

/* the temp directory and all in it, links removed and never followed */
static void teardown(void)
{
	if (nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS))
		cr_log_warn("could not remove %s", dir);
}

static struct latch_kit_opts opts(void)
{
	return (struct latch_kit_opts){ .dir = dir };
}

/* DIR/NAME holding TEXT, mode MODE exactly (chmod after, so no umask); the path, in one of four static buffers. */
static const char *put(const char *name, const char *text, mode_t mode)
{
	static char paths[4][256];
	static unsigned next;
	char *path = paths[next++ % 4];
	FILE *f;

	snprintf(path, sizeof(paths[0]), "%s/%s", dir, name);
	unlink(path);
	f = fopen(path, "w");
	cr_assert_not_null(f, "create %s", path);
	cr_assert_geq(fputs(text, f), 0);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(path, mode), 0, "chmod %s", path);
	return path;
}

static struct latch_kit *parse(const char *text, char *err, size_t errlen)
{
	struct latch_kit_opts o = opts();

	return latch_kit_parse(text, strlen(text), SRC, NULL, &o, err, errlen);
}

static struct latch_kit *parse_ok(const char *text)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_kit *k = parse(text, err, sizeof(err));

	cr_assert_not_null(k, "refused: %s", err);
	return k;
}

/* TEXT with the first FROM replaced by TO (FROM must be there); caller frees. */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	char *out;

	cr_assert_not_null(at, "'%s' is not in the text", from);
	out = malloc(strlen(text) + strlen(to) + 1);
	cr_assert_not_null(out);
	sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

/* ---- the shape */

TestSuite(kit, .init = setup, .fini = teardown);

/* Invariant: every built-in loads, without a warning, with the route its agent needs. */
Test(kit, every_builtin_loads)
{
	struct latch_kit_opts o = opts();
	struct latch_kit_info *list;
	char err[LATCH_ERR_MAX];
	int n;

	cr_assert_eq(latch_kit_list(NULL, &list, &n, err, sizeof(err)), 0);
	cr_assert_geq(n, 4);
	for (int i = 0; i < n; i++) {
		struct latch_kit *k = latch_kit_load(list[i].name, &o, err, sizeof(err));

		cr_assert_not_null(k, "built-in %s: %s", list[i].name, err);
		cr_expect(k->builtin);
		cr_expect_str_empty(k->warning, "%s warns: %s", k->name, k->warning);
		latch_kit_free(k);
	}
	free(list);
}

static const struct latch_kit_env *env_of(const struct latch_kit_cred *cr, const char *name)
{
	for (int i = 0; i < cr->n_env; i++)
		if (!strcmp(cr->env[i].name, name))
			return &cr->env[i];
	return NULL;
}

/* Each built-in agent kit: the host, header, scheme and variables its tool reads. */
Test(kit, builtin_agents_route_their_provider)
{
	static const struct {
		const char *kit, *host, *header, *scheme, *url_var, *url, *key_var;
		enum latch_provider provider;
	} want[] = {
		{ "claude", "api.anthropic.com", "x-api-key", "", "ANTHROPIC_BASE_URL", "{{url}}", "ANTHROPIC_API_KEY",
		  LATCH_PROVIDER_ANTHROPIC },
		{ "codex", "api.openai.com", "Authorization", "Bearer ", "OPENAI_BASE_URL", "{{url}}/v1",
		  "OPENAI_API_KEY", LATCH_PROVIDER_OPENAI },
		{ "gemini", "generativelanguage.googleapis.com", "x-goog-api-key", "", "GOOGLE_GEMINI_BASE_URL",
		  "{{url}}", "GEMINI_API_KEY", LATCH_PROVIDER_GEMINI },
	};
	struct latch_kit_opts o = opts();
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		struct latch_kit *k = latch_kit_load(want[i].kit, &o, err, sizeof(err));
		const struct latch_kit_cred *cr;

		cr_assert_not_null(k, "%s", err);
		cr_assert_eq(k->n_creds, 1, "%s", want[i].kit);
		cr = &k->creds[0];
		cr_expect_str_eq(cr->up.host, want[i].host);
		cr_expect_eq(cr->up.port, 443);
		cr_expect(cr->up.tls);
		cr_expect_str_eq(cr->up.header, want[i].header);
		cr_expect_str_eq(cr->up.scheme, want[i].scheme);
		cr_expect_eq(cr->up.provider, want[i].provider, "%s", want[i].kit);
		cr_assert_not_null(env_of(cr, want[i].url_var), "%s has no %s", want[i].kit, want[i].url_var);
		cr_expect_str_eq(env_of(cr, want[i].url_var)->value, want[i].url);
		cr_assert_not_null(env_of(cr, want[i].key_var));
		cr_expect_str_eq(env_of(cr, want[i].key_var)->value, "{{placeholder}}");
		cr_expect_str_eq(cr->up.secret_var, want[i].key_var, "the host's variable has the tool's name");
		latch_kit_free(k);
	}
}

Test(kit, claude_network_and_shell_has_none)
{
	struct latch_kit_opts o = opts();
	char err[LATCH_ERR_MAX];
	struct latch_kit *k = latch_kit_load("claude", &o, err, sizeof(err));

	cr_assert_not_null(k, "%s", err);
	/* statsig.anthropic.com went with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC (live_clients.sh) */
	cr_assert_eq(k->n_egress, 1);
	cr_expect_str_eq(k->egress_text, "registry.npmjs.org:443\n");
	latch_kit_free(k);
	k = latch_kit_load("shell", &o, err, sizeof(err));
	cr_assert_not_null(k, "%s", err);
	cr_expect_eq(k->n_creds, 0);
	cr_expect_eq(k->n_egress, 0);
	latch_kit_free(k);
}

/* Invariant: a kosa8 kit file loads unchanged; what latch does not read is one warning, not a refusal. */
Test(kit, seed_weather_loads_unchanged)
{
	struct latch_kit *k = parse_ok(weather);
	const struct latch_kit_cred *cr;

	cr_expect_str_eq(k->name, "weather");
	cr_expect_str_eq(k->description, "A shell that can call a weather API without holding its key");
	cr_assert_eq(k->n_command, 1);
	cr_expect_str_eq(k->command[0], "sh");
	cr_assert_eq(k->n_egress, 1);
	cr_expect_str_eq(k->egress[0], "docs.example.com");
	cr_assert_eq(k->n_creds, 1);
	cr = &k->creds[0];
	cr_expect_str_eq(cr->name, "weather");
	cr_expect_str_eq(cr->up.host, "api.example.com");
	cr_expect_str_eq(cr->up.secret_var, "WEATHER_API_KEY");
	cr_expect_str_eq(cr->up.header, "Authorization");
	cr_expect_str_eq(cr->up.scheme, "Bearer ");
	cr_expect_eq(cr->up.provider, LATCH_PROVIDER_OTHER);
	cr_assert_eq(cr->n_methods, 1);
	cr_expect_str_eq(cr->methods[0], "GET");
	cr_assert_eq(cr->n_paths, 1);
	cr_expect_str_eq(cr->paths[0], "/v1/forecast");
	cr_assert_eq(cr->n_env, 2);
	cr_expect_str_eq(cr->env[0].name, "WEATHER_API_URL");
	cr_expect_str_eq(cr->env[1].value, "{{placeholder}}");
	cr_expect_str_eq(k->warning, "kit file ./weather.yaml: latch does not read image (ignored; docs/kits.md lists "
				     "the fields it reads)");
	latch_kit_free(k);
}

Test(kit, unknown_fields_named_in_one_warning)
{
	char *t1 = edit(weather, "    secret:", "    setup: [npm i -g x]\n    pass_env: [GITHUB_TOKEN]\n    secret:");
	char *t2 = edit(t1, "command:", "signature: abc123\nsigned_by:\n  key: k1\ncommand:");
	struct latch_kit *k = parse_ok(t2);

	cr_expect_str_eq(k->warning, "kit file ./weather.yaml: latch does not read image, signature, signed_by, "
				     "credential \"weather\": setup, credential \"weather\": pass_env (ignored; "
				     "docs/kits.md lists the fields it reads)");
	cr_expect_null(strchr(k->warning, '\n'), "one line");
	cr_expect_eq(k->n_creds, 1, "the credential is still read");
	latch_kit_free(k);
	free(t1);
	free(t2);
}

/* An empty key is named too (found by fuzzing: an empty name matched everywhere and ran off the list). */
Test(kit, empty_key_named_in_the_warning)
{
	char *text = edit(weather, "command:", "\"\": x\ncommand:");
	struct latch_kit *k = parse_ok(text);

	cr_expect_str_eq(k->warning, "kit file ./weather.yaml: latch does not read image, \"\" (ignored; docs/kits.md "
				     "lists the fields it reads)");
	latch_kit_free(k);
	free(text);
}

/* ---- the checks: each bad field is one line naming the file, the credential and the fix */

struct bad_row {
	const char *why, *from, *to, *want;
};

/* Every row edits the seed's weather.yaml once (which loads: the control) and wants exactly this line. */
static const struct bad_row bad_rows[] = {
	{ "env without {{placeholder}}", "\"{{placeholder}}\"", "\"fixed\"",
	  SRC ": credential \"weather\": env must give the sandbox {{placeholder}} in some variable" },
	{ "no env at all", "    env:\n      WEATHER_API_URL: \"{{url}}\"\n      WEATHER_API_KEY: \"{{placeholder}}\"\n",
	  "", SRC ": credential \"weather\": env must give the sandbox {{placeholder}} in some variable" },
	{ "upstream with a path", "https://api.example.com", "https://api.example.com/v1",
	  SRC ": credential \"weather\": upstream \"https://api.example.com/v1\" must be https://host with no path" },
	{ "upstream over http", "https://api.example.com", "http://api.example.com",
	  SRC ": credential \"weather\": upstream \"http://api.example.com\" must be https://host with no path" },
	{ "upstream with a query", "https://api.example.com", "https://api.example.com?x=1",
	  SRC ": credential \"weather\": upstream \"https://api.example.com?x=1\" must be https://host with no path" },
	{ "upstream port 0", "https://api.example.com", "https://api.example.com:0",
	  SRC ": credential \"weather\": upstream \"https://api.example.com:0\": port '0' must be 1-65535" },
	{ "upstream with a user", "https://api.example.com", "https://u:p@api.example.com",
	  SRC ": credential \"weather\": upstream \"https://u:p@api.example.com\" carries a user or password; the key "
	      "goes in secret:, write https://host" },
	{ "upstream host not a name", "https://api.example.com", "https://api_x.example.com",
	  SRC ": credential \"weather\": upstream \"https://api_x.example.com\": 'api_x.example.com' is not a host "
	      "name; write https://host, e.g. https://api.example.com" },
	{ "upstream missing", "    upstream: https://api.example.com\n", "",
	  SRC ": credential \"weather\": upstream is missing; write upstream: https://host" },
	{ "credential name in capitals", "  - name: weather", "  - name: Weather_API",
	  SRC ": credential name \"Weather_API\" must be 1-32 characters of a-z, 0-9 and '-'" },
	{ "credential name of 33", "  - name: weather", "  - name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	  SRC ": credential name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" must be 1-32 characters of a-z, 0-9 and '-'" },
	{ "credential without a name", "  - name: weather\n    upstream", "  - upstream",
	  SRC ": credential 1 has no name; give it one of 1-32 characters of a-z, 0-9 and '-'" },
	{ "method TRACE", "methods: [GET]", "methods: [GET, trace]",
	  SRC ": credential \"weather\": method TRACE is never brokered: it echoes the request back, key included; "
	      "remove it" },
	{ "method CONNECT", "methods: [GET]", "methods: [CONNECT]",
	  SRC ": credential \"weather\": method CONNECT is not a route's: tunnels go through HTTPS_PROXY; remove it" },
	{ "method with a blank", "methods: [GET]", "methods: [\"GE T\"]",
	  SRC ": credential \"weather\": method \"GE T\" is not an HTTP method; write e.g. methods: [GET, POST]" },
	{ "path not absolute", "paths: [/v1/forecast]", "paths: [v1/forecast]",
	  SRC ": credential \"weather\": path \"v1/forecast\" must be absolute: write /v1/forecast" },
	{ "path with ..", "paths: [/v1/forecast]", "paths: [/v1/../admin]",
	  SRC ": credential \"weather\": path \"/v1/../admin\" has a . or .. segment; write the path it means" },
	{ "path with .", "paths: [/v1/forecast]", "paths: [/v1/./forecast]",
	  SRC ": credential \"weather\": path \"/v1/./forecast\" has a . or .. segment; write the path it means" },
	{ "path ending in ..", "paths: [/v1/forecast]", "paths: [/v1/..]",
	  SRC ": credential \"weather\": path \"/v1/..\" has a . or .. segment; write the path it means" },
	{ "path with %", "paths: [/v1/forecast]", "paths: [/v1%2fforecast]",
	  SRC ": credential \"weather\": path \"/v1%2fforecast\" has a %-escape; write it decoded (the broker refuses "
	      "encoded paths)" },
	{ "path with //", "paths: [/v1/forecast]", "paths: [/v1//forecast]",
	  SRC ": credential \"weather\": path \"/v1//forecast\" has an empty segment (//); write each '/' once" },
	{ "path with a query", "paths: [/v1/forecast]", "paths: [\"/v1/forecast?x\"]",
	  SRC ": credential \"weather\": path \"/v1/forecast?x\" has a character a URL path can't hold plainly (a "
	      "blank, ?, #, \\, a quote or a control); write the path alone, e.g. /v1/messages" },
	{ "header not a token", "header: Authorization", "header: X API Key",
	  SRC ": credential \"weather\": header \"X API Key\" is not a header name (an RFC 9110 token: letters, digits "
	      "and !#$%&'*+-.^_`|~); write e.g. header: x-api-key" },
	{ "header Host", "header: Authorization", "header: Host",
	  SRC ": credential \"weather\": header \"Host\" frames or routes the request; the key goes in an "
	      "authentication header such as Authorization" },
	{ "header missing", "    header: Authorization\n", "",
	  SRC ": credential \"weather\": header is missing; name the header the key goes in, e.g. header: "
	      "Authorization" },
	{ "secret names nothing", "    secret: WEATHER_API_KEY\n", "",
	  SRC ": credential \"weather\": secret names nothing; write secret: VARIABLE (taken from the environment of "
	      "latch up) or secret_file: /PATH" },
	{ "secret empty", "secret: WEATHER_API_KEY", "secret: \"\"",
	  SRC ": credential \"weather\": secret names nothing; write secret: VARIABLE (taken from the environment of "
	      "latch up) or secret_file: /PATH" },
	{ "secret and secret_file", "secret: WEATHER_API_KEY", "secret: WEATHER_API_KEY\n    secret_file: /etc/k",
	  SRC ": credential \"weather\": secret and secret_file both given; keep one" },
	{ "secret not a variable", "secret: WEATHER_API_KEY", "secret: my key",
	  SRC ": credential \"weather\": secret \"my key\" is not an environment variable's name; write e.g. secret: "
	      "WEATHER_API_KEY" },
	{ "secret_file relative", "secret: WEATHER_API_KEY", "secret_file: keys/weather",
	  SRC ": credential \"weather\": secret_file \"keys/weather\" must be an absolute path without . or .., e.g. "
	      "/etc/latch/secrets/NAME" },
	{ "secret_file with ..", "secret: WEATHER_API_KEY", "secret_file: /etc/latch/../k",
	  SRC ": credential \"weather\": secret_file \"/etc/latch/../k\" must be an absolute path without . or .., "
	      "e.g. /etc/latch/secrets/NAME" },
	{ "scheme glued to the key", "scheme: \"Bearer \"", "scheme: Bearer",
	  SRC ": credential \"weather\": scheme \"Bearer\" would be glued to the key; write \"Bearer \" (with the "
	      "space)" },
	{ "env template unknown", "\"{{url}}\"", "\"{{key}}\"",
	  SRC
	  ": credential \"weather\": env WEATHER_API_URL has an unknown {{key}}; write {{url}} or {{placeholder}}" },
	{ "env sets the proxy", "WEATHER_API_URL:", "HTTPS_PROXY:",
	  SRC
	  ": credential \"weather\": env HTTPS_PROXY is latch's own: the sandbox's proxy is its broker; remove it" },
	{ "env name not a variable", "WEATHER_API_URL:", "1WEATHER:",
	  SRC ": credential \"weather\": env \"1WEATHER\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most "
	      "64)" },
	{ "env unquoted braces", "\"{{url}}\"", "{{url}}",
	  SRC ":17: credential \"weather\": env WEATHER_API_URL is not one value; quote it, e.g. WEATHER_API_URL: "
	      "\"{{url}}\" (unquoted braces are a YAML mapping)" },
	{ "egress_allow a URL", "  - docs.example.com", "  - https://docs.example.com",
	  SRC ": egress_allow:1: 'https://docs.example.com' is a URL; write the host alone, e.g. pypi.org or "
	      "pypi.org:443" },
	{ "egress_allow a bare wildcard", "  - docs.example.com", "  - \"*\"",
	  SRC ": egress_allow:1: '*': '*' alone would allow every name; the built-in profile 'open' is the way to "
	      "remove the policy" },
	{ "egress_allow smuggling a comment", "  - docs.example.com", "  - \"# extends: dev\"",
	  SRC ": egress_allow entry \"# extends: dev\" must be one entry without blanks or '#', e.g. pypi.org:443" },
	{ "provider unknown", "    methods:", "    provider: azure\n    methods:",
	  SRC ": credential \"weather\": provider \"azure\" must be one of openai, anthropic, gemini, other" },
	{ "cap of zero", "    methods:", "    caps:\n      requests_per_hour: 0\n    methods:",
	  SRC ": credential \"weather\": caps: requests_per_hour must be 1 or more; leave it out for latch.conf's "
	      "default" },
	{ "dollars not an amount", "    methods:", "    caps:\n      dollars_per_day: 1.2345678\n    methods:",
	  SRC
	  ": credential \"weather\": caps: dollars_per_day \"1.2345678\" must be an amount above 0 such as 12.50 (at "
	  "most 6 decimals, at most 1000000000)" },
	{ "requests not a number", "    methods:", "    caps:\n      requests_per_day: lots\n    methods:",
	  SRC ":15: requests_per_day must be a whole number of 0 to 4294967295, not 'lots'" },
	{ "methods not a list", "methods: [GET]", "methods: GET",
	  SRC ":14: methods must be a list: [a, b], or one '- item' a line" },
	{ "methods an empty list", "methods: [GET]", "methods: []",
	  SRC ":14: credential \"weather\": methods is an empty list; list what the route allows, or leave methods "
	      "out for every method but TRACE and CONNECT" },
	{ "paths an empty list", "paths: [/v1/forecast]", "paths: []",
	  SRC ":15: credential \"weather\": paths is an empty list; list what the route allows, or leave paths out "
	      "for every path" },
	{ "a field given twice", "    methods:", "    header: x-key\n    methods:",
	  SRC ":14: credential \"weather\": header is given twice; keep one" },
	{ "a kit field given twice", "command:", "name: other\ncommand:", SRC ":5: name is given twice; keep one" },
	{ "not YAML", "methods: [GET]", "methods: [GET",
	  SRC ":15: not valid YAML: did not find expected ',' or ']' while parsing a flow sequence" },
	{ "an alias", "methods: [GET]", "methods: &m [GET]\n    paths: *m",
	  SRC ":14: anchors and aliases (&name, *name) are not read in kits; write the value out where it is used" },
	{ "two documents", "# weather.yaml\n", "name: other\n---\n",
	  SRC ": holds more than one YAML document (---); a kit file holds one kit" },
	{ "a second credential of the same name", "    env:\n",
	  "    env:\n      X: \"{{placeholder}}\"\n  - name: weather\n    upstream: https://b.example.com\n"
	  "    secret: B\n    header: b\n    env:\n",
	  SRC ": credential \"weather\" is given twice; each credential needs a name of its own" },
	{ "a variable given by two credentials", "    env:\n",
	  "    env:\n      WEATHER_API_KEY: \"{{placeholder}}\"\n  - name: other\n    upstream: https://b.example.com\n"
	  "    secret: B\n    header: b\n    env:\n",
	  SRC ": credential \"other\": env WEATHER_API_KEY is also given by credential \"weather\"; a variable has one "
	      "source" },
	{ "alternative over http to another host", "    methods:",
	  "    alternatives:\n      - name: groq\n        upstream: http://api.groq.com\n        secret: G\n    methods:",
	  SRC
	  ": credential \"weather\": alternative \"groq\": upstream \"http://api.groq.com\" is plain http to another "
	  "host; http:// is only for a model server on this host's loopback (127.0.0.1, [::1], localhost): use "
	  "https://" },
	{ "alternative without a key",
	  "    methods:", "    alternatives:\n      - name: groq\n        upstream: https://api.groq.com\n    methods:",
	  SRC
	  ": credential \"weather\": alternative \"groq\": secret names nothing; write secret: VARIABLE (taken from "
	  "the environment of latch up) or secret_file: /PATH" },
	{ "alternative name in capitals",
	  "    methods:", "    alternatives:\n      - name: Groq\n        upstream: https://api.groq.com\n    methods:",
	  SRC ": credential \"weather\": alternative name \"Groq\" must be 1-32 characters of a-z, 0-9 and '-'" },
	{ "priced endpoint of a method the route lacks", "    methods:",
	  "    priced_endpoints:\n      - {method: post, path: /v1/forecast/batch, dollars_per_request: 1}\n    methods:",
	  SRC
	  ": credential \"weather\": priced_endpoints 1: method POST is not one of the credential's methods; add it "
	  "there" },
	{ "priced endpoint outside the paths", "    methods:",
	  "    priced_endpoints:\n      - {method: GET, path: /v1/forecastx, dollars_per_request: 1}\n    methods:",
	  SRC ": credential \"weather\": priced_endpoints 1: path \"/v1/forecastx\" is not under the credential's "
	      "paths; add its prefix to paths" },
	{ "priced endpoint with an escape", "    methods:",
	  "    priced_endpoints:\n      - {method: GET, path: /v1/forecast/%61, dollars_per_request: 1}\n    methods:",
	  SRC
	  ": credential \"weather\": priced_endpoints 1: path \"/v1/forecast/%61\" has a %-escape; write it decoded "
	  "(the broker refuses encoded paths)" },
	{ "priced endpoint with **", "    methods:",
	  "    priced_endpoints:\n      - {method: GET, path: /v1/forecast/**, dollars_per_request: 1}\n    methods:",
	  SRC ": credential \"weather\": priced_endpoints 1: path \"/v1/forecast/**\" has '**'; a '*' already stands "
	      "for any bytes of a segment" },
	{ "priced endpoint without a price",
	  "    methods:", "    priced_endpoints:\n      - {method: GET, path: /v1/forecast/batch}\n    methods:",
	  SRC
	  ": credential \"weather\": priced_endpoints 1: dollars_per_request \"\" must be an amount such as 5.00 (0 "
	  "for free; at most 6 decimals, at most 1000000000)" },
	{ "priced endpoint with a price in a float's form", "    methods:",
	  "    priced_endpoints:\n      - {method: GET, path: /v1/forecast/batch, dollars_per_request: 1e3}\n"
	  "    methods:",
	  SRC
	  ": credential \"weather\": priced_endpoints 1: dollars_per_request \"1e3\" must be an amount such as 5.00 "
	  "(0 for free; at most 6 decimals, at most 1000000000)" },
	{ "priced endpoint given twice", "    methods:",
	  "    priced_endpoints:\n      - {method: GET, path: /v1/forecast/b, dollars_per_request: 1}\n"
	  "      - {method: get, path: /v1/forecast/b/, dollars_per_request: 2}\n    methods:",
	  SRC ": credential \"weather\": priced_endpoints 2: GET /v1/forecast/b is given twice; keep one" },
	{ "a provider tool latch does not know", "    methods:", "    allow_provider_tools: [web_search]\n    methods:",
	  SRC ": credential \"weather\": allow_provider_tools: \"web_search\" is not a tool latch refuses; name "
	      "web_fetch, mcp or url_context" },
	{ "ca_file missing", "    methods:", "    ca_file: /nonexistent/ca.pem\n    methods:",
	  SRC ": credential \"weather\": ca_file /nonexistent/ca.pem: No such file or directory; give the PEM file of "
	      "the upstream's CA" },
};

/*
 * Invariant: a bad field refuses the whole kit with its exact line.  Control:
 * the unedited file loads (seed_weather_loads_unchanged).
 */
Test(kit, each_bad_field_refused_with_its_line)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_rows); i++) {
		const struct bad_row *row = &bad_rows[i];
		char err[LATCH_ERR_MAX] = "", *text = edit(weather, row->from, row->to);
		struct latch_kit *k = parse(text, err, sizeof(err));

		cr_expect_null(k, "%s: loaded", row->why);
		cr_expect_eq(errno, EINVAL, "%s: errno %d", row->why, errno);
		cr_expect_str_eq(err, row->want, "%s", row->why);
		latch_kit_free(k);
		free(text);
	}
}

/* Controls beside the refusals: what is near a bad value but fine loads, as written or folded. */
Test(kit, near_misses_load)
{
	char *t1 = edit(weather, "methods: [GET]", "methods: [get, Post, GET]");
	char *t2 = edit(t1, "paths: [/v1/forecast]", "paths: [/v1/forecast/, /v1/file.json, /v1/a:b@c]");
	char *t3 = edit(t2, "https://api.example.com", "HTTPS://API.Example.com:8443/");
	char *t4 = edit(t3, "    methods:",
			"    caps:\n      requests_per_hour: 100\n      dollars_per_day: \"12.50\"\n"
			"    alternatives:\n      - name: local\n        upstream: http://127.0.0.1:11434\n"
			"        base_path: /v1/\n      - name: groq\n        upstream: https://api.groq.com\n"
			"        base_path: /openai\n        secret: GROQ_API_KEY\n    methods:");
	struct latch_kit *k = parse_ok(t4);
	const struct latch_kit_cred *cr = &k->creds[0];
	char url[512];

	cr_assert_eq(cr->n_methods, 2, "folded and each once");
	cr_expect_str_eq(cr->methods[0], "GET");
	cr_expect_str_eq(cr->methods[1], "POST");
	cr_assert_eq(cr->n_paths, 3);
	cr_expect_str_eq(cr->paths[0], "/v1/forecast", "one trailing '/' dropped");
	cr_expect_str_eq(cr->up.host, "api.example.com", "host folded to lower case");
	cr_expect_eq(cr->up.port, 8443);
	cr_expect_eq(cr->caps.requests_per_hour, 100);
	cr_expect_eq(cr->caps.requests_per_day, 0, "not set: latch.conf's default");
	cr_expect_eq(cr->caps.microdollars_per_day, 12500000ull);
	cr_assert_eq(cr->n_alts, 2);
	cr_expect_not(cr->alts[0].up.tls);
	cr_expect_str_empty(cr->alts[0].up.secret_var, "a loopback model server needs no key");
	cr_expect_str_eq(cr->alts[0].up.header, "Authorization", "the credential's header by default");
	latch_kit_upstream_url(&cr->alts[1].up, url, sizeof(url));
	cr_expect_str_eq(url, "https://api.groq.com/openai");
	cr_expect_eq(cr->alts[1].up.provider, LATCH_PROVIDER_OTHER, "another upstream, another bill");
	latch_kit_free(k);
	free(t1);
	free(t2);
	free(t3);
	free(t4);
}

/*
 * A metered route's priced endpoints and allowed provider tools load as
 * written (methods folded, one trailing '/' dropped, dollars exact, 0 is
 * free); the tool names are budget/'s, which reads them in request bodies.
 */
Test(kit, priced_endpoints_and_provider_tools_load)
{
	char *t1 = edit(weather, "methods: [GET]", "methods: [GET, POST]");
	char *t2 = edit(t1, "    methods:",
			"    priced_endpoints:\n"
			"      - method: post\n        path: /v1/forecast/batches/\n        dollars_per_request: 5.00\n"
			"      - {method: GET, path: /v1/forecast/batches/*/results, dollars_per_request: 0}\n"
			"    allow_provider_tools: [web_fetch, url_context]\n    methods:");
	struct latch_kit *k = parse_ok(t2);
	const struct latch_kit_cred *cr = &k->creds[0];

	cr_assert_eq(cr->n_priced, 2);
	cr_expect_str_eq(cr->priced[0].method, "POST");
	cr_expect_str_eq(cr->priced[0].path, "/v1/forecast/batches");
	cr_expect_eq(cr->priced[0].microdollars, 5000000ull);
	cr_expect_str_eq(cr->priced[1].path, "/v1/forecast/batches/*/results");
	cr_expect_eq(cr->priced[1].microdollars, 0ull);
	cr_expect_eq(cr->provider_tools, (1u << LATCH_KIT_TOOL_WEB_FETCH) | (1u << LATCH_KIT_TOOL_URL_CONTEXT));
	latch_kit_free(k);
	free(t1);
	free(t2);
	/* the seed's weather.yaml names neither: nothing priced, no tool allowed */
	k = parse_ok(weather);
	cr_expect_eq(k->creds[0].n_priced, 0);
	cr_expect_eq(k->creds[0].provider_tools, 0u);
	latch_kit_free(k);
	/* latchd gives budget/ the kit's tools by name: every name is one budget/ reads, and no more */
	cr_assert_eq((int)LATCH_KIT_TOOLS, (int)BUDGET_FETCH_TOOLS);
	for (int t = 0; t < LATCH_KIT_TOOLS; t++) {
		enum budget_fetch_tool bt;

		cr_assert_eq(budget_fetch_tool_parse(latch_kit_tool_name(t), &bt), 0, "%s", latch_kit_tool_name(t));
		cr_expect_str_eq(budget_fetch_tool_name(bt), latch_kit_tool_name(t));
	}
}

Test(kit, provider_named_by_credential_kit_or_host)
{
	char *t1 = edit(weather, "https://api.example.com", "https://api.openai.com");
	char *t2 = edit(weather, "command:", "provider: anthropic\ncommand:");
	char *t3 = edit(t2, "    methods:", "    provider: gemini\n    methods:");
	char *t4 = edit(t1, "command:", "provider: other\ncommand:");
	struct latch_kit *k;

	k = parse_ok(t1);
	cr_expect_eq(k->creds[0].up.provider, LATCH_PROVIDER_OPENAI, "a kosa8 kit is billed by its host");
	latch_kit_free(k);
	k = parse_ok(t2);
	cr_expect_eq(k->creds[0].up.provider, LATCH_PROVIDER_ANTHROPIC, "the kit's provider");
	latch_kit_free(k);
	k = parse_ok(t3);
	cr_expect_eq(k->creds[0].up.provider, LATCH_PROVIDER_GEMINI, "the credential's own comes first");
	latch_kit_free(k);
	k = parse_ok(t4);
	cr_expect_eq(k->creds[0].up.provider, LATCH_PROVIDER_OTHER, "the kit's explicit other, over the host");
	latch_kit_free(k);
	free(t4);
	free(t1);
	free(t2);
	free(t3);
}

/* ---- placeholders and the env */

Test(kit, placeholder_format_and_uniqueness)
{
	static char seen[1000][LATCH_PLACEHOLDER_LEN + 1];
	const size_t plen = strlen(LATCH_PLACEHOLDER_PREFIX);

	cr_assert_eq(LATCH_PLACEHOLDER_LEN, plen + 32, "128 bits as 32 hex digits");
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(latch_placeholder_make(seen[i]), 0);
		cr_assert_eq(strlen(seen[i]), LATCH_PLACEHOLDER_LEN);
		cr_assert_eq(strncmp(seen[i], "latch-placeholder-", plen), 0, "%s", seen[i]);
		cr_assert_eq(strspn(seen[i] + plen, "0123456789abcdef"), 32, "%s", seen[i]);
		for (int k = 0; k < i; k++)
			cr_assert_str_neq(seen[i], seen[k], "placeholder %d repeats %d", i, k);
	}
}

Test(kit, placeholder_compare)
{
	char p[LATCH_PLACEHOLDER_LEN + 1], q[LATCH_PLACEHOLDER_LEN + 2];
	size_t n = LATCH_PLACEHOLDER_LEN;

	cr_assert_eq(latch_placeholder_make(p), 0);
	cr_expect(latch_placeholder_equal(p, n, p), "control: itself");
	strcpy(q, p);
	q[n - 1] ^= 1;
	cr_expect_not(latch_placeholder_equal(q, n, p), "last byte differs");
	strcpy(q, p);
	q[0] ^= 1;
	cr_expect_not(latch_placeholder_equal(q, n, p), "first byte differs");
	cr_expect_not(latch_placeholder_equal(p, n - 1, p), "a prefix of it");
	strcpy(q, p);
	strcat(q, "0");
	cr_expect_not(latch_placeholder_equal(q, n + 1, p), "it and one more byte");
	cr_expect_not(latch_placeholder_equal("", 0, p), "nothing");
	cr_expect_not(latch_placeholder_equal(LATCH_PLACEHOLDER_PREFIX, strlen(LATCH_PLACEHOLDER_PREFIX), p),
		      "the prefix alone");
}

static const char *line_of(char **env, const char *name)
{
	size_t n = strlen(name);

	for (int i = 0; env[i]; i++)
		if (!strncmp(env[i], name, n) && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

Test(kit, env_rendered_with_suffix_and_proxies)
{
	struct latch_kit_opts o = opts();
	char err[LATCH_ERR_MAX], (*ph)[LATCH_PLACEHOLDER_LEN + 1];
	struct latch_kit *k = latch_kit_load("codex", &o, err, sizeof(err));
	struct latch_addr host;
	char **env;
	int n;

	cr_assert_not_null(k, "%s", err);
	ph = calloc(k->n_creds, sizeof(*ph));
	cr_assert_eq(latch_kit_placeholders_make(k, ph), 0);
	cr_assert_eq(latch_parse_addr("192.0.2.1", &host, NULL, 0), 0);
	env = latch_kit_env_render(k, &host, 8080, ph, &n);
	cr_assert_not_null(env);
	cr_expect_eq(n, 8, "two of the kit's, four proxies, two NO_PROXY");
	cr_expect_null(env[n]);
	cr_expect_str_eq(line_of(env, "OPENAI_BASE_URL"), "http://192.0.2.1:8080/openai/v1");
	cr_expect_str_eq(line_of(env, "OPENAI_API_KEY"), ph[0]);
	cr_expect_str_eq(line_of(env, "HTTPS_PROXY"), "http://192.0.2.1:8080");
	cr_expect_str_eq(line_of(env, "http_proxy"), "http://192.0.2.1:8080");
	cr_expect_str_eq(line_of(env, "NO_PROXY"), "192.0.2.1");
	latch_kit_env_free(env);

	cr_assert_eq(latch_parse_addr("2001:db8:1::1", &host, NULL, 0), 0);
	env = latch_kit_env_render(k, &host, 8080, ph, &n);
	cr_assert_not_null(env);
	cr_expect_str_eq(line_of(env, "OPENAI_BASE_URL"), "http://[2001:db8:1::1]:8080/openai/v1");
	cr_expect_str_eq(line_of(env, "HTTPS_PROXY"), "http://[2001:db8:1::1]:8080");
	latch_kit_env_free(env);
	free(ph);
	latch_kit_free(k);
}

/* One placeholder per credential; a value may use a variable's two tokens anywhere. */
Test(kit, env_placeholders_per_credential)
{
	char *t = edit(weather, "    env:\n",
		       "    env:\n      AUTH: \"Bearer {{placeholder}} at {{url}}\"\n"
		       "  - name: second\n    upstream: https://b.example.com\n    secret: B\n    header: b\n"
		       "    env:\n      B_KEY: \"{{placeholder}}\"\n");
	struct latch_kit *k = parse_ok(t);
	char ph[2][LATCH_PLACEHOLDER_LEN + 1], want[256], **env;
	struct latch_addr host;
	int n;

	cr_assert_eq(latch_kit_placeholders_make(k, ph), 0);
	cr_expect_str_neq(ph[0], ph[1]);
	latch_parse_addr("198.51.100.1", &host, NULL, 0);
	env = latch_kit_env_render(k, &host, 9, ph, &n);
	cr_assert_not_null(env);
	snprintf(want, sizeof(want), "Bearer %s at http://198.51.100.1:9/weather", ph[0]);
	cr_expect_str_eq(line_of(env, "AUTH"), want);
	cr_expect_str_eq(line_of(env, "B_KEY"), ph[1]);
	latch_kit_env_free(env);
	latch_kit_free(k);
	free(t);
}

/* ---- files: kit files and secret files */

/* Invariant: a file kit takes the built-in's place whole; the list shows it once, as both. */
Test(kit, file_kit_overrides_builtin)
{
	struct latch_kit_opts o = opts();
	struct latch_kit_info *list;
	char err[LATCH_ERR_MAX], *text = edit(weather, "name: weather", "name: claude");
	struct latch_kit *k;
	int n, seen = 0;

	put("claude.yaml", text, 0644);
	k = latch_kit_load("claude", &o, err, sizeof(err));
	cr_assert_not_null(k, "%s", err);
	cr_expect_not(k->builtin);
	cr_expect_str_eq(k->creds[0].name, "weather", "the file's credentials, not the built-in's");
	cr_expect_eq(k->n_creds, 1);
	latch_kit_free(k);
	cr_assert_eq(latch_kit_list(dir, &list, &n, err, sizeof(err)), 0);
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i].name, "claude")) {
			seen++;
			cr_expect(list[i].builtin && list[i].file);
		}
	cr_expect_eq(seen, 1);
	free(list);
	/* control: another built-in is untouched */
	k = latch_kit_load("codex", &o, err, sizeof(err));
	cr_assert_not_null(k, "%s", err);
	cr_expect(k->builtin);
	latch_kit_free(k);
	free(text);
}

Test(kit, file_kit_name_must_be_its_file)
{
	struct latch_kit_opts o = opts(), other;
	char err[LATCH_ERR_MAX], want[512], path[300];
	struct latch_kit *k;

	put("storm.yaml", weather, 0644);
	cr_expect_null(latch_kit_load("storm", &o, err, sizeof(err)));
	snprintf(want, sizeof(want),
		 "%s/storm.yaml: name \"weather\" is not the file's name; write name: storm, or rename the file to "
		 "weather.yaml",
		 dir);
	cr_expect_str_eq(err, want);
	/* one reader, one verdict: `kit check` of the same file says the same (it once called it valid) */
	snprintf(path, sizeof(path), "%s/storm.yaml", dir);
	cr_expect_null(latch_kit_load_file(path, &o, err, sizeof(err)));
	cr_expect_eq(errno, EINVAL);
	cr_expect_str_eq(err, want);
	/* control: named right, both load it; a draft outside the kits directory keeps its own name */
	put("weather.yaml", weather, 0644);
	snprintf(path, sizeof(path), "%s/weather.yaml", dir);
	k = latch_kit_load("weather", &o, err, sizeof(err));
	cr_expect_not_null(k, "%s", err);
	latch_kit_free(k);
	k = latch_kit_load_file(path, &o, err, sizeof(err));
	cr_expect_not_null(k, "%s", err);
	latch_kit_free(k);
	other = (struct latch_kit_opts){ .dir = "/nonexistent-kits" };
	snprintf(path, sizeof(path), "%s/storm.yaml", dir);
	k = latch_kit_load_file(path, &other, err, sizeof(err));
	cr_expect_not_null(k, "%s", err);
	latch_kit_free(k);
	cr_expect_null(latch_kit_load("nosuch", &o, err, sizeof(err)));
	cr_expect_eq(errno, ENOENT);
	cr_expect_not_null(strstr(err, "no kit 'nosuch'; the kits are claude, codex, gemini, shell, storm"), "%s", err);
}

/*
 * Invariant: a kit file someone else could write, or a link, is never read,
 * and the built-in of its name does not stand in for it.
 */
Test(kit, unsafe_kit_file_refused)
{
	struct latch_kit_opts o = opts();
	char err[LATCH_ERR_MAX], target[300], link[300], *text = edit(weather, "name: weather", "name: claude");
	struct latch_kit *k;

	put("claude.yaml", text, 0666);
	cr_expect_null(latch_kit_load("claude", &o, err, sizeof(err)));
	cr_expect_eq(errno, EPERM);
	cr_expect_not_null(strstr(err, "writable by group or others (mode 0666); run chmod go-w"), "%s", err);
	/* a link to a safe file is refused all the same */
	put("real.yaml", text, 0644);
	snprintf(target, sizeof(target), "%s/real.yaml", dir);
	snprintf(link, sizeof(link), "%s/claude.yaml", dir);
	cr_assert_eq(unlink(link), 0);
	cr_assert_eq(symlink(target, link), 0);
	cr_expect_null(latch_kit_load("claude", &o, err, sizeof(err)));
	cr_expect_eq(errno, ELOOP);
	cr_expect_not_null(strstr(err, "is a symbolic link"), "%s", err);
	/* control: the same file, not a link, mode 0644, loads by name and by path */
	cr_assert_eq(unlink(link), 0);
	put("claude.yaml", text, 0644);
	k = latch_kit_load("claude", &o, err, sizeof(err));
	cr_expect_not_null(k, "%s", err);
	latch_kit_free(k);
	k = latch_kit_load_file(link, &o, err, sizeof(err));
	cr_expect_not_null(k, "%s", err);
	latch_kit_free(k);
	free(text);
}

Test(kit, latch_root_moves_the_kits)
{
	char buf[PATH_MAX];
	const char *old = getenv("LATCH_ROOT");

	setenv("LATCH_ROOT", dir, 1);
	cr_assert_eq(latch_kit_dir(buf, sizeof(buf)), 0);
	cr_expect_eq(strncmp(buf, dir, strlen(dir)), 0, "%s", buf);
	cr_expect_str_eq(buf + strlen(dir), "/etc/latch/kits");
	if (old)
		setenv("LATCH_ROOT", old, 1);
	else
		unsetenv("LATCH_ROOT");
}

static char warned[4][LATCH_ERR_MAX];
static int n_warned;

static void warn(const char *line, void *arg)
{
	if (n_warned < 4)
		snprintf(warned[n_warned++], sizeof(warned[0]), "%s", line);
}

/* The weather kit with its key in a file. */
static struct latch_kit *file_kit(const char *path)
{
	char line[320], *text;
	struct latch_kit *k;

	snprintf(line, sizeof(line), "secret_file: %s", path);
	text = edit(weather, "secret: WEATHER_API_KEY", line);
	k = parse_ok(text);
	free(text);
	return k;
}

/* Invariant: a secret file is read only when it is a regular file, not a link, that nobody else may read. */
Test(kit, secret_file_refusals_and_control)
{
	static const struct {
		mode_t mode;
		const char *want;
	} unsafe[] = {
		{ 0640, "a secret readable by group or others (mode 0640); run chmod 600" },
		{ 0604, "a secret readable by group or others (mode 0604); run chmod 600" },
		{ 0620, "writable by group or others (mode 0620); run chmod 600" },
	};
	struct latch_kit_secrets s = { 0 };
	char err[LATCH_ERR_MAX], why[LATCH_ERR_MAX], link[300];
	const char *path = put("weather.key", "sk-weather-123\n", 0600);
	struct latch_kit *k = file_kit(path);
	const char *v;
	size_t len;

	/* control: 0600, the caller's own */
	cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, NULL, why, sizeof(why)), LATCH_SECRET_SET, "%s", why);
	cr_assert_eq(latch_kit_secrets_read_files(k, &s, warn, NULL, err, sizeof(err)), 0, "%s", err);
	v = latch_kit_secret_get(&s, "weather", &len);
	cr_assert_not_null(v);
	cr_expect_eq(len, 14, "the last line break is no part of the key");
	cr_expect_str_eq(v, "sk-weather-123");
	latch_kit_secrets_wipe(&s);
	cr_expect_eq(s.n, 0);

	for (size_t i = 0; i < ARRAY_SIZE(unsafe); i++) {
		cr_assert_eq(chmod(path, unsafe[i].mode), 0);
		err[0] = '\0';
		cr_expect_eq(latch_kit_secrets_read_files(k, &s, warn, NULL, err, sizeof(err)), -EPERM);
		cr_expect_not_null(strstr(err, unsafe[i].want), "mode %o: %s", unsafe[i].mode, err);
		cr_expect_null(strstr(err, "sk-weather"), "the message holds the key: %s", err);
		cr_expect_eq(s.n, 0, "nothing is kept from a refused read");
		cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, NULL, why, sizeof(why)), LATCH_SECRET_UNSAFE);
	}
	cr_assert_eq(chmod(path, 0600), 0);
	snprintf(link, sizeof(link), "%s/link.key", dir);
	cr_assert_eq(symlink(path, link), 0);
	latch_kit_free(k);
	k = file_kit(link);
	cr_expect_eq(latch_kit_secrets_read_files(k, &s, warn, NULL, err, sizeof(err)), -ELOOP);
	cr_expect_not_null(strstr(err, "is a symbolic link; a secret file must be a regular file"), "%s", err);
	cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, NULL, why, sizeof(why)), LATCH_SECRET_UNSAFE);
	latch_kit_free(k);
}

Test(kit, secret_file_missing_is_a_warning)
{
	struct latch_kit_secrets s = { 0 };
	char err[LATCH_ERR_MAX], path[300], want[400];
	struct latch_kit *k;

	snprintf(path, sizeof(path), "%s/none.key", dir);
	k = file_kit(path);
	n_warned = 0;
	cr_expect_eq(latch_kit_secrets_read_files(k, &s, warn, NULL, err, sizeof(err)), 0);
	cr_expect_eq(s.n, 0);
	cr_assert_eq(n_warned, 1);
	snprintf(want, sizeof(want), "secret_file %s does not exist; the agent may fail to authenticate", path);
	cr_expect_str_eq(warned[0], want);
	cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, NULL, NULL, 0), LATCH_SECRET_MISSING);
	latch_kit_free(k);
}

Test(kit, secrets_from_env)
{
	char *envp[] = { "WEATHER_API_KEY=sk-real-456", NULL };
	char *empty[] = { "OTHER=1", NULL };
	char *bad[] = { "WEATHER_API_KEY=sk-real\r\nX-Evil: 1", NULL };
	struct latch_kit_secrets s = { 0 };
	struct latch_kit *k = parse_ok(weather);
	char err[LATCH_ERR_MAX];
	size_t len;

	cr_assert_eq(latch_kit_secrets_from_env(k, envp, &s, warn, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(latch_kit_secret_get(&s, "weather", &len), "sk-real-456");
	cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, envp, NULL, 0), LATCH_SECRET_SET);
	latch_kit_secrets_wipe(&s);

	n_warned = 0;
	cr_assert_eq(latch_kit_secrets_from_env(k, empty, &s, warn, NULL, err, sizeof(err)), 0);
	cr_expect_eq(s.n, 0, "a missing key is left out: its route refuses");
	cr_assert_eq(n_warned, 1);
	cr_expect_str_eq(warned[0], "WEATHER_API_KEY is not set on the host; the agent may fail to authenticate");
	cr_expect_eq(latch_kit_secret_state(&k->creds[0].up, empty, NULL, 0), LATCH_SECRET_MISSING);

	/* a key with a line break would put a header of the guest's choosing after it */
	cr_expect_eq(latch_kit_secrets_from_env(k, bad, &s, warn, NULL, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "WEATHER_API_KEY holds a control character or a line break; a key is one line of "
			      "printable text");
	cr_expect_eq(s.n, 0);
	latch_kit_free(k);
}

/* The VmFlags of the mapping that holds ADDR, from /proc/self/smaps. */
static void vm_flags(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long lo, hi, a = (unsigned long)addr;
	bool in = false;
	char line[512];

	out[0] = '\0';
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a >= lo && a < hi;
		else if (in && !strncmp(line, "VmFlags:", 8))
			snprintf(out, len, "%s", line + 8);
	}
	fclose(f);
}

/* Invariant: a secret's pages are left out of core dumps and of forked children (read back from the kernel). */
Test(kit, secret_pages_not_dumped_or_inherited)
{
	struct latch_kit_secrets s = { 0 };
	char err[LATCH_ERR_MAX], flags[512];
	size_t len;
	const char *v;

	cr_assert_eq(latch_kit_secrets_set(&s, "weather", "sk-x", 4, "WEATHER_API_KEY", err, sizeof(err)), 0);
	v = latch_kit_secret_get(&s, "weather", &len);
	cr_assert_not_null(v);
	vm_flags(v, flags, sizeof(flags));
	cr_expect_not_null(strstr(flags, " dd"), "no MADV_DONTDUMP: %s", flags);
	cr_expect_not_null(strstr(flags, " wf"), "no MADV_WIPEONFORK: %s", flags);
	if (s.v[0].locked)
		cr_expect_not_null(strstr(flags, " lo"), "said locked, not locked: %s", flags);
	/* control: ordinary heap memory carries neither */
	char *heap = malloc(64);
	vm_flags(heap, flags, sizeof(flags));
	cr_expect_null(strstr(flags, " dd"), "the control is marked too: %s", flags);
	free(heap);
	latch_kit_secrets_wipe(&s);
}
