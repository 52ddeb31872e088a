/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * confine.h - shut a child process in before it parses what a guest sent.
 *
 * A backup's tarball comes from a guest that may be hostile, and libarchive
 * is a large parser.  The child that extracts it gives up, in this order:
 * every file descriptor but the ones it names, the rest of the file system
 * (chroot into the directory it writes, when root), every capability (the
 * bounding set too), the right to gain privileges again (no_new_privs),
 * and every system call that extracting files does not need (a libseccomp
 * allow-list; anything else kills the process).  Files can't grow past the
 * caller's byte cap (RLIMIT_FSIZE).
 */
#ifndef LATCH_VM_CONFINE_H
#define LATCH_VM_CONFINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Confine the calling process (a child made for it) to dir: close every fd
 * but keep_fd (and 0-2, pointed at /dev/null), chroot into dir (when root;
 * otherwise chdir only), drop all capabilities, set no_new_privs, limit file
 * size to max_file, and install the seccomp filter.  0, or -errno with a
 * line in err: the child must then exit without parsing anything.
 */
int latch_confine(const char *dir, int keep_fd, uint64_t max_file, char *err, size_t errlen);

#endif
