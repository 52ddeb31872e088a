#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# arrows.sh MODULE FILE... - refuse an #include that crosses a missing arrow.
#
# USES (environment) lists the modules MODULE may use, as the Makefile's
# USES_MODULE says.  A file of MODULE may include its own module's headers,
# the public header DEP/DEP.h of a module in USES, and bpf/latch_abi.h when
# it uses the loader.  libbpf and the BPF skeletons are the loader's alone.
# Each violation is one line `FILE:LINE: ...`; the exit status is 1 if any.
set -u
mod=$1
shift
own=("$mod/")
case $mod in
cli) own=(cli/) ;;
esac
allowed=()
for u in ${USES:-}; do
	allowed+=("$u/$u.h")
	[ "$u" = loader ] && allowed+=(bpf/latch_abi.h)
done
[ "$mod" = loader ] && allowed+=(bpf/latch_abi.h)

bad=0
for f in "$@"; do
	while IFS=: read -r line text; do
		inc=${text#*\"}
		inc=${inc%%\"*}
		ok=0
		for o in "${own[@]}"; do
			[[ $inc == "$o"* ]] && ok=1
		done
		for a in "${allowed[@]}"; do
			[ "$inc" = "$a" ] && ok=1
		done
		# a bare name: a header beside the file, or one the build generates
		# for the loader (skeletons, the build id of the pinned room programs)
		if [[ $inc != */* ]]; then
			if [[ $inc == *.skel.h || $inc == latch_*_id.h ]]; then
				[ "$mod" = loader ] && ok=1
			elif [ -e "$(dirname "$f")/$inc" ]; then
				ok=1
			fi
		fi
		if [ $ok = 0 ]; then
			echo "arrows: $f:$line: $mod may not include \"$inc\" (it uses: ${USES:-nothing}; see docs/ARCHITECTURE.md)" >&2
			bad=1
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
	if [ "$mod" != loader ] && grep -qn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<bpf/' "$f"; then
		echo "arrows: $f:$(grep -n '#[[:space:]]*include[[:space:]]*<bpf/' "$f" | head -1 | cut -d: -f1): only loader/ talks to libbpf; ask the loader (loader/loader.h)" >&2
		bad=1
	fi
done
exit $bad
