#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# arrows.sh - refuse an #include that crosses a missing arrow.
#
# stdin, one line a module, as the Makefile writes it:
#   MODULE|USES (the modules it may use, USES_MODULE)|FILES (its .c and .h)
# A file of MODULE may include its own module's headers, the public header
# DEP/DEP.h of a module in USES, and bpf/latch_abi.h when it is or uses the
# loader.  libbpf and the BPF skeletons are the loader's alone, and so is
# bpf/latch_tls.h (the names map's hash is the tc program's own code).
#
# Both bracket styles are read: the build passes -I., so <room/room_int.h>
# finds the tree's file as surely as "room/room_int.h" does.  An include
# whose first directory is a module (or bpf/, or any other directory of the
# tree) is a tree include; any other <X/...> or <X.h> is a system header.
# An #include of a macro is refused: its header can't be checked.
# Each violation is one line `arrows: FILE:LINE: ...`; the exit status is 1
# if any.  Run from the top of the tree; BUILD names the build directory.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

table=
files=()
while IFS='|' read -r mod uses list; do
	[ -n "$mod" ] || continue
	table+="$mod=$uses;"
	read -r -a more <<<"$list"
	files+=("${more[@]}")
done
[ ${#files[@]} -gt 0 ] || exit 0

# every path of the tree, to tell a tree include from a system header
find . \( -path ./.git -o -path "./${BUILD:-build}" \) -prune -o -print | sed 's|^\./||' >"$tmp/tree"
grep -Hn '^[[:space:]]*#[[:space:]]*include\b' "${files[@]}" >"$tmp/includes"

awk -v table="$table" '
function refuse(where, msg) {
	print "arrows: " where ": " msg > "/dev/stderr"
	bad = 1
}
# a header the build generates for the loader (skeletons, the build id of
# the pinned room programs, the kernel BTF dump)
function loader_generated(inc) {
	return inc ~ /\.skel\.h$/ || inc ~ /^latch_.*_id\.h$/ || inc == "vmlinux.h"
}
function check(f, where, inc, kind,    mod, dir, top, n, deps, i) {
	mod = f; sub(/\/.*/, "", mod)
	if (("/" inc "/") ~ /\/\.\.?\// || inc ~ /^\//) {
		refuse(where, "\"" inc "\": a path through . or .. or from / escapes the arrows check; name the header from the top of the tree")
		return
	}
	# a quoted name is found beside the file first
	dir = f; sub(/\/[^\/]*$/, "", dir)
	if (kind == "quote" && ((dir "/" inc) in tree))
		inc = dir "/" inc
	if (inc !~ /\//) {
		if (loader_generated(inc)) {
			if (mod != "loader")
				refuse(where, "\"" inc "\" is the loader'"'"'s (generated for libbpf); ask the loader (loader/loader.h)")
		} else if (kind == "quote") {
			refuse(where, "\"" inc "\" is not beside the file; name a header from the top of the tree")
		}
		return
	}
	top = inc; sub(/\/.*/, "", top)
	n = split(uses[mod], deps, " ")
	if (top == "bpf" && !(inc in tree)) {
		# not a file of the tree: libbpf
		if (mod != "loader")
			refuse(where, "only loader/ talks to libbpf (<" inc ">); ask the loader (loader/loader.h)")
		return
	}
	if (top == "bpf") {
		if (inc == "bpf/latch_abi.h" && (mod == "loader" || (" " uses[mod] " ") ~ / loader /))
			return
		if (inc == "bpf/latch_tls.h" && mod == "loader")
			return
		refuse(where, mod " may not include \"" inc "\": of bpf/, only latch_abi.h is shared, with the loader and its users")
		return
	}
	if (!(top in uses)) {
		# a directory of the tree that is not a module, or a system header
		if (kind == "quote" || (top in treetop))
			refuse(where, "\"" inc "\" is not a module'"'"'s header (modules: " modules ")")
		return
	}
	if (top == mod)
		return
	for (i = 1; i <= n; i++) {
		if (deps[i] != top)
			continue
		if (inc != top "/" top ".h")
			refuse(where, "\"" inc "\" is private to " top "/; include its public header " top "/" top ".h")
		return
	}
	refuse(where, mod " may not include \"" inc "\" (it uses: " (uses[mod] ~ /^ *$/ ? "nothing" : uses[mod]) "; see docs/ARCHITECTURE.md)")
}
BEGIN {
	n = split(table, rows, ";")
	for (i = 1; i <= n; i++) {
		if (rows[i] == "")
			continue
		m = rows[i]; sub(/=.*/, "", m)
		u = rows[i]; sub(/^[^=]*=/, "", u)
		uses[m] = u
		modules = modules (modules == "" ? "" : " ") m
	}
}
FILENAME == ARGV[1] {
	tree[$0] = 1
	if ($0 ~ /\//) {
		t = $0; sub(/\/.*/, "", t); treetop[t] = 1
	}
	next
}
{
	# FILE:LINE:TEXT
	f = $0; sub(/:.*/, "", f)
	rest = substr($0, length(f) + 2)
	line = rest; sub(/:.*/, "", line)
	text = substr(rest, length(line) + 2)
	sub(/^[ \t]*#[ \t]*include[ \t]*/, "", text)
	where = f ":" line
	c = substr(text, 1, 1)
	if (c == "\"") {
		inc = substr(text, 2); sub(/".*/, "", inc)
		check(f, where, inc, "quote")
	} else if (c == "<") {
		inc = substr(text, 2); sub(/>.*/, "", inc)
		check(f, where, inc, "angle")
	} else {
		name = text; sub(/[ \t].*/, "", name)
		refuse(where, "#include of a macro (" name "); write the header'"'"'s path, so the arrows check can read it")
	}
}
END { exit bad }
' "$tmp/tree" "$tmp/includes"
