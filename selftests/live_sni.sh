#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_sni.sh - names all the way down: a guest that may reach a name reaches
# that name and no other name on the same address.
#
# Invariant (docs/INVARIANTS.md, "A TLS flow to an answered address names an
# answered name"): when the resolver answers an allowed name, the names it
# answered are recorded at each address (port 443), and a TCP flow to that
# address and port passes its first data only if it is a ClientHello naming
# one of them, before that answer's deadline, without ECH.  Attacks, each
# beside its control on the same address: a ClientHello naming a second name
# of the address that the profile does not allow (domain fronting on a CDN
# edge), IPv4 and IPv6; no server name; an ECH offer; plain text; an answer
# whose deadline passed while another name kept the address open.  Real
# clients: curl (TLS 1.2 and 1.3) and openssl s_client against a TLS server
# in I, the allowed name through, the other name refused.
#
# Topology: selftests/lib.sh (G guest, H host with latch and latchd, I the
# fake internet); dnsmasq in I on 203.0.113.53 answers a.w, e.w and
# b.sni.example with SRV_A/SRV6_A and c/d.sni.example with EDGE4/EDGE6;
# a TLS server (Python's ssl) listens on port 443 of them all.  Every name and address
# is a documentation one.
set -u
. "$(dirname "$0")/lib.sh"
LATCHD_BIN=${LATCHD_BIN:-$LTS_TOP/build/latchd}

for t in dnsmasq kdig openssl curl sqlite3; do
	command -v "$t" >/dev/null || lts_skip_all "needs $t"
done
[ -x "$LATCHD_BIN" ] || lts_skip_all "no $LATCHD_BIN; run make"
SRV_TCP_PORTS=(80 7000 8080) # 443 in I is the TLS server's, below
lts_setup

ROOT=$LTS_TMP/root
EDGE4=203.0.113.44 # c.sni.example (allowed) and d.sni.example (not): one TLS server
EDGE6=2001:db8:ff::44
TTL=2 # dnsmasq's TTL; latch.conf clamps learned entries to 1..3 s

in_i ip addr add "$EDGE4/32" dev lo
in_i ip addr add "$EDGE6/128" dev lo nodad
lts_bg "$LTS_I" "$LTS_TMP/dnsmasq.out" dnsmasq --no-daemon --no-resolv --no-hosts --user=root --group=root \
	--listen-address="$SRV_DNS" --bind-interfaces --port=53 --local-ttl="$TTL" \
	--pid-file="$LTS_TMP/dnsmasq.pid" \
	--host-record="a.w.sni.example,$SRV_A,$SRV6_A" --host-record="b.sni.example,$SRV_A,$SRV6_A" \
	--host-record="e.w.sni.example,$SRV_A,$SRV6_A" \
	--host-record="c.sni.example,$EDGE4,$EDGE6" --host-record="d.sni.example,$EDGE4,$EDGE6"
in_h ip route add 203.0.113.0/24 via 198.51.100.254 dev hi0

# a TLS server on port 443 of every address in I (one certificate; the clients here do not verify)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=c.sni.example \
	-keyout "$LTS_TMP/key.pem" -out "$LTS_TMP/cert.pem" >/dev/null 2>&1 ||
	{ fail setup "openssl could not make a test certificate"; lts_done; }
# one thread a connection: a ClientHello the kernel refused must not hold up the next client
cat >"$LTS_TMP/tls_serve.py" <<'EOF'
import socket, ssl, sys, threading, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 443)); s.listen(64); s.settimeout(1)
print("ready", flush=True)

def one(c):
    try:
        c.settimeout(5)
        t = ctx.wrap_socket(c, server_side=True)
        t.recv(4096)
        t.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nlatch-tls-server\n")
        t.close()
    except (OSError, ssl.SSLError):
        c.close()

end = time.time() + float(sys.argv[3])
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    threading.Thread(target=one, args=(c,), daemon=True).start()
EOF
lts_bg "$LTS_I" "$LTS_TMP/tls_serve.out" "$LTS_PY" "$LTS_TMP/tls_serve.py" "$LTS_TMP/cert.pem" "$LTS_TMP/key.pem" 300
lts_wait_ready "$LTS_TMP/tls_serve.out" || { fail setup "the TLS server in I did not start"; lts_done; }

mkdir -p "$ROOT/etc/latch/profiles"
cat >"$ROOT/etc/latch/latch.conf" <<EOF
dns_upstream = $SRV_DNS
dns_ttl_min = 1
dns_ttl_max = 3
EOF
cat >"$ROOT/etc/latch/profiles/sni.txt" <<'EOF'
# two names on each address, one of them allowed.  The wildcard's names are
# learned when the guest asks (a, and e: a second allowed name on a's
# address); c is a host name, which latchd resolves itself.
*.w.sni.example:443
c.sni.example:443
EOF
chmod 0644 "$ROOT"/etc/latch/latch.conf "$ROOT"/etc/latch/profiles/*.txt

# q NAME [TYPE]: the guest asks its resolver; prints the status word and answers
q() {
	in_g kdig @"$HOST4" "$1" "${2:-A}" +retry=0 +timeout=2 +noall +header +answer 2>&1 |
		sed -n 's/.*status: \([A-Z]*\).*/\1/p; /\sIN\s/p' | awk '{print $NF}' | tr '\n' ' '
}
ech_ok() { in_g "$LTS_PY" "$LTS_NET" tcp "$1" 443 --sni "$2" --ech --timeout "$LTS_T"; }
# curl_ok NAME ADDR TLS-VERSION-OPTIONS...: an HTTPS GET of the TLS server's page, by name, at ADDR
curl_ok() {
	local name=$1 addr=$2
	shift 2
	in_g curl -sk --max-time 3 --resolve "$name:443:$addr" "$@" "https://$name/" 2>/dev/null | grep -q "latch-tls-server"
}
# s_client_ok NAME ADDR: openssl's handshake with ADDR, naming NAME, completes
s_client_ok() {
	in_g timeout 4 openssl s_client -connect "$2:443" -servername "$1" </dev/null 2>/dev/null |
		grep -q "^Verify return code"
}

lts_attach --resolver "$HOST4,$HOST6" --dns-rate 2000 --dns-burst 2000 >/dev/null ||
	{ fail attach "latch attach failed"; lts_done; }
lts_latchd "$ROOT" "$LTS_TMP/latchd.log" ||
	{ fail latchd-start "latchd did not come up: $(tail -3 "$LTS_TMP/latchd.log")"; lts_done; }
out=$(latch egress "$LTS_NAME" profile sni 2>&1)
check "switch to the profile sni" grep -q "profile sni live" <<<"$out"

# --- before any answer nothing is open; b is not a name the resolver answers
check_not "the shared address is closed before any answer" tls_ok "$SRV_A" 443 a.w.sni.example
r=$(q b.sni.example)
check_eq "the resolver refuses the name the profile does not allow" "$r" "REFUSED "

# --- a's answer opens its address, for a's name only
r=$(q a.w.sni.example)
check "the allowed name resolves" grep -q "NOERROR $SRV_A" <<<"$r"
r=$(q a.w.sni.example AAAA)
check "its AAAA resolves too" grep -q "NOERROR $SRV6_A" <<<"$r"
# the answer lives 1..3 s and a refused probe waits LTS_T: ask again before each probe, as a client would
fresh() { q a.w.sni.example >/dev/null && q a.w.sni.example AAAA >/dev/null; }
other0=$(counter drop_sni_other)
fresh
check "v4: a ClientHello naming the allowed name passes (control)" tls_ok "$SRV_A" 443 a.w.sni.example
fresh
check_not "v4: a ClientHello naming the other name on the address is refused" tls_ok "$SRV_A" 443 b.sni.example
fresh
check "v6: a ClientHello naming the allowed name passes (control)" tls_ok "$SRV6_A" 443 a.w.sni.example
fresh
check_not "v6: a ClientHello naming the other name on the address is refused" tls_ok "$SRV6_A" 443 b.sni.example
check "the refusals are counted as drop_sni_other" test "$(counter drop_sni_other)" -ge $((other0 + 2))
n0=$(counter drop_sni_none)
fresh
check_not "a ClientHello without a server name is refused" tls_ok "$SRV_A" 443 ''
check "... counted as drop_sni_none" test "$(counter drop_sni_none)" -gt "$n0"
e0=$(counter drop_sni_ech)
fresh
check_not "a ClientHello offering ECH is refused" ech_ok "$SRV_A" a.w.sni.example
check "... counted as drop_sni_ech" test "$(counter drop_sni_ech)" -gt "$e0"
u0=$(counter drop_sni_unread)
fresh
check_not "plain text to the name-checked port is refused" tcp_ok "$SRV_A" 443
check "... counted as drop_sni_unread" test "$(counter drop_sni_unread)" -gt "$u0"
# the hash of b.sni.example (FNV-1a 64 of the name, bpf/latch_tls.h), as the audit row must carry it
b_hash=$("$LTS_PY" -c 'h = 0xcbf29ce484222325
for c in b"b.sni.example": h = ((h ^ c) * 0x100000001b3) % 2**64
print("%016x" % h)')
audited() {
	sqlite3 "$ROOT/var/lib/latch/audit.db" \
		"SELECT count(*) FROM entries WHERE kind = 'kernel' AND reason = 'drop_sni_other' AND fields LIKE '%$b_hash%'" |
		grep -qv '^0$'
}
check "the refusal reached the audit log with the hash of the name sent" wait_until -t 3 audited

# --- real clients, against a real TLS server with two names
r=$(q c.sni.example)
check "c.sni.example resolves" grep -q "NOERROR $EDGE4" <<<"$r"
r=$(q c.sni.example AAAA)
check "... and its AAAA" grep -q "NOERROR $EDGE6" <<<"$r"
check "curl, TLS 1.3, to the allowed name works" curl_ok c.sni.example "$EDGE4" --tlsv1.3
check "curl, TLS 1.2, to the allowed name works" curl_ok c.sni.example "$EDGE4" --tlsv1.2 --tls-max 1.2
check "curl over IPv6 to the allowed name works" curl_ok c.sni.example "$EDGE6"
check_not "curl naming the other name on the same address is refused" curl_ok d.sni.example "$EDGE4"
check "openssl s_client naming the allowed name completes its handshake" s_client_ok c.sni.example "$EDGE4"
check_not "openssl s_client naming the other name does not" s_client_ok d.sni.example "$EDGE4"
check_not "... nor over IPv6" s_client_ok d.sni.example "[$EDGE6]"

# --- an answer that expired takes its name with it: e's answer keeps the address open, a's name is gone
sleep $((TTL + 2)) # a's answer (TTL 2, clamped 1..3) is past its deadline now
r=$(q e.w.sni.example)
check "a second allowed name on the address resolves" grep -q "NOERROR $SRV_A" <<<"$r"
check "its name passes (control)" tls_ok "$SRV_A" 443 e.w.sni.example
check_not "the name whose answer expired is refused on the address the other answer keeps open" \
	tls_ok "$SRV_A" 443 a.w.sni.example
r=$(q a.w.sni.example)
check "asked again, the name is answered (from the cache or upstream)" grep -q "NOERROR $SRV_A" <<<"$r"
check "... and passes again" tls_ok "$SRV_A" 443 a.w.sni.example

lts_done
