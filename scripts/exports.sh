#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# exports.sh ARCHIVE PREFIX... - refuse a global symbol of a module's archive
# that carries none of its prefixes.
#
# Every module links into the same binaries: an internal helper exported
# bare (expire, parse_text, net_masq_add) is one another archive may define
# too, and the link then takes whichever comes first.  A module's names
# start with latch_ (its public header) or its own prefix (the internal
# header shared between its files); a helper used in one file is static.
# A PREFIX ending in '$' is one whole name allowed as it is.  Each
# violation is one line; the exit status is 1 if any.
set -u
ar=$1
shift
re="^($(printf '%s|' "$@" | sed 's/|$//'))"
bad=$(nm -g --defined-only "$ar" | awk 'NF == 3 { print $3 }' | sort -u | grep -Ev "$re")
[ -z "$bad" ] && exit 0
for s in $bad; do
	echo "$ar: latch: $s is exported without the module's prefix ($*); make it static, or prefix it and declare it in the module's internal header"
done
exit 1
