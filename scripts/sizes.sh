#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# sizes.sh FILE... - refuse a product file over 800 lines or a function over 100.
#
# A newcomer reads a function whole and a file in one sitting; past these
# sizes a file holds two jobs and a function several steps, and each is
# split along what its parts do (issue 35).  A state machine or a table
# may stay one function when a comment just above it says so with the
# words "past 100 lines on purpose" and why.  A function is counted the
# kernel style's way: from the line of its name to its closing brace in
# column 0.  Each violation is one line `FILE:LINE: ...`; exit 1 if any.
set -u
FILE_MAX=${FILE_MAX:-800}
FUNC_MAX=${FUNC_MAX:-100}

bad=0
for f in "$@"; do
	awk -v file_max="$FILE_MAX" -v func_max="$FUNC_MAX" '
	# remember the last lines: the signature and the comment above it
	{ hist[NR] = $0 }
	$0 == "{" && NR > 1 {
		sig = NR - 1
		while (sig > 1 && hist[sig] !~ /\(/)
			sig--
		name = hist[sig]
		sub(/\(.*/, "", name)
		n = split(name, w, /[ *]+/)
		name = w[n]
		start = sig
		in_func = 1
		next
	}
	in_func && $0 == "}" {
		in_func = 0
		len = NR - start + 1
		if (len <= func_max)
			next
		ok = 0
		for (k = start - 1; k > 0 && k >= start - 12; k--)
			if (hist[k] ~ /past 100 lines on purpose/)
				ok = 1
		if (!ok) {
			printf "%s:%d: latch: %s is %d lines (at most %d); split it by what its parts do, or say above it why it is a state machine or a table (\"past 100 lines on purpose\")\n", FILENAME, start, name, len, func_max
			bad = 1
		}
	}
	END {
		if (NR > file_max) {
			printf "%s:%d: latch: %d lines (at most %d); split the file along a seam that names a job\n", FILENAME, NR, NR, file_max
			bad = 1
		}
		exit bad
	}' "$f" || bad=1
done
exit $bad
