#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# man.sh VERSION SRC.md - a man page's Markdown, ready for go-md2man, on stdout.
#
# One source for the docs and the man pages: a page in docs/man/ is either
# all of it (latch.8.md, latch.conf.5.md), or a head that says
# `@include docs/X.md`, which puts that document's body in its place: its
# title line dropped, its `##` sections made the page's sections (outside
# code blocks).  @VERSION@ becomes VERSION.
set -eu
version=$1
src=$2
awk -v version="$version" '
function body(file,    line, fence, first) {
	fence = 0; first = 1
	while ((getline line < file) > 0) {
		if (first && line ~ /^# /) { first = 0; continue }
		first = 0
		if (line ~ /^```/) fence = !fence
		if (!fence && line ~ /^##+ /) sub(/^#/, "", line)
		print line
	}
	close(file)
}
/^@include / { body($2); next }
{ gsub(/@VERSION@/, version); print }
' "$src"
