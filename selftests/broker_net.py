#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""broker_net.py - the fake HTTPS upstream and the guest-side clients of live_broker.sh.

  serve --addr A [--addr A...] --port P --cert C --key K --log FILE [--git-root DIR --git-auth VALUE]
      HTTPS/1.1 (keep-alive) upstream; every request's method, path and headers
      go to FILE as one JSON line, so the test can see what the upstream got.
        /v1/echo...     200, JSON of the method, path, headers and body length
        ...?pause=S     any path: S seconds (5 at most) before the body is read
        /v1/sse         text/event-stream, 10 events 100 ms apart, each {"n", "t": send time}
        /v1/chunked     chunked body in 5 pieces
        /v1/close       body delimited by the connection's end (no length)
        /v1/big?n=N     N bytes
        /v1/reflect     the Authorization header's value, split over two chunks
        /v1/gzip        a gzip-encoded body
        /v1/teprefix    /v1/reflect's chunks under Transfer-Encoding: chunked and then Transfer-Encodingx: y
        /v1/noread      401 at once, without reading the request's body
        /v1/drip        the Authorization header's value a byte a chunk (each with a chunk extension, each
                        its own TLS record) and in a trailer; ?cl=1: under a Content-Length, a byte a record
        /v1/early       two 103s with Link headers and a 100, each cut over writes at its CR, LF and
                        colon, then the response (X-After: 1)
        /v1/hintbody    a 103 with a Content-Length body, /v1/continuebody a 100 with a chunked one (a 1xx
                        has none, RFC 9112 6.3: its bytes are where the next head should be), then the
                        response
        /v1/upgrade     a 101 Switching Protocols nobody asked for
        /v1/tegzip      the Authorization header's value under Transfer-Encoding: gzip, chunked
        /v1/reason      the key (the Authorization value after its scheme) as the reason phrase, a
                        header name and inside a longer value, in a 401
        /v1/nocontent   a 204 with a Content-Length
        /v1/splithead   a head of 80 lines (10 KB) sent in three writes 50 ms apart (three TLS records)
        /v1/interim     a 100 Continue before the response (which has X-After: 1)
        /v1/bytehead    a head of 12 lines, each byte its own TLS record, written back to back (they
                        arrive together: OpenSSL reads them ahead), then the body
        /git/...        git http-backend (smart HTTP), only with Authorization == --git-auth
  raw HOST PORT REQUEST [--bind SRC]   REQUEST with \\r \\n escapes; prints "STATUS<TAB>first body line"
                                        (or "CLOSED" when the connection ended without a response)
  late HOST PORT HEAD BODY             HEAD, then BODY once HEAD's response is whole; prints every status
  sse URL                              prints one line per event: n, delay_ms (arrival - send time)
  stall HOST PORT PATH --pid P --secs S [--header H] [--upload N [--behind PATH2]]
                                        a side that stops: GET PATH, read 64 KiB of its body, stop
                                        reading for S s; or (--upload) POST N bytes to PATH (whose
                                        upstream pauses) as fast as the socket takes them; --behind:
                                        GET PATH2 (whose upstream pauses) first, the POST pipelined
                                        behind it.  Prints JSON: P's VmRSS (kB) before and after S s,
                                        the body bytes read (GET) or the response's body_len and
                                        whether its SHA-256 matched (and PATH2's status)
  hold HOST PORT PATH --pid P --count N --size S [--chunked] [--header H]
                                        N connections each send a POST's head and S bytes of its
                                        body (of S+1, or chunked) and wait: JSON of P's VmRSS before
                                        and after, how many were refused with 503, answered otherwise,
                                        closed unanswered or still waiting, and the last answer's line
  connect HOST PORT NAME SNI [--bind]  CONNECT NAME:443, then a TLS ClientHello with SNI; prints the
          [--again FILE] [--early]      CONNECT status and "tls-ok", "tls-cut" or the HTTP answer; with
                                        --again, once FILE exists (5 s at most) a second request on the
                                        same tunnel, and its "tls-ok" or "tls-cut"; --early: the
                                        ClientHello in the CONNECT's write, before the 200
          [--pid P --stall-upload N | --stall-download N]
                                        through the tunnel, as stall: POST N bytes to /v1/echo?pause=3,
                                        or GET /v1/big?n=N and read nothing for 1 s; prints stall's JSON
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def linger(self):
        """After an answer that did not wait for the body, what the client still sends of it is read and
        dropped (3 s at most), as real servers do (nginx's lingering_close): a close with it unread would
        reset the connection, and the reset could throw the answer away."""
        self.wfile.flush()
        left = int(self.headers.get("Content-Length") or 0)
        self.connection.settimeout(3)
        try:
            while left > 0:
                b = self.connection.recv(min(65536, left))
                if not b:
                    break
                left -= len(b)
        except OSError:
            pass

    def record(self, body_len):
        with self.server.log_lock:
            with open(self.server.log, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path,
                                    "headers": [[k, v] for k, v in self.headers.items()],
                                    "body_len": body_len}) + "\n")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(n) if n else b""

    def send(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def handle_any(self):
        if self.path.startswith("/v1/noread"):  # an answer before the body, as a 401 or a 413 may come
            self.record(-1)
            self.close_connection = True
            self.send(401, b"no\n", "text/plain")
            return self.linger()
        pause = re.search(r"[?&]pause=([0-9.]+)", self.path)
        if pause:  # a slow reader: the broker must hold the guest's body back meanwhile
            time.sleep(min(float(pause.group(1)), 5))
        data = self.body()
        self.record(len(data))
        p = self.path
        if p.startswith("/git/"):
            return self.git(data)
        if p.startswith("/v1/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for n in range(10):
                time.sleep(0.1)
                self.chunk(b"data: %s\n\n" % json.dumps({"n": n, "t": time.time()}).encode())
            self.wfile.write(b"0\r\n\r\n")
            return
        if p.startswith("/v1/chunked"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(5):
                self.chunk(b"piece %d\n" % n)
            self.wfile.write(b"0\r\n\r\n")
            return
        if p.startswith("/v1/close"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until the end\n")
            self.close_connection = True
            return
        if p.startswith("/v1/big"):
            n = int(p.split("n=")[1]) if "n=" in p else 1 << 20
            return self.send(200, b"x" * n, "application/octet-stream")
        if p.startswith(("/v1/reflect", "/v1/teprefix")):
            v = (self.headers.get("Authorization") or "").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("X-Reflect", v.decode())
            self.send_header("Transfer-Encoding", "chunked")
            if p.startswith("/v1/teprefix"):  # http-parser reads this as undoing the chunked above
                self.send_header("Transfer-Encodingx", "y")
            self.end_headers()
            self.chunk(b"you sent: " + v[:len(v) // 2])
            time.sleep(0.05)
            self.chunk(v[len(v) // 2:] + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if p.startswith("/v1/splithead"):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + b"".join(
                b"X-Line-%d: %s\r\n" % (i, b"v" * 110) for i in range(80)) + b"Content-Length: 6\r\n\r\n"
            cut = (len(head) // 3, 2 * len(head) // 3)
            for piece in (head[:cut[0]], head[cut[0]:cut[1]], head[cut[1]:] + b"split\n"):
                self.wfile.write(piece)
                self.wfile.flush()
                time.sleep(0.05)
            return
        if p.startswith("/v1/bytehead"):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + b"".join(
                b"X-Byte-%d: %s\r\n" % (i, b"b" * 20) for i in range(10)) + b"Content-Length: 6\r\n\r\n"
            for i in range(len(head)):
                self.wfile.write(head[i:i + 1])
            self.wfile.write(b"bytes\n")
            self.wfile.flush()
            return
        if p.startswith("/v1/interim"):
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
            time.sleep(0.05)
            return self.send(200, b"after the interim\n", "text/plain", [("X-After", "1")])
        if p.startswith(("/v1/early", "/v1/hintbody", "/v1/continuebody")):
            pieces = [b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n",
                      b"HTTP/1.1 103 Early Hints\r\nLink: </c.css>; rel=preload\r\n\r\n",
                      b"HTTP/1.1 100 Continue\r\n\r\n"]
            if p.startswith("/v1/hintbody"):
                pieces = [b"HTTP/1.1 103 Early Hints\r\nLink: </c.css>; rel=preload\r\nContent-Length: 5\r\n\r\nEVIL!"]
            if p.startswith("/v1/continuebody"):
                pieces = [b"HTTP/1.1 100 Continue\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nEVIL2!\r\n0\r\n\r\n"]
            for piece in pieces:
                # cut at the first CR, the LF after it and the first colon: three more records
                cuts = sorted({piece.find(b"\r"), piece.find(b"\r") + 1, piece.find(b":")} - {-1, 0})
                for a, b in zip([0] + cuts, cuts + [len(piece)]):
                    self.wfile.write(piece[a:b])
                    self.wfile.flush()
                    time.sleep(0.01)
            return self.send(200, b"after the hints\n", "text/plain", [("X-After", "1")])
        if p.startswith("/v1/upgrade"):
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
            return self.send(200, b"not http\n", "text/plain")
        if p.startswith("/v1/tegzip"):
            v = (self.headers.get("Authorization") or "").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "gzip, chunked")
            self.end_headers()
            self.chunk(gzip.compress(b"you sent: " + v + b"\n"))
            self.wfile.write(b"0\r\n\r\n")
            return
        if p.startswith("/v1/reason"):
            key = (self.headers.get("Authorization") or "").partition(" ")[2]
            body = b"bad key\n"
            self.wfile.write(("HTTP/1.1 401 invalid key %s\r\n%s: 1\r\nX-Why: the key %s was refused\r\n"
                              "Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                              % (key, key, key, len(body))).encode() + body)
            return
        if p.startswith("/v1/nocontent"):
            self.wfile.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Nc: 1\r\n\r\n")
            return
        if p.startswith("/v1/drip"):
            v = (self.headers.get("Authorization") or "").encode()
            body = b"you sent: " + v + b"\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            if "cl=1" in p:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", "X-Key")
            self.end_headers()
            for i in range(len(body)):
                self.wfile.write(b"1;n=%d\r\n%s\r\n" % (i, body[i:i + 1]))
                self.wfile.flush()
            self.wfile.write(b"0\r\nX-Key: %s\r\n\r\n" % v)
            return
        if p.startswith("/v1/gzip"):
            return self.send(200, gzip.compress(b"hello\n"), "text/plain", [("Content-Encoding", "gzip")])
        if p.startswith("/v1/"):
            return self.send(200, json.dumps({"method": self.command, "path": p, "body_len": len(data),
                                              "body_sha256": hashlib.sha256(data).hexdigest(),
                                              "headers": dict(self.headers.items())}).encode() + b"\n")
        self.send(404, b"not here\n", "text/plain")

    def git(self, data):
        if self.headers.get("Authorization") != self.server.git_auth:
            return self.send(401, b"auth\n", "text/plain", [("WWW-Authenticate", 'Basic realm="git"')])
        path, _, query = self.path[len("/git"):].partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=self.server.git_root, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), REMOTE_USER="x",
                   CONTENT_LENGTH=str(len(data)))
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "text/plain")
        self.send(status, body, ctype, [h for h in headers if h[0].lower() != "content-type"])

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


def serve(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    servers = []
    for addr in a.addr:
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        cls = type("S", (ThreadingHTTPServer,), {"address_family": fam, "daemon_threads": True})
        s = cls((addr, a.port), Upstream)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
        s.log, s.log_lock, s.git_root, s.git_auth = a.log, threading.Lock(), a.git_root, a.git_auth
        servers.append(s)
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    time.sleep(a.lifetime)


def unescape(s):
    return s.encode().decode("unicode_escape").encode("latin-1")


def read_head(s):
    """What S sends up to the end of a response head (or until it closes): the head and any bytes after it."""
    resp = b""
    while b"\r\n\r\n" not in resp:
        b = s.recv(4096)
        if not b:
            break
        resp += b
    return resp


def content_length(head):
    """A response head's Content-Length, or None."""
    cl = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
    return int(cl.group(1)) if cl else None


def complete(data):
    """Does DATA hold a whole response with a Content-Length body?"""
    head, sep, body = data.partition(b"\r\n\r\n")
    cl = content_length(head)
    return bool(sep and cl is not None and len(body) >= cl)


def read_response(s, data, whole=False):
    """DATA and what S sends after it: up to the end of the first response's Content-Length body, or
    (WHOLE, or no Content-Length) until S closes.  A timeout carries what was read as its last arg."""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout as t:
            raise socket.timeout(*t.args, data)
        if not b:
            return data
        data += b
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and not whole:
            cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if cl and len(body) >= int(cl[0].split(b":")[1]):
                return data


def raw(a):
    s = socket.create_connection((a.host, a.port), timeout=a.timeout,
                                 source_address=(a.bind, 0) if a.bind else None)
    s.sendall(unescape(a.request))
    s.sendall(b"x" * a.body_bytes)  # a body sent whole before a byte of the answer is read
    data = b""
    try:
        data = read_response(s, data, whole=a.full)
    except socket.timeout as t:
        data = t.args[-1] if t.args and isinstance(t.args[-1], bytes) else data
    if not data:
        print("CLOSED")
        return
    head, _, body = data.partition(b"\r\n\r\n")
    if a.full:
        sys.stdout.write(data.decode("latin-1"))
        return
    status = head.split(b"\r\n")[0].split(b" ")[1].decode()
    print("%s\t%s" % (status, body.split(b"\n")[0].decode("latin-1")))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def send_chained(s, n, seed, digest):
    """N bytes to S as fast as it takes them, in 64 KiB blocks each the SHA-256 of the last (the first
    SEED's) repeated; DIGEST is updated with every byte sent."""
    b = hashlib.sha256(seed).digest() * 2048
    while n > 0:
        piece = b[:n]
        digest.update(piece)
        s.sendall(piece)
        n -= len(piece)
        b = hashlib.sha256(b).digest() * 2048


def stall(a):
    """One side of an exchange stops taking bytes; the other goes on as fast as it can."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if a.rcvbuf:  # before connect, so the window stays small: the broker's buffer fills, not ours
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    s.settimeout(30)
    s.connect((a.host, a.port))
    hdrs = "".join("%s\r\n" % h for h in a.header)
    out = {"rss_before": rss_kb(a.pid)}
    if a.upload:
        digest, sent = hashlib.sha256(), []

        def pump():
            if a.behind:  # a request whose answer waits, and the upload pipelined behind it
                s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (a.behind, hdrs)).encode())
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n"
                       % (a.path, hdrs, a.upload)).encode())
            send_chained(s, a.upload, b"latch", digest)
            sent.append(True)

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        time.sleep(a.secs)
        out["rss_during"] = rss_kb(a.pid)
        t.join(30)
        rest = b""
        if a.behind:
            first = read_response(s, b"")
            head, _, rest = first.partition(b"\r\n\r\n")
            out["behind_status"] = int(head.split(b" ")[1])
            rest = rest[content_length(head):]  # what came after the first answer: the start of the second
        body = rest if complete(rest) else read_response(s, rest)
        body = body.partition(b"\r\n\r\n")[2]
        answer = json.loads(body.decode() or "{}")
        out["body_len"] = answer.get("body_len")
        out["sha_ok"] = bool(sent) and answer.get("body_sha256") == digest.hexdigest()
    else:
        if a.post is not None:
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s"
                       % (a.path, hdrs, len(a.post), a.post)).encode())
        else:
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (a.path, hdrs)).encode())
        head, _, body = read_head(s).partition(b"\r\n\r\n")
        while len(body) < 65536:
            more = s.recv(65536)
            if not more:
                break
            body += more
        want = int(re.search(rb"(?i)content-length: *([0-9]+)", head).group(1))
        time.sleep(a.secs)
        out["rss_during"] = rss_kb(a.pid)
        got = len(body)
        kept = open(a.out, "wb") if a.out else None
        if kept:
            kept.write(body)
        while got < want:
            more = s.recv(1 << 20)
            if not more:
                break
            got += len(more)
            if kept:
                kept.write(more)
        if kept:
            kept.close()
        out["received"] = got
    print(json.dumps(out))


def late(a):
    """HEAD, then once its response is whole, BODY on the same connection: every status line that comes."""
    s = socket.create_connection((a.host, a.port), timeout=a.timeout)
    s.sendall(unescape(a.head))
    data = read_response(s, b"")
    try:
        s.sendall(unescape(a.body))
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (socket.timeout, OSError):
        pass
    print(" ".join(m.decode() for m in re.findall(rb"HTTP/1\.1 (\d\d\d) ", data)) or "none")


def hold(a):
    """N connections each send a metered request's head and all its body but the last byte, at once."""
    out = {"rss_before": rss_kb(a.pid)}
    socks = []
    for i in range(a.count):
        s = socket.create_connection((a.host, a.port), timeout=10)
        socks.append(s)
        head = "POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (a.path, "".join("%s\r\n" % h for h in a.header))
        if a.chunked:
            s.sendall((head.replace("\r\n\r\n", "\r\nTransfer-Encoding: chunked\r\n\r\n", 1)).encode())
        else:
            s.sendall((head.replace("\r\n\r\n", "\r\nContent-Length: %d\r\n\r\n" % (a.size + 1), 1)).encode())

    def pump(s):
        block = b"a" * 65536
        left = a.size
        try:
            while left > 0:
                piece = block[:left]
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if a.chunked else piece)
                left -= len(piece)
        except OSError:  # refused and closed mid-body: what the broker answered is read below
            pass
    threads = [threading.Thread(target=pump, args=(s,), daemon=True) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    time.sleep(0.5)
    out["rss_during"] = rss_kb(a.pid)
    statuses = []
    for s in socks:
        s.settimeout(0.2)
        try:
            got = s.recv(4096) or b"closed"
        except socket.timeout:
            got = b""  # still waiting for its answer
        except OSError:
            got = b"closed"
        statuses.append(int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.1 ") else -1 if got else 0)
        if got.startswith(b"HTTP/1.1 "):
            out["line"] = got.partition(b"\r\n\r\n")[2].decode().strip()
    out["waiting"] = statuses.count(0)
    out["refused_503"] = statuses.count(503)
    out["closed"] = statuses.count(-1)  # unanswered: cut, or its answer lost to the reset of the close
    out["other"] = len(statuses) - out["waiting"] - out["refused_503"] - out["closed"]
    for s in socks:
        s.close()
    print(json.dumps(out))


def idle(a):
    """COUNT requests GAP seconds apart on one connection, then wait: how many were answered, and
    whether and when (seconds after the last answer, or the connect) the broker closed it."""
    s = socket.create_connection((a.host, a.port), timeout=a.wait)
    since, answered = time.time(), 0
    try:
        for _ in range(a.count):
            time.sleep(a.gap)
            s.sendall(unescape(a.request))
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    raise ConnectionError
                data += b
                head, sep, body = data.partition(b"\r\n\r\n")
                cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if sep and cl and len(body) >= int(cl[0].split(b":")[1]):
                    break
            answered += 1
            since = time.time()
        end = "closed" if not s.recv(1) else "data"
    except socket.timeout:
        end = "open"
    except ConnectionError:
        end = "closed"
    print("%d %s %.1f" % (answered, end, time.time() - since))


def trickle(a):
    """REQUEST's first FIRST bytes, then the rest a byte every GAP seconds (--stop: nothing more):
    the answer's status (or -), and whether and when (seconds after the last byte sent) it closed."""
    req = unescape(a.request)
    s = socket.create_connection((a.host, a.port), timeout=a.wait)
    first = a.first if a.first > 0 else len(req) + a.first  # < 0: all but that many
    s.sendall(req[:first])
    for i in range(first, len(req) if not a.stop else first):
        time.sleep(a.gap)
        s.sendall(req[i:i + 1])
    since, status = time.time(), "-"
    try:
        got = s.recv(65536)
        if got.startswith(b"HTTP/1.1 "):
            status = got.split(b" ")[1].decode()
            got = read_response(s, got)
            since = time.time()
            s.settimeout(0.5)
            got = s.recv(1)
        end = "closed" if not got else "data"
    except socket.timeout:
        end = "open"
    except OSError:
        end = "closed"
    print("%s %s %.1f" % (status, end, time.time() - since))


def sse(a):
    host, _, rest = a.url[len("http://"):].partition("/")
    h, _, p = host.rpartition(":")
    s = socket.create_connection((h, int(p)), timeout=5)
    s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (rest, host, "".join(
        "%s\r\n" % x for x in a.header))).encode())
    buf = b""
    seen = 0
    while seen < 10:
        b = s.recv(65536)
        if not b:
            break
        now = time.time()
        buf += b
        while b"data: " in buf and b"\n\n" in buf.split(b"data: ", 1)[1]:
            ev, buf = buf.split(b"data: ", 1)[1].split(b"\n\n", 1)
            d = json.loads(ev)
            print("%d %.1f" % (d["n"], (now - d["t"]) * 1000), flush=True)
            seen += 1


def begin_tls(a, check_hostname=True):
    """A TLS client for --sni over memory BIOs, its ClientHello made and waiting in OUT: (t, inc, out)."""
    ctx = ssl.create_default_context(cafile=a.cafile)
    ctx.check_hostname = check_hostname
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(inc, out, server_hostname=a.sni)
    try:
        t.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return t, inc, out


def client_hello(a):
    """The ClientHello this client would send for --sni, for a caller that never finishes the handshake."""
    return begin_tls(a)[2].read()


def connect_early(a, s):
    """CONNECT and the ClientHello in one write, before the 200 (a client that does not wait)."""
    t, inc, out = begin_tls(a, check_hostname=False)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (a.name, a.name)).encode() + out.read())
    resp = read_head(s)
    head, _, rest = resp.partition(b"\r\n\r\n")
    line = head.split(b"\r\n")[0].decode()
    if " 200 " not in line + " ":
        print(line, rest.decode().strip(), sep="\t")
        return
    inc.write(rest)

    def pump(op):
        while True:
            try:
                return op()
            except ssl.SSLWantReadError:
                s.sendall(out.read())
                b = s.recv(65536)
                if not b:
                    raise ConnectionError
                inc.write(b)
    try:
        pump(t.do_handshake)
        t.write(b"GET /v1/echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % a.sni.encode())
        s.sendall(out.read())
        got = pump(lambda: t.read(4096))
        print(line, "tls-ok" if got.startswith(b"HTTP/1.1 200") else "tls-odd", sep="\t")
    except (ssl.SSLError, ConnectionError, socket.timeout, OSError):
        print(line, "tls-cut", sep="\t")


def connect_stall(a, s, t):
    """Through the tunnel T (on S): one side stops taking bytes while the other goes on, as stall()."""
    out = {"rss_before": rss_kb(a.pid)}
    t.settimeout(30)
    if a.stall_upload:
        digest, sent = hashlib.sha256(), []

        def pump():
            t.sendall(b"POST /v1/echo?pause=3 HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
                      % (a.sni.encode(), a.stall_upload))
            send_chained(t, a.stall_upload, b"tunnel", digest)
            sent.append(True)

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        time.sleep(1)
        out["rss_during"] = rss_kb(a.pid)
        th.join(30)
        got = b""
        while not complete(got):
            b = t.recv(65536)
            if not b:
                break
            got += b
        answer = json.loads(got.partition(b"\r\n\r\n")[2].decode() or "{}")
        out["body_len"] = answer.get("body_len")
        out["sha_ok"] = bool(sent) and answer.get("body_sha256") == digest.hexdigest()
    else:
        t.sendall(b"GET /v1/big?n=%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.stall_download, a.sni.encode()))
        got = t.recv(65536)
        time.sleep(1)
        out["rss_during"] = rss_kb(a.pid)
        head, _, body = got.partition(b"\r\n\r\n")
        n = len(body)
        while n < a.stall_download:
            b = t.recv(1 << 20)
            if not b:
                break
            n += len(b)
        out["received"] = n
    print(json.dumps(out))


def with_extension(hello, ext):
    """The ClientHello record HELLO with an extension of type EXT (8 bytes of payload) first among its own."""
    i = 5 + 4 + 2 + 32
    i += 1 + hello[i]
    i += 2 + int.from_bytes(hello[i:i + 2], "big")
    i += 1 + hello[i]
    add = ext.to_bytes(2, "big") + (8).to_bytes(2, "big") + b"\xec" * 8
    out = bytearray(hello[:i + 2] + add + hello[i + 2:])
    for at, width in ((i, 2), (6, 3), (3, 2)):  # the extensions', the handshake's and the record's lengths
        out[at:at + width] = (int.from_bytes(out[at:at + width], "big") + len(add)).to_bytes(width, "big")
    return bytes(out)


def tunnel_and_hello(a, s):
    """CONNECT to --name's port 443, then this client's ClientHello for --sni, not yet sent: (the status
    line, the hello), or (the status line, None) when the CONNECT was not answered 200."""
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (a.name, a.name)).encode())
    line = read_head(s).split(b"\r\n")[0].decode()
    if " 200 " not in line + " ":
        return line, None
    return line, client_hello(a)


def connect_hello_part(a, s):
    """After the 200, the first --hello-part bytes of this client's ClientHello, then the rest a byte every
    --hello-gap seconds (none: nothing more): a ServerHello, or the tunnel closed, and when."""
    line, hello = tunnel_and_hello(a, s)
    if hello is None:
        print(line)
        return
    part = a.hello_part if a.hello_part > 0 else len(hello) + a.hello_part  # < 0: all but that many
    s.sendall(hello[:part])
    if a.hello_gap:
        for i in range(part, len(hello)):
            time.sleep(a.hello_gap)
            s.sendall(hello[i:i + 1])
    since = time.time()
    try:
        got = s.recv(5)
    except socket.timeout:
        got = None
    except OSError:
        got = b""
    print(line, "server-hello" if got and got[:1] == b"\x16" else "open" if got is None else "closed",
          "%.1f" % (time.time() - since), sep="\t")


def connect_hello(a, s):
    """After the 200, this client's own ClientHello with --hello-ext's extension put in (none: as it is):
    does the upstream's ServerHello come back through the tunnel, or is the tunnel cut?"""
    line, hello = tunnel_and_hello(a, s)
    if hello is None:
        print(line)
        return
    s.sendall(hello if a.hello_ext == "none" else with_extension(hello, int(a.hello_ext, 0)))
    try:
        got = s.recv(5)
    except OSError:
        got = b""
    print(line, "server-hello" if got[:1] == b"\x16" else "tls-cut", sep="\t")


def connect(a):
    s = socket.create_connection((a.host, a.port), timeout=a.timeout,
                                 source_address=(a.bind, 0) if a.bind else None)
    if a.early:
        return connect_early(a, s)
    if a.hello_ext:
        return connect_hello(a, s)
    if a.hello_part:
        return connect_hello_part(a, s)
    if a.stall_upload or a.stall_download:  # a small window, so that the broker's buffer fills, not ours
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (a.name, a.name)).encode())
    resp = read_head(s)
    line = resp.split(b"\r\n")[0].decode()
    if " 200 " not in line + " ":
        print(line, resp.partition(b"\r\n\r\n")[2].decode().strip(), sep="\t")
        return
    ctx = ssl.create_default_context(cafile=a.cafile)
    ctx.check_hostname = False  # the test checks what the broker lets through, not the name
    def one(t, close):
        t.sendall(b"GET /v1/echo HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (a.sni.encode(),
                                                                     b"Connection: close\r\n" if close else b""))
        got = b""
        while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < int(
                [l for l in got.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1]):
            b = t.recv(4096)
            if not b:
                raise ConnectionError
            got += b
        return "tls-ok" if got.startswith(b"HTTP/1.1 200") else "tls-odd"

    out = [line]
    if a.stall_upload or a.stall_download:
        return connect_stall(a, s, ctx.wrap_socket(s, server_hostname=a.sni))
    try:
        t = ctx.wrap_socket(s, server_hostname=a.sni)
        out.append(one(t, not a.again))
        if a.again:
            print(*out, sep="\t", end="\t", flush=True)
            out = []
            for _ in range(100):
                if os.path.exists(a.again):
                    break
                time.sleep(0.05)
            out.append(one(t, True))
    except (ssl.SSLError, ConnectionError, socket.timeout, OSError, IndexError):
        out.append("tls-cut")
    print(*out, sep="\t")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--addr", action="append", required=True)
    p.add_argument("--port", type=int, default=443)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--git-root", default="")
    p.add_argument("--git-auth", default="")
    p.add_argument("--lifetime", type=float, default=300)
    p = sub.add_parser("raw")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("request")
    p.add_argument("--bind")
    p.add_argument("--full", action="store_true")
    p.add_argument("--timeout", type=float, default=3)
    p.add_argument("--body-bytes", type=int, default=0, help="N bytes after the request, sent before reading")
    p = sub.add_parser("late")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("head")
    p.add_argument("body")
    p.add_argument("--timeout", type=float, default=1.5)
    p = sub.add_parser("hold")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("path")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--chunked", action="store_true")
    p.add_argument("--header", action="append", default=[])
    p = sub.add_parser("idle")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("request")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--gap", type=float, default=0)
    p.add_argument("--wait", type=float, default=6)
    p = sub.add_parser("trickle")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("request")
    p.add_argument("--first", type=int, required=True)
    p.add_argument("--gap", type=float, default=0)
    p.add_argument("--stop", action="store_true", help="send nothing after the first bytes")
    p.add_argument("--wait", type=float, default=6)
    p = sub.add_parser("sse")
    p.add_argument("url")
    p.add_argument("--header", action="append", default=[])
    p = sub.add_parser("stall")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("path")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--secs", type=float, default=2)
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--upload", type=int, default=0)
    p.add_argument("--behind", help="upload: first GET this path (whose upstream pauses), the upload pipelined")
    p.add_argument("--post", help="download: POST this body (default GET)")
    p.add_argument("--rcvbuf", type=int, default=0, help="the socket's SO_RCVBUF, set before connecting")
    p.add_argument("--out", help="download: write the body here")
    p = sub.add_parser("connect")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("name")
    p.add_argument("sni")
    p.add_argument("--cafile")
    p.add_argument("--bind")
    p.add_argument("--again")
    p.add_argument("--early", action="store_true")
    p.add_argument("--hello-part", type=int, default=0, help="send this many bytes of the ClientHello first")
    p.add_argument("--hello-gap", type=float, default=0, help="then the rest a byte every this many seconds")
    p.add_argument("--hello-ext", help="send this client's ClientHello with an extension of this type put in "
                   "(none: as it is) and say whether a ServerHello comes back")
    p.add_argument("--pid", type=int)
    p.add_argument("--stall-upload", type=int, default=0, help="POST N bytes to an upstream that pauses 3 s")
    p.add_argument("--stall-download", type=int, default=0, help="GET N bytes, then read nothing for 1 s")
    p.add_argument("--timeout", type=float, default=3)
    a = ap.parse_args()
    {"serve": serve, "raw": raw, "late": late, "idle": idle, "trickle": trickle, "sse": sse, "connect": connect,
     "stall": stall, "hold": hold}[a.cmd](a)


if __name__ == "__main__":
    main()
