// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent_input.c - the guest agent's side of an interactive command
 * (`latch exec -i/-t`, `latch shell`): the STDIN, STDIN_EOF, WINSZ and
 * SIGNAL frames, and the pty it runs under.  Static buffers only: one
 * STDIN payload waits in in_frame until the command's stdin takes it, and
 * agent.c reads no further frame meanwhile (backpressure).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "vm/guest/agent.h"

uint8_t in_frame[HDR_LEN + LAGENT_MAX_PAYLOAD + 1];
bool in_frame_held;

/* No more input: a pipe is closed; a pty's master stays open for the output. */
static void input_close(struct run *r)
{
	if (!r->pty && r->in >= 0)
		close(r->in);
	r->in = -1;
	r->in_len = 0;
}

/*
 * Write what the command's stdin takes of the pending STDIN bytes, without
 * blocking; then, after STDIN_EOF, end its input.  A pty has no end of
 * input but its EOF character (^D at the start of a line).
 */
void input_flush(struct run *r)
{
	while (r->in >= 0 && r->in_len) {
		ssize_t w = write(r->in, in_frame + HDR_LEN + r->in_off, r->in_len);

		if (w > 0) {
			r->in_off += (uint32_t)w;
			r->in_len -= (uint32_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			return;
		} else if (!(w < 0 && errno == EINTR)) {
			input_close(r); /* it closed its stdin (EPIPE), or the pty is gone (EIO) */
		}
	}
	if (r->in >= 0 && r->in_eof) {
		struct termios t;
		char eof = 4;

		if (r->pty && tcgetattr(r->in, &t) == 0 && t.c_cc[VEOF] != _POSIX_VDISABLE)
			eof = (char)t.c_cc[VEOF];
		if (r->pty && write(r->in, &eof, 1) < 0)
			logx("pty eof: %s", strerror(errno));
		input_close(r);
	}
}

static bool signal_allowed(int signo)
{
	return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT || signo == SIGKILL;
}

static void set_winsz(int master, const struct lagent_winsz *ws)
{
	struct winsize w = {
		.ws_row = le16toh(ws->rows),
		.ws_col = le16toh(ws->cols),
		.ws_xpixel = le16toh(ws->xpixel),
		.ws_ypixel = le16toh(ws->ypixel),
	};

	/* The kernel sends SIGWINCH to the pty's foreground process group. */
	if (w.ws_row && w.ws_col && ioctl(master, TIOCSWINSZ, &w) < 0)
		logx("pty size: %s", strerror(errno));
}

/*
 * One frame from the host while an interactive command runs.  Its own input
 * frames are served; any other frame is a new client's request: it cancels
 * the command (as during any command) and is held for serve().  0 to go on,
 * -EPIPE to cancel.
 */
int input_frame(struct run *r)
{
	struct lagent_hdr h;
	struct lagent_signal sg;
	struct lagent_winsz ws;
	int ret = read_frame(in_frame, &h);

	if (ret)
		return ret;
	if (h.len > LAGENT_MAX_PAYLOAD)
		return -EPIPE; /* answered with an ERROR already; serve() gets back in step */
	if (h.id != r->id || h.type < LAGENT_STDIN || h.type > LAGENT_SIGNAL) {
		in_frame_held = true;
		return -EPIPE;
	}
	switch (h.type) {
	case LAGENT_STDIN:
		if (r->in >= 0 && !r->in_eof) {
			r->in_off = 0;
			r->in_len = h.len;
			input_flush(r);
		}
		break;
	case LAGENT_STDIN_EOF:
		r->in_eof = true;
		input_flush(r);
		break;
	case LAGENT_WINSZ:
		if (r->pty && h.len == sizeof(ws)) {
			memcpy(&ws, in_frame + HDR_LEN, sizeof(ws));
			set_winsz(r->out, &ws);
		}
		break;
	case LAGENT_SIGNAL:
		if (h.len != sizeof(sg))
			break;
		memcpy(&sg, in_frame + HDR_LEN, sizeof(sg));
		sg.signo = (int32_t)le32toh((uint32_t)sg.signo);
		if (!signal_allowed(sg.signo))
			logx("signal %d is not one the host may send; ignored", sg.signo);
		else if (!r->reaped && kill(-r->pid, sg.signo) < 0)
			kill(r->pid, sg.signo); /* sent at once: the command may not have reached setsid() */
		break;
	}
	return 0;
}

/* A new pty of the size asked for: *master for us, *slave for the command; both CLOEXEC. */
int open_pty(const struct lagent_winsz *ws, int *master, int *slave)
{
	char name[64];
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), ret;

	if (m < 0)
		return -errno;
	if (grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)))
		goto fail;
	*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*slave < 0)
		goto fail;
	set_winsz(m, ws);
	*master = m;
	return 0;
fail:
	ret = -errno;
	close(m);
	return ret;
}
