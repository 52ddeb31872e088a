/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cni.h - latch-cni, the chained CNI plugin (build/latch-cni, cni/main.c):
 * the CNI protocol (spec 1.0.0 and 0.3.x/0.4.0; STATUS of 1.1.0), a
 * container's host-side veth found from its netns, which profile and kit
 * the container gets (the network config, runtimeConfig, the node's pod
 * file), and ADD, DEL, CHECK as the same attach `latch attach` makes:
 * default deny, read back from the kernel before ADD returns.
 *
 * Only the plugin's binary uses this module; the header is what its files
 * share.  Every function returns 0 or -errno; a failure fills a struct
 * latch_cni_error, which main.c writes as the spec's error object.
 */
#ifndef LATCH_CNI_H
#define LATCH_CNI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/loader.h"

/* The spec's error codes (SPEC.md, "Error"); 100 and up are latch's own. */
enum latch_cni_code {
	LATCH_CNI_E_VERSION = 1, /* incompatible CNI version */
	LATCH_CNI_E_FIELD = 2, /* unsupported field in the network config */
	LATCH_CNI_E_UNKNOWN = 3, /* container unknown or does not exist */
	LATCH_CNI_E_ENV = 4, /* invalid necessary environment variables */
	LATCH_CNI_E_IO = 5, /* I/O failure */
	LATCH_CNI_E_DECODE = 6, /* failed to decode content */
	LATCH_CNI_E_CONFIG = 7, /* invalid network config */
	LATCH_CNI_E_AGAIN = 11, /* try again later */
	LATCH_CNI_E_NOT_READY = 50, /* STATUS: the plugin is not available */
	LATCH_CNI_E_ENFORCE = 100, /* the enforcement could not be attached or verified */
	LATCH_CNI_E_POSTURE = 101, /* CHECK: the posture is not what ADD made */
};

#define LATCH_CNI_MSG_MAX 1024
struct latch_cni_error {
	int code; /* enum latch_cni_code */
	char msg[LATCH_CNI_MSG_MAX];
	char details[LATCH_CNI_MSG_MAX];
};
/* Fill E (code, one line of msg) and return ret (a -errno). */
__attribute__((format(printf, 4, 5))) int latch_cni_fail(struct latch_cni_error *e, int code, int ret, const char *fmt,
							 ...);

/* The versions this plugin speaks, newest last; "1.1.0" is STATUS's. */
extern const char *const latch_cni_versions[];
bool latch_cni_version_known(const char *v);

/* What the runtime says in the environment (CNI_*). */
struct latch_cni_env {
	const char *command; /* ADD, DEL, CHECK, VERSION, STATUS */
	const char *container_id;
	const char *netns; /* a path; DEL may come without one */
	const char *ifname;
	const char *args; /* "K=V;K=V", may be NULL */
};

#define LATCH_CNI_POLICY_MAX 64
/* Which policy a container gets, and where that came from (for the error that names it). */
struct latch_cni_policy {
	char profile[LATCH_CNI_POLICY_MAX]; /* "" : sealed (nothing reachable) */
	char kit[LATCH_CNI_POLICY_MAX]; /* "" : none */
	char from[200]; /* "the network config", "/etc/latch/cni-pods:3 (agents/builder)" ... */
};

/* The network config from stdin, and what ADD and CHECK need from it. */
struct latch_cni_conf {
	json_t *root; /* the whole document (owned) */
	const char *version; /* its cniVersion */
	json_t *prev; /* prevResult (borrowed from root), NULL when none */
	struct latch_cni_policy policy;
};

/*
 * Parse the network config (TEXT from stdin): cniVersion known, `latch`
 * section and runtimeConfig well formed, the policy resolved (the node's
 * pod file, then runtimeConfig's latch, then the config's latch section).
 * 0 or -errno with E; free with latch_cni_conf_free().
 */
int latch_cni_conf_parse(const char *text, const struct latch_cni_env *env, struct latch_cni_conf *c,
			 struct latch_cni_error *e);
void latch_cni_conf_free(struct latch_cni_conf *c);
/*
 * The node's pod file ($LATCH_ROOT/etc/latch/cni-pods, root's, written by
 * nobody else): NAMESPACE or NAMESPACE/POD, a profile and an optional kit,
 * one line each; the most specific match for NS/POD into P.  0 with
 * *found, or -errno with E naming the file and line.
 */
int latch_cni_pods_lookup(const char *ns, const char *pod, struct latch_cni_policy *p, bool *found,
			  struct latch_cni_error *e);

/* The container's side, read from the kernel and checked against prevResult. */
struct latch_cni_link {
	char host_ifname[IF_NAMESIZE]; /* the veth peer on the host */
	int host_ifindex;
	uint8_t mac[6]; /* the container interface's */
	struct latch_addr ip4, ip6, gw4, gw6; /* from prevResult; family 0 when absent */
};

/*
 * The host end of ENV's interface: CNI_IFNAME in CNI_NETNS is a veth, its
 * peer is in this netns (IFLA_LINK and the peer's netns id agree both
 * ways), and prevResult's addresses on it.  0 or -errno with E.
 */
int latch_cni_link_find(const struct latch_cni_env *env, const json_t *prev, struct latch_cni_link *l,
			struct latch_cni_error *e);
/* The addresses, gateways and MAC prevResult gives ENV's interface (into L; the host end is not touched). */
int latch_cni_prev_addrs(const struct latch_cni_env *env, const json_t *prev, struct latch_cni_link *l,
			 struct latch_cni_error *e);

/* The sandbox name of a container's interface: "cni-" and 16 hex of SHA-256(id, ifname), so DEL needs no state. */
int latch_cni_sandbox_name(const char *container_id, const char *ifname, char name[LATCH_NAME_MAX + 1]);

/* Record NAME's DECISION ("attach", "detach") for ENV's container in the audit log; a failure is a warning. */
void latch_cni_audit(const char *name, const char *decision, const char *reason, const struct latch_cni_env *env,
		     const char *device);

/* The commands; ADD and CHECK print nothing: main.c writes prevResult when they return 0. */
int latch_cni_add(const struct latch_cni_env *env, const struct latch_cni_conf *c, struct latch_cni_error *e);
int latch_cni_del(const struct latch_cni_env *env, struct latch_cni_error *e);
int latch_cni_check(const struct latch_cni_env *env, const struct latch_cni_conf *c, struct latch_cni_error *e);
int latch_cni_status(struct latch_cni_error *e);

#endif
