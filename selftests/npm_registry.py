#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
# npm_registry.py - a static fake npm registry over HTTPS for live_setup.sh:
# ROOT's files served as they are (NAME/-/BASE-VERSION.tgz, NAME/VERSION for
# metadata; a FILE.redirect beside one answers 302 to the URL it holds), each request's path logged one a line to LOG, "ready" printed
# once listening.  Bound to one address of the test's namespace; it exits
# after LIFETIME seconds whatever happens.
import argparse
import http.server
import os
import ssl
import sys
import threading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--port", type=int, default=443)
    ap.add_argument("--root", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=int, default=120)
    ap.add_argument("--plain", action="store_true", help="plain HTTP, no TLS (what a redirect must not reach)")
    a = ap.parse_args()
    root = os.path.realpath(a.root)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with open(a.log, "a") as f:
                f.write(self.path + "\n")
            path = os.path.realpath(os.path.join(root, self.path.lstrip("/")))
            if path.startswith(root + "/") and os.path.isfile(path + ".redirect"):
                # PATH.redirect holds a Location: the registry sends the client elsewhere
                with open(path + ".redirect") as f:
                    self.send_response(302)
                    self.send_header("Location", f.read().strip())
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                return
            if not path.startswith(root + "/") or not os.path.isfile(path):
                self.send_error(404)
                return
            with open(path, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer((a.addr, a.port), Handler)
    if not a.plain:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
