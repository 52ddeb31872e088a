#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# map.sh ARCHITECTURE README - the map agrees with the territory.
#
# stdin is `make arrows`: one line "MODULE -> USES..." a module, from the
# Makefile's MODULES and USES_* lines, the same table the arrows checks
# enforce.  A newcomer finds the room for a change from the map alone, so:
#   - the graph block of ARCHITECTURE's "## The module graph" is that output;
#   - its table has a row `MODULE/` for every module, whose "may use" cell
#     names the same modules, and no row names a folder that is missing;
#   - README's "## Layout" table has a row for every module, and no row
#     names a missing folder;
#   - every module another module uses has its public header MODULE/MODULE.h,
#     and the header opens (after its SPDX line) with a comment that says
#     what the module owns.
# Each disagreement is one line `map: FILE:LINE: ...`; the exit status is 1
# if any.  Run from the top of the tree.
set -u
arch=$1
readme=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/arrows"

bad=0
refuse() {
	echo "map: $1: $2" >&2
	bad=1
}

# the fenced block after the heading, with the line number of its fence
awk '/^## The module graph/ { s = 1; next }
     s == 1 && /^```/ { print NR > "/dev/stderr"; s = 2; next }
     s == 2 && /^```/ { exit }
     s == 2 { print }' "$arch" >"$tmp/graph" 2>"$tmp/graph.line"
gline=$(head -1 "$tmp/graph.line")
if [ -z "$gline" ]; then
	refuse "$arch" "no \`\`\` block under \"## The module graph\"; paste \`make arrows\` there"
elif ! diff -q "$tmp/arrows" "$tmp/graph" >/dev/null; then
	refuse "$arch:$gline" "the module graph differs from the Makefile's arrows; paste \`make arrows\` there"
	diff -u --label "make arrows" --label "$arch" "$tmp/arrows" "$tmp/graph" | tail -n +3 | sed 's/^/map:   /' >&2
fi

# "| `DIR/` | cell | ..." -> "LINE DIR cell" for each row of the first table
# under HEADING (cell: the second column, backticks dropped)
rows() {
	awk -v h="$2" -F'|' '
		$0 ~ "^## " { s = ($0 == h) }
		s && /^\| *`[^`]*\/` *\|/ {
			d = $2; gsub(/[ `]/, "", d); sub(/\/$/, "", d)
			c = $3; gsub(/`/, "", c); gsub(/^ +| +$/, "", c)
			print NR, d, c
		}' "$1"
}
# "vm, room, common" or "nothing" -> "vm room common"
words() {
	local s=$* w out=()
	s=${s//,/ }
	for w in $s; do
		[ "$w" = nothing ] || out+=("$w")
	done
	echo "${out[*]}"
}

rows "$arch" "## The module graph" >"$tmp/arch.rows"
rows "$readme" "## Layout" >"$tmp/readme.rows"
declare -A arch_line arch_cell readme_line
while read -r line dir cell; do
	[ -d "$dir" ] || refuse "$arch:$line" "the row for $dir/ names a folder that does not exist"
	arch_line[$dir]=$line
	arch_cell[$dir]=$cell
done <"$tmp/arch.rows"
while read -r line dir _; do
	[ -d "$dir" ] || refuse "$readme:$line" "the row for $dir/ names a folder that does not exist"
	readme_line[$dir]=$line
done <"$tmp/readme.rows"

used=" "
while read -r mod _ uses; do
	[ "$uses" = nothing ] && uses=
	used+="$uses "
	if [ -n "${arch_line[$mod]:-}" ]; then
		[ "$(words "${arch_cell[$mod]}")" = "$(words "$uses")" ] ||
			refuse "$arch:${arch_line[$mod]}" "$mod/ may use \"${arch_cell[$mod]}\" in the table, but \"${uses:-nothing}\" in the Makefile (USES_$mod)"
	else
		refuse "$arch" "no row \`$mod/\` in the module table; add one that says what it owns"
	fi
	[ -n "${readme_line[$mod]:-}" ] ||
		refuse "$readme" "no row \`$mod/\` in the table under \"## Layout\"; add one"
done <"$tmp/arrows"

while read -r mod _; do
	[[ $used == *" $mod "* ]] || continue
	h=$mod/$mod.h
	if ! [ -f "$h" ]; then
		refuse "$h" "$mod/ is used by other modules but has no public header $h"
		continue
	fi
	# line 1 the SPDX line, then a comment "/*\n * NAME.h - what it owns" of a few words
	{
		read -r _
		read -r l2
		read -r l3
	} <"$h"
	[[ "$l2 $l3" =~ ^/\*[\ *]+$mod\.h\ -\ ([^ ]+\ ){2,} ]] ||
		refuse "$h:2" "the public header must open with \"/* $mod.h - what $mod/ owns\" after its SPDX line"
done <"$tmp/arrows"
exit $bad
