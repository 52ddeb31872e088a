// SPDX-License-Identifier: GPL-2.0-only
/*
 * changes.c - what a room changed in its workspace, and applying it.
 *
 * With `:rw` the workspace is the lower layer of an overlay whose upper layer
 * lives in a tmpfs latch keeps; the room's writes never touch the workspace.
 * After the run the upper layer is read as the record: a file there that the
 * workspace has with other content or mode is modified, one it lacks is
 * added, a whiteout (character device 0/0) is a deletion, an opaque
 * directory hides everything the workspace had in it.  A file copied up but
 * left as it was is no change.  Text files get a unified diff (diff -u).
 *
 * Everything in the upper layer was made by the room: it is opened relative
 * to directory descriptors, never through a symlink, and applying writes
 * each change through openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), into a
 * temporary name renamed over the target.
 *
 * What lands is the room's content, never its authority: a file or directory
 * is written with its permission bits only (no set-uid, set-gid or sticky
 * bit: a room run as root would otherwise plant a set-uid-root program in the
 * caller's tree), owned by the workspace directory's owner (not the room's
 * uid), and without the room's extended attributes (no file capability);
 * FIFOs, sockets and device nodes are never written (the whole apply is
 * refused).  A VM's state backup keeps the same rule (vm/guest_state.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "room/room_int.h"

#define DIFF_MAX (64 * 1024) /* bytes of diff kept per file */
#define TEXT_MAX (1024 * 1024) /* files larger than this are not diffed */
#define SNIFF 8000 /* a NUL in the first bytes: binary (as git and diff decide) */

/* The bits a file from a room may carry on the host: its permissions, never set-id or sticky. */
static mode_t plain_mode(mode_t m)
{
	return m & 0777;
}

static int open_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how = { .flags = flags | O_CLOEXEC | O_NOFOLLOW,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };

	return syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

static struct latch_room_change *add(struct latch_room_result *res, const char *rel, enum latch_room_change_kind c,
				     const struct stat *st)
{
	struct latch_room_change *ch, *grown;

	if (res->n_changes >= LATCH_ROOM_CHANGES_MAX) {
		res->changes_truncated = true;
		return NULL;
	}
	grown = realloc(res->changes, (res->n_changes + 1) * sizeof(*res->changes));
	if (!grown)
		return NULL;
	res->changes = grown;
	ch = &res->changes[res->n_changes++];
	memset(ch, 0, sizeof(*ch));
	ch->path = strdup(rel);
	ch->change = c;
	ch->kind = S_ISREG(st->st_mode) ? LATCH_FILE_REGULAR :
		   S_ISDIR(st->st_mode) ? LATCH_FILE_DIR :
		   S_ISLNK(st->st_mode) ? LATCH_FILE_SYMLINK :
					  LATCH_FILE_OTHER;
	if (c != LATCH_CHANGE_DELETED) {
		ch->mode = st->st_mode & 07777;
		ch->applied_mode = plain_mode(st->st_mode);
		ch->size = st->st_size;
	}
	return ch;
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* Same bytes in both files? */
static bool same_content(int a, int b, off_t size)
{
	char ba[16384], bb[16384];

	for (off_t off = 0; off < size;) {
		ssize_t na = pread(a, ba, sizeof(ba), off), nb = pread(b, bb, sizeof(bb), off);

		if (na <= 0 || na != nb || memcmp(ba, bb, na))
			return false;
		off += na;
	}
	return true;
}

static bool looks_text(int fd, off_t size)
{
	char buf[SNIFF];
	ssize_t n;

	if (fd < 0)
		return true; /* nothing (the /dev/null side of an added file) */
	if (size > TEXT_MAX)
		return false;
	n = pread(fd, buf, sizeof(buf), 0);
	return n >= 0 && !memchr(buf, 0, n);
}

/* diff -u between two open files (-1: /dev/null), labelled with the path. */
static void diff_of(struct latch_room_change *ch, int old_fd, int new_fd)
{
	char a[PATH_MAX + 8], b[PATH_MAX + 8], fa[32], fb[32], *out = NULL;
	char *argv[] = { "diff", "-u", "--label", a, "--label", b, fa, fb, NULL };
	posix_spawn_file_actions_t fa_;
	size_t len = 0;
	int p[2], st;
	pid_t pid;

	snprintf(a, sizeof(a), "a/%s", ch->path);
	snprintf(b, sizeof(b), "b/%s", ch->path);
	snprintf(fa, sizeof(fa), old_fd >= 0 ? "/dev/fd/3" : "/dev/null");
	snprintf(fb, sizeof(fb), new_fd >= 0 ? "/dev/fd/4" : "/dev/null");
	if (pipe2(p, O_CLOEXEC))
		return;
	posix_spawn_file_actions_init(&fa_);
	posix_spawn_file_actions_adddup2(&fa_, p[1], 1);
	if (old_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa_, old_fd, 3);
	if (new_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa_, new_fd, 4);
	if (posix_spawn(&pid, "/usr/bin/diff", &fa_, NULL, argv, (char *[]){ "LC_ALL=C", NULL })) {
		posix_spawn_file_actions_destroy(&fa_);
		close(p[0]);
		close(p[1]);
		return;
	}
	posix_spawn_file_actions_destroy(&fa_);
	close(p[1]);
	out = malloc(DIFF_MAX + 1);
	for (ssize_t n; out && (n = read(p[0], out + len, DIFF_MAX - len)) > 0;) {
		len += n;
		if (len == DIFF_MAX) {
			char sink[4096];

			ch->diff_truncated = true;
			while (read(p[0], sink, sizeof(sink)) > 0)
				;
			break;
		}
	}
	close(p[0]);
	waitpid(pid, &st, 0);
	if (out) {
		out[len] = 0;
		ch->diff = out;
	}
}

/* A regular file of the upper layer against the workspace's (old_fd -1: none). */
static void file_change(struct latch_room_result *res, const char *rel, int up_fd, const struct stat *us, int old_fd,
			const struct stat *ls)
{
	struct latch_room_change *ch;

	if (old_fd >= 0 && ls->st_size == us->st_size && same_content(old_fd, up_fd, us->st_size) &&
	    (ls->st_mode & 07777) == (us->st_mode & 07777))
		return; /* copied up, not changed */
	ch = add(res, rel, old_fd >= 0 ? LATCH_CHANGE_MODIFIED : LATCH_CHANGE_ADDED, us);
	if (!ch)
		return;
	ch->binary = !looks_text(up_fd, us->st_size) || !looks_text(old_fd, old_fd >= 0 ? ls->st_size : 0);
	if (!ch->binary)
		diff_of(ch, old_fd, up_fd);
}

struct walk {
	struct latch_room_result *res;
	int depth;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory, sorted; caller frees. */
static int names_of(int dirfd, char ***out)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0, cap = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	char **v = NULL;

	*out = NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **g = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof(*v));

			if (!g)
				break;
			v = g;
		}
		v[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_names);
	*out = v;
	return n;
}

static void free_names(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* What the workspace had in a directory the room made opaque (replaced): deleted, unless the room made it again. */
static void opaque_deletions(struct walk *w, int up_fd, int low_fd, const char *prefix)
{
	char **names, rel[PATH_MAX];
	int n = names_of(low_fd, &names);
	struct stat st;

	for (int i = 0; i < n; i++) {
		if (!fstatat(up_fd, names[i], &st, AT_SYMLINK_NOFOLLOW) && !is_whiteout(&st))
			continue;
		if (fstatat(low_fd, names[i], &st, AT_SYMLINK_NOFOLLOW))
			continue;
		snprintf(rel, sizeof(rel), "%s%s", prefix, names[i]);
		add(w->res, rel, LATCH_CHANGE_DELETED, &st);
	}
	free_names(names, n > 0 ? n : 0);
}

static void walk_dir(struct walk *w, int up_fd, int low_fd, const char *prefix)
{
	char **names, rel[PATH_MAX];
	int n = names_of(up_fd, &names);

	if (++w->depth > 64) { /* deeper than any sane tree: the record says where it stopped */
		w->res->changes_truncated = true;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct stat us, ls;
		bool have_low = low_fd >= 0 && !fstatat(low_fd, names[i], &ls, AT_SYMLINK_NOFOLLOW);

		if (snprintf(rel, sizeof(rel), "%s%s", prefix, names[i]) >= (int)sizeof(rel) ||
		    fstatat(up_fd, names[i], &us, AT_SYMLINK_NOFOLLOW))
			continue;
		if (is_whiteout(&us)) {
			if (have_low)
				add(w->res, rel, LATCH_CHANGE_DELETED, &ls);
		} else if (S_ISDIR(us.st_mode)) {
			int sub_up = openat(up_fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
			    sub_low = -1;
			char opq = 0, sub[PATH_MAX];

			if (sub_up < 0)
				continue;
			if (!have_low || !S_ISDIR(ls.st_mode))
				add(w->res, rel, have_low ? LATCH_CHANGE_MODIFIED : LATCH_CHANGE_ADDED, &us);
			else if ((ls.st_mode & 07777) != (us.st_mode & 07777))
				add(w->res, rel, LATCH_CHANGE_MODIFIED, &us);
			if (have_low && S_ISDIR(ls.st_mode))
				sub_low = openat(low_fd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (snprintf(sub, sizeof(sub), "%s/", rel) >= (int)sizeof(sub)) {
				close(sub_up);
				if (sub_low >= 0)
					close(sub_low);
				continue;
			}
			if (sub_low >= 0 && fgetxattr(sub_up, "trusted.overlay.opaque", &opq, 1) == 1 && opq == 'y') {
				opaque_deletions(w, sub_up, sub_low, sub);
				close(sub_low);
				sub_low = -1;
			}
			walk_dir(w, sub_up, sub_low, sub);
			close(sub_up);
			if (sub_low >= 0)
				close(sub_low);
		} else if (S_ISREG(us.st_mode)) {
			int up = openat(up_fd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			int low = have_low && S_ISREG(ls.st_mode) ?
					  openat(low_fd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC) :
					  -1;

			if (up >= 0) {
				if (have_low && low < 0) /* was something else: now a file */
					add(w->res, rel, LATCH_CHANGE_MODIFIED, &us);
				else
					file_change(w->res, rel, up, &us, low, &ls);
			}
			if (up >= 0)
				close(up);
			if (low >= 0)
				close(low);
		} else if (S_ISLNK(us.st_mode)) {
			char t[PATH_MAX], old[PATH_MAX];
			ssize_t tn = readlinkat(up_fd, names[i], t, sizeof(t) - 1), on = -1;
			struct latch_room_change *ch;

			if (tn < 0)
				continue;
			t[tn] = 0;
			if (have_low && S_ISLNK(ls.st_mode)) {
				on = readlinkat(low_fd, names[i], old, sizeof(old) - 1);
				if (on == tn && !memcmp(old, t, tn))
					continue;
			}
			ch = add(w->res, rel, have_low ? LATCH_CHANGE_MODIFIED : LATCH_CHANGE_ADDED, &us);
			if (ch)
				ch->target = strdup(t);
		} else {
			/* a FIFO or socket the room made: recorded, never applied */
			add(w->res, rel, have_low ? LATCH_CHANGE_MODIFIED : LATCH_CHANGE_ADDED, &us);
		}
	}
out:
	w->depth--;
	free_names(names, n > 0 ? n : 0);
}

int room_changes_collect(struct room *r, char *err, size_t errlen)
{
	char path[PATH_MAX + 8];
	struct walk w = { .res = r->res };
	int up;

	snprintf(path, sizeof(path), "%s/upper", r->upper_mnt);
	up = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return latch_errf(err, errlen, -errno, "cannot read the room's changes in %s: %s", path,
				  strerror(errno));
	walk_dir(&w, up, r->workspace_fd, "");
	close(up);
	return 0;
}

/* ------------------------------------------------------------ apply */

/* The directory holding REL, beneath the workspace; *base points at REL's last component. */
static int parent_of(int ws, const char *rel, char *dir, size_t len, const char **base)
{
	const char *slash = strrchr(rel, '/');

	if (!slash) {
		*base = rel;
		return open_beneath(ws, ".", O_PATH | O_DIRECTORY);
	}
	snprintf(dir, len, "%.*s", (int)(slash - rel), rel);
	*base = slash + 1;
	return open_beneath(ws, dir, O_PATH | O_DIRECTORY);
}

/* rm -r of NAME in DIRFD, never following a symlink. */
static int remove_at(int dirfd, const char *name)
{
	struct stat st;
	char **names;
	int sub, n;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) ? -errno : 0;
	sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -errno;
	n = names_of(sub, &names);
	for (int i = 0; i < n; i++)
		remove_at(sub, names[i]);
	free_names(names, n > 0 ? n : 0);
	close(sub);
	return unlinkat(dirfd, name, AT_REMOVEDIR) ? -errno : 0;
}

/*
 * Copy the upper layer's file REL into the workspace under a temporary name,
 * then rename it in: its bytes and permission bits, the workspace owner's.
 */
static int put_file(int up_root, int pfd, const char *rel, const char *base, const struct stat *owner)
{
	char tmp[NAME_MAX + 1], buf[65536];
	struct stat st;
	int src = open_beneath(up_root, rel, O_RDONLY), dst = -1, rc = 0;
	ssize_t n;

	if (src < 0 || fstat(src, &st))
		return -errno;
	snprintf(tmp, sizeof(tmp), ".latch-apply-%d", (int)getpid());
	unlinkat(pfd, tmp, 0);
	dst = openat(pfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0) {
		rc = -errno;
		goto out;
	}
	while ((n = read(src, buf, sizeof(buf))) > 0)
		if (write(dst, buf, n) != n) {
			rc = -EIO;
			break;
		}
	/* chown first: it would clear set-id bits, but fchmod is what must never set them */
	if (!rc && (n < 0 || fchown(dst, owner->st_uid, owner->st_gid) || fchmod(dst, plain_mode(st.st_mode))))
		rc = -errno;
	if (!rc) {
		/* a directory in the way (a type change) goes first */
		struct stat old;

		if (!fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) && S_ISDIR(old.st_mode))
			rc = remove_at(pfd, base);
	}
	if (!rc && renameat(pfd, tmp, pfd, base))
		rc = -errno;
out:
	if (rc)
		unlinkat(pfd, tmp, 0);
	if (dst >= 0)
		close(dst);
	close(src);
	return rc;
}

/* A directory or link applied is the workspace owner's, whoever made it in the room. */
static int own_as_workspace(int pfd, const char *base, const struct stat *owner)
{
	return fchownat(pfd, base, owner->st_uid, owner->st_gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int apply_one(int ws, int up_root, const struct stat *owner, const struct latch_room_change *ch)
{
	char dir[PATH_MAX];
	const char *base;
	int pfd = parent_of(ws, ch->path, dir, sizeof(dir), &base), rc = 0;
	struct stat st;

	if (pfd < 0)
		return -errno;
	if (ch->change == LATCH_CHANGE_DELETED) {
		rc = remove_at(pfd, base);
	} else if (ch->kind == LATCH_FILE_DIR) {
		if (!fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) && !S_ISDIR(st.st_mode))
			rc = remove_at(pfd, base);
		if (!rc && mkdirat(pfd, base, 0700) && errno != EEXIST)
			rc = -errno;
		if (!rc)
			rc = own_as_workspace(pfd, base, owner);
		if (!rc && fchmodat(pfd, base, ch->applied_mode, AT_SYMLINK_NOFOLLOW))
			rc = -errno;
	} else if (ch->kind == LATCH_FILE_REGULAR) {
		rc = put_file(up_root, pfd, ch->path, base, owner);
	} else if (ch->kind == LATCH_FILE_SYMLINK) {
		char tmp[NAME_MAX + 1];

		snprintf(tmp, sizeof(tmp), ".latch-apply-%d", (int)getpid());
		unlinkat(pfd, tmp, 0);
		if (symlinkat(ch->target, pfd, tmp) || renameat(pfd, tmp, pfd, base))
			rc = -errno;
		if (!rc)
			rc = own_as_workspace(pfd, base, owner);
	} else {
		rc = -EOPNOTSUPP; /* a FIFO, socket or device node: never written to the workspace */
	}
	close(pfd);
	return rc;
}

int room_changes_apply(struct room *r, char *err, size_t errlen)
{
	struct latch_room_result *res = r->res;
	char path[PATH_MAX + 8];
	struct stat owner;
	int up, ws, rc = 0;

	if (res->changes_truncated)
		return latch_errf(err, errlen, -E2BIG,
				  "more than %d changes: nothing applied (the record is incomplete)",
				  LATCH_ROOM_CHANGES_MAX);
	for (int i = 0; i < res->n_changes; i++)
		if (res->changes[i].change != LATCH_CHANGE_DELETED && res->changes[i].kind == LATCH_FILE_OTHER)
			return latch_errf(
				err, errlen, -EOPNOTSUPP,
				"%s is a FIFO, socket or device node: nothing applied (never written to the host)",
				res->changes[i].path);
	snprintf(path, sizeof(path), "%s/upper", r->upper_mnt);
	up = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ws = open(r->o->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (up < 0 || ws < 0 || fstat(ws, &owner)) {
		rc = latch_errf(err, errlen, -errno, "cannot open the workspace to apply: %s", strerror(errno));
		goto out;
	}
	/* deletions deepest first, then the rest in path order (a directory before what it holds) */
	for (int i = res->n_changes - 1; i >= 0 && !rc; i--)
		if (res->changes[i].change == LATCH_CHANGE_DELETED &&
		    (rc = apply_one(ws, up, &owner, &res->changes[i])))
			latch_errf(err, errlen, rc, "%s: %s (the changes before it were applied)", res->changes[i].path,
				   strerror(-rc));
	for (int i = 0; i < res->n_changes && !rc; i++)
		if (res->changes[i].change != LATCH_CHANGE_DELETED &&
		    (rc = apply_one(ws, up, &owner, &res->changes[i])))
			latch_errf(err, errlen, rc, "%s: %s (the changes before it were applied)", res->changes[i].path,
				   strerror(-rc));
	res->applied = !rc;
out:
	if (up >= 0)
		close(up);
	if (ws >= 0)
		close(ws);
	return rc;
}

void room_changes_free(struct latch_room_result *res)
{
	for (int i = 0; i < res->n_changes; i++) {
		free(res->changes[i].path);
		free(res->changes[i].diff);
		free(res->changes[i].target);
	}
	free(res->changes);
	res->changes = NULL;
	res->n_changes = 0;
}
