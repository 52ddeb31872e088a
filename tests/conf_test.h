/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * conf_test.h - what the latch.conf tests share: a fresh temp dir a suite
 * (conf_test_setup/conf_test_teardown as its .init/.fini) and conf_of(),
 * which writes TEXT there as latch.conf (root-safe mode 0644) and parses it.
 */
#ifndef LATCH_TESTS_CONF_TEST_H
#define LATCH_TESTS_CONF_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"

static char conf_test_dir[64];

static inline void conf_test_setup(void)
{
	snprintf(conf_test_dir, sizeof(conf_test_dir), "/tmp/latch-conftest-XXXXXX");
	cr_assert_not_null(mkdtemp(conf_test_dir));
}

static inline void conf_test_teardown(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/latch.conf", conf_test_dir);
	unlink(path);
	rmdir(conf_test_dir);
}

static inline int conf_of(const char *text, struct latch_conf *c, char *err, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/latch.conf", conf_test_dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, 0644);
	return latch_conf_parse_file(path, c, err, len);
}

#endif
