#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# symbols.sh - the arrows, checked on the built code (nm) rather than the
# includes: a module may call only itself, the modules its arrows reach
# (the closure of USES_M) and system libraries.  A binary links every archive
# of its closure, so a call across a missing arrow can link all the same when
# both ends are in the same binary: this check is what refuses it.
#
# It also refuses an arrow that nothing uses: M may use D, but no file of M
# includes D's public header (D/D.h) and no symbol of D is called by M.  An
# unused arrow hides the real graph and lets the next call across it in
# unreviewed.
#
# Input on stdin, one line a module, as the Makefile writes it:
#   MODULE|USES (direct)|CLOSURE of USES|FILES (archives or objects)
# The sources of MODULE are the files under MODULE/.  Each violation is one
# line `symbols: ...`; the exit status is 1 if any.  Run from the top of the
# tree.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mods=()
while IFS='|' read -r mod uses closure files; do
	[ -n "$mod" ] || continue
	mods+=("$mod")
	echo "$uses" >"$tmp/uses.$mod"
	echo "$closure" >"$tmp/closure.$mod"
	# shellcheck disable=SC2086 # FILES is a list
	nm -g --defined-only $files 2>/dev/null |
		awk -v m="$mod" 'NF == 3 { print $3, m }' >>"$tmp/defs"
	# nm -A: "ARCHIVE:MEMBER: U SYM" (or "OBJECT: U SYM"): the member names the caller
	# shellcheck disable=SC2086
	nm -A -g --undefined-only $files 2>/dev/null |
		awk 'NF >= 3 && $(NF-1) == "U" { f = $1; sub(/:$/, "", f); print $NF, f }' >"$tmp/undef.$mod" || {
		echo "symbols: nm failed on $files" >&2
		exit 1
	}
done
sort -u -o "$tmp/defs" "$tmp/defs"

bad=0
for mod in "${mods[@]}"; do
	read -r -a closure <"$tmp/closure.$mod"
	read -r -a uses <"$tmp/uses.$mod"
	# each undefined symbol of mod, with each module that defines it
	# ("SYM CALLER DEFINER"); a symbol no module defines is a system library's
	sort -k1,1 "$tmp/undef.$mod" | join -j1 - "$tmp/defs" >"$tmp/calls.$mod"
	# a symbol mod defines itself (another member of its archive) is its own
	awk -v m="$mod" '$3 == m { print $1 }' "$tmp/calls.$mod" | sort -u >"$tmp/own.$mod"
	awk -v m="$mod" -v ok=" ${closure[*]} " -v uses="${uses[*]:-nothing}" '
		NR == FNR { own[$1] = 1; next }
		own[$1] { next }
		index(ok, " " $3 " ") { allowed[$1] = 1; next }
		{ bad[$1] = $2; by[$1] = by[$1] ? by[$1] "," $3 : $3 }
		END {
			for (s in bad)
				if (!allowed[s])
					printf "symbols: %s calls %s() of %s/, but %s may not use %s (USES_%s: %s); add the arrow or move the code\n",
						bad[s], s, by[s], m, by[s], m, uses
		}' "$tmp/own.$mod" "$tmp/calls.$mod" >"$tmp/bad.$mod"
	if [ -s "$tmp/bad.$mod" ]; then
		sort "$tmp/bad.$mod" >&2
		bad=1
	fi
	for dep in "${uses[@]}"; do
		awk -v d="$dep" '$3 == d { found = 1 } END { exit !found }' "$tmp/calls.$mod" && continue
		grep -rqE --include='*.[ch]' "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$dep/$dep\.h[\">]" "$mod" && continue
		echo "symbols: $mod may use $dep (USES_$mod), but no file of $mod/ includes $dep/$dep.h or calls $dep; drop the arrow" >&2
		bad=1
	done
done
exit $bad
