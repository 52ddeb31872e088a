// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_state.c - `latch backup` and `latch restore`: the guest's state
 * directory to the host and back, through the guest agent.
 *
 * Out of the guest: `tar c` on the agent's stdout into a memfd, capped by
 * the agent client, then extracted by libarchive into a fresh directory
 * beside the host copy, which replaces the old copy only when everything
 * was extracted.  The tarball comes from a guest that may be hostile, so
 * only tar (no compression filters: no decompression bombs) is read, only
 * regular files and directories are written, names are checked here and
 * again by libarchive's SECURE_* flags, owners and set-id bits are never
 * applied, and the bytes written (sparse entries included) are capped.
 *
 * Into the guest: the agent protocol has no stdin.  The host copy is packed
 * by libarchive and sent as base64 arguments of `sh -c`, RESTORE_CHUNK bytes
 * per exec, appended to a file in the guest, checked by size, and unpacked
 * with the guest's own tar into a directory that then replaces the old one.
 * A state directory is small, so one exec per 32 KiB is cheap enough, and it
 * works with every agent already built into a cached image.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/agent_client.h"
#include "vm/confine.h"
#include "vm/guest_state.h"
#include "vm/state.h"

#define RESTORE_CHUNK (32u * 1024) /* raw bytes per exec; ~43 KiB of base64, well inside a frame */
#define GUEST_TAR "/var/lib/.latch-restore.tar"

int latch_vm_backup_dir(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_GUEST_STATE_DIR_FMT, name);
}

/* Run a script in the guest; its stderr goes to err_fd, its stdout to out_fd. */
static int guest_sh(struct latch_agent *a, const char *script, const char *arg, int out_fd, uint32_t limit,
		    struct latch_agent_result *res, char *err, size_t errlen)
{
	const char *argv[] = { "/bin/sh", "-c", script, "sh", arg, NULL };
	struct latch_agent_exec_opts eo = { .timeout_ms = 60000, .output_limit = limit };
	int r;

	r = latch_agent_exec(a, argv, &eo, out_fd, -1, res);
	if (r)
		return snprintf(err, errlen, "exec in the guest: %s", strerror(-r)), r;
	if (latch_agent_status(res))
		return snprintf(err, errlen, "the guest's `%.60s...` exited %d", script, latch_agent_status(res)), -EIO;
	return 0;
}

/* A name from the tarball, made relative; false when it must not be written. */
static bool safe_name(const char *in, char *out, size_t len)
{
	const char *p = in, *c;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (!*p || !strcmp(p, ".") || *p == '/' || strlen(p) >= len)
		return false;
	for (c = p; *c;) {
		size_t n = strcspn(c, "/");

		if ((n == 2 && !strncmp(c, "..", 2)) || n == 0 || n > NAME_MAX)
			return false;
		c += n;
		if (*c == '/' && *++c == '\0')
			break; /* a trailing slash, as on directories */
	}
	snprintf(out, len, "%s", p);
	if (out[strlen(out) - 1] == '/')
		out[strlen(out) - 1] = '\0';
	return true;
}

/* What the extracting child reports; the parent checks its size. */
struct extract_report {
	int ret;
	uint32_t files;
	uint64_t bytes;
	char err[LATCH_ERR_MAX];
};

/* Extract into the current directory: the confined child's work. */
static void extract_here(const void *buf, size_t len, struct extract_report *rep)
{
	const int flags = ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
			  ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_NO_OVERWRITE;
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	char *err = rep->err;
	size_t errlen = sizeof(rep->err);
	struct archive_entry *e;
	uint64_t total = 0;
	uint32_t n = 0;
	int r, ret = 0;
	char rel[PATH_MAX];

	if (!in || !out) {
		ret = -ENOMEM;
		goto out;
	}
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, flags);
	if (archive_read_open_memory(in, buf, len) != ARCHIVE_OK) {
		ret = -EPROTO;
		snprintf(err, errlen, "the guest's tarball is unreadable: %s", archive_error_string(in));
		goto out;
	}
	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		mode_t type = archive_entry_filetype(e);
		const void *blk;
		size_t sz;
		la_int64_t off;

		if (!safe_name(archive_entry_pathname(e), rel, sizeof(rel))) {
			if (!strcmp(archive_entry_pathname(e), ".") || !strcmp(archive_entry_pathname(e), "./"))
				continue;
			ret = -EPERM;
			snprintf(err, errlen, "refused a name from the guest: '%.80s'", archive_entry_pathname(e));
			goto out;
		}
		if (archive_entry_hardlink(e) || (type != AE_IFREG && type != AE_IFDIR))
			continue; /* links, devices, fifos: never written */
		if (++n > LATCH_GUEST_STATE_MAX_ENTRIES) {
			ret = -EFBIG;
			snprintf(err, errlen, "the guest's state has more than %u entries",
				 LATCH_GUEST_STATE_MAX_ENTRIES);
			goto out;
		}
		archive_entry_set_pathname(e, rel);
		archive_entry_set_perm(e, type == AE_IFDIR ? 0700 | (archive_entry_perm(e) & 0755) :
							     0600 | (archive_entry_perm(e) & 0755));
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
		if (archive_write_header(out, e) != ARCHIVE_OK) {
			ret = -EPERM;
			snprintf(err, errlen, "cannot write '%.80s': %s", rel, archive_error_string(out));
			goto out;
		}
		while (type == AE_IFREG && (r = archive_read_data_block(in, &blk, &sz, &off)) == ARCHIVE_OK) {
			if (off < 0 || (uint64_t)off + sz > LATCH_GUEST_STATE_MAX ||
			    (total += sz) > LATCH_GUEST_STATE_MAX) {
				ret = -EFBIG;
				snprintf(err, errlen, "the guest's state is larger than %u bytes",
					 LATCH_GUEST_STATE_MAX);
				goto out;
			}
			if (archive_write_data_block(out, blk, sz, off) != ARCHIVE_OK) {
				ret = -EIO;
				snprintf(err, errlen, "writing '%.80s': %s", rel, archive_error_string(out));
				goto out;
			}
		}
		if (type == AE_IFREG && r != ARCHIVE_EOF) {
			ret = -EPROTO;
			snprintf(err, errlen, "the guest's tarball is truncated at '%.80s'", rel);
			goto out;
		}
		if (archive_write_finish_entry(out) != ARCHIVE_OK) {
			ret = -EIO;
			snprintf(err, errlen, "finishing '%.80s': %s", rel, archive_error_string(out));
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		ret = -EPROTO;
		snprintf(err, errlen, "the guest's tarball is malformed: %s", archive_error_string(in));
	}
out:
	if (out) {
		archive_write_close(out);
		archive_write_free(out);
	}
	if (in)
		archive_read_free(in);
	rep->ret = ret;
	rep->bytes = total;
	rep->files = n;
}

int latch_guest_state_extract(const void *buf, size_t len, const char *dir, uint64_t *bytes, uint32_t *files, char *err,
			      size_t errlen)
{
	struct extract_report rep = { .ret = -ECHILD };
	int pfd[2], status;
	ssize_t got = 0, k;
	pid_t pid;

	if (mkdir(dir, 0700))
		return latch_errf(err, errlen, -errno, "mkdir %s: %s", dir, strerror(errno));
	if (pipe2(pfd, O_CLOEXEC))
		return latch_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return latch_errf(err, errlen, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/*
		 * libarchive is loaded now, while the child may still map code: the
		 * latch binary loads it on first use (scripts/lazy.mk), and the
		 * confinement forbids executable mappings and the chroot hides it.
		 */
		(void)archive_version_number();
		/* nothing of the tar is read before the child is shut in */
		if (latch_confine(dir, pfd[1], LATCH_GUEST_STATE_MAX, rep.err, sizeof(rep.err)) == 0)
			extract_here(buf, len, &rep);
		_exit(write(pfd[1], &rep, sizeof(rep)) == sizeof(rep) ? 0 : 1);
	}
	close(pfd[1]);
	while (got < (ssize_t)sizeof(rep) &&
	       ((k = read(pfd[0], (char *)&rep + got, sizeof(rep) - got)) > 0 || (k < 0 && errno == EINTR)))
		got += k > 0 ? k : 0;
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got != (ssize_t)sizeof(rep) || !WIFEXITED(status) || WEXITSTATUS(status))
		return latch_errf(err, errlen, -ECHILD, "the child extracting the guest's tarball died (%s %d)",
				  WIFSIGNALED(status) ? "signal" : "exit",
				  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	rep.err[sizeof(rep.err) - 1] = '\0';
	if (rep.ret)
		return latch_errf(err, errlen, rep.ret, "%s", rep.err);
	if (bytes)
		*bytes = rep.bytes;
	if (files)
		*files = rep.files;
	return 0;
}

int latch_vm_backup(const char *name, uint64_t *bytes, uint32_t *files, char *err, size_t errlen)
{
	static const char script[] = "mkdir -p " LATCH_GUEST_STATE_DIR " && cd " LATCH_GUEST_STATE_DIR
				     " && exec tar cf - .";
	struct latch_agent_result res;
	struct latch_agent *a;
	char dir[PATH_MAX], tmp[PATH_MAX + 8], old[PATH_MAX + 8];
	void *map = NULL;
	off_t len = 0;
	int fd, ret;

	if (latch_vm_backup_dir(name, dir, sizeof(dir)))
		return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.new", dir);
	snprintf(old, sizeof(old), "%s.old", dir);
	ret = latch_agent_open_sandbox(name, 5000, &a, err, errlen);
	if (ret)
		return ret;
	fd = memfd_create("latch-backup", MFD_CLOEXEC);
	if (fd < 0) {
		latch_agent_close(a);
		return snprintf(err, errlen, "memfd_create: %s", strerror(errno)), -errno;
	}
	ret = guest_sh(a, script, NULL, fd, LATCH_GUEST_STATE_MAX, &res, err, errlen);
	latch_agent_close(a);
	if (!ret && (res.flags & (LAGENT_EXIT_TRUNCATED | LATCH_AGENT_HOST_TRUNCATED)))
		ret = -EFBIG, snprintf(err, errlen, "%s in %s is larger than %u bytes; not backed up",
				       LATCH_GUEST_STATE_DIR, name, LATCH_GUEST_STATE_MAX);
	if (ret)
		goto out;
	len = lseek(fd, 0, SEEK_END);
	if (len <= 0) {
		ret = -EPROTO;
		snprintf(err, errlen, "the guest sent no tarball");
		goto out;
	}
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		map = NULL;
		ret = -errno;
		goto out;
	}
	latch_rm_tree(tmp);
	ret = latch_guest_state_extract(map, len, tmp, bytes, files, err, errlen);
	if (ret) {
		latch_rm_tree(tmp);
		goto out;
	}
	/* the old copy goes only once the new one is whole */
	latch_rm_tree(old);
	if ((access(dir, F_OK) == 0 && rename(dir, old)) || rename(tmp, dir)) {
		ret = -errno;
		snprintf(err, errlen, "cannot put %s in place: %s", dir, strerror(errno));
		goto out;
	}
	latch_rm_tree(old);
out:
	if (map)
		munmap(map, len);
	close(fd);
	return ret;
}

/* Packing the host copy (only what extract wrote: files and directories). */
static struct {
	struct archive *a;
	size_t root_len;
	uint64_t total;
	int err;
} pack;

static int pack_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	struct archive_entry *e;
	char rel[PATH_MAX + 2], buf[16384];
	int fd = -1;
	ssize_t n;

	if (ftw->level == 0)
		return 0;
	if (flag != FTW_F && flag != FTW_D)
		return 0;
	if (!S_ISREG(sb->st_mode) && !S_ISDIR(sb->st_mode))
		return 0;
	snprintf(rel, sizeof(rel), "./%s", path + pack.root_len + 1);
	if (S_ISREG(sb->st_mode) && (pack.total += sb->st_size) > LATCH_GUEST_STATE_MAX)
		return pack.err = -EFBIG;
	if (S_ISREG(sb->st_mode) && (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return pack.err = -errno;
	e = archive_entry_new();
	archive_entry_copy_stat(e, sb);
	archive_entry_set_pathname(e, rel);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (archive_write_header(pack.a, e) != ARCHIVE_OK)
		pack.err = -EIO;
	while (!pack.err && fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		if (archive_write_data(pack.a, buf, n) != n)
			pack.err = -EIO;
	archive_entry_free(e);
	if (fd >= 0)
		close(fd);
	return pack.err;
}

static int pack_dir(const char *dir, int fd, char *err, size_t errlen)
{
	int r;

	memset(&pack, 0, sizeof(pack));
	pack.a = archive_write_new();
	pack.root_len = strlen(dir);
	if (!pack.a)
		return -ENOMEM;
	archive_write_set_format_pax_restricted(pack.a);
	if (archive_write_open_fd(pack.a, fd) != ARCHIVE_OK) {
		snprintf(err, errlen, "archive: %s", archive_error_string(pack.a));
		archive_write_free(pack.a);
		return -EIO;
	}
	r = nftw(dir, pack_cb, 16, FTW_PHYS);
	if (archive_write_close(pack.a) != ARCHIVE_OK && !r)
		r = -EIO;
	archive_write_free(pack.a);
	if (r || pack.err) {
		r = pack.err ?: -EIO;
		snprintf(err, errlen, "packing %s: %s", dir, strerror(-r));
	}
	return r;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64(const unsigned char *in, size_t n, char *out)
{
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		*out++ = b64[in[i] >> 2];
		*out++ = b64[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		*out++ = b64[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
		*out++ = b64[in[i + 2] & 63];
	}
	if (i < n) {
		*out++ = b64[in[i] >> 2];
		if (i + 1 < n) {
			*out++ = b64[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
			*out++ = b64[(in[i + 1] & 15) << 2];
		} else {
			*out++ = b64[(in[i] & 3) << 4];
			*out++ = '=';
		}
		*out++ = '=';
	}
	*out = '\0';
}

int latch_vm_restore(const char *name, const char *src_dir, uint64_t *bytes, char *err, size_t errlen)
{
	static const char start[] = "mkdir -p /var/lib && rm -f " GUEST_TAR " && : > " GUEST_TAR;
	static const char append[] = "printf %s \"$1\" | base64 -d >> " GUEST_TAR;
	static const char finish[] = "set -e; t=" GUEST_TAR "; d=" LATCH_GUEST_STATE_DIR
				     "; [ \"$(wc -c < $t)\" -eq \"$1\" ]; "
				     "rm -rf $d.new $d.old; mkdir -p $d.new; tar xf $t -C $d.new; "
				     "if [ -d $d ]; then mv $d $d.old; fi; mv $d.new $d; rm -rf $d.old $t";
	struct latch_agent_result res;
	struct latch_agent *a = NULL;
	char dir[PATH_MAX], num[32], *chunk = NULL;
	unsigned char *map = NULL;
	struct stat sb;
	off_t len = 0;
	int fd = -1, ret;

	if (!src_dir) {
		if (latch_vm_backup_dir(name, dir, sizeof(dir)))
			return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
		src_dir = dir;
	}
	if (lstat(src_dir, &sb) || !S_ISDIR(sb.st_mode))
		return snprintf(err, errlen, "no backup of %s's state at %s", name, src_dir), -ENOENT;
	fd = memfd_create("latch-restore", MFD_CLOEXEC);
	if (fd < 0)
		return snprintf(err, errlen, "memfd_create: %s", strerror(errno)), -errno;
	ret = pack_dir(src_dir, fd, err, errlen);
	if (ret)
		goto out;
	len = lseek(fd, 0, SEEK_END);
	map = len > 0 ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	chunk = malloc(RESTORE_CHUNK / 3 * 4 + 8);
	if (map == MAP_FAILED || !chunk) {
		map = NULL;
		ret = -ENOMEM;
		snprintf(err, errlen, "cannot map the packed state");
		goto out;
	}
	ret = latch_agent_open_sandbox(name, 5000, &a, err, errlen);
	if (ret)
		goto out;
	ret = guest_sh(a, start, NULL, -1, 4096, &res, err, errlen);
	for (off_t off = 0; !ret && off < len; off += RESTORE_CHUNK / 3 * 3) {
		size_t n = len - off < RESTORE_CHUNK / 3 * 3 ? (size_t)(len - off) : RESTORE_CHUNK / 3 * 3;

		base64(map + off, n, chunk);
		ret = guest_sh(a, append, chunk, -1, 4096, &res, err, errlen);
	}
	snprintf(num, sizeof(num), "%lld", (long long)len);
	if (!ret)
		ret = guest_sh(a, finish, num, -1, 4096, &res, err, errlen);
	if (!ret && bytes)
		*bytes = len;
out:
	latch_agent_close(a);
	free(chunk);
	if (map)
		munmap(map, len);
	close(fd);
	return ret;
}
