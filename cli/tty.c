// SPDX-License-Identifier: GPL-2.0-only
/*
 * tty.c - the user's terminal in raw mode for `latch exec -t` and `latch
 * shell`, and back as it was on every way out.
 *
 * Raw mode (cfmakeraw) hands every key to the guest's pty: Ctrl-C is a byte
 * there, and the guest's line discipline makes it SIGINT for the guest's
 * process.  A terminal left raw is unusable (no echo, no line editing), so
 * the saved settings go back on a normal return (latch_tty_restore), at
 * exit() (atexit), and on SIGTERM, SIGHUP (the terminal closed), SIGQUIT and
 * SIGINT sent from elsewhere, whose handler restores with tcsetattr (async-
 * signal-safe) and then dies of the same signal.  Only SIGKILL leaves it
 * raw: `reset` or `stty sane` mends it then.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"

static struct termios saved;
static int saved_fd = -1;
static volatile sig_atomic_t is_raw;
static const int fatal_signals[] = { SIGTERM, SIGHUP, SIGQUIT, SIGINT };

void latch_tty_restore(void)
{
	if (!is_raw)
		return;
	is_raw = 0;
	tcsetattr(saved_fd, TCSADRAIN, &saved);
}

static void on_fatal_signal(int sig)
{
	int saved_errno = errno;

	latch_tty_restore();
	signal(sig, SIG_DFL);
	raise(sig); /* delivered when the handler returns: latch dies of it, as it would have */
	errno = saved_errno;
}

int latch_tty_raw(int fd)
{
	static bool hooked;
	struct termios raw;

	if (tcgetattr(fd, &saved) < 0)
		return -errno;
	saved_fd = fd;
	if (!hooked) {
		struct sigaction sa = { .sa_handler = on_fatal_signal };

		sigemptyset(&sa.sa_mask);
		for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
			if (sigaction(fatal_signals[i], &sa, NULL) < 0)
				return -errno;
		if (atexit(latch_tty_restore))
			return -ENOMEM;
		hooked = true;
	}
	raw = saved;
	cfmakeraw(&raw);
	is_raw = 1;
	if (tcsetattr(fd, TCSADRAIN, &raw) < 0) {
		is_raw = 0;
		return -errno;
	}
	return 0;
}
