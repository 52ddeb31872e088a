// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_agent.c - `latch agent run [-w DIR] [--keep] [--dry-run] [--cold] [--name
 * NAME] [--image I] [--memory SIZE] KIT [-- ARGS...]`: an agent in a throwaway VM sandbox
 * (sandbox/agent.c does the work and says its lines).
 *
 * It relays the agent's status, so latch's own failures are 125, as
 * `exec`'s are (docs/exit-codes.md); a run stopped by SIGINT, SIGTERM or
 * SIGHUP exits 128 + that signal once the sandbox is gone.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sandbox/sandbox.h"

/* What the run did, as JSON: the sandbox, how it ended, the times. */
static json_t *run_json(const struct latch_sandbox_agent_opts *o, const struct latch_sandbox_agent_result *r)
{
	return json_pack(
		"{s:s, s:s, s:b, s:b, s:b, s:i, s:i, s:b, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
		"sandbox", r->name, "kit", o->kit, "dry_run", o->dry_run, "kept", o->keep && !r->removed, "ran", r->ran,
		"status", r->status, "signal", r->signal, "removed", r->removed, "started",
		r->warm ? "restored" : "booted", "template", r->template_id, "ms", "template_made",
		(json_int_t)r->ms_template, "up_began", (json_int_t)r->ms_up_began, "enforced",
		(json_int_t)r->ms_enforced, "domain_started", (json_int_t)r->ms_domain, "agent_answered",
		(json_int_t)r->ms_agent, "ready", (json_int_t)r->ms_ready, "setup_done", (json_int_t)r->ms_setup,
		"command_started", (json_int_t)r->ms_command);
}

/* The user's terminal raw while the agent has it (its pty echoes and edits), restored after. */
static void terminal_switch(void *arg, bool raw)
{
	(void)arg;
	if (raw)
		latch_tty_raw(STDIN_FILENO);
	else
		latch_tty_restore();
}

static int agent_run(int argc, char **argv)
{
	static struct latch_sandbox_agent_opts o;
	static struct latch_sandbox_agent_result r;
	char err[LATCH_SANDBOX_ERR_MAX];
	const char *ws = NULL;
	int c, ret;

	o.say = latch_say;
	optind = 1;
	opterr = 0;
	while ((c = latch_getopt(argc, argv, "agent")) != -1) {
		switch (c) {
		case 'w':
			ws = optarg;
			break;
		case 'k':
			o.keep = true;
			break;
		case 'n':
			o.dry_run = true;
			break;
		case 'N':
			o.name = optarg;
			break;
		case 'c':
			o.cold = true;
			break;
		case 'i':
			o.image = optarg;
			break;
		case 'm': {
			uint64_t bytes;

			/* as `up --memory`: a bare number is MiB */
			if (latch_parse_size("--memory", optarg, 1 << 20, 64ull << 20, 64ull << 30, &bytes, err,
					     sizeof(err)))
				return latch_err(LATCH_EXIT_CMD_LATCH, "agent run: %s", err);
			o.memory_mib = (uint32_t)(bytes >> 20);
			break;
		}
		default:
			return latch_err(LATCH_EXIT_CMD_LATCH,
					 "agent run: unknown or incomplete option '%s'; see `latch help agent`",
					 argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return latch_err(LATCH_EXIT_CMD_LATCH, "agent run needs a KIT; see `latch help agent`");
	o.kit = argv[optind++];
	if (optind < argc && strcmp(argv[optind], "--"))
		return latch_err(LATCH_EXIT_CMD_LATCH, "agent run: '%s' after KIT: put the command's words after --",
				 argv[optind]);
	if (optind < argc)
		o.args = (const char *const *)argv + optind + 1;
	/* the workspace as resolved now: the guest gets that directory, not what the path names later */
	if (!realpath(ws ? ws : ".", o.workspace))
		return latch_err(LATCH_EXIT_CMD_LATCH, "workspace %s: %s; give a directory with -w DIR", ws ? ws : ".",
				 strerror(errno));
	/* a terminal on both ends, as ssh decides on a pty: a script's pipe gets the bytes as they are */
	if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && !latch_json)
		o.terminal = terminal_switch;
	if (!o.dry_run && latch_need_root("agent run"))
		return LATCH_EXIT_CMD_LATCH;
	ret = latch_sandbox_agent_run(&o, &r, err, sizeof(err));
	latch_json_out(run_json(&o, &r));
	if (ret)
		return latch_err(LATCH_EXIT_CMD_LATCH, "agent run: %s", err);
	if (r.signal)
		return 128 + r.signal;
	return o.dry_run ? 0 : r.status;
}

int cmd_agent(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return agent_run(argc - 1, argv + 1);
	return latch_err(LATCH_EXIT_CMD_LATCH, "usage: latch agent run [-w DIR] [--keep] [--dry-run] [--name NAME] "
					       "[--image I] [--memory SIZE] [--cold] KIT [-- ARGS...]");
}
