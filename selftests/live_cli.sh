#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# lts-limit: 300 (about 150 s on a busy testbed; every option of every command is probed)
#
# live_cli.sh - the command line keeps its contract (docs/man/latch.8.md):
# global options only before the command, arguments after `--` untouched and
# unlimited, one JSON document per command with "version" (errors too), one
# exit code for "no such sandbox", sub-verbs by prefix, help that lists every
# option the parsers take, and a refusal to work on an `ip netns exec` /sys.
# Each boundary has its control beside it.  Uses lib.sh's namespaces (no
# servers); prints KTAP (selftests/lib.sh).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
TOP=$(cd "$HERE/.." && pwd)

lts_init
lts_topo_up || { fail setup "namespaces"; lts_done; }
lts_attach >/dev/null 2>&1 || { fail setup "attach"; lts_done; }
N=$LTS_NAME

# --- global options: before the command only -------------------------------------
# Invariant: what follows `--` is the command's, -v and --json and -h included.
out=$(latch run -- sh -c 'echo "$@"' sh grep -v x --json -h f 2>/dev/null)
check_eq "run -- keeps -v, --json and -h for the command" "$out" "grep -v x --json -h f"
# Invariant: no argument is dropped, however many (there was a limit of 255).
args=$(seq 1 400)
# shellcheck disable=SC2086
out=$(latch run -- sh -c 'echo $#' sh $args 2>/dev/null)
check_eq "run -- passes 400 arguments, not 255" "$out" "400"
# control: before the command, --json is latch's
check "--json before the command is latch's" bash -c "'$LATCH_BIN' --json --version | jq -e '.version' >/dev/null"
rc=0; err=$(latch status "$N" --json 2>&1 >/dev/null) || rc=$?
check_eq "--json after the command is refused, exit 2" "$rc" 2
check "... saying where it belongs" grep -q "global option: put it before the command" <<<"$err"
out=$("$LATCH_BIN" exec --help 2>&1)
check "CMD --help before -- is help" grep -q "^usage: latch exec" <<<"$out"
# `latch help CMD` and `latch --help CMD` are CMD's help too, and exit 0 (they once ran CMD with no arguments)
for form in "help run" "--help run" "help exec" "-h status"; do
	rc=0; out=$("$LATCH_BIN" $form 2>&1) || rc=$?
	check "latch $form prints ${form##* }'s help, exit 0 (exit $rc)" \
		bash -c "[ $rc = 0 ] && grep -q '^usage: latch ${form##* }' <<<\"\$1\"" _ "$out"
done
# control: a command's arguments after -- are the command's, not a help request
out=$(latch run -- sh -c 'echo x' --help 2>/dev/null)
check_eq "run -- CMD --help is CMD's, not latch's" "$out" "x"

# --- JSON: exactly one document, with version, in success and in failure ---------
one_doc() { # CMD...: stdout parses as exactly one JSON object with a version
	local out n
	out=$(latch --json "$@" 2>/dev/null)
	n=$(jq -s 'length' <<<"$out" 2>/dev/null)
	[ "$n" = 1 ] && jq -e 'type == "object" and (.version | type == "string") and (.exit | type == "number")' \
		<<<"$out" >/dev/null
}
for c in "status" "status $N" "status nosuch" "egress $N show" "egress nosuch show" "egress $N allow 192.0.2.99:443" \
	"egress $N revoke 192.0.2.99:443" "egress $N allow not-an-entry" "detach nosuch" "attach nosuch" "ls" \
	"exec nosuch -- true" "task nosuch -- true" "backup nosuch" "restore nosuch" "down nosuch" "destroy nosuch" \
	"audit" "audit verify" "audit --kind egress" "audit prune" "kits" "kit check /nonexistent.yaml" "doctor" \
	"run -- true" "run -- false" "run --nosuch" "image" "boot" "nosuch" "eg" "completion bash" "--version" \
	"help" "status --help"; do
	# shellcheck disable=SC2086
	check "--json $c: one document with version" one_doc $c
done

# --- exit codes -------------------------------------------------------------------
code() { local rc=0; latch "$@" >/dev/null 2>&1 || rc=$?; echo "$rc"; }
check_eq "status of no sandbox: 4" "$(code status nosuch)" 4
check_eq "detach of no sandbox: 4" "$(code detach nosuch)" 4
check_eq "egress of no sandbox: 4" "$(code egress nosuch show)" 4
check_eq "backup of no VM sandbox: 4" "$(code backup nosuch)" 4
check_eq "down of no VM sandbox: 4" "$(code down nosuch)" 4
check_eq "destroy of no VM sandbox: 4" "$(code destroy nosuch)" 4
check_eq "control: status of the sandbox: 0" "$(code status "$N")" 0
# Invariant: exec's own failures are 125, never a status the guest's command could have given
check_eq "exec of no sandbox: 125" "$(code exec nosuch -- true)" 125
check_eq "exec with a bad option: 125" "$(code exec nosuch --timeout x -- true)" 125
check_eq "exec without --: 125" "$(code exec nosuch true)" 125
check_eq "task of no sandbox: 125" "$(code task nosuch -- true)" 125
check_eq "control: run relays the command's status" "$(code run -- sh -c 'exit 7')" 7
# Invariant: a name that is no sandbox is exit 4 for usage too (it printed a table of defaults, exit 0)
check_eq "usage of no sandbox: 4" "$(code usage nosuch)" 4
check "... with the one no-sandbox line" bash -c "latch --json usage nosuch | jq -e '.exit == 4 and (.error | test(\"no sandbox .nosuch.\"))' >/dev/null"
check_eq "control: usage of the sandbox: 0" "$(code usage "$N")" 0
check_eq "control: usage with no name: 0" "$(code usage)" 0

# --- one duration and one size grammar (latch(8), "Durations and sizes") -----------
# Invariant: 1h means the same to every command, and nan, hex, exponents and
# overflow are refused (run's own failures are 125), naming the option and the grammar.
check_eq "run --timeout 1h is a duration (it was refused)" "$(code run --timeout 1h -- true)" 0
check_eq "control: run --timeout 500ms" "$(code run --timeout 500ms -- true)" 0
for bad in nan inf 0x10 1e3 -5 " 5" 99999999999999999999999; do
	check_eq "run --timeout '$bad' refused, 125" "$(code run --timeout "$bad" -- true)" 125
done
rc=0; err=$(latch run --timeout nan -- true 2>&1) || rc=$?
check_eq "run --timeout nan: one line naming the option and the grammar" "$rc:$err" \
	"125:latch: --timeout: 'nan' is not a duration (60, 90s, 5m, 1h, 500ms)"
rc=0; err=$(latch run --memory 17179869185G -- true 2>&1) || rc=$?
check_eq "run --memory 17179869185G is refused, not wrapped to 1 GiB" "$rc:$err" \
	"125:latch: --memory: '17179869185G' is out of range; give 8M to 64T"
check_eq "control: run --memory 1G" "$(code run --memory 1G -- true)" 0
check_eq "run --cpus nan refused, 125" "$(code run --cpus nan -- true)" 125
check_eq "control: run --cpus 0.5" "$(code run --cpus 0.5 -- true)" 0
check_eq "exec --timeout 1e3 refused, 125" "$(code exec nosuch --timeout 1e3 -- true)" 125
check_eq "up --memory 17179869185G refused, 2" "$(code up nosuch --memory 17179869185G)" 2
check_eq "down --timeout nan refused, 2" "$(code down nosuch --timeout nan)" 2

# --- sub-verbs by unique prefix ------------------------------------------------------
check_eq "egress NAME s is show" "$(latch --json eg "$N" s | jq -r '.entries | type')" array
latch eg "$N" a 192.0.2.77:443 >/dev/null 2>&1
check "egress NAME a ENTRY is allow" bash -c "jq -e '.entries[] | select(.entry | startswith(\"192.0.2.77\"))' >/dev/null <<<'$(latch --json egress "$N" show)'"
latch eg "$N" re 192.0.2.77:443 >/dev/null 2>&1
check "egress NAME re ENTRY is revoke" bash -c "! jq -e '.entries[] | select(.entry | startswith(\"192.0.2.77\"))' >/dev/null <<<'$(latch --json egress "$N" show)'"
rc=0; latch audit pr >/dev/null 2>&1 || rc=$?
check_eq "control: audit's first word may be a NAME, so no prefix there (pr is a sandbox name)" "$rc" 0

# --- help lists every option the parsers take, and the man page has them ------------
opts_of() { # FILE: the --options its parser knows (getopt tables and strcmp)
	grep -oE '\{ "[a-z-]+", (required|no)_argument|"--[a-z-]+"' "$1" | grep -oE '"-*[a-z][a-z-]+"' | sed 's/^"-*//; s/"$//' |
		sed 's/^/--/' | sort -u
}
# each file's options must be in the --help of one of the commands it parses for
for pair in cmd_sandbox.c:attach cmd_vm.c:up,down,destroy,exec,task cmd_run.c:run cmd_audit.c:audit \
	cmd_audit_ops.c:audit cmd_egress.c:egress cmd_image.c:image cmd_vmstate.c:backup,boot cmd_agent.c:agent; do
	help=
	for cmd in ${pair#*:}; do help="$help$("$LATCH_BIN" ${cmd//,/ } --help 2>&1)"; done
	help=
	for cmd in $(tr , ' ' <<<"${pair#*:}"); do
		help="$help$("$LATCH_BIN" "$cmd" --help 2>&1)"
		check "$cmd --help has an example" grep -q "^examples:" <<<"$("$LATCH_BIN" "$cmd" --help 2>&1)"
	done
	missing=
	for o in $(opts_of "$TOP/cli/${pair%%:*}"); do
		grep -q -- "$o\b" <<<"$help" || missing="$missing $o"
	done
	check_eq "${pair%%:*}: every option its parser takes is in --help" "${missing:-none}" none
done

# --- the table, latch(8) and the completion agree ---------------------------------------
# Invariant: every command of the command table (read from `latch help`), every option and
# sub-verb its `latch CMD --help` names, is in latch(8), in that command's section, and in the
# completion.  The lists are read from the table, and an empty one fails: a check that
# extracts nothing must not pass.
MAN=$TOP/docs/man/latch.8.md
COMP=$("$LATCH_BIN" completion bash)
cmds=$("$LATCH_BIN" help 2>&1 | sed -n 's/^  latch \([a-z][a-z]*\).*/\1/p' | sort -u)
check "latch help lists the table's commands ($(wc -w <<<"$cmds") of them)" test "$(wc -w <<<"$cmds")" -ge 20
comp_cmds=$(sed -n 's/^\tlocal cmds="\([^"]*\)".*/\1/p' <<<"$COMP" | tr ' ' '\n' | sort -u)
check_eq "the completion's commands are the table's" "$(echo $comp_cmds)" "$(echo $cmds)"
section() { # CMD: its section of latch(8), "## a, b" headings naming it
	awk -v c="$1" '/^# / { s = 0 } /^## / { s = 0; n = split(substr($0, 4), w, /, */); for (i = 1; i <= n; i++) if (w[i] == c) s = 1 } s' "$MAN"
}
nopt=0 no_sec= no_man= no_comp=
for c in $cmds; do
	sec=$(section "$c")
	[ -n "$sec" ] || no_sec="$no_sec $c"
	h=$("$LATCH_BIN" "$c" --help 2>&1)
	copts=" $(sed -n "s/^\t$c) opts=\"\([^\"]*\)\".*/\1/p" <<<"$COMP") "
	# the options, then the usage's sub-verbs (lower-case words after CMD, outside [--x ...])
	for o in $(sed -n '/^options:/,/^$/p' <<<"$h" | grep -oE '^  --[a-z][a-z-]*'); do
		nopt=$((nopt + 1))
		grep -qF -- "**$o**" <<<"$sec" || no_man="$no_man $c:$o"
		[[ $copts == *" $o "* ]] || no_comp="$no_comp $c:$o"
	done
	for v in $(awk 'NR == 1 { sub(/^usage: latch /, ""); print; next } /^ / { print; next } { exit }' <<<"$h" |
		sed 's/\[[^]]*\]//g' | tr ' |' '\n\n' |
		grep -x '[a-z][a-z]*' | grep -vx "$c"); do
		grep -qF -- "**$v**" <<<"$sec" || grep -qF -- "**latch $c $v" <<<"$sec" || no_man="$no_man $c:$v"
	done
done
check "the table's commands have $nopt options (extracted, not none)" test "$nopt" -ge 40
check_eq "latch(8) has a section for every command" "${no_sec:-none}" none
check_eq "latch(8) names every option and sub-verb in its command's section" "${no_man:-none}" none
check_eq "the completion offers every option of each command" "${no_comp:-none}" none

# --- each command accepts exactly the options of its table row ---------------------------
# Invariant: a command takes the options its row of the command table lists (what `latch CMD
# --help` prints, read here from `latch --json CMD --help`) and no other: each listed option
# gets past the command's parser, and one the row lacks is refused with the command's usual
# usage error.  A probe is CMD's words with @ for the option (and a value when it takes one)
# and the line the parser refuses an option with (% is the option), and its exit code.  The
# getopt probes end in --zz-after, so the parser stops there and nothing runs; the others name a
# sandbox that does not exist (LATCH_ROOT and bpffs are this test's).
probes=(
	"attach|attach nosuch @ --zz-after|attach: unknown or incomplete option '%'|2"
	"detach|detach nosuch @|detach takes one NAME|2"
	"egress|egress nosuch allow 192.0.2.1 @|'%': '%' is not an IPv4 or IPv6 address|2"
	"grant|grant nosuch docs.example.com @|grant: unknown option '%'|2"
	"grants|grants nosuch @|usage: latch grants NAME|2"
	"approve|approve K3M2Q7ZX4P9A8B6C @|usage: latch approve ID|2"
	"deny|deny K3M2Q7ZX4P9A8B6C @|usage: latch deny ID|2"
	"status|status nosuch @|status takes at most one NAME|2"
	"up|up @ --zz-after|up: unknown or incomplete option '%'|2"
	"down|down nosuch @|down takes one NAME|2"
	"destroy|destroy nosuch @|destroy takes one NAME|2"
	"ls|ls @|ls takes no arguments|2"
	"exec|exec nosuch @ -- true|exec needs -- and a command|125"
	"shell|shell nosuch @|usage: latch shell NAME|125"
	"backup|backup nosuch @|backup takes one NAME|2"
	"backup:--all|backup @|backup takes one NAME|2"
	"restore|restore nosuch @|restore takes one NAME|2"
	"task|task nosuch @ -- true|task needs -- and a command|125"
	"agent|agent run @ --zz-after|agent run: unknown or incomplete option '%'|125"
	"boot|boot @|usage: latch boot install|2"
	"image|image build @ --image nosuch-image|usage: latch image build|2"
	"kits|kits @|usage: latch kits|2"
	"kit|kit @|usage: latch kit check FILE|2"
	"env|env nosuch @|usage: latch env NAME|2"
	"doctor|doctor @|doctor takes no arguments|2"
	"run|run @ --zz-after|run: unrecognized option '%'|125"
	"verify|verify nosuch @|usage: latch verify NAME|2"
	"audit|audit @ --zz-after|audit: unknown or incomplete option '%'|2"
	"audit:--before|audit prune @|usage: latch audit prune --before T|2"
	"completion|completion @|usage: latch completion bash|2"
	"usage|usage @ --zz-after|usage: unrecognized option '%'|2"
)
declare -A sample=([--dev]=veth-zz [--guest-mac]=02:00:00:00:00:01 [--guest-ip]=192.0.2.2 [--host-ip]=192.0.2.1
	[--resolver]=192.0.2.1 [--host-port]=8080 [--dns-rate]=10 [--dns-burst]=20 [--kit]=claude [--for]=60
	[--reason]=why [--profile]=sealed [--image]=default [--memory]=512M [--cpus]=1 [--workspace]=/tmp
	[--timeout]=60 [--output-limit]=64K [--pids]=64 [--user]=root [--env]=A=B [--since]=2h [--kind]=egress
	[--before]=30d [--rebind-name]=rebind.example.org)
probe_of() { # CMD [OPT]: the probe for OPT of CMD (its own, else CMD's)
	local p
	for p in "${probes[@]}"; do [ "${p%%|*}" = "$1:${2:-}" ] && { echo "$p"; return; }; done
	for p in "${probes[@]}"; do [ "${p%%|*}" = "$1" ] && { echo "$p"; return; }; done
}
probe() { # CMD OPT [VALUE]: "refused" when CMD's parser refuses OPT as it refuses options, else "taken"
	local p words out rc=0 w
	p=$(probe_of "$1" "$2")
	IFS='|' read -r _ words re code <<<"$p"
	words=()
	for w in $(cut -d'|' -f2 <<<"$p"); do
		if [ "$w" = @ ]; then words+=("$2" ${3:+"$3"}); else words+=("$w"); fi
	done
	out=$(latch "${words[@]}" 2>&1) || rc=$?
	# 126/127: latch itself did not run, which must not pass for "taken"
	if [ "$rc" = 126 ] || [ "$rc" = 127 ]; then
		echo "not-run (exit $rc)"
	elif [ "$rc" = "$code" ] && grep -qF -- "${re//%/$2}" <<<"$out"; then
		echo refused
	elif [[ " ${words[*]} " == *" --zz-after "* ]] && ! grep -qF -- "${re//%/--zz-after}" <<<"$out"; then
		# a getopt probe: taken means getopt went on to --zz-after and refused that
		echo "refused-early (exit $rc)"
	else
		echo "taken (exit $rc)"
	fi
}
ncmd=0 nprobed=0 untaken= bogus_taken=
for c in $cmds; do
	[ -n "$(probe_of "$c")" ] || { untaken="$untaken $c:no-probe"; continue; }
	ncmd=$((ncmd + 1))
	while IFS=$'\t' read -r spelled _; do
		[ -n "$spelled" ] || continue
		spelled=${spelled#-[a-zA-Z], } # "-w, --workspace DIR": the long spelling is probed
		o=${spelled%% *}
		v=
		[ "$o" != "$spelled" ] && v=${sample[$o]:-x}
		nprobed=$((nprobed + 1))
		r=$(probe "$c" "$o" "$v")
		[ "${r%% *}" = taken ] || untaken="$untaken $c:$o:${r%% *}"
	done < <("$LATCH_BIN" --json "$c" --help | jq -r '.options // empty')
	# control: an option no row has is refused as the command refuses options
	r=$(probe "$c" --zz-no-such)
	[ "$r" = refused ] || bogus_taken="$bogus_taken $c:$r"
done
check "every command of the table has a probe ($ncmd of them)" test "$ncmd" -ge 20 -a "$ncmd" = "$(wc -w <<<"$cmds")"
check "the table's options were probed ($nprobed of them, not none)" test "$nprobed" -ge 40
check_eq "every option a command's row lists gets past its parser" "${untaken:-none}" none
check_eq "an option no row lists is refused with the command's usage error" "${bogus_taken:-none}" none
# and latchd: its one table (latchd_opts in latchd/main.c) is what its getopt takes and its --help names
LATCHD=${LATCHD_BIN:-$TOP/build/latchd}
dopts=$(sed -n '/latchd_opts\[\] = {/,/^};/p' "$TOP/latchd/main.c" | grep -oE '^\s*\{ "[a-z-]+", .[a-zA-Z]., ("[A-Z]+"|NULL), "[^"]*", (true|false)' |
	sed -E 's/^\s*\{ "([a-z-]+)", .(.)., ("[A-Z]+"|NULL).*, (true|false)$/\1 \2 \3 \4/')
check "latchd's option table was read ($(wc -l <<<"$dopts") rows, not none)" test "$(wc -l <<<"$dopts")" -ge 5
dhelp=$("$LATCHD" --help 2>&1) dbad=
while read -r name key arg short; do
	[ -n "$name" ] || continue
	for o in "--$name" $([ "$short" = true ] && echo "-$key"); do
		# --help prints that text, and is not in it
		[ "$name" = help ] || grep -qF -- "$o" <<<"$dhelp" || dbad="$dbad $o:not-in-help"
		rc=0; out=$(timeout 5 "$LATCHD" "$o" $([ "$arg" = NULL ] || echo 5353) --zz-after 2>&1 </dev/null) || rc=$?
		# taken: getopt went on to --zz-after and refused that (--version and --help exit 0 first)
		[ "$rc" = 0 ] || grep -qF "unrecognized option '--zz-after'" <<<"$out" || dbad="$dbad $o:refused"
	done
done <<<"$dopts"
check_eq "latchd takes every option of its table, and --help names each" "${dbad:-none}" none
rc=0; out=$("$LATCHD" --zz-no-such 2>&1) || rc=$?
check "control: latchd refuses an option its table lacks, exit 2 with its usage" \
	bash -c "[ $rc = 2 ] && grep -q \"unrecognized option '--zz-no-such'\" <<<\"\$1\" && grep -q '^usage: latchd' <<<\"\$1\"" _ "$out"

# Invariant: a repository path that a man page cites (itself or the docs it @includes) exists,
# as a file or directory, or as the source of a program named without its .c/.sh.
cited_missing= ncited=0
for f in "$TOP"/docs/man/*.md $(sed -n 's/^@include //p' "$TOP"/docs/man/*.md); do
	[ "${f#/}" = "$f" ] && f=$TOP/$f
	for p in $(grep -oE '(^|[^/A-Za-z0-9_.-])(docs|tests|selftests|vm|broker|cli|config|scripts|bpf|loader|room|budget|audit|kit|profile|common|bench)/[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$f" |
		sed -E 's/^[^a-z]//' | sort -u); do
		ncited=$((ncited + 1))
		[ -e "$TOP/$p" ] || [ -e "$TOP/$p.c" ] || [ -e "$TOP/$p.sh" ] || cited_missing="$cited_missing ${f#"$TOP"/}:$p"
	done
done
check "the man pages cite repository paths ($ncited found, not none)" test "$ncited" -ge 10
check_eq "every repository path a man page cites exists" "${cited_missing:-none}" none
# and every test file (tests/, selftests/) the sources and docs cite by name
cited_missing=
for p in $(cd "$TOP" && grep -rhoE '\b(tests|selftests)/[a-z_/]+\.(c|sh|py)\b' --include=*.c --include=*.h --include=*.md \
	--include=*.mk --include=*.sh --include=Makefile . | sort -u); do
	[ -e "$TOP/$p" ] || cited_missing="$cited_missing $p"
done
check_eq "every test file the sources and docs cite exists" "${cited_missing:-none}" none

# --- the completion, driven in bash ---------------------------------------------------------
# Invariant: the completion offers what the command takes at that place: sandbox names (never a
# directory's path or a listing's heading), a command's sub-verbs and options, the audit log's
# kinds, directories for --workspace.  Sandboxes: $N (pins in this test's bpffs) and vm-$$, a
# VM sandbox's state directory made here (no libvirt guest: only the listing is under test).
mkdir -p "$LTS_TMP/root/var/lib/latch/sandboxes/vm-$$" "$LTS_TMP/ws-$$"
sorted() { tr ' ' '\n' <<<"$*" | grep . | sort | tr '\n' ' ' | sed 's/ $//'; }
comp() { # WORD...: COMPREPLY for the last word, sorted, on one line
	LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS bash -c 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _latch
		printf "%s\n" "${COMPREPLY[@]}" | grep . | sort | tr "\n" " " | sed "s/ $//"' _ "$LATCH_BIN" "$@" <<<"$COMP"
}
sbx=$(sorted "$N" "vm-$$")
check_eq "completion: latch eg -> egress" "$(comp eg)" egress
check_eq "completion: latch --json sta -> status (after a global option)" "$(comp --json sta)" status
check_eq "completion: latch status -> the sandboxes, names only" "$(comp status '')" "$sbx"
check_eq "completion: latch eg (a prefix) -> the sandboxes" "$(comp eg '')" "$sbx"
check_eq "completion: latch egress box a -> allow" "$(comp egress "$N" a)" allow
check_eq "completion: latch egress box -> its sub-verbs" "$(comp egress "$N" '')" "allow profile revoke show"
check_eq "completion: latch up x --w -> --workspace" "$(comp up x --w)" --workspace
check_eq "completion: latch up x --memory 512 --k (an option's argument is no NAME) -> options" \
	"$(comp up x --memory 512 --k)" "--keep-on-failure --kit"
check_eq "completion: latch run -> run's options, not sandboxes" "$(comp run '')" \
	"--apply --check --cpus --env --help --kit --memory --output-limit --pids --profile --resolver --sweep --timeout --user --workspace"
check_eq "completion: latch run --workspace DIR -> directories" "$(comp run --workspace "$LTS_TMP/ws-")" "$LTS_TMP/ws-$$"
check_eq "completion: latch run --timeout -> nothing (a duration)" "$(comp run --timeout '')" ""
check_eq "completion: latch run -- CMD -> nothing of latch's" "$(comp run -- '')" ""
check_eq "completion: latch audit -> the sandboxes, verify and prune" "$(comp audit '')" "$(sorted $sbx prune verify)"
check_eq "completion: latch audit --kind gr -> grant" "$(comp audit --kind gr)" grant
check_eq "completion: latch audit --kind k -> kernel kit" "$(comp audit --kind k)" "kernel kit"
check_eq "completion: latch ls -> nothing (ls takes no argument)" "$(comp ls '')" ""
check_eq "completion: latch kit -> check, fetch, pin and the sandboxes" "$(comp kit '')" "$(sorted check fetch pin $sbx)"
check_eq "completion: latch kit NAME -> backend secrets setup" "$(comp kit "$N" '')" "backend secrets setup"
check_eq "completion: latch kit check FILE -> files, not kit's verbs" "$(comp kit check "$LTS_TMP/ws-")" "$LTS_TMP/ws-$$"
check_eq "completion: latch boot -> its sub-verbs" "$(comp boot '')" "apply install uninstall"
check_eq "completion: latch approve without latchd -> nothing (no pending ask)" "$(comp approve '')" ""
check_eq "completion: latch help eg -> egress" "$(comp help eg)" egress
# the kinds offered are the kinds the sources write (latchd_audit's third argument,
# latch_audit_note's second, hb_audit's, a literal .kind)
src_kinds=$(cd "$TOP" && grep -rhoE 'latchd_audit(_wanted)?\([^,]+, [^,]+, "[a-z]+"|latch_audit_note\([^,]+, "[a-z]+"|hb_audit\(g, [^,]*|\.kind = "[a-z]+"' \
	--include=*.c broker cli audit vm room budget latchd resolver ctl | sed -E '/^hb_audit/!s/.*("[a-z]+")$/\1/' | grep -oE '"[a-z]+"' | tr -d '"')
check "... the sources write 15 kinds or more (extracted, not none)" test "$(sorted $src_kinds | wc -w)" -ge 15
check_eq "completion: audit --kind offers exactly the kinds the sources write" "$(comp audit --kind '')" \
	"$(tr ' ' '\n' <<<"$(echo $src_kinds)" | sort -u | tr '\n' ' ' | sed 's/ $//')"

# --- ip netns exec: a /sys that is not the host's is refused ---------------------------
# Invariant: latch never pins into a bpffs that vanishes with it.
rc=0
err=$(LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS ip netns exec "$LTS_G" "$LATCH_BIN" attach ipx \
	--dev g0 --guest-mac 02:00:00:00:00:09 --guest-ip 192.0.2.9 --host-ip 192.0.2.10 2>&1) || rc=$?
check_eq "attach under ip netns exec: refused (exit 1)" "$rc" 1
check "... naming the fix: nsenter --net=/run/netns/$LTS_G" grep -qF "nsenter --net=/run/netns/$LTS_G latch" <<<"$err"
check "... and nothing was attached to g0" bash -c "! ip netns exec '$LTS_G' tc filter show dev g0 ingress | grep -q bpf"
check "... nor pinned" test ! -e "$LTS_BPFFS/latch/ipx"
check "control: the same attach through nsenter --net works" bash -c \
	"LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS nsenter --net=/run/netns/$LTS_G '$LATCH_BIN' attach ipx --dev g0 --guest-mac 02:00:00:00:00:09 --guest-ip 192.0.2.9 --host-ip 192.0.2.10 >/dev/null && test -e $LTS_BPFFS/latch/ipx"
LATCH_ROOT=$LTS_TMP/root LATCH_BPFFS=$LTS_BPFFS nsenter --net="/run/netns/$LTS_G" "$LATCH_BIN" detach ipx >/dev/null 2>&1

# --- guest text and /run/latch ----------------------------------------------------------
rc=0; err=$(latch status $'x\x1b[2Jy' 2>&1) || rc=$?
check "an error line carries no raw escape" bash -c "! grep -q $'\x1b' <<<\"\$1\" && grep -qF 'x\\x1b' <<<\"\$1\"" _ "$err"
check_eq "run/latch made by attach is 0700" "$(stat -c %a "$LTS_TMP/root/run/latch")" 700

lts_done
