#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_resolver.sh - the latch resolver answers only its guest and only
# allowed names, and nothing else leaves the host: an unlisted name is
# REFUSED without a query upstream (dnsmasq's query log is the witness), a
# TXT-tunnel burst leaks nothing, ANY/TXT/HTTPS are refused, rebinding
# answers (and answers naming the host's own addresses) are refused, an
# allowed name is answered through its CDN-shaped CNAME chain while the
# chain's names stay unaskable, answers are cached, TTLs clamped, forged
# upstream replies and records off the chain ignored, queries from anyone
# but the guest on its link go unanswered and unreported, and a TCP
# connection that pipelines without end is cut.  Controls: each attack has
# an allowed query beside it that is answered and that does show up
# upstream.
#
#   G "client"   g0  198.51.100.2/30 2001:db8:1::2/64     kdig
#        |  veth
#   H "host"     hg0 198.51.100.1/30 2001:db8:1::1/64     resolver_drv :53 (and :5300, :5301, :5302)
#                hi0 198.51.100.5/30 2001:db8:fe::1/64
#        |  veth
#   I "upstream" ih0 198.51.100.6/30 2001:db8:fe::2/64, on lo:
#                203.0.113.53 2001:db8:ff::53  dnsmasq, the fake authoritative server
#                203.0.113.54 a forging server (lts_spoof.py below), .55 its forged source
#
# H does not forward, so G can reach nothing but the resolver.  I routes the
# resolver's address through H (hi0), as a LAN host that routes the pool
# would, to try it from the wrong link.  Nothing routes to the root
# namespace or eth0.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"

DRV=${RESOLVER_DRV:-$LTS_TOP/build/selftests/resolver_drv}
C4=198.51.100.2
R4=198.51.100.1
R6=2001:db8:1::1
H_UP4=198.51.100.5
I_UP4=198.51.100.6
DNS4=203.0.113.53
DNS6=2001:db8:ff::53
TRICK4=203.0.113.54
FORGE4=203.0.113.55
DEAD4=203.0.113.99 # nothing answers there: I does not forward
TTL_MIN=30
TTL_MAX=300

[ "$(id -u)" = 0 ] || lts_skip_all "needs root"
for t in dnsmasq kdig ip "$LTS_PY" timeout; do
	command -v "$t" >/dev/null || lts_skip_all "needs $t"
done
[ -x "$DRV" ] || lts_skip_all "no $DRV; run make selftest-bins"
trap lts_cleanup EXIT
trap 'exit 130' INT TERM HUP
LTS_TMP=$(mktemp -d /tmp/latch-selftest.XXXXXX)
chmod 755 "$LTS_TMP" # dnsmasq writes its log after dropping to nobody
LOG=$LTS_TMP/dnsmasq.log
OUT=$LTS_TMP/drv.out
OUT2=$LTS_TMP/drv2.out

# ------------------------------------------------------------ topology

topo() {
	local ns
	for ns in "$LTS_G" "$LTS_H" "$LTS_I"; do
		[ -e "/run/netns/$ns" ] && { echo "namespace $ns exists already" >&2; return 1; }
		lts_ns_add "$ns" || return 1
	done
	LTS_TOPO_ERR=0
	_x ip -n "$LTS_H" link add hi0 type veth peer name ih0 netns "$LTS_I"
	_x ip -n "$LTS_H" addr add "$H_UP4/30" dev hi0
	_x ip -n "$LTS_H" addr add 2001:db8:fe::1/64 dev hi0 nodad
	_x ip -n "$LTS_H" link set hi0 up
	_x ip -n "$LTS_H" route add 203.0.113.0/24 via "$I_UP4"
	_x ip -n "$LTS_H" -6 route add 2001:db8:ff::/48 via 2001:db8:fe::2
	_x ip -n "$LTS_I" addr add "$I_UP4/30" dev ih0
	_x ip -n "$LTS_I" addr add 2001:db8:fe::2/64 dev ih0 nodad
	_x ip -n "$LTS_I" link set ih0 up
	for a in "$DNS4" "$TRICK4" "$FORGE4"; do
		_x ip -n "$LTS_I" addr add "$a/32" dev lo
	done
	_x ip -n "$LTS_I" addr add "$DNS6/128" dev lo nodad
	return $LTS_TOPO_ERR
}

# the client link comes up after the resolver has bound to its addresses
client_link() {
	LTS_TOPO_ERR=0
	_x ip -n "$LTS_G" link add g0 type veth peer name hg0 netns "$LTS_H"
	_x ip -n "$LTS_G" addr add "$C4/30" dev g0
	_x ip -n "$LTS_G" addr add 2001:db8:1::2/64 dev g0 nodad
	_x ip -n "$LTS_G" link set g0 up
	_x ip -n "$LTS_H" addr add "$R4/30" dev hg0
	_x ip -n "$LTS_H" addr add "$R6/64" dev hg0 nodad
	_x ip -n "$LTS_H" link set hg0 up
	return $LTS_TOPO_ERR
}

# A server that forges: for spoof.example it first sends a reply with the
# wrong ID, one from the wrong source address and one for another question
# (all saying 203.0.113.66), then the real one (203.0.113.10); tc.example
# is truncated over UDP and answered (203.0.113.17) over TCP.  The names in
# CRAFTED get the answer sections written there, as an upstream could send
# them: a chain plus records off it, addresses on a middle link, a loop, a
# fork.  Bounded: it exits after its lifetime.
write_spoof_server() {
	cat >"$LTS_TMP/lts_spoof.py" <<'EOF'
import select, socket, struct, sys, time
addr, forge, log, life = sys.argv[1], sys.argv[2], open(sys.argv[3], "a", buffering=1), float(sys.argv[4])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((addr, 53))
f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); f.bind((forge, 53))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind((addr, 53)); t.listen(8)

def question(m):
    i, labels = 12, []
    while m[i]:
        labels.append(m[i + 1:i + 1 + m[i]].decode().lower()); i += 1 + m[i]
    return ".".join(labels), m[12:i + 5]

def reply(qid, qsec, ip, tc=False):
    flags = 0x8180 | (0x0200 if tc else 0)
    h = struct.pack(">HHHHHH", qid, flags, 1, 1 if ip else 0, 0, 0)
    a = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip) if ip else b""
    return h + qsec + a

def wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"

def rr(owner, kind, data):
    if kind == "CNAME":
        t, d = 5, wire(data)
    elif kind == "A":
        t, d = 1, socket.inet_aton(data)
    else:
        t, d = 28, socket.inet_pton(socket.AF_INET6, data)
    return wire(owner) + struct.pack(">HHIH", t, 1, 60, len(d)) + d

CRAFTED = {
    # the chain, and beside it: a private address for another name, a public one, another chain
    "stray.example": [("stray.example", "CNAME", "edge.cdn.example.net"),
                      ("victim.example", "A", "10.0.0.9"),
                      ("edge.cdn.example.net", "A", "203.0.113.81"),
                      ("other.example", "A", "203.0.113.82"),
                      ("unrelated.example", "CNAME", "x.example.net")],
    # an address on a middle link counts for nothing: only the end of the chain answers
    "midaddr.example": [("midaddr.example", "CNAME", "mid.cdn.example.net"),
                        ("mid.cdn.example.net", "A", "203.0.113.83"),
                        ("mid.cdn.example.net", "CNAME", "end.cdn.example.net"),
                        ("end.cdn.example.net", "A", "203.0.113.84")],
    "loop.example": [("loop.example", "CNAME", "a.loop.example.net"),
                     ("a.loop.example.net", "CNAME", "loop.example"),
                     ("loop.example", "A", "203.0.113.85")],
    "fork.example": [("fork.example", "CNAME", "x1.example.net"),
                     ("fork.example", "CNAME", "x2.example.net"),
                     ("x1.example.net", "A", "203.0.113.86"),
                     ("x2.example.net", "A", "203.0.113.87")],
}

def crafted(qid, qsec, name, qtype):
    recs = [r for r in CRAFTED[name] if r[1] == "CNAME" or (r[1] == "A") == (qtype == 1)]
    h = struct.pack(">HHHHHH", qid, 0x8180, 1, len(recs), 0, 0)
    return h + qsec + b"".join(rr(*r) for r in recs)

other = b"\x05other\x07example\x00\x00\x01\x00\x01"
print("ready", flush=True)
end = time.time() + life
while time.time() < end:
    r, _, _ = select.select([u, t], [], [], 0.5)
    if u in r:
        m, peer = u.recvfrom(4096)
        qid = struct.unpack(">H", m[:2])[0]
        name, qsec = question(m)
        log.write("udp %s\n" % name)
        if name == "spoof.example":
            u.sendto(reply(qid ^ 0x5a5a, qsec, "203.0.113.66"), peer)
            f.sendto(reply(qid, qsec, "203.0.113.66"), peer)
            u.sendto(reply(qid, other, "203.0.113.66"), peer)
            time.sleep(0.1)
            u.sendto(reply(qid, qsec, "203.0.113.10"), peer)
        elif name == "tc.example":
            u.sendto(reply(qid, qsec, None, tc=True), peer)
        elif name in CRAFTED:
            u.sendto(crafted(qid, qsec, name, struct.unpack(">H", qsec[-4:-2])[0]), peer)
        else:
            u.sendto(reply(qid, qsec, "203.0.113.20"), peer)
    if t in r:
        c, _ = t.accept(); c.settimeout(2)
        try:
            n = struct.unpack(">H", c.recv(2))[0]; m = b""
            while len(m) < n:
                m += c.recv(n - len(m))
            qid = struct.unpack(">H", m[:2])[0]
            name, qsec = question(m)
            log.write("tcp %s\n" % name)
            out = reply(qid, qsec, "203.0.113.17")
            c.sendall(struct.pack(">H", len(out)) + out)
        except (OSError, struct.error):
            pass
        c.close()
EOF
}

# TCP clients the resolver must survive; each command prints what it saw.
write_tcp_client() {
	cat >"$LTS_TMP/lts_tcp.py" <<'EOF'
import socket, struct, sys, time
host, port, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def conn():
    return socket.create_connection((host, port), timeout=3)

def query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\1\0\1"
    return struct.pack(">H", len(q)) + q

def read_msg(c):
    b = b""
    while len(b) < 2:
        d = c.recv(2 - len(b))
        if not d:
            return None
        b += d
    n, m = struct.unpack(">H", b)[0], b""
    while len(m) < n:
        d = c.recv(n - len(m))
        if not d:
            return None
        m += d
    return m

def closed(c, wait):
    # True when the peer closes within wait seconds
    c.settimeout(wait)
    try:
        return c.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True

if cmd == "pipeline":  # N queries sent at once on one connection, all answered
    n, c = int(sys.argv[4]), conn()
    c.sendall(b"".join(query(i + 1, "q%d.pipe.example" % i) for i in range(n)))
    c.settimeout(15)
    ids = set()
    for _ in range(n):
        m = read_msg(c)
        if m is None:
            break
        if m[3] & 15 == 0:
            ids.add(struct.unpack(">H", m[:2])[0])
    print(len(ids))
elif cmd == "idle":  # closed after the idle time, but not before
    c = conn()
    print("early" if closed(c, 0.5) else ("closed" if closed(c, 2.5) else "open"))
elif cmd == "cap":  # N clients open; the next one is closed at once; the first still answers
    n = int(sys.argv[4])
    cs = [conn() for _ in range(n)]
    time.sleep(0.2)
    extra = conn()
    r = "extra-closed" if closed(extra, 0.5) else "extra-open"
    cs[0].sendall(query(7, "spoof.example"))
    cs[0].settimeout(3)
    m = read_msg(cs[0])
    print(r, "first-answers" if m and struct.unpack(">H", m[:2])[0] == 7 else "first-silent")
elif cmd == "short":  # a length below a header closes the connection
    c = conn()
    c.sendall(b"\0\4abcd")
    print("closed" if closed(c, 1) else "open")
elif cmd == "burst":  # N queries for NAME pipelined at once: how many come back, and is it cut
    n, name, c = int(sys.argv[4]), sys.argv[5], conn()
    c.sendall(b"".join(query(i + 1, name) for i in range(n)))
    c.settimeout(5)
    got, state = 0, "open"
    try:
        while got < n:
            if read_msg(c) is None:
                state = "closed"
                break
            got += 1
    except socket.timeout:
        pass
    except OSError:
        state = "closed"
    print("answers=%d %s" % (got, state))
elif cmd == "udpflood":  # N queries for unique names from SRC at once: how many get any reply
    src, n = sys.argv[4], int(sys.argv[5])
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    for i in range(n):
        s.sendto(query(i + 1, "f%d.tunnel.example" % i)[2:], (host, port))
    s.settimeout(1)
    got = 0
    try:
        while True:
            s.recv(4096)
            got += 1
    except socket.timeout:
        pass
    print(got)
elif cmd in ("udpfrom", "tcpfrom"):  # one query from source SRC (IP_TRANSPARENT, root: it need not be ours)
    src, name = sys.argv[4], sys.argv[5]
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM if cmd == "udpfrom" else socket.SOCK_STREAM)
    if fam == socket.AF_INET:
        s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
    else:
        s.setsockopt(socket.IPPROTO_IPV6, 75, 1)  # IPV6_TRANSPARENT
    s.bind((src, 0))
    s.settimeout(1.5)
    try:
        if cmd == "udpfrom":
            s.sendto(query(0x4242, name)[2:], (host, port))
            print("answered" if s.recv(4096)[:2] == b"\x42\x42" else "other")
        else:
            s.connect((host, port))
            s.sendall(query(0x4242, name))
            print("answered" if read_msg(s) else "closed")
    except socket.timeout:
        print("silent")
    except ConnectionRefusedError:
        print("refused")
    except ConnectionResetError:
        print("closed")
    except OSError as e:
        print("error %d" % e.errno)
EOF
}

# ------------------------------------------------------------ probes

# dq [kdig args...]: one query from the client, full text output
dq() { ip netns exec "$LTS_G" kdig +retry=0 +timeout=2 "$@" 2>&1; }
# status NAME TYPE [args]: NOERROR, REFUSED, ... or "none"
status() {
	local s
	s=$(dq "@$R4" "$@" | sed -n 's/.*status: \([A-Z]*\);.*/\1/p' | head -1)
	echo "${s:-none}"
}
# answers NAME TYPE [args]: "TTL TYPE DATA" for each answer record
answers() { dq "@$R4" +noall +answer "$@" | awk '$1 !~ /^;/ && NF >= 5 { print $2, $4, $5 }'; }
# upstream_seen NAME [TYPE]: queries for NAME that reached dnsmasq
upstream_seen() { grep -cE "query\[${2:-[A-Z]+}\] $1 from" "$LOG"; }
# drv_has REGEX [FILE]: a line the driver printed
drv_has() { grep -qE "$1" "${2:-$OUT}"; }
drv_count() { grep -cE "$1" "${2:-$OUT}"; }

# ------------------------------------------------------------ setup

if ! topo; then
	fail setup "could not build the test namespaces"
	lts_done
fi
touch "$LOG"
chmod 666 "$LOG"
lts_bg "$LTS_I" "$LTS_TMP/dnsmasq.out" dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
	--pid-file="$LTS_TMP/dnsmasq.pid" --log-queries --log-facility="$LOG" --bind-interfaces \
	--listen-address="$DNS4,$DNS6" --port=53 --local-ttl=600 --neg-ttl=60 \
	--host-record=ok.example,203.0.113.10,2001:db8::10 \
	--host-record=low.example,203.0.113.12,5 \
	--host-record=cache.example,203.0.113.13 --host-record=unlearnable.example,203.0.113.14 \
	--host-record=big.example,2001:db8:b::1 --host-record=big.example,2001:db8:b::2 --host-record=big.example,2001:db8:b::3 --host-record=big.example,2001:db8:b::4 --host-record=big.example,2001:db8:b::5 --host-record=big.example,2001:db8:b::6 --host-record=big.example,2001:db8:b::7 --host-record=big.example,2001:db8:b::8 --host-record=big.example,2001:db8:b::9 --host-record=big.example,2001:db8:b::a --host-record=big.example,2001:db8:b::b --host-record=big.example,2001:db8:b::c --host-record=big.example,2001:db8:b::d --host-record=big.example,2001:db8:b::e --host-record=big.example,2001:db8:b::f --host-record=big.example,2001:db8:b::10 --host-record=big.example,2001:db8:b::11 --host-record=big.example,2001:db8:b::12 --host-record=big.example,2001:db8:b::13 --host-record=big.example,2001:db8:b::14 --host-record=big.example,2001:db8:b::15 --host-record=big.example,2001:db8:b::16 --host-record=big.example,2001:db8:b::17 --host-record=big.example,2001:db8:b::18 \
	--host-record=lookup.example,203.0.113.18,2001:db8::18 \
	--host-record=rebind.example,10.0.0.5 \
	--host-record=meta.example,169.254.169.254 \
	--host-record=rebind6.example,fd00::5 \
	--host-record=outside.example,203.0.113.11 \
	--host-record=a.wild.example,203.0.113.15 \
	--host-record=wild.example,203.0.113.16 \
	--cname=alias.example,ok.example \
	--cname=leak.example,outside.example \
	--cname=c1.chain.example,c2.chain.example --cname=c2.chain.example,c3.chain.example \
	--cname=c3.chain.example,c4.chain.example --cname=c4.chain.example,c5.chain.example \
	--cname=c5.chain.example,c6.chain.example --cname=c6.chain.example,c7.chain.example \
	--cname=c7.chain.example,c8.chain.example --cname=c8.chain.example,c9.chain.example \
	--cname=c9.chain.example,ok.example \
	--host-record=edge7.cdn.example.net,203.0.113.71,2001:db8:7::71 \
	--host-record=edge7.cdn.example.net,203.0.113.72,2001:db8:7::72 \
	--host-record=edge7.cdn.example.net,203.0.113.73 \
	--cname=www.site.example,site.example.cdn.example.net \
	--cname=site.example.cdn.example.net,edge7.cdn.example.net \
	--host-record=dualstack.fastly.example.net,203.0.113.74,2001:db8:7::74 \
	--host-record=dualstack.fastly.example.net,203.0.113.75,2001:db8:7::75 \
	--cname=files.pkg.example,pkg.map.fastly.example.net \
	--cname=pkg.map.fastly.example.net,prod.fastly.example.net \
	--cname=prod.fastly.example.net,dualstack.fastly.example.net \
	--host-record=self.example,"$H_UP4" --host-record=self6.example,2001:db8:fe::1 \
	--cname=hostcdn.example,self.example --host-record=later.example,203.0.113.77 \
	--host-record=lan.example,10.0.7.7 \
	--host-record=mixed.example,203.0.113.78 --host-record=mixed.example,10.0.7.8 \
	--txt-record=ok.example,hello \
	--address=/tunnel.example/203.0.113.99 --address=/tunnelok.example/203.0.113.19 \
	--local=/example/ --local=/example.net/ # unknown names are NXDOMAIN, names without the type NODATA
upstream_answers() { ip netns exec "$LTS_I" kdig +retry=0 +timeout=1 "@$DNS4" ok.example A 2>/dev/null | grep -q NOERROR; }
wait_until -t 5 upstream_answers
write_spoof_server
write_tcp_client
lts_bg "$LTS_I" "$LTS_TMP/spoof.out" "$LTS_PY" "$LTS_TMP/lts_spoof.py" "$TRICK4" "$FORGE4" "$LTS_TMP/spoof.log" 120
lts_wait_ready "$LTS_TMP/spoof.out" || fail setup "the forging server did not start"

ALLOW=(ok.example low.example cache.example unlearnable.example big.example lookup.example rebind.example meta.example rebind6.example
	alias.example leak.example nx.example spoof.example tc.example www.site.example files.pkg.example
	self.example self6.example hostcdn.example later.example lan.example mixed.example)
args=()
for n in "${ALLOW[@]}"; do args+=(--allow "$n"); done
# who may ask: the guest's addresses on the guest's link (hg0); the link does not exist yet
GUEST=(--guest-dev hg0 --guest "$C4" --guest 2001:db8:1::2)
lts_bg "$LTS_H" "$OUT" "$DRV" --listen "$R4" --listen "$R6" --port 53 --upstream "$DNS4" "${GUEST[@]}" \
	--rate 10000 --burst 10000 \
	"${args[@]}" --wildcard wild.example --wildcard chain.example --wildcard tunnelok.example \
	--exempt 10.0.7.0/24 --unlearnable unlearnable.example --ttl-min "$TTL_MIN" --ttl-max "$TTL_MAX" --empty-port 5301 \
	--lookup lookup.example --lookup rebind.example --lookup nx.example --lookup lan.example
DRV_PID=${LTS_PIDS[-1]}
# the second resolver: a dead upstream first, then the forging one
lts_bg "$LTS_H" "$OUT2" "$DRV" --listen "$R4" --port 5300 --upstream "$DEAD4" --upstream "$TRICK4" "${GUEST[@]}" \
	--rate 10000 --burst 10000 --allow spoof.example --allow tc.example --allow stray.example \
	--allow midaddr.example --allow loop.example --allow fork.example --wildcard pipe.example --timeout-ms 400 \
	--tcp-idle-ms 1000 --tcp-clients 4
DRV2_PID=${LTS_PIDS[-1]}
# the third: a sandbox with a small query rate (20/s, 30 deep), 25 queries per TCP connection
OUT3=$LTS_TMP/drv3.out
lts_bg "$LTS_H" "$OUT3" "$DRV" --listen "$R4" --port 5302 --upstream "$DNS4" "${GUEST[@]}" \
	--rate 20 --burst 30 --tcp-queries 25 --tcp-clients 8 --allow ok.example --empty-port 5303
DRV3_PID=${LTS_PIDS[-1]}
if lts_wait_ready "$OUT" && lts_wait_ready "$OUT2" && lts_wait_ready "$OUT3"; then
	ok "the resolvers bind before the sandbox's addresses exist (IP_FREEBIND)"
else
	fail setup "resolver_drv did not start"
	lts_done
fi
if ! client_link; then
	fail setup "could not build the client link"
	lts_done
fi

# ------------------------------------------------------------ allowed names

check_eq "control: dnsmasq answers ok.example directly" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" ok.example A)" "203.0.113.10"
check_eq "ok.example A is answered" "$(answers ok.example A)" "$TTL_MAX A 203.0.113.10"
check "answered ok.example is reported with the clamped TTL (600 -> $TTL_MAX)" \
	drv_has "^answered ok\.example $TTL_MAX 203\.0\.113\.10$"
check_eq "ok.example AAAA is answered" "$(answers ok.example AAAA)" "$TTL_MAX AAAA 2001:db8::10"
check "answered ok.example AAAA is reported" drv_has "^answered ok\.example $TTL_MAX 2001:db8::10$"
check_eq "a short TTL is raised to ttl-min (5 -> $TTL_MIN)" "$(answers low.example A)" "$TTL_MIN A 203.0.113.12"
check "answered low.example is reported with ttl-min" drv_has "^answered low\.example $TTL_MIN 203\.0\.113\.12$"
check_eq "the resolver's IPv6 address answers too" \
	"$(dq "@$R6" +short ok.example A)" "203.0.113.10"
check_eq "NXDOMAIN is passed on" "$(status nx.example A)" NXDOMAIN
check_eq "NODATA is passed on (low.example has no AAAA)" "$(status low.example AAAA)" NOERROR
check_eq "NODATA has no answer" "$(answers low.example AAAA)" ""
check_cmp "NXDOMAIN and NODATA are not reported as answers" \
	"$(drv_count '^answered (nx|low)\.example [0-9]+$')" -eq 0

# ------------------------------------------------------------ unlisted names never leave the host

check_eq "control: outside.example exists upstream" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" outside.example A)" "203.0.113.11"
n0=$(upstream_seen outside.example)
check_eq "an unlisted name (outside.example) is REFUSED" "$(status outside.example A)" REFUSED
check "the refusal is reported as not-allowed" drv_has "^refused outside\.example A not-allowed$"
check_eq "its query never reached the upstream" "$(upstream_seen outside.example)" "$n0"
check_cmp "control: the allowed ok.example did reach the upstream" "$(upstream_seen ok.example A)" -ge 1

# the DNS whisper channel: unique random labels, TXT and A, as a tunnel sends them
qs=()
for i in $(seq 200); do
	qs+=("$(printf '%04x%04x%02d' $RANDOM $RANDOM $((i % 100))).tunnel.example")
done
burst=()
for n in "${qs[@]}"; do burst+=("$n" TXT "$n" A); done
refused=$(dq "@$R4" "${burst[@]}" | grep -c 'status: REFUSED')
check_eq "a burst of 200 random tunnel.example names (TXT and A) is all REFUSED" "$refused" 400
check_eq "the driver reported 400 not-allowed refusals for them" \
	"$(drv_count '^refused [0-9a-f]+\.tunnel\.example (TXT|A) not-allowed$')" 400
check_eq "zero tunnel queries reached the upstream" "$(grep -c 'tunnel\.example from' "$LOG")" 0
ctl=()
for i in 1 2 3 4 5; do ctl+=("$(printf '%04x%04x' $RANDOM $RANDOM).tunnelok.example" A); done
check_cmp "control: 5 random names under an allowed wildcard are answered" \
	"$(dq "@$R4" "${ctl[@]}" | grep -c 'status: NOERROR')" -eq 5
check_eq "control: and all 5 show up in the upstream's log" "$(grep -c 'query\[A\] [0-9a-f]*\.tunnelok\.example from' "$LOG")" 5

# ------------------------------------------------------------ query types

n0=$(upstream_seen ok.example)
check_eq "ANY ok.example is REFUSED" "$(status ok.example ANY)" REFUSED
check_eq "TXT ok.example is REFUSED" "$(status ok.example TXT)" REFUSED
check_eq "HTTPS (TYPE65) ok.example is REFUSED" "$(status ok.example TYPE65)" REFUSED
check_eq "MX ok.example is REFUSED" "$(status ok.example MX)" REFUSED
check "reported with reason qtype" drv_has "^refused ok\.example (ANY|TXT) qtype$"
check_eq "none of them reached the upstream" "$(upstream_seen ok.example)" "$n0"
check_eq "control: TXT ok.example exists upstream" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" ok.example TXT)" '"hello"'
check_eq "class CH is REFUSED" "$(status ok.example TXT -c CH)" REFUSED
check "reported with reason qclass" drv_has "^refused - TXT qclass$"

# a malformed query (two questions) gets FORMERR, a response is never answered
formerr=$(ip netns exec "$LTS_G" "$LTS_PY" - "$R4" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
q = b"\x02ok\x07example\x00\x00\x01\x00\x01"
s.sendto(struct.pack(">HHHHHH", 0x1234, 0x0100, 2, 0, 0, 0) + q + q, (sys.argv[1], 53))
try:
    m = s.recv(4096); print("rcode=%d id=%x" % (m[3] & 15, struct.unpack(">H", m[:2])[0]), end=" ")
except socket.timeout:
    print("rcode=none", end=" ")
s.sendto(struct.pack(">HHHHHH", 0x4321, 0x8180, 1, 0, 0, 0) + q, (sys.argv[1], 53))
try:
    s.recv(4096); print("response=answered")
except socket.timeout:
    print("response=dropped")
EOF
)
check_eq "two questions get FORMERR with the client's ID; a response is dropped" "$formerr" \
	"rcode=1 id=1234 response=dropped"

# the reply on the wire: our own, whatever shape the query had (the simple
# shape is read by the resolver itself, any other by ldns, with one outcome)
wire=$(ip netns exec "$LTS_G" "$LTS_PY" - "$R4" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
def ask(qid, name, extra=b"", an=0, ar=0, qtype=1):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", qtype, 1)
    s.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, an, 0, ar) + q + extra, (sys.argv[1], 53))
    try:
        return s.recv(4096)
    except socket.timeout:
        return b""
def summary(m, name):
    if not m:
        return "none"
    qd, an, ns, ar = struct.unpack(">HHHH", m[4:12])
    qn = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    echo = "echo" if m[12:12 + len(qn)] == qn else "noecho"
    opt = ""
    if ar:
        o = m[-11:]
        opt = " opt=%d,%d" % (struct.unpack(">H", o[3:5])[0], struct.unpack(">H", o[9:11])[0])
    return "rcode=%d an=%d ar=%d tc=%d %s%s" % (m[3] & 15, an, ar, (m[2] >> 1) & 1, echo, opt)
cookie = b"\0" + struct.pack(">HHIH", 41, 4096, 0, 12) + struct.pack(">HH", 10, 8) + b"12345678"
stray = b"\x02ok\x07example\0" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 1])
print(summary(ask(1, "Ok.ExAmPlE"), "Ok.ExAmPlE"))
print(summary(ask(2, "ok.example", cookie, ar=1), "ok.example"))
print(summary(ask(3, "ok.example", stray, ar=1), "ok.example"))
print(summary(ask(4, "ok.example", stray, an=1), "ok.example"))
print(summary(ask(5, "big.example", qtype=28), "big.example"))
print(summary(ask(6, "big.example", b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0), ar=1, qtype=28), "big.example"))
EOF
)
check_eq "mixed case: answered, the question echoed as the client spelled it" "$(sed -n 1p <<<"$wire")" \
	"rcode=0 an=1 ar=0 tc=0 echo"
check_eq "EDNS with a cookie: answered with our OPT (1232, no options), not theirs" "$(sed -n 2p <<<"$wire")" \
	"rcode=0 an=1 ar=1 tc=0 echo opt=1232,0"
check_eq "a record other than OPT in the additional section: read by ldns, answered the same" \
	"$(sed -n 3p <<<"$wire")" "rcode=0 an=1 ar=0 tc=0 echo"
check_eq "a record in the query's answer section: read by ldns, answered the same" "$(sed -n 4p <<<"$wire")" \
	"rcode=0 an=1 ar=0 tc=0 echo"
check_eq "24 AAAA without EDNS do not fit 512 bytes: the question alone, TC set" "$(sed -n 5p <<<"$wire")" \
	"rcode=0 an=0 ar=0 tc=1 echo"
check_eq "with EDNS they fit" "$(sed -n 6p <<<"$wire")" "rcode=0 an=24 ar=1 tc=0 echo opt=1232,0"
check_eq "control: after TC the client asks over TCP and gets them all" \
	"$(dq "@$R4" +tcp +noall +answer big.example AAAA | grep -c AAAA)" 24

# ------------------------------------------------------------ rebinding

check_eq "control: rebind.example is 10.0.0.5 upstream" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" rebind.example A)" "10.0.0.5"
check_eq "an allowed name answering 10.0.0.5 is REFUSED" "$(status rebind.example A)" REFUSED
check_eq "an allowed name answering 169.254.169.254 is REFUSED" "$(status meta.example A)" REFUSED
check_eq "an allowed name answering fd00::5 is REFUSED" "$(status rebind6.example AAAA)" REFUSED
check "reported as rebinding" drv_has "^refused meta\.example A rebinding$"
check_cmp "nothing was answered for them" "$(drv_count '^answered (rebind|meta|rebind6)\.example')" -eq 0
check_eq "control: ok.example still answers" "$(dq "@$R4" +short ok.example A)" "203.0.113.10"

# ------------------------------------------------------------ the host's own addresses

# Invariant: no answer may point the guest at the host itself, whatever the
# name: an address of the host's is refused, and "the host's" is what the
# kernel says now, not what it said when the resolver started.
check_eq "control: self.example is H's uplink address upstream" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" self.example A)" "$H_UP4"
check_eq "an allowed name answering the host's address ($H_UP4) is REFUSED" "$(status self.example A)" REFUSED
check "reported as host-address" drv_has "^refused self\.example A host-address$"
check_eq "the same for the host's IPv6 address (2001:db8:fe::1)" "$(status self6.example AAAA)" REFUSED
check_eq "and for a chain that ends at the host's address" "$(status hostcdn.example A)" REFUSED
check_eq "control: later.example (203.0.113.77, not the host's) is answered" \
	"$(dq "@$R4" +short later.example A)" "203.0.113.77"
ip -n "$LTS_H" addr add 203.0.113.77/32 dev lo
check_eq "once the host takes 203.0.113.77, the cached later.example is REFUSED" "$(status later.example A)" REFUSED
check "reported as host-address" drv_has "^refused later\.example A host-address$"
ip -n "$LTS_H" addr del 203.0.113.77/32 dev lo
check_eq "once the host gives it up, later.example is answered again" "$(dq "@$R4" +short later.example A)" \
	"203.0.113.77"
check_cmp "nothing was learned for the host's addresses" \
	"$(drv_count '^answered (self|self6|hostcdn)\.example')" -eq 0

# ------------------------------------------------------------ a CIDR exemption covers its own ports only

# Invariant: a non-public address that a CIDR entry exempts from the
# rebinding filter is answered, but never learned under the name's ports
# (the CIDR entry reaches it, on the CIDR entry's ports only).
check_eq "an exempt private address (10.0.7.7) is answered" "$(dq "@$R4" +short lan.example A)" "10.0.7.7"
check_cmp "but not reported for learning" "$(drv_count '^answered lan\.example')" -eq 0
check_eq "a mixed answer is answered whole" "$(dq "@$R4" +short mixed.example A | sort | tr '\n' ' ')" \
	"10.0.7.8 203.0.113.78 "
check "and only its public address is learned" drv_has "^answered mixed\.example $TTL_MAX 203\.0\.113\.78$"
check "a host-side lookup of an exempt name adds nothing, and is no failure" drv_has "^lookup lan\.example $TTL_MAX$"
check_eq "control: a private address outside the exemption is still REFUSED" "$(status rebind.example A)" REFUSED

# ------------------------------------------------------------ CNAME chains

check_eq "a chain inside the allowlist is followed" "$(answers alias.example A)" \
	"$TTL_MAX CNAME ok.example.
$TTL_MAX A 203.0.113.10"
check "answered alias.example is reported with the address at the chain's end" \
	drv_has "^answered alias\.example $TTL_MAX 203\.0\.113\.10$"
# Invariant: an allowed name is answered through its own DNS's CNAME chain,
# wherever the chain's names lie (CDNs), and its final addresses are learned
# under the allowed name; the chain's names never become askable by themselves.
check_eq "control: leak.example is a CNAME to outside.example upstream" \
	"$(ip netns exec "$LTS_I" kdig +short "@$DNS4" leak.example A | head -1)" "outside.example."
check_eq "an allowed name whose chain leaves the allowlist is answered with its chain" \
	"$(answers leak.example A)" "$TTL_MAX CNAME outside.example.
$TTL_MAX A 203.0.113.11"
check "its final address is learned under the allowed name" drv_has "^answered leak\.example $TTL_MAX 203\.0\.113\.11$"
n0=$(upstream_seen outside.example)
check_eq "the chain's target asked by itself is still REFUSED" "$(status outside.example A)" REFUSED
check_eq "and never asked upstream" "$(upstream_seen outside.example)" "$n0"
check_cmp "nothing was ever learned under the chain's target" "$(drv_count '^answered outside\.example')" -eq 0
# a CDN's shape: two hops into another zone, three addresses at the end
check_eq "www.site.example: 2 CNAMEs into cdn.example.net, 3 addresses" \
	"$(answers www.site.example A | sort)" "$(printf '%s\n' "$TTL_MAX A 203.0.113.71" "$TTL_MAX A 203.0.113.72" \
	"$TTL_MAX A 203.0.113.73" "$TTL_MAX CNAME edge7.cdn.example.net." "$TTL_MAX CNAME site.example.cdn.example.net.")"
check "all three are learned under www.site.example" \
	drv_has "^answered www\.site\.example $TTL_MAX( 203\.0\.113\.7[123]){3}$"
check_eq "files.pkg.example: 3 CNAMEs, its AAAA at the end" "$(answers files.pkg.example AAAA | grep -c AAAA)" 2
check "both AAAA are learned under files.pkg.example" \
	drv_has "^answered files\.pkg\.example $TTL_MAX( 2001:db8:7::7[45]){2}$"
for n in site.example.cdn.example.net edge7.cdn.example.net prod.fastly.example.net dualstack.fastly.example.net; do
	check_eq "a chain link ($n) asked by itself is REFUSED" "$(status "$n" A)" REFUSED
done
check_eq "none of the links was asked upstream by itself" \
	"$(grep -cE 'query\[[A-Z]+\] [a-z0-9.]*(cdn|fastly)\.example\.net from' "$LOG")" 0
# only the records on the chain from the question count (the forging server writes these answers)
check_eq "a chain plus records off it: only the chain and its end reach the guest" \
	"$(answers stray.example A -p 5300)" "60 CNAME edge.cdn.example.net.
60 A 203.0.113.81"
check "and only its end is learned (not 10.0.0.9 for victim.example, not 203.0.113.82)" \
	drv_has "^answered stray\.example 60 203\.0\.113\.81$" "$OUT2"
check_eq "an address on a middle link is not the answer" "$(answers midaddr.example A -p 5300 | tail -1)" \
	"60 A 203.0.113.84"
check "only the end of the chain is learned" drv_has "^answered midaddr\.example 60 203\.0\.113\.84$" "$OUT2"
check_eq "a chain that loops back to the question is REFUSED" "$(status loop.example A -p 5300)" REFUSED
check "reported as cname-loop" drv_has "^refused loop\.example A cname-loop$" "$OUT2"
check_eq "a name with two CNAME targets is REFUSED" "$(status fork.example A -p 5300)" REFUSED
check "reported as cname-chain" drv_has "^refused fork\.example A cname-chain$" "$OUT2"
check_cmp "nothing was learned for the loop or the fork" "$(drv_count '^answered (loop|fork)\.example' "$OUT2")" -eq 0
check_eq "control: 8 CNAMEs (c2.chain.example) are followed" "$(answers c2.chain.example A | tail -1)" \
	"$TTL_MAX A 203.0.113.10"
check_eq "9 CNAMEs (c1.chain.example) are REFUSED" "$(status c1.chain.example A)" REFUSED
check "reported as cname-chain (too long)" drv_has "^refused c1\.chain\.example A cname-chain$"

# ------------------------------------------------------------ cache

check_eq "cache.example is answered" "$(dq "@$R4" +short cache.example A)" "203.0.113.13"
sleep 1.1 # the point: a second of its TTL gone, the answer comes from the cache
check_eq "cache.example again is answered" "$(dq "@$R4" +short cache.example A)" "203.0.113.13"
check_eq "the upstream saw cache.example once" "$(upstream_seen cache.example A)" 1
# a report the policy took (its entries are in the kernel until the TTL) is not made again by a hit;
# one it could not take is made again by the next hit, with the remaining TTL
check_eq "a cache hit of a taken report is not reported again" "$(drv_count '^answered cache\.example ')" 1
check_eq "control: unlearnable.example is answered" "$(dq "@$R4" +short unlearnable.example A)" "203.0.113.14"
sleep 1.1 # the point: the hit's remaining TTL is below the first answer's
check_eq "... and answered again from the cache" "$(dq "@$R4" +short unlearnable.example A)" "203.0.113.14"
ttls=$(sed -n 's/^answered unlearnable\.example \([0-9]*\) .*/\1/p' "$OUT" | tr '\n' ' ')
check "a report the policy refused is made again by the hit, with the remaining TTL ($ttls)" \
	test "$(echo "$ttls" | awk '{ print NF == 2 && $1 == '"$TTL_MAX"' && $2 < $1 }')" = 1
check_eq "a cached rebinding answer is still REFUSED" "$(status rebind.example A)" REFUSED
kill -USR1 "$DRV_PID"
wait_until -t 2 drv_has '^flushed$'
check_eq "after a flush, cache.example is answered" "$(dq "@$R4" +short cache.example A)" "203.0.113.13"
check_eq "and asked upstream again" "$(upstream_seen cache.example A)" 2
check_eq "and reported afresh" "$(drv_count '^answered cache\.example ')" 2

# ------------------------------------------------------------ TCP, wildcards, two resolvers

check_eq "TCP: ok.example is answered" "$(dq "@$R4" +tcp +short ok.example A)" "203.0.113.10"
check_eq "TCP: an unlisted name is REFUSED" "$(status outside.example A +tcp)" REFUSED
check_eq "TCP: three queries on one connection are answered" \
	"$(dq "@$R4" +tcp +keepopen ok.example A alias.example A nx.example A | grep -c 'status: \(NOERROR\|NXDOMAIN\)')" 3
check_eq "TCP over IPv6 works" "$(dq "@$R6" +tcp +short ok.example AAAA)" "2001:db8::10"
check_eq "a wildcard allows a subdomain (a.wild.example)" "$(dq "@$R4" +short a.wild.example A)" "203.0.113.15"
check_eq "but not its apex (wild.example)" "$(status wild.example A)" REFUSED
check "the apex is reported as not-allowed" drv_has "^refused wild\.example A not-allowed$"
check_eq "a second resolver in the same loop (empty policy) REFUSES ok.example" \
	"$(status ok.example A -p 5301)" REFUSED
check "its refusal is its own" drv_has "^r2 refused ok\.example A not-allowed$"
check_cmp "and the first resolver's policy never saw it" "$(drv_count '^refused ok\.example A ')" -eq 0
dup=$(ip netns exec "$LTS_H" timeout 3 "$DRV" --listen "$R4" --port 53 --upstream "$DNS4" "${GUEST[@]}" \
	--allow ok.example 2>&1)
check "a resolver can't bind an address and port already taken (no shared UDP socket): $dup" \
	grep -q "Address already in use" <<<"$dup"

# ------------------------------------------------------------ who may ask

# Invariant: only the guest's addresses, arriving on the guest's link, get an
# answer (or an audit row, or a TCP slot); any local user or LAN host gets
# silence.  I routes the resolver's /30 through H, as a LAN host would.
ip -n "$LTS_I" route add 198.51.100.0/30 via "$H_UP4"
ip -n "$LTS_I" -6 route add 2001:db8:1::/64 via 2001:db8:fe::1
tcpx() { local ns=$1; shift; ip netns exec "$ns" "$LTS_PY" "$LTS_TMP/lts_tcp.py" "$@" 2>&1; }
check_eq "control: the guest asks and is answered" "$(dq "@$R4" +short ok.example A)" "203.0.113.10"
n_lines=$(wc -l <"$OUT")
# each probe asks for a name of its own that the policy refuses: any processing at all leaves a line
check_eq "the host itself (H) gets no answer" \
	"$(ip netns exec "$LTS_H" kdig +retry=0 +timeout=1 "@$R4" h.tunnel.example A 2>&1 | grep -c 'status:')" 0
check_eq "a user on H who is not root gets no answer" \
	"$(ip netns exec "$LTS_H" setpriv --reuid 65534 --regid 65534 --clear-groups \
		kdig +retry=0 +timeout=1 "@$R4" nobody.tunnel.example A 2>&1 | grep -c 'status:')" 0
check_eq "I (another link) gets no answer" \
	"$(tcpx "$LTS_I" "$R4" 53 udpfrom "$I_UP4" i.tunnel.example)" silent
check_eq "I with the guest's address as its source gets no answer" \
	"$(tcpx "$LTS_I" "$R4" 53 udpfrom "$C4" ispoof.tunnel.example)" silent
check_eq "I over IPv6 with the guest's address gets no answer" \
	"$(tcpx "$LTS_I" "$R6" 53 udpfrom 2001:db8:1::2 ispoof6.tunnel.example)" silent
check_eq "I over TCP finds no listener on its link" "$(tcpx "$LTS_I" "$R4" 53 tcpfrom "$I_UP4" itcp.tunnel.example)" \
	refused
# (local traffic to R4 looks as if it came in on hg0, so the peer's address decides there)
check_eq "H over TCP gets no answer" \
	"$(ip netns exec "$LTS_H" kdig +retry=0 +timeout=1 +tcp "@$R4" htcp.tunnel.example A 2>&1 | grep -c 'status:')" 0
# the audit budget: a flood of unlisted names from outside writes nothing
check_eq "a flood of 200 unlisted names from I gets no reply" "$(tcpx "$LTS_I" "$R4" 53 udpflood "$I_UP4" 200)" 0
check_eq "none of it was reported: no refusal, no answer, nothing" "$(sed -n "$((n_lines + 1)),\$p" "$OUT" | grep -vc '^$')" 0
check_eq "control: the guest still asks over TCP and is answered" "$(dq "@$R4" +tcp +short ok.example A)" "203.0.113.10"
check_eq "control: and an unlisted name from the guest is still reported" "$(status outside.example A)" REFUSED
check "... as its refusal" test "$(sed -n "$((n_lines + 1)),\$p" "$OUT" | grep -c '^refused outside\.example A not-allowed$')" -ge 1
kill -USR2 "$DRV_PID"
wait_until -t 2 drv_has '^stats '
check_cmp "all of it was counted as foreign (stats: $(grep '^stats ' "$OUT" | tail -1))" \
	"$(grep '^stats ' "$OUT" | tail -1 | sed -n 's/.* foreign=\([0-9]*\).*/\1/p')" -ge 205
ip -n "$LTS_I" route del 198.51.100.0/30 via "$H_UP4"
ip -n "$LTS_I" -6 route del 2001:db8:1::/64 via 2001:db8:fe::1

# ------------------------------------------------------------ latchd's own lookups

check "lookup: lookup.example gives both families with the clamped TTL" \
	drv_has "^lookup lookup\.example $TTL_MAX (203\.0\.113\.18 2001:db8::18|2001:db8::18 203\.0\.113\.18)$"
check "lookup: a rebinding name fails as rebinding" drv_has "^lookup rebind\.example failed rebinding$"
check "lookup: a missing name fails as nxdomain" drv_has "^lookup nx\.example failed nxdomain$"

# ------------------------------------------------------------ forged replies, failover, TC

check_eq "failover and forgery: spoof.example is answered with the real address" \
	"$(dq "@$R4" -p 5300 +short spoof.example A)" "203.0.113.10"
check "the forging server sent its forgeries" grep -qx "udp spoof.example" "$LTS_TMP/spoof.log"
check "no forged address was ever reported" test "$(grep -c '203\.0\.113\.66' "$OUT2")" = 0
check "spoof.example was answered with the real address" drv_has "^answered spoof\.example [0-9]+ 203\.0\.113\.10$" "$OUT2"
check_eq "a truncated answer is asked again over TCP" "$(dq "@$R4" -p 5300 +short tc.example A)" "203.0.113.17"
check "the forging server saw tc.example over TCP" grep -qx "tcp tc.example" "$LTS_TMP/spoof.log"

# ------------------------------------------------------------ TCP limits (the second resolver)

tcpc() { ip netns exec "$LTS_G" "$LTS_PY" "$LTS_TMP/lts_tcp.py" "$R4" 5300 "$@" 2>&1; }
check_eq "40 queries pipelined on one connection (16 in flight at most) are all answered" \
	"$(tcpc pipeline 40)" 40
check_eq "an idle TCP client is closed after the idle time (1 s), not before" "$(tcpc idle)" closed
check_eq "the 5th concurrent TCP client is closed; control: the 1st still answers" "$(tcpc cap 4)" \
	"extra-closed first-answers"
check_eq "a TCP frame shorter than a header closes the connection" "$(tcpc short)" closed
check_eq "control: after all that, the second resolver still answers over TCP" \
	"$(dq "@$R4" -p 5300 +tcp +short spoof.example A)" "203.0.113.10"

# ------------------------------------------------------------ TCP queries pay per query (the third resolver)

# Invariant: the kernel charges a TCP connection one token (its SYN), so the
# resolver charges each query: at most 25 per connection, and every TCP query
# draws from the sandbox's rate (20/s, 30 deep); past either the connection
# is cut and audited.  Controls: another sandbox's resolver in the same
# process and event loop (port 5303, an empty policy: it answers REFUSED)
# answers all along, and the guest's UDP is answered right after.
tcp3() { ip netns exec "$LTS_G" "$LTS_PY" "$LTS_TMP/lts_tcp.py" "$R4" 5302 "$@" 2>&1; }
t0=$(date +%s.%N)
(for i in $(seq 8); do tcp3 burst 400 ok.example; done >"$LTS_TMP/burst.out") &
burst_pid=$!
ctl_ok=0
for _ in $(seq 10); do
	s=$(status ok.example A -p 5303 +tcp)
	[ "$s" = REFUSED ] && ctl_ok=$((ctl_ok + 1))
	echo "# control during the bursts: $s"
	sleep 0.1 # the point: ten samples spread over the bursts
done
wait "$burst_pid"
t1=$(date +%s.%N)
first=$(head -1 "$LTS_TMP/burst.out")
check_eq "a pipelined burst of 400 on one connection gets its first 25 answers, then is cut" "$first" \
	"answers=25 closed"
check "every burst connection was cut ($(tr '\n' ' ' <"$LTS_TMP/burst.out"))" \
	test "$(grep -c ' closed$' "$LTS_TMP/burst.out")" = 8
total=$(awk -F'[= ]' '{ n += $2 } END { print n + 0 }' "$LTS_TMP/burst.out")
allowed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf("%d", 30 + 20 * (b - a) + 1) }')
check_cmp "the 8 bursts (3200 queries) got no more than the rate allows: 30 + 20/s ($total <= $allowed)" \
	"$total" -le "$allowed"
check "each cut was reported (tcp-queries)" drv_has "^refused - TYPE0 tcp-queries$" "$OUT3"
check "the rate's cut was reported (tcp-rate)" drv_has "^refused - TYPE0 tcp-rate$" "$OUT3"
check_eq "control: another sandbox's resolver (same loop) answered over TCP during the bursts" "$ctl_ok" 10
check_eq "control: the guest's UDP to this resolver is answered right after" \
	"$(dq "@$R4" -p 5302 +short ok.example A)" "203.0.113.10"
sleep 2 # 30 deep at 20/s: full again
check_eq "control: once the rate has room again, TCP is answered again" "$(tcp3 burst 3 ok.example)" "answers=3 open"

# ------------------------------------------------------------ the end

kill -TERM "$DRV_PID"
wait_until -t 3 drv_has '^stats '
stats=$(grep "^stats " "$OUT" | tail -1)
echo "# $stats"
check "resolver_drv exits cleanly on SIGTERM with its stats" test -n "$stats"
get() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$stats"; }
check_cmp "stats: refused counts the tunnel burst" "$(get refused)" -ge 400
check_cmp "stats: cache hits were counted" "$(get cache_hits)" -ge 1
check_cmp "stats: upstream_sent is well below the queries" "$(get upstream_sent)" -lt $(($(get queries) / 4))

# free with a query in flight (the dead upstream holds it for 400 ms): no callback after it
dq "@$R4" -p 5300 +short late.pipe.example A >/dev/null &
kdig_pid=$!
sleep 0.15 # the point: the query is in flight (the dead upstream holds it for 400 ms) when SIGTERM comes
kill -TERM "$DRV2_PID"
wait_until -t 3 lts_not kill -0 "$DRV2_PID"
wait "$kdig_pid"
check "SIGTERM with a query in flight: the second resolver exits" test "$(grep -c '^stats ' "$OUT2")" = 1 -a \
	! -d "/proc/$DRV2_PID"
check_eq "and nothing was reported after it was freed" "$(sed -n '/^stats /,$p' "$OUT2" | sed 1d)" ""

lts_done
