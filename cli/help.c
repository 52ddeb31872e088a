// SPDX-License-Identifier: GPL-2.0-only
/*
 * help.c - everything latch says about itself, read from the one command
 * table (latch_cmds[] in latch.c): `latch help`, `latch CMD --help` (usage,
 * every option with its meaning, examples) and `latch completion bash`.
 * Nothing here is written twice, so the help and the completion can't drift
 * from the commands; selftests/live_cli.sh checks the table against the
 * option parsers and docs/man/latch.8.md.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"

/* Global options, for the usage text and the completion alike; main() reads them by hand. */
static const struct latch_opt global_opts[] = {
	{ "json", 0, NULL, "one JSON document on stdout, errors included (docs/json.md)", false },
	{ "verbose", 'v', NULL, "libbpf's and the verifier's messages", true },
	{ "version", 0, NULL, "print latch's version", false },
	{ "help", 'h', NULL, "this help; `latch CMD --help` for one command", true },
	{ NULL, 0, NULL, NULL, false },
};

/* Each option as "  --opt ARG              meaning". */
static void print_options(FILE *f, const struct latch_opt *o)
{
	char spelled[64];

	for (; o && o->name; o++) {
		latch_opt_spelling(o, spelled, sizeof(spelled));
		fprintf(f, "  %-22s %s\n", spelled, o->help);
	}
}

static void print_lines(FILE *f, const char *text)
{
	while (text && *text) {
		size_t n = strcspn(text, "\n");

		fprintf(f, "  %.*s\n", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

void latch_usage(FILE *f)
{
	fprintf(f, "usage: latch [--json] [-v] [--version] COMMAND ...\n\n");
	for (size_t i = 0; i < latch_n_cmds; i++)
		fprintf(f, "  latch %s\n      %s\n", latch_cmds[i].usage, latch_cmds[i].help);
	fprintf(f, "\nglobal options (before COMMAND only):\n");
	print_options(f, global_opts);
	fprintf(f,
		"\nCommands and their sub-verbs match on a unique prefix (`latch eg NAME s` is egress NAME show).\n"
		"Exit codes: 0 ok, 1 failed, 2 usage, 3 posture not verified, 4 no such sandbox; exec, task and\n"
		"run: the command's own, 124 deadline, 125 latch failed, 126/127 CMD could not run\n"
		"(docs/exit-codes.md).  LATCH_BPFFS moves the bpffs root (default " LATCH_BPFFS_DEFAULT
		"); LATCH_ROOT\n"
		"moves /" LATCH_ETC_DIR ", /" LATCH_VAR_DIR " and /" LATCH_RUN_DIR ".  latch %s; man latch.\n",
		latch_version);
}

void latch_cmd_help(FILE *f, const struct latch_cmd *c)
{
	fprintf(f, "usage: latch %s\n%s\n", c->usage, c->help);
	if (c->opts) {
		fprintf(f, "\noptions:\n");
		print_options(f, c->opts);
	}
	if (c->examples) {
		fprintf(f, "\nexamples:\n");
		print_lines(f, c->examples);
	}
	fprintf(f, "\nglobal options go before %s: latch [--json] [-v] %s ...\n", c->name, c->name);
}

json_t *latch_cmd_help_json(const struct latch_cmd *c)
{
	char *text = NULL, spelled[64];
	size_t len = 0;
	FILE *f = c->opts ? open_memstream(&text, &len) : NULL;
	json_t *o;

	/* the options as the help's lines were once written: "--opt ARG\tmeaning", one a line */
	for (const struct latch_opt *opt = c->opts; f && opt->name; opt++) {
		latch_opt_spelling(opt, spelled, sizeof(spelled));
		fprintf(f, "%s%s\t%s", opt == c->opts ? "" : "\n", spelled, opt->help);
	}
	if (f)
		fclose(f);
	o = json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "command", c->name, "usage", c->usage, "help", c->help, "options",
		      text, "examples", c->examples);
	free(text);
	return o;
}

/*
 * The kinds of entry latch writes into the audit log, for `audit --kind`'s
 * completion.  selftests/live_cli.sh compares this list with every kind the
 * sources write (latchd_audit, latch_audit_note, hb_audit), both ways.
 */
static const char audit_kinds[] = "attach audit backup budget config confine daemon dns egress grant kernel kit "
				  "learned other profile refused room route";

/* The option names of a table ("-v, --verbose" gives -v and --verbose) into f; with_arg: those that take one. */
static void option_words(FILE *f, const struct latch_opt *o, bool with_arg)
{
	for (; o && o->name; o++) {
		if (with_arg && !o->arg)
			continue;
		if (o->has_short)
			fprintf(f, " -%c", (char)o->key);
		fprintf(f, " --%s", o->name);
	}
}

/* Does the option OPT (len n, "--name") of c take an argument? */
static bool option_takes_arg(const struct latch_cmd *c, const char *opt, size_t n)
{
	if (n < 3 || strncmp(opt, "--", 2))
		return false;
	for (const struct latch_opt *o = c->opts; o && o->name; o++)
		if (strlen(o->name) == n - 2 && !strncmp(o->name, opt + 2, n - 2))
			return o->arg != NULL;
	return false;
}

/*
 * One usage word as the completion sees it: a literal sub-verb ("=allow"),
 * or what a placeholder completes to ("@sandbox", "@file", "@dir", "@id",
 * "@none"); "+" after it when the word repeats (HOST...).
 */
static void form_word(FILE *f, const char *w, size_t n)
{
	bool many = n > 3 && !strncmp(w + n - 3, "...", 3), lit = true;
	size_t len = many ? n - 3 : n;

	if (len >= 2 && w[0] == '[' && w[len - 1] == ']')
		w++, len -= 2;
	for (size_t i = 0; i < len; i++)
		lit = lit && w[i] >= 'a' && w[i] <= 'z';
	if (lit)
		fprintf(f, " =%.*s", (int)len, w);
	else if (len == 4 && !strncmp(w, "NAME", 4))
		fprintf(f, " @sandbox");
	else if (len == 4 && !strncmp(w, "FILE", 4))
		fprintf(f, " @file");
	else if (len == 3 && !strncmp(w, "DIR", 3))
		fprintf(f, " @dir");
	else if (len == 2 && !strncmp(w, "ID", 2))
		fprintf(f, " @id");
	else
		fprintf(f, " @none");
	if (many)
		fputc('+', f);
}

/* Is p the first word of its line in text? */
static bool line_start(const char *text, const char *p)
{
	while (p > text && p[-1] == ' ')
		p--;
	return p == text || p[-1] == '\n';
}

/*
 * The forms of c's usage as bash words, one quoted string per form: every
 * "CMD ..." line and every "| ..." alternative, the positional words only
 * (options, their arguments and [--x ...] groups left out, `--` ends a form).
 */
static void usage_forms(FILE *f, const struct latch_cmd *c)
{
	const char *u = c->usage;
	size_t cl = strlen(c->name);
	bool open = false, in_opt = false, skip_arg = false, ended = false;

	while (*u) {
		size_t w;

		if (*u == '\n' || *u == ' ') {
			u++;
			continue;
		}
		w = strcspn(u, " \n");
		/* a form starts at "CMD" first on a line, or at "|" */
		if ((w == 1 && *u == '|') || (w == cl && !strncmp(u, c->name, cl) && line_start(c->usage, u))) {
			if (open)
				fputc('"', f);
			fprintf(f, " \"");
			open = true, in_opt = skip_arg = ended = false;
			u += w;
			u += strspn(u, " ");
			/* "| CMD ..." may name the command again */
			if (w == 1 && !strncmp(u, c->name, cl) && (u[cl] == ' ' || u[cl] == '\n' || !u[cl]))
				u += cl;
			continue;
		}
		if (!open) { /* a continuation line of options */
			u += w;
			continue;
		}
		if (in_opt) {
			in_opt = !memchr(u, ']', w);
		} else if (skip_arg) {
			skip_arg = false;
		} else if (u[0] == '[' && w > 1 && u[1] == '-') {
			in_opt = !memchr(u, ']', w);
		} else if (u[0] == '-') {
			if (w == 2 && u[1] == '-')
				ended = true;
			else
				skip_arg = option_takes_arg(c, u, w);
		} else if (!ended) {
			form_word(f, u, w);
		}
		u += w;
	}
	if (open)
		fputc('"', f);
}

/* The script's fixed parts; the command table fills in what goes between them. */
static const char completion_helpers[] =
	"# each sandbox once: a directory of pins (bpffs latch/NAME) or of VM state\n"
	"_latch_sandboxes()\n{\n"
	"\tlocal b=${LATCH_BPFFS:-" LATCH_BPFFS_DEFAULT "} r=${LATCH_ROOT:-} d\n"
	"\tfor d in \"$b\"/latch/*/ \"$r\"/" LATCH_SANDBOXES_DIR "/*/; do\n"
	"\t\t[ -d \"$d\" ] || continue\n"
	"\t\td=${d%/}; d=${d##*/}\n"
	"\t\tcase $d in _*) ;; *) echo \"$d\" ;; esac\n"
	"\tdone | sort -u\n"
	"}\n\n"
	"# grant ids from `latch grants NAME` of every sandbox; pending ones only for approve\n"
	"_latch_grant_ids()\n{\n"
	"\tlocal s\n"
	"\tfor s in $(_latch_sandboxes); do\n"
	"\t\t\"$1\" grants \"$s\" 2>/dev/null | awk -v only=\"$2\" \\\n"
	"\t\t\t'length($1) == 16 && $1 ~ /^[a-z2-7]+$/ && (only == \"\" || $2 == only) { print $1 }'\n"
	"\tdone\n"
	"}\n\n"
	"_latch()\n{\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} i=1 ci=0 cmd= w c n k t\n"
	"\tlocal cmds=\"";

/* after the command names: find the command word, or complete the global options and the commands */
static const char completion_find_cmd[] =
	"\" opts= argopts= forms=() args=() lits= words= none=1\n"
	"\tCOMPREPLY=()\n"
	"\twhile [ $i -lt $COMP_CWORD ]; do\n"
	"\t\tcase ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]} ci=$i; break ;; esac\n"
	"\t\ti=$((i + 1))\n"
	"\tdone\n"
	"\tif [ -z \"$cmd\" ]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"";

static const char completion_dispatch[] =
	" help $cmds\" -- \"$cur\"))\n"
	"\t\treturn\n"
	"\tfi\n"
	"\t# a unique prefix is the command (`latch eg`)\n"
	"\tif [[ \" help $cmds \" != *\" $cmd \"* ]]; then\n"
	"\t\tc=$(compgen -W \"$cmds\" -- \"$cmd\")\n"
	"\t\t[[ $c == *[[:space:]]* ]] || cmd=$c\n"
	"\tfi\n"
	"\tcase $cmd in\n"
	"\thelp) [ $((COMP_CWORD - ci)) -eq 1 ] && COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\")); return ;;\n";

/*
 * The words after the command: options and their arguments are left
 * out, the rest are the positional words typed so far (args).  A form
 * fits when each typed word is its literal, or fills its placeholder
 * and is no form's literal at that place (`kit check` is not a NAME).
 */
static const char completion_match[] =
	"\t*) return ;;\n"
	"\tesac\n"
	"\tfor ((i = ci + 1; i < COMP_CWORD; i++)); do\n"
	"\t\tw=${COMP_WORDS[i]}\n"
	"\t\tcase $w in\n"
	"\t\t--) return ;;\n"
	"\t\t-*) [[ \" $argopts \" == *\" $w \"* ]] && i=$((i + 1)) ;;\n"
	"\t\t*) args+=(\"$w\") ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\tif [ $((COMP_CWORD - 1)) -gt $ci ] && [[ \" $argopts \" == *\" $prev \"* ]]; then\n"
	"\t\tcase $prev in\n"
	"\t\t--kind) COMPREPLY=($(compgen -W \"$_latch_kinds\" -- \"$cur\")) ;;\n"
	"\t\t--workspace) COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
	"\t\t--image) COMPREPLY=($(compgen -W \"default debian\" -- \"$cur\")) ;;\n"
	"\t\tesac\n"
	"\t\treturn\n"
	"\tfi\n"
	"\tif [[ $cur == -* ]]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
	"\t\treturn\n"
	"\tfi\n"
	"\tn=${#args[@]}\n"
	"\tfor c in \"${forms[@]}\"; do\n"
	"\t\tt=($c)\n"
	"\t\tfor ((k = 0; k < ${#t[@]}; k++)); do [[ ${t[k]} == =* ]] && lits=\"$lits $k${t[k]}\"; done\n"
	"\tdone\n"
	"\tfor c in \"${forms[@]}\"; do\n"
	"\t\tt=($c)\n"
	"\t\tfor ((k = 0; k <= n; k++)); do\n"
	"\t\t\tw=${t[k]:-}\n"
	"\t\t\t# past the form's end, its last word when that repeats\n"
	"\t\t\t[ -z \"$w\" ] && [ ${#t[@]} -gt 0 ] && [[ ${t[${#t[@]} - 1]} == *+ ]] && w=${t[${#t[@]} - 1]}\n"
	"\t\t\t[ -n \"$w\" ] || continue 2\n"
	"\t\t\tw=${w%+}\n"
	"\t\t\t[ $k -eq $n ] && break\n"
	"\t\t\tcase $w in\n"
	"\t\t\t=*) [ \"${w#=}\" = \"${args[k]}\" ] || continue 2 ;;\n"
	"\t\t\t*) [[ \"$lits \" == *\" $k=${args[k]} \"* ]] && continue 2 ;;\n"
	"\t\t\tesac\n"
	"\t\tdone\n"
	"\t\tnone=0\n"
	"\t\tcase $w in\n"
	"\t\t=*) words=\"$words ${w#=}\" ;;\n"
	"\t\t@sandbox) words=\"$words $(_latch_sandboxes)\" ;;\n"
	"\t\t@id) words=\"$words $(_latch_grant_ids \"${COMP_WORDS[0]}\" \"$([ \"$cmd\" = approve ] && "
	"echo pending)\")\" ;;\n"
	"\t\t@file) COMPREPLY+=($(compgen -f -- \"$cur\")) ;;\n"
	"\t\t@dir) COMPREPLY+=($(compgen -d -- \"$cur\")) ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\t# no positional word fits here: only an option can follow\n"
	"\t[ $none = 1 ] && [ \"$opts\" != --help ] && words=$opts\n"
	"\tCOMPREPLY+=($(compgen -W \"$words\" -- \"$cur\" | sort -u))\n"
	"}\n"
	"complete -F _latch latch\n";

/*
 * The script.  Words complete from the command table: commands (unique
 * prefixes too), options, option arguments that have a known set, and each
 * positional word from the usage forms.  Sandbox names come from the pins
 * and the VM state directory, grant ids from `latch grants` (root only, so
 * a user's shell completes commands alone).
 */
int latch_completion_bash(FILE *f)
{
	fprintf(f,
		"# bash completion for latch %s: generated by `latch completion bash` from latch's\n"
		"# command table; do not edit.\n"
		"_latch_kinds=\"%s\"\n\n",
		latch_version, audit_kinds);
	fputs(completion_helpers, f);
	for (size_t i = 0; i < latch_n_cmds; i++)
		fprintf(f, "%s%s", i ? " " : "", latch_cmds[i].name);
	fputs(completion_find_cmd, f);
	option_words(f, global_opts, false);
	fputs(completion_dispatch, f);
	for (size_t i = 0; i < latch_n_cmds; i++) {
		const struct latch_cmd *c = &latch_cmds[i];

		fprintf(f, "\t%s) opts=\"--help", c->name);
		option_words(f, c->opts, false);
		fprintf(f, "\" argopts=\"");
		option_words(f, c->opts, true);
		fprintf(f, "\" forms=(");
		usage_forms(f, c);
		fprintf(f, " ) ;;\n");
	}
	fputs(completion_match, f);
	return ferror(f) ? -1 : 0;
}

int cmd_completion(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "bash"))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch completion bash");
	if (latch_json)
		return latch_err(LATCH_EXIT_USAGE, "completion prints a script; --json has nothing to add");
	return latch_completion_bash(stdout) ? LATCH_EXIT_FAILED : 0;
}
