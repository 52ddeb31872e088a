// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent_sandbox.c - the guest agent of a sandbox by its name: where its
 * channel is, and one command run there with the errors a user can act on
 * (vm/agent_client.c speaks the protocol).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vm/agent_client.h"

int latch_vm_agent_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_AGENT_SOCKET_FMT, name);
}

bool latch_vm_running(const char *name)
{
	char sock[PATH_MAX];

	return !latch_vm_agent_path(name, sock, sizeof(sock)) && access(sock, F_OK) == 0;
}

int latch_agent_open_sandbox(const char *name, int ping_ms, struct latch_agent **out, char *err, size_t errlen)
{
	char sock[PATH_MAX];
	int r;

	*out = NULL;
	if (latch_vm_agent_path(name, sock, sizeof(sock)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	r = latch_agent_connect(sock, out);
	if (!r)
		r = latch_agent_ping(*out, ping_ms, NULL, 0);
	if (r) {
		latch_agent_close(*out);
		*out = NULL;
		latch_errf(err, errlen, r, "the agent of %s does not answer (%s); is it up? see `latch ls`", name,
			   strerror(-r));
	}
	return r;
}

int latch_vm_exec(const char *name, const char *const argv[], const struct latch_vm_exec_opts *opts, int out_fd,
		  int err_fd, struct latch_vm_exec_result *res, char *err, size_t errlen)
{
	struct latch_agent_exec_opts eo = { 0 };
	struct latch_agent_result r;
	struct latch_agent *a;
	int ret;

	memset(res, 0, sizeof(*res));
	if (opts) {
		eo.timeout_ms = opts->timeout_ms;
		eo.output_limit = opts->output_limit;
		eo.env = opts->env;
		eo.io = opts->io;
		eo.stdin_fd = opts->stdin_fd;
		eo.cwd = opts->cwd;
		eo.escape_out = opts->escape_out;
		eo.escape_err = opts->escape_err;
	}
	ret = latch_agent_open_sandbox(name, 5000, &a, err, errlen);
	if (ret)
		return ret;
	res->answered = true;
	ret = latch_agent_exec(a, argv, &eo, out_fd, err_fd, &r);
	latch_agent_close(a); /* cancels a command still running */
	if (ret == -ECONNRESET || ret == -EPIPE)
		return latch_errf(err, errlen, ret,
				  "exec in %s: the guest's agent channel closed mid-command (did the guest stop? see "
				  "`latch status %s`)",
				  name, name);
	if (ret == -EINTR || ret == -ETIMEDOUT)
		return latch_errf(err, errlen, ret, "exec in %s: %s", name, strerror(-ret));
	if (ret == -EPROTONOSUPPORT)
		return latch_errf(err, errlen, ret,
				  "exec in %s: the guest's agent is too old for %s; rebuild the image (`latch image "
				  "build --force`) and `latch down` and `latch up` the sandbox",
				  name,
				  eo.io & LATCH_AGENT_IO_TTY   ? "a terminal (-t)" :
				  eo.io & LATCH_AGENT_IO_STDIN ? "stdin (-i)" :
				  eo.cwd		       ? "a working directory" :
								 "the kit's environment");
	if (ret)
		return latch_errf(err, errlen, ret, "exec in %s: %s%s", name, strerror(-ret),
				  *r.message ? " (the agent refused the command)" : "");
	res->status = latch_agent_status(&r);
	res->signaled = r.how == LAGENT_SIGNALED;
	res->truncated = r.flags & (LAGENT_EXIT_TRUNCATED | LATCH_AGENT_HOST_TRUNCATED);
	res->timed_out = r.flags & LAGENT_EXIT_TIMED_OUT;
	res->duration_ms = r.duration_ms;
	return 0;
}
