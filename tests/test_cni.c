// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_cni.c - latch-cni's input: the network config, the policy each
 * source gives (the node's pod file, runtimeConfig, the config), prevResult's
 * addresses, and the sandbox name DEL finds without state.  No root, no
 * kernel: the pod file lives under a LATCH_ROOT of the test's own.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cni/cni.h"

static char root[64];

static void setup(void)
{
	char dir[128];

	snprintf(root, sizeof(root), "/tmp/latch-cni-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/etc/latch", root);
	cr_assert_eq(latch_mkdirs(dir, 0755), 0);
	setenv("LATCH_ROOT", root, 1);
}

static void teardown(void)
{
	char cmd[128];

	unsetenv("LATCH_ROOT");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		cr_log_warn("could not remove %s", root);
}

TestSuite(cni, .init = setup, .fini = teardown);

static void pods_file(const char *text, mode_t mode)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/etc/latch/cni-pods", root);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path, mode), 0);
}

static const struct latch_cni_env env_pod = {
	.command = "ADD",
	.container_id = "c1",
	.netns = "/run/netns/p1",
	.ifname = "eth0",
	.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=agents;K8S_POD_NAME=builder",
};

static int parse(const char *conf, const struct latch_cni_env *env, struct latch_cni_conf *c, struct latch_cni_error *e)
{
	memset(e, 0, sizeof(*e));
	return latch_cni_conf_parse(conf, env, c, e);
}

#define CONF_DEV "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"latch-cni\",\"latch\":{\"profile\":\"dev\"}}"

Test(cni, pod_line_wins_over_namespace_and_config)
{
	struct latch_cni_conf c;
	struct latch_cni_error e;

	pods_file("# ns[/pod] profile [kit]\nagents sealed claude\nagents/builder research\nother dev\n", 0644);
	cr_assert_eq(parse(CONF_DEV, &env_pod, &c, &e), 0, "%s", e.msg);
	cr_expect_str_eq(c.policy.profile, "research");
	cr_expect_str_eq(c.policy.kit, "");
	cr_expect(strstr(c.policy.from, "cni-pods:3") != NULL, "from: %s", c.policy.from);
	latch_cni_conf_free(&c);
}

Test(cni, namespace_line_when_the_pod_has_none)
{
	struct latch_cni_env env = env_pod;
	struct latch_cni_conf c;
	struct latch_cni_error e;

	env.args = "K8S_POD_NAMESPACE=agents;K8S_POD_NAME=other";
	pods_file("agents sealed claude\nagents/builder research\n", 0644);
	cr_assert_eq(parse(CONF_DEV, &env, &c, &e), 0, "%s", e.msg);
	cr_expect_str_eq(c.policy.profile, "sealed");
	cr_expect_str_eq(c.policy.kit, "claude");
	latch_cni_conf_free(&c);
}

Test(cni, config_and_runtime_config_without_a_pod_line)
{
	struct latch_cni_env env = env_pod;
	struct latch_cni_conf c;
	struct latch_cni_error e;

	env.args = NULL;
	pods_file("agents sealed\n", 0644);
	cr_assert_eq(parse(CONF_DEV, &env, &c, &e), 0, "%s", e.msg);
	cr_expect_str_eq(c.policy.profile, "dev");
	latch_cni_conf_free(&c);
	cr_assert_eq(parse("{\"cniVersion\":\"0.4.0\",\"latch\":{\"profile\":\"dev\"},"
			   "\"runtimeConfig\":{\"latch\":{\"profile\":\"research\",\"kit\":\"shell\"}}}",
			   &env, &c, &e),
		     0, "%s", e.msg);
	cr_expect_str_eq(c.policy.profile, "research");
	cr_expect_str_eq(c.policy.kit, "shell");
	latch_cni_conf_free(&c);
}

/* The pod file is the operator's: one anyone could have written is no policy at all. */
Test(cni, pod_file_others_can_write_is_refused)
{
	struct latch_cni_conf c;
	struct latch_cni_error e;

	pods_file("agents/builder open\n", 0666);
	cr_assert_neq(parse(CONF_DEV, &env_pod, &c, &e), 0);
	cr_expect_eq(e.code, LATCH_CNI_E_CONFIG);
	cr_expect(strstr(e.msg, "cni-pods") != NULL, "%s", e.msg);
	latch_cni_conf_free(&c);
	/* control: the same file, 0644, is read */
	pods_file("agents/builder open\n", 0644);
	cr_assert_eq(parse(CONF_DEV, &env_pod, &c, &e), 0, "%s", e.msg);
	latch_cni_conf_free(&c);
}

Test(cni, pod_file_bad_lines_name_file_and_line)
{
	static const char *const bad[] = {
		"agents\n", /* no profile */
		"agents sealed claude extra\n", /* four words */
		"Agents sealed\n", /* not a Kubernetes name */
		"agents/builder dev\nagents/builder sealed\n", /* twice */
		"agents ../x\n", /* no profile name */
	};
	struct latch_cni_conf c;
	struct latch_cni_error e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pods_file(bad[i], 0644);
		cr_expect_neq(parse(CONF_DEV, &env_pod, &c, &e), 0, "accepted: %s", bad[i]);
		cr_expect_eq(e.code, LATCH_CNI_E_CONFIG, "%s", bad[i]);
		cr_expect(strstr(e.msg, "cni-pods:") != NULL, "no FILE:LINE: %s", e.msg);
		latch_cni_conf_free(&c);
	}
}

Test(cni, config_refusals_have_their_codes)
{
	struct latch_cni_env env = env_pod;
	struct latch_cni_conf c;
	struct latch_cni_error e;

	env.args = NULL;
	cr_expect_neq(parse("{\"cniVersion\":\"2.0.0\"}", &env, &c, &e), 0);
	cr_expect_eq(e.code, LATCH_CNI_E_VERSION);
	latch_cni_conf_free(&c);
	cr_expect_neq(parse("not json", &env, &c, &e), 0);
	cr_expect_eq(e.code, LATCH_CNI_E_DECODE);
	latch_cni_conf_free(&c);
	cr_expect_neq(parse("{\"cniVersion\":\"1.0.0\",\"latch\":{\"profile\":\"dev\",\"open\":true}}", &env, &c, &e),
		      0);
	cr_expect_eq(e.code, LATCH_CNI_E_FIELD);
	latch_cni_conf_free(&c);
	cr_expect_neq(parse("{\"cniVersion\":\"1.0.0\",\"latch\":{\"profile\":7}}", &env, &c, &e), 0);
	cr_expect_eq(e.code, LATCH_CNI_E_CONFIG);
	latch_cni_conf_free(&c);
}

static int prev(const char *json, struct latch_cni_link *l, struct latch_cni_error *e)
{
	json_t *p = json_loads(json, 0, NULL);
	int r;

	cr_assert_not_null(p);
	memset(l, 0, sizeof(*l));
	memset(e, 0, sizeof(*e));
	r = latch_cni_prev_addrs(&env_pod, p, l, e);
	json_decref(p);
	return r;
}

#define IFACES                                                     \
	"\"interfaces\":[{\"name\":\"br0\"},{\"name\":\"veth1\"}," \
	"{\"name\":\"eth0\",\"mac\":\"02:00:00:00:00:07\",\"sandbox\":\"/run/netns/p1\"}]"

Test(cni, prev_result_addresses_of_the_interface)
{
	struct latch_cni_link l;
	struct latch_cni_error e;

	cr_assert_eq(prev("{" IFACES ",\"ips\":[{\"address\":\"192.0.2.10/24\",\"gateway\":\"192.0.2.1\","
			  "\"interface\":2},{\"address\":\"2001:db8::10/64\",\"gateway\":\"2001:db8::1\","
			  "\"interface\":2},{\"address\":\"198.51.100.9/24\",\"gateway\":\"198.51.100.1\","
			  "\"interface\":0}]}",
			  &l, &e),
		     0, "%s", e.msg);
	cr_expect_eq(l.ip4.family, AF_INET);
	cr_expect_eq(l.ip4.v4.s_addr, htonl(0xc000020a));
	cr_expect_eq(l.gw4.v4.s_addr, htonl(0xc0000201));
	cr_expect_eq(l.ip6.family, AF_INET6);
	cr_expect_eq(l.mac[5], 7);
}

Test(cni, prev_result_refusals)
{
	struct latch_cni_link l;
	struct latch_cni_error e;

	/* two of a family: latch enforces one */
	cr_expect_neq(prev("{" IFACES ",\"ips\":[{\"address\":\"192.0.2.10/24\",\"gateway\":\"192.0.2.1\","
			   "\"interface\":2},{\"address\":\"192.0.2.11/24\",\"gateway\":\"192.0.2.1\","
			   "\"interface\":2}]}",
			   &l, &e),
		      0);
	cr_expect(strstr(e.msg, "two IPv4") != NULL, "%s", e.msg);
	/* no gateway: no host address for the resolver */
	cr_expect_neq(prev("{" IFACES ",\"ips\":[{\"address\":\"192.0.2.10/24\",\"interface\":2}]}", &l, &e), 0);
	cr_expect(strstr(e.msg, "isGateway") != NULL, "%s", e.msg);
	/* the interface in another netns is not this container's */
	cr_expect_neq(prev("{\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/run/netns/p2\"}],\"ips\":[]}", &l, &e),
		      0);
	cr_expect_eq(e.code, LATCH_CNI_E_CONFIG);
}

Test(cni, sandbox_name_is_a_hash_of_id_and_interface)
{
	char a[LATCH_NAME_MAX + 1], b[LATCH_NAME_MAX + 1], c[LATCH_NAME_MAX + 1], err[LATCH_ERR_MAX];

	cr_assert_eq(latch_cni_sandbox_name("ab", "c", a), 0);
	cr_assert_eq(latch_cni_sandbox_name("ab", "c", b), 0);
	cr_assert_eq(latch_cni_sandbox_name("a", "bc", c), 0);
	cr_expect_str_eq(a, b);
	cr_expect_str_neq(a, c);
	cr_expect_eq(strlen(a), 20);
	cr_expect_eq(latch_parse_name(a, err, sizeof(err)), 0, "%s", err);
}
