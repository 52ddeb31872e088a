#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_setup.sh - a kit's setup installers, fetched and verified on the host
# (kit/setup.c) from a fake npm registry over real TLS: a namespace of its
# own, a test CA, python's http.server on a documentation address.
#
# Invariant: no installer is used whose bytes are not the kit's sha512 pin.
# Each attack stands beside its control: a good tarball is fetched, cached
# 0600 under a 0700 directory and found there the second time (the registry
# is not asked again); a tarball whose bytes differ from the pin is refused
# in one line naming the package and both hashes, and nothing is cached; a
# tampered cache file is refused and removed, and the next fetch is clean; a
# sha1-only pin is refused before the registry is asked; a registry whose
# certificate does not verify is refused, and so is a redirect to plain http
# (which serves the very bytes); `kit pin` writes the registry's
# sha512, and refuses a version the registry gives only sha1 for.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"

command -v openssl >/dev/null || lts_skip_all "needs openssl"
lts_init
. "$LTS_DIR/lib_broker.sh"

ROOT=$LTS_TMP/root
KITS=$ROOT/etc/latch/kits
CACHE=$ROOT/var/lib/latch/cache/npm
REG=$LTS_TMP/registry
LOG=$LTS_TMP/registry.log
mkdir -p "$KITS" "$REG" "$LTS_TMP/pki" "$ROOT/etc/latch"
: >"$LOG"

# lt ARGS...: latch in the registry's namespace, in the test's root
lt() { LATCH_ROOT=$ROOT nsenter --net="/run/netns/$LTS_I" -- "$LATCH_BIN" "$@"; }

# run NAME WANT_RC ARGS...: `lt ARGS`, exit WANT_RC; $OUT and $ERR hold its streams
run() {
	local name=$1 want=$2 rc
	shift 2
	lt "$@" >"$LTS_TMP/out" 2>"$LTS_TMP/err"
	rc=$?
	OUT=$(cat "$LTS_TMP/out")
	ERR=$(cat "$LTS_TMP/err")
	if [ "$rc" = "$want" ]; then ok "$name (exit $rc)"; else fail "$name" "exit $rc, want $want: $ERR"; fi
}

# pkg NAME VERSION TEXT: REG/NAME/-/NAME-VERSION.tgz, an npm tarball whose bin prints TEXT; its integrity on stdout
pkg() {
	local d=$LTS_TMP/pkg-$1-$2
	mkdir -p "$d/package/bin" "$REG/$1/-"
	printf '{"name": "%s", "version": "%s", "bin": {"%s": "bin/run.sh"}}\n' "$1" "$2" "$1" >"$d/package/package.json"
	printf '#!/bin/sh\necho %s\n' "$3" >"$d/package/bin/run.sh"
	tar -C "$d" -czf "$REG/$1/-/$1-$2.tgz" package
	integrity_of "$REG/$1/-/$1-$2.tgz"
}
integrity_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

# kit FILE PKG VERSION INTEGRITY: a kit installing that one package
kit() {
	printf 'name: %s\ncommand: [%s]\nsetup:\n  - npm: %s\n    version: "%s"\n    integrity: "%s"\n' \
		"$(basename "$1" .yaml)" "$2" "$2" "$3" "$4" >"$1"
	chmod 0644 "$1"
}

lts_ns_add "$LTS_I" || { fail setup "no namespace"; lts_done; }
ip -n "$LTS_I" addr add "$SRV_A/32" dev lo
broker_test_pki "$LTS_TMP/pki" "IP:$SRV_A" || { fail setup "no test CA"; lts_done; }
printf 'npm_registry = https://%s/\nnpm_ca_file = %s\n' "$SRV_A" "$LTS_TMP/pki/ca.pem" >"$ROOT/etc/latch/latch.conf"
chmod 0644 "$ROOT/etc/latch/latch.conf"

GOOD=$(pkg good-agent 1.0.0 good)
# the bad tarball is served where the pin's package should be, with the pin of other bytes
BAD_PIN=$(pkg bad-agent 1.0.0 honest)
pkg bad-agent 1.0.0 swapped-by-the-registry >/dev/null
BAD_GOT=$(integrity_of "$REG/bad-agent/-/bad-agent-1.0.0.tgz")
kit "$KITS/good.yaml" good-agent 1.0.0 "$GOOD"
kit "$KITS/bad.yaml" bad-agent 1.0.0 "$BAD_PIN"
kit "$KITS/weak.yaml" good-agent 1.0.0 "sha1-$(openssl dgst -sha1 -binary "$REG/good-agent/-/good-agent-1.0.0.tgz" | base64 -w0)"

lts_bg "$LTS_I" "$LTS_TMP/reg.out" "$LTS_PY" "$LTS_DIR/npm_registry.py" --addr "$SRV_A" --root "$REG" \
	--cert "$LTS_TMP/pki/srv.pem" --key "$LTS_TMP/pki/srv.key" --log "$LOG" --lifetime "${LTS_LIMIT:-120}"
lts_wait_ready "$LTS_TMP/reg.out" || { fail setup "the fake registry did not start"; lts_done; }
# the same files over plain http, for the redirect test: a client that followed it would get good bytes
lts_bg "$LTS_I" "$LTS_TMP/reg80.out" "$LTS_PY" "$LTS_DIR/npm_registry.py" --addr "$SRV_A" --port 80 --plain \
	--root "$REG" --log "$LOG" --lifetime "${LTS_LIMIT:-120}"
lts_wait_ready "$LTS_TMP/reg80.out" || { fail setup "the plain registry did not start"; lts_done; }

gets() { grep -c "^/$1/-/" "$LOG"; }
cached() { find "$CACHE" -type f 2>/dev/null | wc -l; }

# ---- a good tarball: fetched, verified, cached 0600; the second time from the cache
run "a good tarball is fetched and verified" 0 kit fetch good
check "it says it fetched and verified it" grep -q "good-agent@1.0.0 verified: sha512 matches the kit's pin (fetched" "$LTS_TMP/err"
check_eq "the registry was asked once" "$(gets good-agent)" 1
HEX=$(openssl dgst -sha512 -hex "$REG/good-agent/-/good-agent-1.0.0.tgz" | awk '{print $NF}')
check_eq "cached under its hash, root's 0600" "$(stat -c '%U %a' "$CACHE/$HEX.tgz" 2>&1)" "root 600"
check_eq "the cache directory is root's 0700" "$(stat -c '%U %a' "$CACHE")" "root 700"
check_eq "the cached bytes are the registry's" "$(cmp "$CACHE/$HEX.tgz" "$REG/good-agent/-/good-agent-1.0.0.tgz" && echo same)" same
run "the second fetch" 0 --json kit fetch good
check_eq "comes from the cache" "$(jq -r '.setup[0].cached' <<<"$OUT")" true
check_eq "and reads the bin from package.json" "$(jq -r '.setup[0].bin[0] | "\(.name)=\(.path)"' <<<"$OUT")" \
	"good-agent=bin/run.sh"
check_eq "the registry was not asked again" "$(gets good-agent)" 1

# ---- a tarball that is not the pin's bytes: refused, one line, nothing kept
run "a tarball whose bytes differ from the pin is refused" 1 kit fetch bad
check_eq "in one line" "$(wc -l <"$LTS_TMP/err")" 1
check "naming the package, the expected and the got hash" grep -qF \
	"setup bad-agent@1.0.0: the tarball from https://$SRV_A does not match its pin (expected $BAD_PIN, got $BAD_GOT)" \
	"$LTS_TMP/err"
check_eq "the registry was asked" "$(gets bad-agent)" 1
check_eq "nothing of it was cached (the good one only)" "$(cached)" 1
check_eq "no partial file is left in the cache" "$(find "$CACHE" -mindepth 1 ! -name "$HEX.tgz" | wc -l)" 0

# ---- a tampered cache file: refused and removed; the next fetch is clean
printf 'x' >>"$CACHE/$HEX.tgz"
run "a tampered cache file is refused" 1 kit fetch good
check "it says the cache does not match" grep -qF "the cached tarball $CACHE/$HEX.tgz does not match its pin (expected $GOOD, got sha512-" "$LTS_TMP/err"
check "and is removed" lts_not test -e "$CACHE/$HEX.tgz"
check_eq "the registry was not asked for it" "$(gets good-agent)" 1
run "control: the next fetch takes it from the registry again" 0 kit fetch good
check_eq "the registry was asked the second time" "$(gets good-agent)" 2
check "and cached it again" test -f "$CACHE/$HEX.tgz"

# ---- a sha1-only pin: refused at load, before any request
run "a sha1-only pin is refused" 2 kit fetch weak
check "as unverifiable, naming the fix" grep -qF \
	"setup \"good-agent\": unverifiable: integrity is sha1, which an attacker can match; give the registry's sha512 (npm view good-agent@1.0.0 dist.integrity)" \
	"$LTS_TMP/err"
check_eq "the registry was not asked" "$(gets good-agent)" 2
run "kits names it invalid as well" 1 kits
check "kits' line" grep -qE "^weak +- .*INVALID" "$LTS_TMP/out"

# ---- TLS is verified: without the test CA the registry is not trusted
rm -f "$CACHE/$HEX.tgz"
printf 'npm_registry = https://%s/\n' "$SRV_A" >"$ROOT/etc/latch/latch.conf"
run "a registry whose certificate does not verify is refused" 1 kit fetch good
check "it says the fetch failed" grep -qF "setup good-agent@1.0.0: fetching https://$SRV_A/good-agent/-/good-agent-1.0.0.tgz failed" "$LTS_TMP/err"
check_eq "nothing was cached" "$(cached)" 0
printf 'npm_registry = https://%s/\nnpm_ca_file = %s\n' "$SRV_A" "$LTS_TMP/pki/ca.pem" >"$ROOT/etc/latch/latch.conf"
run "control: with its CA it is fetched" 0 kit fetch good

# ---- a redirect is followed over https only: to plain http it is refused, to https it is followed
rm -f "$CACHE/$HEX.tgz"
mv "$REG/good-agent/-/good-agent-1.0.0.tgz" "$REG/good-agent/-/moved.tgz"
echo "http://$SRV_A/good-agent/-/moved.tgz" >"$REG/good-agent/-/good-agent-1.0.0.tgz.redirect"
run "a redirect to plain http is refused" 1 kit fetch good
check "it says the fetch failed" grep -qF "setup good-agent@1.0.0: fetching https://$SRV_A/good-agent/-/good-agent-1.0.0.tgz failed" "$LTS_TMP/err"
check_eq "nothing was cached" "$(cached)" 0
check_eq "and the plain http server was never asked" "$(grep -c moved.tgz "$LOG")" 0
echo "https://$SRV_A/good-agent/-/moved.tgz" >"$REG/good-agent/-/good-agent-1.0.0.tgz.redirect"
run "control: a redirect to https is followed, and verified" 0 kit fetch good
check "it was fetched from where it moved" grep -qx "/good-agent/-/moved.tgz" "$LOG"
rm "$REG/good-agent/-/good-agent-1.0.0.tgz.redirect"
mv "$REG/good-agent/-/moved.tgz" "$REG/good-agent/-/good-agent-1.0.0.tgz"

# ---- kit pin: the registry's sha512 for a newer version, written into the kit file
NEW=$(pkg good-agent 1.1.0 newer)
printf '{"name": "good-agent", "version": "1.1.0", "dist": {"integrity": "%s", "shasum": "x"}}\n' "$NEW" \
	>"$REG/good-agent/1.1.0"
printf '{"name": "good-agent", "version": "0.9.0", "dist": {"shasum": "x", "integrity": "sha1-%s"}}\n' \
	"$(printf x | openssl dgst -sha1 -binary | base64 -w0)" >"$REG/good-agent/0.9.0"
cp "$KITS/good.yaml" "$LTS_TMP/good.before"
run "a version the registry has only sha1 for is not pinned" 2 kit pin good good-agent@0.9.0
check "as unverifiable" grep -qF "good-agent@0.9.0: unverifiable: the registry gives no sha512 integrity" "$LTS_TMP/err"
check "the kit file is unchanged" cmp -s "$KITS/good.yaml" "$LTS_TMP/good.before"
run "a range is not pinned" 2 kit pin good good-agent@^1.1.0
run "a version the registry does not have is not pinned" 1 kit pin good good-agent@7.7.7
check "saying the registry's answer" grep -qF "good-agent@7.7.7: fetching https://$SRV_A/good-agent/7.7.7 failed" "$LTS_TMP/err"
run "a package the kit does not install is not pinned" 2 kit pin good other-agent@1.0.0
check "the kit file is still unchanged" cmp -s "$KITS/good.yaml" "$LTS_TMP/good.before"
run "kit pin good good-agent@1.1.0" 0 kit pin good good-agent@1.1.0
check "the file holds the new version" grep -qx '    version: "1.1.0"' "$KITS/good.yaml"
check "and the registry's sha512" grep -qxF "    integrity: \"$NEW\"" "$KITS/good.yaml"
check_eq "the file is root's 0644" "$(stat -c '%U %a' "$KITS/good.yaml")" "root 644"
run "the pinned kit fetches and verifies 1.1.0" 0 --json kit fetch good
check_eq "version 1.1.0 was fetched" "$(jq -r '.setup[0] | "\(.version) \(.cached)"' <<<"$OUT")" "1.1.0 false"

lts_done
