// SPDX-License-Identifier: GPL-2.0-only
/*
 * profile.c - load egress profiles: find the files and built-ins, follow
 * `# extends:`, layer the overlay, and list what there is.  One text is
 * parsed by parse.c; names are matched by match.c.
 *
 * A profile decides where a sandbox may go, so a file is read only when root
 * (or, for the unit tests, the user running latch) owns it and nobody else
 * may write it, and one bad line refuses the whole load: a profile is never
 * half applied.  The entries come out as data; turning them into map entries
 * and learned addresses is the daemon's business.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/internal.h"
#include "profile/profile.h"
/* generated; its first comment quotes a glob, which -Wcomment would flag */
#include "profile/profiles_builtin.h"

#define N_BUILTIN (sizeof(latch_builtin_profiles) / sizeof(latch_builtin_profiles[0]))

int latch_profile_name_check(const char *name, char *err, size_t errlen)
{
	return latch_parse_file_name("profile", name, err, errlen);
}

/* ---- files and built-ins */

/*
 * Read PATH whole, refusing anything but a regular file that root (or we)
 * own and nobody else may write.  -ENOENT, without a message, when there is
 * no such file.
 */
static int read_file(const char *path, char **text, char *err, size_t errlen)
{
	size_t len = 0;
	char *buf = NULL;
	int fd, ret = 0;

	*text = NULL;
	/* it decides where sandbox traffic goes: nobody but root may have written it */
	fd = latch_open_trusted(path, LATCH_FILE_CONFIG, "a profile", NULL, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(LATCH_PROFILE_FILE_MAX + 1);
	if (!buf) {
		ret = latch_errf_at(err, errlen, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	/* read to EOF rather than trust st_size: the file may be growing */
	for (;;) {
		ssize_t r = read(fd, buf + len, LATCH_PROFILE_FILE_MAX + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = latch_errf_at(err, errlen, -errno, path, 0, "read error: %s", strerror(errno));
			goto out;
		}
		if (!r)
			break;
		len += r;
		if (len > LATCH_PROFILE_FILE_MAX) {
			ret = latch_errf_at(err, errlen, -EFBIG, path, 0,
					    "larger than %d bytes; use CIDRs or wildcards", LATCH_PROFILE_FILE_MAX);
			goto out;
		}
	}
	if (memchr(buf, '\0', len)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "has a NUL byte; a profile is a text file");
		goto out;
	}
	buf[len] = '\0';
	*text = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return ret;
}

static const char *builtin_text(const char *name)
{
	for (size_t i = 0; i < N_BUILTIN; i++)
		if (!strcmp(latch_builtin_profiles[i].name, name))
			return latch_builtin_profiles[i].text;
	return NULL;
}

/* "dev, open, research, sealed": for the message that says a name is unknown. */
static void builtin_names(char *buf, size_t len)
{
	struct latch_profile_info *v;
	size_t off = 0;
	int n;

	buf[0] = '\0';
	if (latch_profile_list(NULL, &v, &n, NULL, 0))
		return;
	for (int i = 0; i < n && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? ", " : "", v[i].name);
	free(v);
}

static int profile_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s.txt", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * The text of profile NAME, DIR/NAME.txt over the built-in.  SOURCE gets the
 * path or "builtin:NAME"; *owned is what the caller frees.  -ENOENT, without
 * a message, when neither exists.
 */
static int find_profile(const char *dir, const char *name, char **owned, const char **text, char *source, size_t srclen,
			char *err, size_t errlen)
{
	int ret;

	*owned = NULL;
	*text = NULL;
	if (dir && *dir) {
		if (profile_path(source, srclen, dir, name))
			return latch_errf_at(err, errlen, -ENAMETOOLONG, dir, 0, "path too long for profile '%s'",
					     name);
		ret = read_file(source, owned, err, errlen);
		if (ret != -ENOENT) {
			*text = *owned;
			return ret;
		}
	}
	*text = builtin_text(name);
	if (!*text)
		return -ENOENT;
	snprintf(source, srclen, "builtin:%s", name);
	return 0;
}

/* The overlay's text: no file (or no path) is no overlay, *text NULL. */
static int read_overlay(const char *path, char **text, char *err, size_t errlen)
{
	int ret;

	*text = NULL;
	if (!path || !*path)
		return 0;
	ret = read_file(path, text, err, errlen);
	return ret == -ENOENT ? 0 : ret;
}

/* The overlay layered over the active profile (TEXT NULL: none). */
static int load_overlay(const char *path, const char *text, struct pvec *pv, int room, char *err, size_t errlen)
{
	char ext[LATCH_PROFILE_NAME_MAX + 1];
	int line, ret;

	if (!text)
		return 0;
	ret = profile_parse_text(text, path, pv, room, ext, &line, err, errlen);
	if (!ret && *ext)
		ret = latch_errf_at(
			err, errlen, -EINVAL, path, line,
			"an overlay cannot '# extends:'; it is layered over whichever profile is active, so remove "
			"the line or make this file a profile of its own");
	return ret;
}

struct layer {
	char name[LATCH_PROFILE_NAME_MAX + 1];
	char source[PATH_MAX];
	char extends[LATCH_PROFILE_NAME_MAX + 1];
	int ext_line;
	const char *text;
	char *owned; /* text, when read from a file */
};

/* "a -> b -> a": the chain so far, then the name it would go on to. */
static void chain_text(const struct layer *layers, int depth, const char *next, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < depth && off < len; i++)
		off += snprintf(buf + off, len - off, "%s -> ", layers[i].name);
	if (off < len)
		snprintf(buf + off, len - off, "%s", next);
}

static int load_open(const char *dir, const char *overlay, struct latch_profile *out, char *err, size_t errlen)
{
	char path[PATH_MAX], *text;
	struct pvec ov;
	size_t bytes = 128;
	struct stat st;
	int lines = 0, ret;

	if (dir && *dir) {
		if (profile_path(path, sizeof(path), dir, LATCH_PROFILE_OPEN))
			return latch_errf_at(err, errlen, -ENAMETOOLONG, dir, 0, "path too long");
		if (!lstat(path, &st))
			return latch_errf_at(
				err, errlen, -EINVAL, path, 0,
				"'open' is built in: it removes the policy, so no file may define it; rename "
				"this file, e.g. to my-open.txt");
	}
	/* open has no entries, but a broken overlay is still reported now, not at the next switch */
	ret = read_overlay(overlay, &text, err, errlen);
	if (ret)
		return ret;
	if (text)
		profile_text_size(text, &lines, &bytes);
	ret = profile_pvec_init(&ov, lines, bytes);
	if (ret)
		ret = latch_errf(err, errlen, ret, "out of memory");
	else
		ret = load_overlay(overlay, text, &ov, LATCH_PROFILE_ENTRIES_MAX, err, errlen);
	profile_pvec_free(&ov);
	free(text);
	if (ret)
		return ret;
	strcpy(out->name, LATCH_PROFILE_OPEN);
	out->open = true;
	return 0;
}

/*
 * The chain: layers[0] is NAME, each next one the profile the previous
 * extends.  Adds each layer's lines and bytes to *lines and *bytes, so the
 * entries can go into one array sized up front.  Returns the depth, or
 * -errno with err set.
 */
static int load_chain(const char *dir, const char *name, struct layer *layers, int *lines, size_t *bytes, char *err,
		      size_t errlen)
{
	char chain[LATCH_ERR_MAX], known[LATCH_ERR_MAX];
	const char *cur = name;
	int depth = 0, ret;

	for (;;) {
		struct layer *l = &layers[depth];

		strcpy(l->name, cur);
		ret = find_profile(dir, cur, &l->owned, &l->text, l->source, sizeof(l->source), err, errlen);
		if (ret == -ENOENT && !depth) {
			builtin_names(known, sizeof(known));
			return latch_errf(err, errlen, -ENOENT,
					  "profile '%s' not found: there is no %s%s%s.txt and no built-in of that name "
					  "(built-in: %s)",
					  cur, dir && *dir ? dir : "", dir && *dir ? "/" : "", cur, known);
		} else if (ret == -ENOENT) {
			return latch_errf_at(
				err, errlen, -ENOENT, layers[depth - 1].source, layers[depth - 1].ext_line,
				"extends '%s', which is neither %s%s%s.txt nor a built-in profile; fix the name or "
				"add the file",
				cur, dir && *dir ? dir : "", dir && *dir ? "/" : "", cur);
		}
		if (ret)
			return ret;
		ret = profile_parse_text(l->text, l->source, NULL, 0, l->extends, &l->ext_line, err, errlen);
		if (ret)
			return ret;
		profile_text_size(l->text, lines, bytes);
		*bytes += 128; /* its source */
		depth++;
		if (!*l->extends)
			return depth;
		for (int i = 0; i < depth; i++) {
			if (strcmp(layers[i].name, l->extends))
				continue;
			chain_text(layers, depth, l->extends, chain, sizeof(chain));
			return latch_errf_at(err, errlen, -ELOOP, l->source, l->ext_line,
					     "profile cycle %s; remove one of these '# extends:' lines", chain);
		}
		if (depth == LATCH_PROFILE_DEPTH_MAX) {
			chain_text(layers, depth, l->extends, chain, sizeof(chain));
			return latch_errf_at(err, errlen, -ELOOP, l->source, l->ext_line,
					     "more than %d profiles in one extends chain (%s); flatten it",
					     LATCH_PROFILE_DEPTH_MAX, chain);
		}
		cur = l->extends;
	}
}

int latch_profile_load(const char *dir, const char *name, const char *overlay, struct latch_profile *out, char *err,
		       size_t errlen)
{
	char *ov_text = NULL;
	struct pvec all = { 0 };
	struct layer *layers;
	int depth, lines = 0, ret;
	size_t bytes = 0;

	memset(out, 0, sizeof(*out));
	ret = latch_profile_name_check(name, err, errlen);
	if (ret)
		return ret;
	if (!strcmp(name, LATCH_PROFILE_OPEN))
		return load_open(dir, overlay, out, err, errlen);
	layers = calloc(LATCH_PROFILE_DEPTH_MAX, sizeof(*layers));
	if (!layers)
		return latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);

	/*
	 * The chain first, then the entries, base first (a later layer reads as
	 * adding to an earlier one), into one array sized from the line counts:
	 * copying 65,536 parsed entries from layer arrays into a fresh one cost a
	 * third of a load in first touches of memory.
	 */
	depth = load_chain(dir, name, layers, &lines, &bytes, err, errlen);
	ret = depth < 0 ? depth : 0;
	if (ret)
		goto out;
	ret = read_overlay(overlay, &ov_text, err, errlen);
	if (ret)
		goto out;
	if (ov_text) {
		profile_text_size(ov_text, &lines, &bytes);
		bytes += 128;
	}
	if (profile_pvec_init(&all, lines < LATCH_PROFILE_ENTRIES_MAX ? lines : LATCH_PROFILE_ENTRIES_MAX, bytes)) {
		ret = latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);
		goto out;
	}
	for (int i = depth - 1; i >= 0; i--) {
		char ext[LATCH_PROFILE_NAME_MAX + 1];
		int line;

		ret = profile_parse_text(layers[i].text, layers[i].source, &all, LATCH_PROFILE_ENTRIES_MAX - all.n, ext,
					 &line, err, errlen);
		if (ret)
			goto out;
	}
	ret = load_overlay(overlay, ov_text, &all, LATCH_PROFILE_ENTRIES_MAX - all.n, err, errlen);
	if (ret)
		goto out;
	out->entries = all.v;
	out->n = all.n;
	all.v = NULL;
	strcpy(out->name, name);
	out->index = profile_index_make(out);
	if (!out->index && out->n) {
		ret = latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);
		goto out;
	}
out:
	for (int i = 0; i < LATCH_PROFILE_DEPTH_MAX; i++)
		free(layers[i].owned);
	free(layers);
	free(ov_text);
	profile_pvec_free(&all);
	if (ret)
		latch_profile_free(out);
	return ret;
}

void latch_profile_free(struct latch_profile *p)
{
	if (!p)
		return;
	profile_index_free(p->index);
	free(p->entries);
	memset(p, 0, sizeof(*p));
}

/* ---- listing */

static int info_add(struct latch_profile_info **v, int *n, const char *name, bool builtin, bool file)
{
	struct latch_profile_info *nv;

	for (int i = 0; i < *n; i++) {
		if (strcmp((*v)[i].name, name))
			continue;
		(*v)[i].builtin |= builtin;
		(*v)[i].file |= file;
		return 0;
	}
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	memset(&nv[*n], 0, sizeof(nv[*n]));
	strcpy(nv[*n].name, name);
	nv[*n].builtin = builtin;
	nv[*n].file = file;
	(*n)++;
	return 0;
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct latch_profile_info *)a)->name, ((const struct latch_profile_info *)b)->name);
}

int latch_profile_list(const char *dir, struct latch_profile_info **out, int *n, char *err, size_t errlen)
{
	struct latch_profile_info *v = NULL;
	struct dirent *de;
	int count = 0, ret = 0;
	DIR *d = NULL;

	*out = NULL;
	*n = 0;
	ret = info_add(&v, &count, LATCH_PROFILE_OPEN, true, false);
	for (size_t i = 0; i < N_BUILTIN && !ret; i++)
		ret = info_add(&v, &count, latch_builtin_profiles[i].name, true, false);
	if (ret)
		goto nomem;
	if (dir && *dir && !(d = opendir(dir)) && errno != ENOENT) {
		ret = latch_errf_at(err, errlen, -errno, dir, 0, "cannot read the profile directory: %s",
				    strerror(errno));
		free(v);
		return ret;
	}
	while (d && (errno = 0, de = readdir(d))) {
		char name[LATCH_PROFILE_NAME_MAX + 1];
		size_t len = strlen(de->d_name);

		/* only names latch_profile_load() could be asked for */
		if (len <= 4 || len - 4 > LATCH_PROFILE_NAME_MAX || strcmp(de->d_name + len - 4, ".txt"))
			continue;
		memcpy(name, de->d_name, len - 4);
		name[len - 4] = '\0';
		if (latch_profile_name_check(name, NULL, 0))
			continue;
		if (info_add(&v, &count, name, false, true))
			goto nomem;
	}
	if (d && errno) {
		ret = latch_errf_at(err, errlen, -errno, dir, 0, "cannot read the profile directory: %s",
				    strerror(errno));
		closedir(d);
		free(v);
		return ret;
	}
	if (d)
		closedir(d);
	qsort(v, count, sizeof(*v), info_cmp);
	*out = v;
	*n = count;
	return 0;
nomem:
	if (d)
		closedir(d);
	free(v);
	return latch_errf(err, errlen, -ENOMEM, "listing profiles: out of memory");
}
