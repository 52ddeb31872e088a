// SPDX-License-Identifier: GPL-2.0-only
/*
 * pods.c - the node's pod file: which profile and kit a Kubernetes pod gets.
 *
 *   # NAMESPACE[/POD]   PROFILE   [KIT]
 *   agents              sealed    claude
 *   agents/builder      dev
 *
 * The operator writes it on the node (root's, writable by nobody else,
 * refused otherwise as latch's other config files are); a line for the pod
 * wins over its namespace's.  A malformed line refuses the whole file:
 * a container would otherwise get a policy nobody meant.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cni/cni.h"
#include "profile/profile.h"

#define PODS_LINES_MAX 10000

/* Kubernetes names: a namespace is a DNS label, a pod name a DNS subdomain. */
static bool k8s_name_ok(const char *s, bool dots)
{
	if (!*s || strlen(s) > 253)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || (dots && *s == '.')))
			return false;
	return true;
}

/* One line's words into key, profile, kit; 0 for a blank or comment line too (*key "" then). */
static int pods_line(char *line, const char *path, int n, char **key, char **profile, char **kit,
		     struct latch_cni_error *e)
{
	char err[LATCH_ERR_MAX], *words[4], *save = NULL, *w;
	int nw = 0;

	line[strcspn(line, "#\n")] = '\0';
	for (w = strtok_r(line, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (nw == 3)
			return latch_cni_fail(
				e, LATCH_CNI_E_CONFIG, -EINVAL,
				"latch: %s:%d: more than three words; write NAMESPACE[/POD] PROFILE [KIT]", path, n);
		words[nw++] = w;
	}
	*key = nw ? words[0] : "";
	if (!nw)
		return 0;
	if (nw < 2)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: %s:%d: no profile; write NAMESPACE[/POD] PROFILE [KIT]", path, n);
	*profile = words[1];
	*kit = nw == 3 ? words[2] : "";
	if (latch_profile_name_check(*profile, err, sizeof(err)) || strlen(*profile) >= LATCH_CNI_POLICY_MAX)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: %s:%d: profile \"%s\": %s", path, n,
				      *profile, err);
	if (**kit && (latch_profile_name_check(*kit, err, sizeof(err)) || strlen(*kit) >= LATCH_CNI_POLICY_MAX))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL, "latch: %s:%d: kit \"%s\": %s", path, n, *kit,
				      err);
	w = strchr(*key, '/');
	if (w)
		*w = '\0';
	if (!k8s_name_ok(*key, false) || (w && !k8s_name_ok(w + 1, true)))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: %s:%d: \"%s%s%s\" is no NAMESPACE or NAMESPACE/POD (lower-case "
				      "Kubernetes names)",
				      path, n, *key, w ? "/" : "", w ? w + 1 : "");
	if (w)
		*w = '/';
	return 0;
}

static int pods_read(FILE *f, const char *path, const char *ns, const char *pod, struct latch_cni_policy *p,
		     bool *found, struct latch_cni_error *e)
{
	char *line = NULL, *key = NULL, *profile = NULL, *kit = NULL, want_pod[520];
	int rank = 0, n = 0, ret = 0;
	size_t cap = 0;

	snprintf(want_pod, sizeof(want_pod), "%s/%s", ns, pod);
	while (getline(&line, &cap, f) > 0) {
		int r;

		if (++n > PODS_LINES_MAX) {
			ret = latch_cni_fail(e, LATCH_CNI_E_CONFIG, -E2BIG, "latch: %s: more than %d lines", path,
					     PODS_LINES_MAX);
			break;
		}
		if ((ret = pods_line(line, path, n, &key, &profile, &kit, e)))
			break;
		r = !strcmp(key, want_pod) && *pod ? 2 : !strcmp(key, ns) ? 1 : 0;
		if (!r)
			continue;
		if (r == rank) {
			ret = latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
					     "latch: %s:%d: a second line for \"%s\"; keep one", path, n, key);
			break;
		}
		if (r > rank) {
			rank = r;
			snprintf(p->profile, sizeof(p->profile), "%s", profile);
			snprintf(p->kit, sizeof(p->kit), "%s", kit);
			snprintf(p->from, sizeof(p->from), "%.*s:%d (%.*s)", 100, path, n, 40, key);
		}
	}
	free(line);
	*found = !ret && rank;
	return ret;
}

int latch_cni_pods_lookup(const char *ns, const char *pod, struct latch_cni_policy *p, bool *found,
			  struct latch_cni_error *e)
{
	struct latch_cni_policy q = *p;
	char path[PATH_MAX], err[LATCH_ERR_MAX];
	FILE *f;
	int fd, ret;

	*found = false;
	if (latch_path(path, sizeof(path), "%s", LATCH_CNI_PODS_FILE))
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -ENAMETOOLONG, "latch: LATCH_ROOT is too long");
	fd = latch_open_trusted(path, LATCH_FILE_CONFIG, "the CNI pod file", NULL, err, sizeof(err));
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, fd, "latch: %s", err);
	f = fdopen(fd, "r");
	if (!f) {
		ret = -errno;
		close(fd);
		return latch_cni_fail(e, LATCH_CNI_E_IO, ret, "latch: %s: %s", path, strerror(-ret));
	}
	ret = pods_read(f, path, ns, pod, &q, found, e);
	fclose(f);
	if (!ret && *found)
		*p = q;
	return ret;
}
