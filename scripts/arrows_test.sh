#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# arrows_test.sh - the arrows checks refuse what they are for (make arrows-test).
#
# Invariant: `make` refuses a tree in which a module includes a module it may
# not use (in either bracket style), includes another module's private
# header, or calls a module it may not use (even when the link would
# succeed), and a map that disagrees with the Makefile's arrows; each refusal
# is one line naming the file.  Each case is a copy of the tree and its
# build in a scratch directory (the working tree is never touched) with one
# change, built with `make`; the control is the unchanged copy, whose checks
# run again from scratch and pass.  Run from the top of the tree after `make`.
set -u
build=${BUILD:-build}
case $build in
/* | *..*)
	echo "arrows-test: BUILD=$build: a directory inside the tree, please" >&2
	exit 1
	;;
esac
scratch=$(mktemp -d /tmp/latch-arrows.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fails=0
n=0

for f in "$build/arrows.ok" "$build/symbols.ok" "$build/map.ok"; do
	[ -e "$f" ] || {
		echo "arrows-test: no $f: run \`make\` first" >&2
		exit 1
	}
done

# a C file of MODULE, the first by name (any will do: the checks read them all)
first_c() { (cd "$1" && ls "$2"/*.c | head -1); }
# FILE as a regular expression
re() { printf "%s" "${1//./\\.}"; }

# copy NAME: the tree (without .git and the build) and the build, with their
# times, so that make rebuilds only what a case changes
copy() {
	local dst=$scratch/$1
	mkdir -p "$dst"
	tar -c --exclude="./$build" --exclude=./.git . | tar -x -C "$dst"
	cp -a "$build" "$dst/$build"
	# the version the build has, so that make does not rewrite version.h
	sed -n 's/^#define LATCH_VERSION "\(.*\)"$/\1/p' "$build/cli/version.h" >"$dst/VERSION"
	echo "$dst"
}

# expect NAME DIR PATTERN: make in DIR refuses the tree with one check line,
# and that line matches PATTERN
expect_refused() {
	local name=$1 dir=$2 pattern=$3 out rc lines
	n=$((n + 1))
	out=$(make -C "$dir" --no-print-directory BUILD="$build" "$build/latch" "$build/latchd" "$build/map.ok" 2>&1)
	rc=$?
	lines=$(grep -E '^(arrows|symbols|map): ' <<<"$out")
	if [ $rc -eq 0 ]; then
		echo "not ok $n - $name: make did not refuse the tree"
		fails=$((fails + 1))
	elif [ -z "$lines" ] || [ "$(wc -l <<<"$lines")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$lines"; then
		echo "not ok $n - $name: expected one line matching /$pattern/, got:"
		sed 's/^/#   /' <<<"$out"
		fails=$((fails + 1))
	else
		echo "ok $n - $name: $lines"
	fi
}

echo "TAP version 13"

# control: the tree as it is, every check run again
dir=$(copy control)
rm -f "$dir/$build/arrows.ok" "$dir/$build/symbols.ok" "$dir/$build/map.ok"
n=$((n + 1))
if out=$(make -C "$dir" --no-print-directory BUILD="$build" "$build/latch" "$build/latchd" "$build/map.ok" 2>&1) &&
	[ -e "$dir/$build/arrows.ok" ] && [ -e "$dir/$build/symbols.ok" ] && [ -e "$dir/$build/map.ok" ]; then
	echo "ok $n - control: the unchanged tree passes the arrows, symbols and map checks"
else
	echo "not ok $n - control: the unchanged tree is refused:"
	sed 's/^/#   /' <<<"$out"
	fails=$((fails + 1))
fi

# (a) vm may not use room: the angle brackets find the tree's room/room.h all the same (-I.)
dir=$(copy angle)
f=$(first_c "$dir" vm)
echo '#include <room/room.h>' >>"$dir/$f"
expect_refused "vm/ includes <room/room.h>" "$dir" "^arrows: $(re "$f"):[0-9]+: vm may not include \"room/room\\.h\""

# (b) cli may use vm, but only through vm/vm.h
dir=$(copy private)
f=$(first_c "$dir" cli)
echo '#include "vm/state.h"' >>"$dir/$f"
expect_refused "cli/ includes vm's private \"vm/state.h\"" "$dir" \
	"^arrows: $(re "$f"):[0-9]+: \"vm/state\\.h\" is private to vm/"

# (b') the same private header in angle brackets
dir=$(copy private_angle)
f=$(first_c "$dir" cli)
echo '#include <vm/state.h>' >>"$dir/$f"
expect_refused "cli/ includes vm's private <vm/state.h>" "$dir" \
	"^arrows: $(re "$f"):[0-9]+: \"vm/state\\.h\" is private to vm/"

# (a') an include of a macro can't be checked
dir=$(copy macro)
f=$(first_c "$dir" vm)
printf '#define ARROWS_HDR "room/room.h"\n#include ARROWS_HDR\n' >>"$dir/$f"
expect_refused "vm/ includes a macro" "$dir" "^arrows: $(re "$f"):[0-9]+: #include of a macro \\(ARROWS_HDR\\)"

# (c) audit may not use kit: a call declared by hand passes the include check
# and compiles; the symbols check refuses it before any binary is linked
dir=$(copy call)
f=$(first_c "$dir" audit)
cat >>"$dir/$f" <<'EOF'
int latch_kit_dir(char *buf, size_t len);
int audit_arrows_probe(char *buf, size_t len);
int audit_arrows_probe(char *buf, size_t len)
{
	return latch_kit_dir(buf, len);
}
EOF
expect_refused "audit/ calls kit's latch_kit_dir()" "$dir" \
	"^symbols: .*libaudit\\.a:$(basename "$f" .c)\\.o calls latch_kit_dir\\(\\) of kit/, but audit may not use kit"

# (d) an arrow nothing uses: vm may use budget, but neither includes nor calls it
dir=$(copy unused)
sed -i 's/^USES_vm := /USES_vm := budget /' "$dir/Makefile"
sed -i 's/^vm       -> /vm       -> budget /; s/^| `vm\/` | /| `vm\/` | budget, /' "$dir/docs/ARCHITECTURE.md"
expect_refused "vm/ may use budget/, unused" "$dir" '^symbols: vm may use budget \(USES_vm\), but no file of vm/'

# (e) the map: README's layout table loses a module's row
dir=$(copy map)
sed -i '/^| `room\/` |/d' "$dir/README.md"
expect_refused "README.md has no row for room/" "$dir" '^map: README\.md: no row `room/`'

echo "1..$n"
if [ $fails -ne 0 ]; then
	echo "# arrows-test: $fails of $n failed" >&2
	exit 1
fi
echo "# arrows-test: $n passed"
