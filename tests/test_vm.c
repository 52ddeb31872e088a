// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_vm.c - the pure parts of vm/ and the command line's durations: the
 * extraction of a guest's tarball and the child that does it, the sandbox
 * state file, what destroy keeps, and the domain XML's console log.
 *
 * A guest's backup tarball is hostile input.  These tests hand the
 * extractor tarballs built here with libarchive (links, devices, names
 * that walk out, a size past the cap) and check what lands on disk; and
 * they try, from inside the confinement the extracting child lives in,
 * what a parser bug would try (a socket, an exec, a file elsewhere,
 * executable memory), each beside the same attempt unconfined.  The
 * confinement cases need root (chroot, capabilities) and skip without it.
 */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/confine.h"
#include "vm/guest_state.h"
#include "vm/libvirt.h"
#include "vm/state.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- durations, as the command line writes them */

Test(duration, seconds_and_units)
{
	static const struct {
		const char *in;
		uint32_t ms;
	} ok[] = { { "60", 60000 }, { "90s", 90000 }, { "5m", 300000 }, { "1h", 3600000 }, { "1", 1000 } };
	uint32_t ms;

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		cr_expect_eq(latch_parse_duration(ok[i].in, 1, 3600, &ms), 0, "'%s' refused", ok[i].in);
		cr_expect_eq(ms, ok[i].ms, "'%s' is %u ms", ok[i].in, ms);
	}
}

Test(duration, refuses_what_is_not_one)
{
	static const char *const bad[] = { "", "s", "m5", "5x", "-5", "1.5m", "5 m", " 5", "5ss", "0x10" };
	uint32_t ms = 7;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		cr_expect_eq(latch_parse_duration(bad[i], 1, 3600, &ms), -EINVAL, "'%s' accepted", bad[i]);
	cr_expect_eq(latch_parse_duration("0", 1, 3600, &ms), -ERANGE);
	cr_expect_eq(latch_parse_duration("2h", 1, 3600, &ms), -ERANGE);
	cr_expect_eq(latch_parse_duration("99999999999", 1, 3600, &ms), -ERANGE);
	cr_expect_eq(ms, 7, "a refused duration was stored");
}

/* ---- the guest's tarball */

struct entry {
	const char *name;
	mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFIFO */
	const char *data; /* file contents, or the link target */
	size_t size; /* for a file with data NULL: that many zero bytes */
};

/* A tar of the entries, in a malloc'd buffer. */
static void *make_tar(const struct entry *e, size_t n, size_t *len)
{
	size_t cap = 32 << 20, used = 0;
	char *buf = malloc(cap);
	struct archive *a = archive_write_new();

	cr_assert(buf && a);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	cr_assert_eq(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *ae = archive_entry_new();

		archive_entry_set_pathname(ae, e[i].name);
		archive_entry_set_filetype(ae, e[i].type);
		archive_entry_set_perm(ae, e[i].type == AE_IFDIR ? 0755 : 04755);
		if (e[i].type == AE_IFLNK)
			archive_entry_set_symlink(ae, e[i].data);
		if (e[i].type == AE_IFREG)
			archive_entry_set_size(ae, e[i].data ? strlen(e[i].data) : e[i].size);
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK, "%s", archive_error_string(a));
		if (e[i].type == AE_IFREG && e[i].data) {
			archive_write_data(a, e[i].data, strlen(e[i].data));
		} else if (e[i].type == AE_IFREG) {
			static const char zero[65536];

			for (size_t left = e[i].size; left;) {
				size_t k = left < sizeof(zero) ? left : sizeof(zero);

				archive_write_data(a, zero, k);
				left -= k;
			}
		}
		archive_entry_free(ae);
	}
	archive_write_close(a);
	archive_write_free(a);
	*len = used;
	return buf;
}

static char scratch[64];

static void scratch_dir(void)
{
	snprintf(scratch, sizeof(scratch), "/tmp/latch-test-vm.XXXXXX");
	cr_assert_not_null(mkdtemp(scratch));
}

static void scratch_rm(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	cr_expect_eq(system(cmd), 0);
}

static bool is_type(const char *dir, const char *name, mode_t type)
{
	char p[PATH_MAX];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &sb) == 0 && (sb.st_mode & S_IFMT) == type;
}

TestSuite(guest_tar, .init = scratch_dir, .fini = scratch_rm);

/* Invariant: only regular files and directories come out of a guest's tarball, never links or devices. */
Test(guest_tar, writes_files_and_directories_only)
{
	const struct entry e[] = {
		{ "./memo", AE_IFREG, "remembered\n", 0 }, { "./sub", AE_IFDIR, NULL, 0 },
		{ "./sub/x", AE_IFREG, "deep\n", 0 },	   { "./evil-link", AE_IFLNK, "/etc/shadow", 0 },
		{ "./fifo", AE_IFIFO, NULL, 0 },	   { "./sub/link2", AE_IFLNK, "../../../etc", 0 },
	};
	char err[LATCH_ERR_MAX] = "", dir[128];
	uint64_t bytes = 0;
	uint32_t files = 0;
	size_t len;
	void *tar = make_tar(e, ARRAY_SIZE(e), &len);
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/state", scratch);
	cr_assert_eq(latch_guest_state_extract(tar, len, dir, &bytes, &files, err, sizeof(err)), 0, "%s", err);
	cr_expect(is_type(dir, "memo", S_IFREG) && is_type(dir, "sub", S_IFDIR) && is_type(dir, "sub/x", S_IFREG));
	cr_expect(!is_type(dir, "evil-link", S_IFLNK) && !is_type(dir, "evil-link", S_IFREG), "a symlink was written");
	cr_expect(!is_type(dir, "fifo", S_IFIFO), "a fifo was written");
	cr_expect(!is_type(dir, "sub/link2", S_IFLNK), "a symlink was written");
	cr_expect_eq(files, 3);
	cr_expect_eq(bytes, strlen("remembered\n") + strlen("deep\n"));
	/* the set-id bits the guest asked for are never applied */
	snprintf(dir, sizeof(dir), "%s/state/memo", scratch);
	cr_expect(stat(dir, &sb) == 0 && !(sb.st_mode & (S_ISUID | S_ISGID)), "mode %o", sb.st_mode);
	free(tar);
}

/* Invariant: no name in a guest's tarball writes outside the backup directory. */
Test(guest_tar, refuses_names_that_walk_out)
{
	static const char *const names[] = { "../escaped", "/tmp/escaped-abs", "a/../../escaped", "./../escaped" };
	char err[LATCH_ERR_MAX], dir[128], outside[128];

	snprintf(outside, sizeof(outside), "%s/escaped", scratch);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		const struct entry e[] = { { "./ok", AE_IFREG, "fine\n", 0 }, { names[i], AE_IFREG, "pwned\n", 0 } };
		size_t len;
		void *tar = make_tar(e, ARRAY_SIZE(e), &len);

		snprintf(dir, sizeof(dir), "%s/state%zu", scratch, i);
		*err = '\0';
		cr_expect_eq(latch_guest_state_extract(tar, len, dir, NULL, NULL, err, sizeof(err)), -EPERM,
			     "'%s' accepted", names[i]);
		cr_expect(strstr(err, "refused a name from the guest"), "'%s': %s", names[i], err);
		cr_expect(access(outside, F_OK) != 0 && access("/tmp/escaped-abs", F_OK) != 0, "'%s' escaped",
			  names[i]);
		free(tar);
	}
	/* control: the same tarball without the bad name extracts */
	{
		const struct entry e[] = { { "./ok", AE_IFREG, "fine\n", 0 } };
		size_t len;
		void *tar = make_tar(e, 1, &len);

		snprintf(dir, sizeof(dir), "%s/control", scratch);
		cr_expect_eq(latch_guest_state_extract(tar, len, dir, NULL, NULL, err, sizeof(err)), 0, "%s", err);
		free(tar);
	}
}

Test(guest_tar, refuses_more_than_the_size_cap)
{
	const struct entry e[] = { { "./huge", AE_IFREG, NULL, LATCH_GUEST_STATE_MAX + 1 } };
	char err[LATCH_ERR_MAX] = "", dir[128];
	size_t len;
	void *tar = make_tar(e, 1, &len);

	snprintf(dir, sizeof(dir), "%s/state", scratch);
	cr_expect_eq(latch_guest_state_extract(tar, len, dir, NULL, NULL, err, sizeof(err)), -EFBIG, "%s", err);
	free(tar);
}

/* ---- the extracting child's confinement */

enum attempt { OPEN_HOST_FILE, SOCKET, EXEC, EXEC_MEMORY, WRITE_INSIDE };

/* Fork, confine (or not), try it: the child's wait status. */
static int try_in_child(enum attempt what, bool confine)
{
	char err[LATCH_ERR_MAX];
	int status, fd;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (confine && latch_confine(scratch, -1, 1 << 20, err, sizeof(err)))
			_exit(100);
		switch (what) {
		case OPEN_HOST_FILE:
			_exit(open("/etc/passwd", O_RDONLY) >= 0 ? 0 : 1);
		case SOCKET:
			_exit(socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : 1);
		case EXEC:
			execl("/bin/true", "true", (char *)NULL);
			_exit(1);
		case EXEC_MEMORY:
			_exit(mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
					      MAP_FAILED ?
				      0 :
				      1);
		case WRITE_INSIDE:
			fd = open(confine ? "inside" : "/dev/null", O_WRONLY | O_CREAT | O_EXCL, 0600);
			_exit(fd >= 0 && write(fd, "x", 1) == 1 ? 0 : 1);
		}
		_exit(99);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return status;
}

static bool killed_or_failed(int status)
{
	return (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) || (WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

TestSuite(confine, .init = scratch_dir, .fini = scratch_rm);

/*
 * Invariant: the child that parses a guest's tarball can write files in its
 * directory and do nothing else - no host file, no network, no program, no
 * executable memory - whatever a parser bug made of it.
 */
Test(confine, parser_child_reaches_nothing_but_its_directory)
{
	static const enum attempt denied[] = { OPEN_HOST_FILE, SOCKET, EXEC, EXEC_MEMORY };
	static const char *const names[] = { "open /etc/passwd", "socket", "exec /bin/true", "PROT_EXEC memory" };

	if (geteuid() != 0)
		cr_skip_test("chroot and dropping capabilities need root");
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		int control = try_in_child(denied[i], false), confined = try_in_child(denied[i], true);

		cr_expect(WIFEXITED(control) && WEXITSTATUS(control) == 0, "control: %s failed unconfined", names[i]);
		cr_expect(killed_or_failed(confined), "%s succeeded in the confined child (status %#x)", names[i],
			  confined);
	}
	/* and what it is for still works */
	cr_expect_eq(try_in_child(WRITE_INSIDE, true), 0, "the confined child could not write in its directory");
	cr_expect(is_type(scratch, "inside", S_IFREG));
}

/* ---- the state file */

TestSuite(state, .init = scratch_dir, .fini = scratch_rm);

static void a_state(struct latch_vm_state *st, const char *workspace)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->name, sizeof(st->name), "t-state");
	snprintf(st->tap, sizeof(st->tap), "lt-t-state");
	latch_parse_addr("198.51.100.0", &st->subnet4, NULL, 0);
	latch_parse_addr("198.51.100.1", &st->host4, NULL, 0);
	latch_parse_addr("198.51.100.2", &st->guest4, NULL, 0);
	st->table = 31999;
	st->rule_priority = 10213;
	st->memory_mib = 256;
	st->cpus = 1;
	snprintf(st->image, sizeof(st->image), "default");
	snprintf(st->workspace, sizeof(st->workspace), "%s", workspace);
}

/* Invariant: nothing an operator passes can add a key to the state file (one key per line). */
Test(state, refuses_a_value_with_a_control_character)
{
	static const char *const bad[] = { "/srv/w\nuplink = eth0", "/srv/w\rx", "/srv/\x1b[2Jw", "/srv/w\x7f" };
	struct latch_vm_state st, back;
	char err[LATCH_ERR_MAX], path[256];

	setenv("LATCH_ROOT", scratch, 1);
	snprintf(path, sizeof(path), "%s/var/lib/latch/sandboxes/t-state/sandbox", scratch);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		a_state(&st, bad[i]);
		cr_expect_eq(latch_state_save(&st, err, sizeof(err)), -EINVAL, "workspace %zu accepted", i);
		cr_expect(strstr(err, "workspace has a control character"), "%s", err);
		cr_expect(access(path, F_OK) != 0, "the state file was written");
	}
	/* control: a plain path is saved and read back as it was */
	a_state(&st, "/srv/agent work");
	cr_assert_eq(latch_state_save(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(latch_state_load("t-state", &back, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(back.workspace, "/srv/agent work");
	cr_expect_str_eq(back.uplink, "");
}

/* destroy keeps the guest-state backup beside the record unless purged */
Test(state, remove_keeps_the_backup_purge_does_not)
{
	struct latch_vm_state st;
	char err[LATCH_ERR_MAX], dir[256], backup[300];

	setenv("LATCH_ROOT", scratch, 1);
	a_state(&st, "");
	cr_assert_eq(latch_state_save(&st, err, sizeof(err)), 0, "%s", err);
	latch_state_dir("t-state", dir, sizeof(dir));
	snprintf(backup, sizeof(backup), "%s/state", dir);
	cr_assert_eq(mkdir(backup, 0700), 0);
	cr_expect_eq(latch_state_remove("t-state"), 0);
	cr_expect(!latch_vm_exists("t-state"), "the record survived");
	cr_expect(is_type(dir, "state", S_IFDIR), "the backup went with the record");
	cr_expect_eq(latch_state_purge("t-state"), 0);
	cr_expect(access(dir, F_OK) != 0, "purge left %s", dir);
	/* without a backup, the directory goes with the record */
	cr_assert_eq(latch_state_save(&st, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(latch_state_remove("t-state"), 0);
	cr_expect(access(dir, F_OK) != 0, "remove left an empty %s", dir);
}

/* ---- the domain XML */

Test(domain_xml, logs_the_serial_console_to_a_file)
{
	struct latch_domain_opts o = { .memory_mib = 256, .cpus = 1 };
	char *xml;

	snprintf(o.name, sizeof(o.name), "t-xml");
	snprintf(o.tap, sizeof(o.tap), "lt-t-xml");
	snprintf(o.console_log, sizeof(o.console_log), "/var/log/latch/t-xml&'.console.log");
	xml = latch_domain_xml(&o);
	cr_assert_not_null(xml);
	cr_expect(strstr(xml, "<serial type='pty'>\n      <log file='/var/log/latch/t-xml&amp;&apos;.console.log' "
			      "append='off'/>"),
		  "%s", xml);
	free(xml);
	*o.console_log = '\0';
	xml = latch_domain_xml(&o);
	cr_assert_not_null(xml);
	cr_expect(!strstr(xml, "<log "), "a log without a path: %s", xml);
	free(xml);
}

/* agents' native binaries need SSE4/AVX: never libvirt's default qemu64 (SIGILL) */
Test(domain_xml, asks_for_a_cpu_that_runs_agent_binaries)
{
	struct latch_domain_opts o = { .memory_mib = 256, .cpus = 1 };
	char *xml;

	snprintf(o.name, sizeof(o.name), "t-xml");
	snprintf(o.tap, sizeof(o.tap), "lt-t-xml");
	xml = latch_domain_xml(&o);
	cr_assert_not_null(xml);
	cr_expect(strstr(xml, "<domain type='qemu'>") && strstr(xml, "  <cpu mode='maximum'/>\n"), "TCG: %s", xml);
	cr_expect(!strstr(xml, "qemu64"), "%s", xml);
	free(xml);
	o.kvm = true;
	xml = latch_domain_xml(&o);
	cr_assert_not_null(xml);
	cr_expect(strstr(xml, "<domain type='kvm'>") && strstr(xml, "  <cpu mode='host-passthrough'/>\n"), "KVM: %s",
		  xml);
	free(xml);
}

/* status reports the CPU the live XML shows, whatever libvirt expanded it to */
Test(domain_xml, cpu_mode_read_back_from_live_xml)
{
	char buf[48];

	cr_expect_eq(latch_domain_cpu_from_xml("<domain type='qemu'>\n  <cpu mode='maximum' check='none' "
					       "migratable='on'/>\n</domain>",
					       buf, sizeof(buf)),
		     0);
	cr_expect_str_eq(buf, "maximum");
	cr_expect_eq(latch_domain_cpu_from_xml("<cpu check=\"none\" mode=\"host-passthrough\"/>", buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "host-passthrough");
	cr_expect_eq(latch_domain_cpu_from_xml("<cpu mode='custom' match='exact' check='full'>\n    <model "
					       "fallback='forbid'>qemu64</model>\n    <feature policy='require' "
					       "name='x2apic'/>\n  </cpu>",
					       buf, sizeof(buf)),
		     0);
	cr_expect_str_eq(buf, "custom qemu64");
	/* control: no cpu element, or one with no mode, says nothing */
	cr_expect_eq(latch_domain_cpu_from_xml("<domain><clock offset='utc'/></domain>", buf, sizeof(buf)), -ENOENT);
	cr_expect_str_eq(buf, "");
	cr_expect_eq(latch_domain_cpu_from_xml("<cpu match='exact'><model>x</model></cpu>", buf, sizeof(buf)), -ENOENT);
	/* an attribute whose name ends in mode is not mode */
	cr_expect_eq(latch_domain_cpu_from_xml("<cpu xmode='maximum'/>", buf, sizeof(buf)), -ENOENT);
}
