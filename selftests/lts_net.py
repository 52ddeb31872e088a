#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""lts_net.py - the traffic tools of the live selftests (servers and probes).

Run inside a test namespace with `ip netns exec`.  Every command is bounded
in time.  Probes exit 0 when the exchange completed and 1 when it did not;
they never retry.  Times are CLOCK_BOOTTIME seconds, the clock latch's
deadlines use.

  serve [--tcp PORT]... [--udp PORT]... [--addr ADDR]... [--log FILE]
        echo servers, TCP on every address (dual stack), UDP on each ADDR
        (default every address); with --log, one line per TCP line received,
        "BOOTTIME LOCALADDR PEER TEXT", and per datagram, "... PEER udp TEXT"
  dns-serve ADDR [--port 53]   answer every query (UDP and TCP) with one A record
  tcp HOST PORT [--bind SRC] [--timeout S]    connect, send a line, get it back
  udp HOST PORT [--bind SRC] [--timeout S] [--payload TEXT]
                                              send a datagram, get it back
  ping HOST [--bind SRC] [--timeout S]        one ICMP/ICMPv6 echo
  dns HOST [--count N] [--wait S] [--tcp]     send N queries as fast as possible,
        print how many were answered; exit 0 if at least one was
  stream HOST PORT --duration S [--interval S]   one TCP connection sending a
        timestamped line every interval; exit 0 if it connected
  udpstream HOST PORT --duration S [--interval S]   datagrams "N BOOTTIME";
        prints how many were sent
  dnsburst SERVER DOMAIN [--count N] [--wait S]   N queries for unique random
        names under DOMAIN (TXT and A by turns); prints "rcodeR=K ... unanswered=U"
"""
import argparse
import os
import select
import socket
import struct
import sys
import time


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def make_sock(host, kind, bind, proto=0):
    s = socket.socket(family_of(host), kind, proto)
    if bind:
        s.bind((bind, 0))
    return s


# --------------------------------------------------------------- servers


def cmd_serve(a):
    listeners, udps, conns = [], [], {}
    log = open(a.log, "a", buffering=1) if a.log else None
    for port in a.tcp:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        s.listen(64)
        listeners.append(s)
    # UDP is bound per address so that a reply leaves from the address the
    # query went to (a socket on "::" would answer from the route's source)
    for port in a.udp:
        for addr in a.addr or ["::"]:
            s = socket.socket(family_of(addr), socket.SOCK_DGRAM)
            if addr == "::":
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind((addr, port))
            udps.append(s)
    end = time.monotonic() + a.lifetime
    print("ready", flush=True)
    while time.monotonic() < end:
        r, _, _ = select.select(listeners + udps + list(conns), [], [], 0.5)
        for s in r:
            if s in listeners:
                try:
                    c, _ = s.accept()
                except OSError:
                    continue
                conns[c] = b""
            elif s in udps:
                try:
                    data, peer = s.recvfrom(65535)
                    if log:
                        log.write("%.6f %s %s udp %s\n" % (boottime(), s.getsockname()[0], peer[0],
                                                            data.decode(errors="replace")))
                    s.sendto(data, peer)
                except OSError:
                    pass
            else:
                try:
                    data = s.recv(65535)
                except OSError:
                    data = b""
                if not data:
                    conns.pop(s, None)
                    s.close()
                    continue
                buf = conns[s] + data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if log:
                        local = s.getsockname()[0].replace("::ffff:", "")
                        peer = s.getpeername()[0].replace("::ffff:", "")
                        log.write("%.6f %s %s %s\n" % (boottime(), local, peer, line.decode(errors="replace")))
                    try:
                        s.sendall(line + b"\n")
                    except OSError:
                        pass
                conns[s] = buf


def dns_answer(q):
    if len(q) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    if flags & 0x8000 or qd != 1:
        return None
    # the question ends at the zero label, then QTYPE and QCLASS
    i = 12
    while i < len(q) and q[i] != 0:
        i += q[i] + 1
    question = q[12:i + 5]
    hdr = struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0)
    answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("203.0.113.99")
    return hdr + question + answer


def cmd_dns_serve(a):
    s = socket.socket(family_of(a.addr), socket.SOCK_DGRAM)
    s.bind((a.addr, a.port))
    t = socket.socket(family_of(a.addr), socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((a.addr, a.port))
    t.listen(16)
    end = time.monotonic() + a.lifetime
    print("ready", flush=True)
    while time.monotonic() < end:
        r, _, _ = select.select([s, t], [], [], 0.5)
        if s in r:
            data, peer = s.recvfrom(4096)
            ans = dns_answer(data)
            if ans:
                s.sendto(ans, peer)
        if t in r:
            c, _ = t.accept()
            c.settimeout(1)
            try:
                n = struct.unpack("!H", c.recv(2))[0]
                ans = dns_answer(c.recv(n))
                if ans:
                    c.sendall(struct.pack("!H", len(ans)) + ans)
            except (OSError, struct.error):
                pass
            c.close()


# --------------------------------------------------------------- probes


def client_hello(name):
    """The ClientHello this Python's TLS would send naming NAME (None: no server name)."""
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=name or None)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def with_ech(hello):
    """HELLO with its padding extension (21) retyped encrypted_client_hello (0xfe0d): a crafted ECH offer."""
    b = bytearray(hello)
    off = 9 + 2 + 32
    off += 1 + b[off]
    off += 2 + int.from_bytes(b[off:off + 2], "big")
    off += 1 + b[off]
    end = off + 2 + int.from_bytes(b[off:off + 2], "big")
    off += 2
    while off + 4 <= end:
        if int.from_bytes(b[off:off + 2], "big") == 21:
            b[off:off + 2] = b"\xfe\x0d"
            return bytes(b)
        off += 4 + int.from_bytes(b[off + 2:off + 4], "big")
    raise SystemExit("lts_net: this ClientHello has no padding extension to retype")


def cmd_tcp(a):
    s = make_sock(a.host, socket.SOCK_STREAM, a.bind)
    s.settimeout(a.timeout)
    # --sni NAME: a real ClientHello first (what a name-checked port wants), echoed with the line,
    # or answered by a TLS server
    first = client_hello(a.sni) + b"\n" if a.sni is not None else b""
    if a.ech:
        first = with_ech(first[:-1]) + b"\n"
    try:
        s.connect((a.host, a.port))
        s.sendall(first + b"latch-selftest\n")
        got = b""
        while not got.endswith(b"latch-selftest\n"):
            # a TLS server's answer to the ClientHello (a handshake record) is an answer too
            if first and got[:2] == b"\x16\x03":
                return 0
            d = s.recv(4096)
            if not d:
                break
            got += d
        return 0 if got == first + b"latch-selftest\n" else 1
    except OSError:
        return 1


def cmd_udp(a):
    s = make_sock(a.host, socket.SOCK_DGRAM, a.bind)
    s.settimeout(a.timeout)
    try:
        payload = a.payload.encode()
        s.sendto(payload, (a.host, a.port))
        d, _ = s.recvfrom(len(payload) + 1)
        return 0 if d == payload else 1
    except OSError:
        return 1


def cmd_ping(a):
    v6 = family_of(a.host) == socket.AF_INET6
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    s = make_sock(a.host, socket.SOCK_RAW, a.bind, proto)
    ident = os.getpid() & 0xFFFF
    typ = 128 if v6 else 8
    payload = b"latch-selftest"
    hdr = struct.pack("!BBHHH", typ, 0, 0, ident, 1)
    csum = 0
    if not v6:  # the kernel fills in the ICMPv6 checksum
        data = hdr + payload
        total = sum(struct.unpack("!%dH" % (len(data) // 2), data + b"\0" * (len(data) % 2)))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        csum = ~total & 0xFFFF
    pkt = struct.pack("!BBHHH", typ, 0, csum, ident, 1) + payload
    s.sendto(pkt, (a.host, 0))
    end = time.monotonic() + a.timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return 1
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return 1
        d, _ = s.recvfrom(2048)
        if not v6:
            d = d[(d[0] & 0x0F) * 4:]
        if len(d) >= 8:
            t, _, _, rid, _ = struct.unpack("!BBHHH", d[:8])
            if t == (129 if v6 else 0) and rid == ident:
                return 0


def dns_query(qid, name="example.com", qtype=1):
    hdr = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\x00"
    return hdr + q + struct.pack("!HH", qtype, 1)


def udp_replies(s, wait, qids):
    """Replies to the queries qids on the non-blocking socket s, within wait seconds: {qid: rcode}."""
    got = {}
    end = time.monotonic() + wait
    while len(got) < len(qids):
        left = end - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([s], [], [], left)
        if not r:
            break
        try:
            d = s.recv(4096)
        except OSError:
            continue
        if len(d) >= 12 and d[2] & 0x80:
            qid = struct.unpack("!H", d[:2])[0]
            if qid in qids:
                got[qid] = d[3] & 0x0F
    return got


def cmd_dns(a):
    answered = set()
    if a.tcp:
        # one connection per query; the bucket charges each SYN
        for qid in range(1, a.count + 1):
            s = socket.socket(family_of(a.host), socket.SOCK_STREAM)
            s.settimeout(a.wait)
            try:
                s.connect((a.host, 53))
                q = dns_query(qid)
                s.sendall(struct.pack("!H", len(q)) + q)
                if len(s.recv(2)) == 2:
                    answered.add(qid)
            except OSError:
                pass
            s.close()
    else:
        s = socket.socket(family_of(a.host), socket.SOCK_DGRAM)
        s.setblocking(False)
        for qid in range(1, a.count + 1):
            try:
                s.sendto(dns_query(qid), (a.host, 53))
            except OSError:
                pass
        answered = set(udp_replies(s, a.wait, set(range(1, a.count + 1))))
    print(len(answered))
    return 0 if answered else 1


def cmd_stream(a):
    s = socket.socket(family_of(a.host), socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((a.host, a.port))
    except OSError:
        return 1
    s.setblocking(False)
    end = time.monotonic() + a.duration
    n = 0
    while time.monotonic() < end:
        n += 1
        try:
            s.send(b"%d %.6f\n" % (n, boottime()))
        except OSError:
            pass  # buffer full or reset: keep time, the server's log decides
        try:
            while s.recv(65535):
                pass
        except OSError:
            pass
        time.sleep(a.interval)
    return 0


def cmd_udpstream(a):
    """Numbered datagrams "N SEND_BOOTTIME" every interval: a loss shows as a missing N."""
    s = socket.socket(family_of(a.host), socket.SOCK_DGRAM)
    end = time.monotonic() + a.duration
    n = 0
    while time.monotonic() < end:
        n += 1
        try:
            s.sendto(b"%d %.6f" % (n, boottime()), (a.host, a.port))
        except OSError:
            pass
        time.sleep(a.interval)
    print(n)
    return 0


def cmd_dnsburst(a):
    """COUNT queries for unique random names under DOMAIN (TXT, then A); prints rcode counts."""
    import random
    s = socket.socket(family_of(a.server), socket.SOCK_DGRAM)
    s.setblocking(False)
    qids = set(range(1, a.count + 1))
    for qid in sorted(qids):
        label = "%016x" % random.getrandbits(64)
        try:
            s.sendto(dns_query(qid, "%s.%s" % (label, a.domain), 16 if qid % 2 else 1), (a.server, 53))
        except OSError:
            pass
        if qid % 20 == 0:
            time.sleep(0.01)  # a trickle, not a flood: the kernel's DNS bucket is not what this tests
    got = udp_replies(s, a.wait, qids)
    rcodes = {}
    for rc in got.values():
        rcodes[rc] = rcodes.get(rc, 0) + 1
    pending = qids - set(got)
    print(" ".join("rcode%d=%d" % (k, v) for k, v in sorted(rcodes.items())) or "none",
          "unanswered=%d" % len(pending))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("serve")
    c.add_argument("--tcp", type=int, action="append", default=[])
    c.add_argument("--udp", type=int, action="append", default=[])
    c.add_argument("--addr", action="append", default=[], help="UDP addresses (default ::)")
    c.add_argument("--log")
    c.add_argument("--lifetime", type=float, default=600)
    c = sub.add_parser("dns-serve")
    c.add_argument("addr")
    c.add_argument("--port", type=int, default=53)
    c.add_argument("--lifetime", type=float, default=600)
    for name in ("tcp", "udp"):
        c = sub.add_parser(name)
        c.add_argument("host")
        c.add_argument("port", type=int)
        c.add_argument("--bind")
        c.add_argument("--timeout", type=float, default=1.0)
        if name == "udp":
            c.add_argument("--payload", default="latch-selftest")
        else:
            c.add_argument("--sni", help="send a TLS ClientHello naming SNI first ('': none)")
            c.add_argument("--ech", action="store_true", help="... with an encrypted_client_hello extension")
    c = sub.add_parser("ping")
    c.add_argument("host")
    c.add_argument("--bind")
    c.add_argument("--timeout", type=float, default=1.0)
    c = sub.add_parser("dns")
    c.add_argument("host")
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--wait", type=float, default=1.0)
    c.add_argument("--tcp", action="store_true")
    c = sub.add_parser("stream")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--duration", type=float, required=True)
    c.add_argument("--interval", type=float, default=0.1)
    c = sub.add_parser("udpstream")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--duration", type=float, required=True)
    c.add_argument("--interval", type=float, default=0.01)
    c = sub.add_parser("dnsburst")
    c.add_argument("server")
    c.add_argument("domain")
    c.add_argument("--count", type=int, default=200)
    c.add_argument("--wait", type=float, default=3.0)
    a = p.parse_args()
    fn = {"serve": cmd_serve, "dns-serve": cmd_dns_serve, "tcp": cmd_tcp, "udp": cmd_udp,
          "ping": cmd_ping, "dns": cmd_dns, "stream": cmd_stream, "udpstream": cmd_udpstream,
          "dnsburst": cmd_dnsburst}[a.cmd]
    sys.exit(fn(a) or 0)


if __name__ == "__main__":
    main()
