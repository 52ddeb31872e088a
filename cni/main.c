// SPDX-License-Identifier: GPL-2.0-only
/*
 * main.c - latch-cni's main: the CNI protocol's edges (CNI_* in the
 * environment, the network config on stdin, a result or an error object
 * on stdout, exit 0 or 1).  The work is in cmd.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni/cni.h"

/* a network config with a prevResult is a few KiB; more is no config */
#define STDIN_MAX (1 << 20)

static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	while (buf && len < STDIN_MAX) {
		if (len + 1 >= cap) {
			char *more = realloc(buf, cap * 2);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
		n = read(0, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			buf[len] = '\0';
			return n < 0 ? (free(buf), NULL) : buf;
		}
		len += (size_t)n;
	}
	free(buf);
	return NULL;
}

/* The spec's error object on stdout (and its line on stderr, for the runtime's log). */
static int put_error(const char *version, const struct latch_cni_error *e)
{
	json_t *o = json_pack("{s:s, s:i, s:s}", "cniVersion",
			      version && latch_cni_version_known(version) ? version : "1.0.0", "code", e->code, "msg",
			      e->msg);

	if (*e->details)
		json_object_set_new(o, "details", json_string(e->details));
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
	fprintf(stderr, "%s%s%s\n", e->msg, *e->details ? ": " : "", e->details);
	return 1;
}

static int put_version(const char *text)
{
	json_t *in = json_loads(text ? text : "{}", 0, NULL), *list = json_array(), *o;
	const char *v = json_string_value(json_object_get(in, "cniVersion"));

	for (int i = 0; latch_cni_versions[i]; i++)
		json_array_append_new(list, json_string(latch_cni_versions[i]));
	o = json_pack("{s:s, s:o}", "cniVersion", latch_cni_version_known(v) ? v : "1.0.0", "supportedVersions", list);
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
	json_decref(in);
	return 0;
}

/* ADD's output: the previous result passed through, in the config's version. */
static int put_result(const struct latch_cni_conf *c)
{
	json_t *r = json_deep_copy(c->prev);

	json_object_set_new(r, "cniVersion", json_string(c->version));
	json_dumpf(r, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(r);
	return 0;
}

/* DEL reads only the version: a config it would refuse must not keep a container's pins alive. */
static int run_del(const struct latch_cni_env *env, const char *text)
{
	struct latch_cni_error e = { 0 };
	json_t *in = json_loads(text, 0, NULL);
	const char *v = json_string_value(json_object_get(in, "cniVersion"));
	int rc = 0;

	if (latch_cni_del(env, &e))
		rc = put_error(v, &e);
	json_decref(in);
	return rc;
}

static int run(const struct latch_cni_env *env, const char *text)
{
	struct latch_cni_error e = { 0 };
	struct latch_cni_conf c;
	int rc = 0;

	if (!strcmp(env->command, "DEL"))
		return run_del(env, text);
	if (latch_cni_conf_parse(text, env, &c, &e))
		rc = put_error(c.version, &e);
	else if (!strcmp(env->command, "ADD"))
		rc = latch_cni_add(env, &c, &e) ? put_error(c.version, &e) : put_result(&c);
	else if (!strcmp(env->command, "CHECK"))
		rc = latch_cni_check(env, &c, &e) ? put_error(c.version, &e) : 0;
	else if (!strcmp(env->command, "STATUS"))
		rc = latch_cni_status(&e) ? put_error(c.version, &e) : 0;
	else
		rc = put_error(c.version,
			       &(struct latch_cni_error){
				       .code = LATCH_CNI_E_ENV,
				       .msg = "latch: CNI_COMMAND must be ADD, DEL, CHECK, VERSION or STATUS",
			       });
	latch_cni_conf_free(&c);
	return rc;
}

int main(int argc, char **argv)
{
	struct latch_cni_env env = {
		.command = getenv("CNI_COMMAND"),
		.container_id = getenv("CNI_CONTAINERID"),
		.netns = getenv("CNI_NETNS"),
		.ifname = getenv("CNI_IFNAME"),
		.args = getenv("CNI_ARGS"),
	};
	char *text;
	int rc;

	if (!env.command) {
		fprintf(stderr, "latch-cni: a CNI plugin, run by a container runtime with CNI_COMMAND set (see "
				"latch-cni(8))\n");
		return 1;
	}
	text = read_stdin();
	if (!strcmp(env.command, "VERSION")) {
		rc = put_version(text);
	} else if (!text) {
		rc = put_error(NULL, &(struct latch_cni_error){
					     .code = LATCH_CNI_E_IO,
					     .msg = "latch: cannot read the network config from stdin (at most 1 MiB)",
				     });
	} else {
		rc = run(&env, text);
	}
	free(text);
	fflush(stdout);
	return rc;
}
