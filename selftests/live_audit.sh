#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_audit.sh - the audit chain's head is anchored outside the database, in
# the systemd journal, and `latch audit verify` holds the log against it:
#   - a cut tail is named ("the log ends at entry 80, but the journal
#     anchored entry 100 at ..."), even when the file anchor was cut too;
#   - a suffix rewritten with fresh hashes, up to an anchored entry, is named;
#   - a log deleted whole is named;
#   - only anchors that journald stamped with root's _UID count: a user who
#     is not root can't plant one (and root's own plant is believed, which is
#     the control that the match matters);
#   - controls: the untouched log verifies, and says which anchor it matched;
#   - a prune keeps it verifying with the journal's anchors of pruned entries,
#     and a forged cut or a rewrite after the prune is still named;
#   - the tail: latchd anchors any append within about a second, so a root
#     who SIGKILLs it and cuts the newest rows is named even when they came
#     after the last anchor it made at once (control: uncut, it verifies).
# What it can't catch (INVARIANTS): a rewrite after the newest anchor (the
# last second's appends), and root deleting the journal's files.
#
# The journal is a journald of this test's own: the whole script runs in a
# mount namespace of its own (unshare -m), with tmpfs over /run/systemd,
# /run/log and /var/log/journal, and journald (volatile storage, no kernel
# messages) started there.  Nothing reaches the host's journal, if it has
# one; everything goes when the namespace does.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"

JOURNALD=${JOURNALD:-/lib/systemd/systemd-journald}
DRV=${AUDIT_DRV:-$LTS_TOP/build/selftests/audit_drv}
LATCHD=${LATCHD_BIN:-$LTS_TOP/build/latchd}
[ "$(id -u)" = 0 ] || lts_skip_all "needs root"
[ -x "$JOURNALD" ] || lts_skip_all "needs systemd-journald ($JOURNALD)"
for t in journalctl unshare sqlite3 setpriv logger jq "$LTS_PY"; do
	command -v "$t" >/dev/null || lts_skip_all "needs $t"
done
[ -x "$DRV" ] || lts_skip_all "no $DRV; run make selftest-bins"
[ -x "$LATCH_BIN" ] || lts_skip_all "no $LATCH_BIN; run make"
[ -x "$LATCHD" ] || lts_skip_all "no $LATCHD; run make"

if [ -z "${LTS_AUDIT_MNTNS:-}" ]; then
	exec unshare -m --propagation private env LTS_AUDIT_MNTNS=1 bash "$0" "$@"
fi

JPID=
DPID=
cleanup() {
	trap - EXIT INT TERM HUP
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	[ -n "$JPID" ] && kill -TERM "$JPID" 2>/dev/null && wait "$JPID" 2>/dev/null
	[ -n "$LTS_TMP" ] && rm -rf "$LTS_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
LTS_TMP=$(mktemp -d /tmp/latch-selftest.XXXXXX)
ROOT=$LTS_TMP/root
DB=$ROOT/var/lib/latch/audit.db
MSGID=6c617463686175646974616e63686f72 # AUDIT_ANCHOR_MESSAGE_ID

# ------------------------------------------------------------ a journald of our own
for d in /run/systemd /run/log /var/log/journal; do
	mkdir -p "$d" && mount -t tmpfs -o mode=0755 tmpfs "$d" || { fail setup "cannot mount a tmpfs on $d"; lts_done; }
done
mkdir -p /run/systemd/journal /run/systemd/journald.conf.d
printf '[Journal]\nStorage=volatile\nReadKMsg=no\nForwardToSyslog=no\nForwardToWall=no\nAudit=no\n' \
	>/run/systemd/journald.conf.d/latch-selftest.conf
"$JOURNALD" >"$LTS_TMP/journald.out" 2>&1 &
JPID=$!
wait_until -t 5 test -S /run/systemd/journal/socket || { fail setup "journald did not start: $(cat "$LTS_TMP/journald.out")"; lts_done; }

verify() { LATCH_ROOT=$ROOT "$LATCH_BIN" audit verify 2>&1; }
# anchored N [DB]: journald has written an anchor of entry N for this log
anchored() {
	journalctl -q -o export MESSAGE_ID=$MSGID "LATCH_AUDIT_DB=${2:-$DB}" _UID=0 2>/dev/null |
		grep -qx "LATCH_AUDIT_ENTRY=$1"
}
# anchors_seen N [DB]: wait (5 s at most) until journald has written an anchor of entry N for this log
anchors_seen() { wait_until -t 5 anchored "$@"; }
# rehash FROM: rewrite entries FROM.. (but a prune entry) with decision 'deny' and recompute every hash after
# them, as root who knows the scheme (docs/audit.md) could
rehash() {
	"$LTS_PY" - "$DB" "$1" <<'EOF'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT id, time_ns, sandbox, kind, decision, reason, fields, prev_hash FROM entries "
                  "WHERE id >= ? ORDER BY id", (int(sys.argv[2]),)).fetchall()
prev = rows[0][7]
for r in rows:
    decision = r[4] if r[3] == "audit" else "deny"  # a prune entry stays one: the attacker keeps the cut
    cols = [str(r[0]), str(r[1]), r[2], r[3], decision, r[5], r[6], prev]
    h = hashlib.sha256(b"latch-audit-v1;" + b"".join(b"%d:%s;" % (len(c.encode()), c.encode()) for c in cols)).hexdigest()
    db.execute("UPDATE entries SET decision = ?, prev_hash = ?, hash = ? WHERE id = ?", (decision, prev, h, r[0]))
    prev = h
db.commit()
EOF
}

# ------------------------------------------------------------ anchors are written, and the log verifies
check_eq "100 entries appended through the audit module" "$("$DRV" "$DB" 100)" "appended 1..100"
check "journald holds an anchor of entry 100 (written at close), stamped _UID=0" anchors_seen 100
check "... and of entry 1 (the first append after a quiet period, at once)" anchors_seen 1
out=$(verify)
check "control: the untouched log verifies ($out)" grep -q "chain whole, 100 entries" <<<"$out"
check "... against an anchor of entry 100" grep -q "anchored: entry 100 at " <<<"$out"

# ------------------------------------------------------------ a cut tail
# Invariant: deleting the newest entries is named, even when the file anchor beside the log is deleted too.
cp "$DB" "$LTS_TMP/db.saved"
cp "$DB.anchor" "$LTS_TMP/anchor.saved"
sqlite3 "$DB" "DELETE FROM entries WHERE id > 80"
rm -f "$DB.anchor"
out=$(verify)
rc=$?
check_eq "a cut tail fails verify" "$rc" 1
check "and is named from the journal: $out" \
	grep -q "broken at entry 81: the log ends at entry 80, but the journal anchored entry 100 at " <<<"$out"
cp "$LTS_TMP/db.saved" "$DB"
cp "$LTS_TMP/anchor.saved" "$DB.anchor"
check "control: the log put back verifies" grep -q "chain whole, 100 entries" <<<"$(verify)"

# ------------------------------------------------------------ a rewritten suffix
# Invariant: a suffix rewritten with fresh hashes is named when an anchor is newer than its start.
rehash 90
rm -f "$DB.anchor"
out=$(verify)
check "a suffix rewritten with fresh hashes (90..100) is named: $out" \
	grep -q "broken at entry 100: entry 100 is not the entry the journal anchored at " <<<"$out"
check "control: the rewritten chain is whole by itself (its own hashes all match)" \
	test "$(sqlite3 "$DB" "SELECT count(*) FROM entries WHERE decision = 'deny'")" = 11
cp "$LTS_TMP/db.saved" "$DB"
cp "$LTS_TMP/anchor.saved" "$DB.anchor"

# ------------------------------------------------------------ forged anchors
# Invariant: only anchors journald stamped with root's _UID count.
forge() { printf 'MESSAGE_ID=%s\nMESSAGE=forged\nLATCH_AUDIT_DB=%s\nLATCH_AUDIT_ENTRY=%s\nLATCH_AUDIT_HASH=%s\n' \
	"$MSGID" "$DB" "$1" "$(printf '0%.0s' $(seq 64))"; }
forge 5000 | setpriv --reuid 65534 --regid 65534 --clear-groups logger --journald
forged_in_journal() { journalctl -q MESSAGE_ID=$MSGID LATCH_AUDIT_ENTRY=5000 2>/dev/null | grep -q forged; }
wait_until -t 3 forged_in_journal
check "the forged anchor is in the journal, from uid 65534" \
	test "$(journalctl -q -o export MESSAGE_ID=$MSGID LATCH_AUDIT_ENTRY=5000 | grep -c '^_UID=65534$')" = 1
check "an anchor planted by a user who is not root changes nothing" grep -q "chain whole, 100 entries" <<<"$(verify)"

# ------------------------------------------------------------ a deleted log
mv "$DB" "$LTS_TMP/db.moved"
rm -f "$DB-wal" "$DB-shm"
out=$(verify)
check "a log deleted whole is named: $out" grep -q "the log is empty or gone, but the journal anchored entry 100" <<<"$out"
mv "$LTS_TMP/db.moved" "$DB"

# ------------------------------------------------------------ later anchors
# 10 more entries: a new writer anchors its first append (101) and its close (110); a rewrite of
# 101..110 is named at the first anchored entry it changed.
check_eq "10 more entries" "$("$DRV" "$DB" 10)" "appended 101..110"
check "journald holds an anchor of entry 110" anchors_seen 110
cp "$DB" "$LTS_TMP/db110.saved"
cp "$DB.anchor" "$LTS_TMP/anchor110.saved"
rehash 101
out=$(verify)
check "a rewrite of 101..110 is named at 101: $out" grep -q "broken at entry 101: entry 101 is not the entry" <<<"$out"
cp "$LTS_TMP/db110.saved" "$DB"
cp "$LTS_TMP/anchor110.saved" "$DB.anchor"

# ------------------------------------------------------------ a prune, with the journal's anchors below the cut
# Invariant: a prune keeps verify green although the journal holds anchors of entries it removed
# (1, 100, 101, 110); the anchor of the last entry removed still binds the cut's hash, and the
# prune entry is anchored at once, so a forged cut or a rewrite after the prune is still named.
t110=$(sqlite3 "$DB" "SELECT time_ns FROM entries WHERE id = 110")
cut_s=$((t110 / 1000000000 + 1))
# the cut is a whole second: wait for the clock to pass it (the test's point, not a guess)
past_cut() { [ "$(date +%s)" -ge "$cut_s" ]; }
wait_until -t 3 -i 0.2 past_cut
check_eq "5 entries after the second of entry 110" "$("$DRV" "$DB" 5)" "appended 111..115"
out=$(LATCH_ROOT=$ROOT "$LATCH_BIN" --json audit prune --before "@$cut_s" 2>&1)
check_eq "audit prune --before the second after entry 110 removes 1..110 ($out)" \
	"$(jq -c '[.pruned, .first_id, .prune_id]' <<<"$out")" "[110,111,116]"
check "the prune entry (116) is anchored in the journal at once" anchors_seen 116
out=$(verify)
check "control: the pruned log verifies against the journal's anchors, older ones included ($out)" \
	grep -q "chain whole, 6 entries (from the cut of the last prune)" <<<"$out"
check "... and names the prune entry's anchor" grep -q "anchored: entry 116 at .*journal" <<<"$out"
cp "$DB" "$LTS_TMP/db.pruned"
cp "$DB.anchor" "$LTS_TMP/anchor.pruned"
# the attack: a cut whose hash was changed, in the cuts row and in the prune entry, with every hash
# after it recomputed, so that the chain is whole by itself
"$LTS_PY" - "$DB" <<'EOF'
import hashlib, json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
forged = "f" * 64
db.execute("UPDATE cuts SET anchor = ?", (forged,))
prev = forged
for r in db.execute("SELECT id, time_ns, sandbox, kind, decision, reason, fields FROM entries ORDER BY id").fetchall():
    fields = r[6]
    if r[3] == "audit" and r[4] == "prune":
        f = json.loads(fields)
        f["anchor"] = forged
        fields = json.dumps(f, separators=(",", ":"), sort_keys=True)
    cols = [str(r[0]), str(r[1]), r[2], r[3], r[4], r[5], fields, prev]
    h = hashlib.sha256(b"latch-audit-v1;" + b"".join(b"%d:%s;" % (len(c.encode()), c.encode()) for c in cols)).hexdigest()
    db.execute("UPDATE entries SET fields = ?, prev_hash = ?, hash = ? WHERE id = ?", (fields, prev, h, r[0]))
    prev = h
db.commit()
EOF
rm -f "$DB.anchor"
out=$(verify)
check "a forged cut is named at the journal's anchor of the last entry pruned: $out" \
	grep -q "broken at entry 110: entry 110 is not the entry the journal anchored at " <<<"$out"
cp "$LTS_TMP/db.pruned" "$DB"
cp "$LTS_TMP/anchor.pruned" "$DB.anchor"
rehash 113
out=$(verify)
check "a rewrite after the prune (113..116) is named at an anchor after the cut: $out" \
	grep -q "broken at entry 115: entry 115 is not the entry the journal anchored at " <<<"$out"
cp "$LTS_TMP/db.pruned" "$DB"
cp "$LTS_TMP/anchor.pruned" "$DB.anchor"
check "control: the pruned log put back verifies" grep -q "chain whole, 6 entries" <<<"$(verify)"

# ------------------------------------------------------------ the tail: latchd killed, its newest rows cut
# Invariant: latchd anchors any append within about a second (AUDIT_ANCHOR_PERIOD_NS, a deferred anchor
# on a timer, at most one a second), so a root who SIGKILLs it a second and a half after its last append
# and cuts the rows it appended after its last anchor made at once is named.  Before, those rows waited for
# the 64th entry or a minute, and the cut went unnoticed.
# latchd runs for real, unconfined, in a network namespace of its own with nothing in it; SIGHUP makes it
# append (a config reload entry each).
DROOT=$LTS_TMP/droot
DDB=$DROOT/var/lib/latch/audit.db
dcount() { sqlite3 "$DDB" "SELECT count(*) FROM entries" 2>/dev/null; }
dcount_is() { [ "$(dcount)" = "$1" ]; }
dverify() { LATCH_ROOT=$DROOT "$LATCH_BIN" audit verify 2>&1; }
mkdir -p "$DROOT"
LATCH_ROOT=$DROOT LATCH_BPFFS=/sys/fs/bpf/latch-selftest-$$ LATCH_CGROUP=latch-selftest-$$ \
	unshare -n "$LATCHD" --unconfined >"$LTS_TMP/latchd.log" 2>&1 &
DPID=$!
if wait_until -t 5 grep -q "listening" "$LTS_TMP/latchd.log" && wait_until -t 5 dcount_is 1; then
	check "latchd's start (entry 1, the first append after a quiet period) is anchored at once" anchors_seen 1 "$DDB"
	for n in 2 3 4; do
		kill -HUP "$DPID"
		wait_until -t 3 dcount_is "$n" || fail "latchd appends entry $n on SIGHUP" "the log holds $(dcount)"
	done
	t4=$(sqlite3 "$DDB" "SELECT time_ns FROM entries WHERE id = 4")
	check "entries 2..4 (SIGHUP reloads, within its anchor period) are anchored too, with latchd still running" \
		anchors_seen 4 "$DDB"
	a4=$(journalctl -q -o export MESSAGE_ID=$MSGID "LATCH_AUDIT_DB=$DDB" LATCH_AUDIT_ENTRY=4 _UID=0 2>/dev/null |
		sed -n 's/^__REALTIME_TIMESTAMP=//p' | head -1)
	lag=$(( ${a4:-0} ? ${a4:-0} * 1000 - ${t4:-0} : 1 << 62 )) # no anchor of entry 4: as late as can be
	check_cmp "... within about a second of entry 4's append ($((lag / 1000000)) ms)" "$lag" -le 1500000000
	# the journal's own times of this log's anchors, in us: no two closer than the period (less jitter)
	gap=$(journalctl -q -o export MESSAGE_ID=$MSGID "LATCH_AUDIT_DB=$DDB" _UID=0 2>/dev/null |
		sed -n 's/^__REALTIME_TIMESTAMP=//p' | sort -n | awk 'NR > 1 && (m == "" || $1 - p < m) { m = $1 - p } { p = $1 } END { print m }')
	check_cmp "the appends were not anchored one by one: at most one anchor a second (closest two ${gap:-?} us apart)" \
		"${gap:-0}" -ge 900000
	kill -KILL "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=
	out=$(dverify)
	check "control: the log latchd left, uncut, verifies against entry 4's anchor ($out)" \
		grep -q "chain whole, 4 entries.*anchored: entry 4 at " <<<"$(tr '\n' ' ' <<<"$out")"
	sqlite3 "$DDB" "DELETE FROM entries WHERE id > 1"
	rm -f "$DDB.anchor"
	out=$(dverify)
	rc=$?
	check_eq "the cut of entries 2..4 after SIGKILL fails verify" "$rc" 1
	check "... and is named from the journal: $out" \
		grep -q "broken at entry 2: the log ends at entry 1, but the journal anchored entry 4 at " <<<"$out"
else
	fail "latchd" "did not start and write its start entry: $(cat "$LTS_TMP/latchd.log")"
fi
[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
DPID=

# control for the match on _UID: root's own plant is believed (so the match above is what stopped the user's)
forge 6000 | logger --journald
anchors_seen 6000 || fail "root's plant" "not seen"
check "control: a plant by root is believed, and names a cut (the match on _UID is what matters)" \
	grep -q "the journal anchored entry 6000" <<<"$(verify)"

lts_done
