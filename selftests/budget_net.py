#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""budget_net.py - fake AI provider upstreams and the guest's clients for live_budget.sh.

  serve --addr A --port P --cert C --key K --log FILE [--usage in=N,out=N,...]
      One HTTPS/1.1 server (keep-alive) that answers in the shape of the provider
      its Host names (openai.*, anthropic.*, gemini.*), as their API references
      document it, streamed or not:
        OpenAI   POST /v1/chat/completions   JSON, or SSE chunks ("stream": true) whose
                                              last chunk carries usage, then [DONE]
                 POST /v1/responses          JSON, or SSE events ending in response.completed
                 anything else under /v1/    a chat completion (a provider that reads the
                                              path loosely: what a spelling trick hopes for)
        Anthropic POST /v1/messages          JSON, or SSE: message_start's usage, content
                                              deltas, message_delta's output_tokens, message_stop
                 POST /v1/messages/count_tokens {"input_tokens": N}
        Gemini   POST /v1beta/models/M:generateContent        JSON with usageMetadata
                 POST ...:streamGenerateContent?alt=sse       SSE, usageMetadata on every event
                 POST ...:streamGenerateContent               one JSON array, element by element
                 POST /v1beta/openai/chat/completions          its OpenAI-compatible endpoint:
                                              answered as OpenAI's chat completions
      A real client (live_clients.sh) sends no X-Fake-* header: --usage gives the counts
      reported then (none: zeros).  OpenAI's Responses stream carries the message item's
      events as the API sends them (output_item.added, content_part.added, the deltas,
      output_text.done, content_part.done, output_item.done), which Codex needs.
      The test steers each request with headers the broker passes on:
        X-Fake-Usage: in=N,out=N,cached=N,cw=N,cw1h=N,thoughts=N,search=N,files=N,code=N,images=N
                      the counts to report
                      (search: server-side web searches: on Anthropic a server_tool_use and a
                      web_search_tool_result block each, counted in usage.server_tool_use; on
                      OpenAI's Responses a web_search_call output item each; on Gemini a query
                      each in groundingMetadata.webSearchQueries, given in the last two chunks
                      of a stream alike; files, code and images: OpenAI's Responses only, a
                      file_search_call, a code_interpreter_call and an
                      image_generation_call output item each)
        X-Fake-Mode:  ok | omit (no usage anywhere) | malformed (a count that is a string)
                      | cut (the upstream closes mid-body) | slow (events 0.5 s apart, for a
                      SIGKILL mid-stream) | hold (answer after 1 s: all racers decide first)
                      | spend (the output is all the body allows, read as a lax provider
                      reads it: Python's json, the last of a key twice, escapes decoded,
                      a gzip body inflated, "8" or 8.0 taken for 8; n or best_of times
                      the prompts of a list, or candidateCount, times max tokens; the
                      input 1,105 tokens an image, 150,000 for a document: a PDF, a URL)
      Streamed bodies are chunked, one event per chunk; text in them carries a fake usage
      object and a fake SSE event inside JSON strings (a scanner that loses track of
      strings would read them).  Every request goes to FILE as one JSON line: method,
      path, headers, body length.
  req URL --key K [--header H:V...] [--body JSON] [--method M] [--cut-after N] [--full] [--bom] [--gzip] [--chunked]
      [--pad N]  (@PAD@ in the body becomes N bytes of base64, as a file inline)
      One request from the guest; prints "STATUS<TAB>first body line" (--full: the status
      on a line of its own, then the body as it came).  --cut-after N closes the
      connection after N body bytes (the guest going away mid-stream).
  race URL --key K --body JSON --n N [--header H:V...]
      N requests at once, each on its own connection, released together; prints one
      line per request: STATUS<TAB>first body line.
  ledger DB lastid | settled AFTER [--wait S] | sums
      The spend ledger read beside latch (sqlite, read-only): the newest row's id; the
      first reservation after id AFTER with its settlement, once the tick has written it,
      as one JSON line; micros charged and requests per sandbox/provider.
"""
import argparse
import base64
import gzip
import json
import math
import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# what the "model" wrote: a usage object and SSE events inside a JSON string
FAKE_TEXT = 'Hi! data: {"usage":{"prompt_tokens":0}}\n\nevent: message_delta\ndata: {"usage":{"output_tokens":1}}\n\n'


def counts(headers, default=""):
    c = {"in": 0, "out": 0, "cached": 0, "cw": 0, "cw1h": 0, "thoughts": 0, "search": 0, "files": 0, "code": 0,
         "images": 0}
    for part in (headers.get("X-Fake-Usage") or default or "").split(","):
        k, _, v = part.partition("=")
        if k.strip() in c:
            c[k.strip()] = int(v)
    return c


def lax(v, default):
    """An integer as a lax server reads it: "8", 8.0, true."""
    if v is None:
        return default
    if isinstance(v, (bool, int, float)):
        return int(math.ceil(v))
    try:
        return int(math.ceil(float(v)))
    except (TypeError, ValueError):
        return default


def spend(req, host):
    """Every output token the request allows, as a lax server reads it."""
    if host == "gemini":
        g = req.get("generationConfig") or req.get("generation_config") or {}
        per = lax(g.get("candidateCount", g.get("candidate_count")), 1)
        return per * lax(g.get("maxOutputTokens", g.get("max_output_tokens")), 0)
    per = max(lax(req.get("n"), 1), lax(req.get("best_of"), 1))
    prompt = req.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        per *= len(prompt)
    most = max(lax(req.get(k), 0) for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"))
    return per * most


def spend_input(req, base):
    """The input a provider bills beyond the body's text: 1,105 tokens an image (gpt-4o's high detail at
    768x1536), 150,000 for a document it fetches or reads page by page (a PDF)."""
    images, doc = 0, False

    def walk(v, parent):
        nonlocal images, doc
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "image_url":
                    images += 1
                elif k in ("file_url", "file_data") or (k == "type" and parent == "source" and x == "url"):
                    doc = True
                elif k in ("media_type", "mimeType", "mime_type") and isinstance(x, str):
                    if x.startswith("image/"):
                        images += 1
                    elif not x.startswith("text/"):
                        doc = True
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, parent)
    walk(req, "")
    return base + images * 1105 + (150000 if doc else 0)


def num(v, malformed):
    return str(v) if malformed else v


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def record(self, body):
        with self.server.log_lock:
            with open(self.server.log, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path, "body_len": len(body),
                                    "headers": [[k, v] for k, v in self.headers.items()]}) + "\n")

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, ctype):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def stream(self, pieces, mode):
        """pieces: bytes, one chunk each; cut closes after half of them, slow spaces them out."""
        for i, p in enumerate(pieces):
            if mode == "cut" and i == len(pieces) // 2:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p))
            self.wfile.flush()
            if mode == "slow":
                time.sleep(0.5)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def cut_json(self, obj):
        """A Content-Length body cut by the upstream halfway."""
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:len(data) // 2])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def handle_any(self):
        data = self.body()
        self.record(data)
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            data = gzip.decompress(data)
        try:
            req = json.loads(data) if data else {}
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        mode = self.headers.get("X-Fake-Mode", "ok")
        if mode == "hold":
            time.sleep(1.0)
        c = counts(self.headers, self.server.usage)
        host = self.server.provider or (self.headers.get("Host") or "").split(".")[0]
        if mode == "spend":
            c["out"] = spend(req, host)
            c["in"] = spend_input(req, c["in"])
        p = self.path.split("?")[0]
        if host == "anthropic":
            return self.anthropic(p, req, c, mode)
        if host == "gemini" and p.startswith("/v1beta/openai/"):
            return self.openai(p[len("/v1beta/openai"):], req, c, mode)
        if host == "gemini":
            return self.gemini(p, c, mode)
        return self.openai(p, req, c, mode)

    # ---- OpenAI

    def openai_usage(self, c, mode, responses):
        m = mode == "malformed"
        if responses:
            return {"input_tokens": num(c["in"], m), "input_tokens_details": {"cached_tokens": c["cached"]},
                    "output_tokens": c["out"], "output_tokens_details": {"reasoning_tokens": c["thoughts"]},
                    "total_tokens": c["in"] + c["out"]}
        return {"prompt_tokens": num(c["in"], m), "completion_tokens": c["out"],
                "total_tokens": c["in"] + c["out"], "prompt_tokens_details": {"cached_tokens": c["cached"]},
                "completion_tokens_details": {"reasoning_tokens": c["thoughts"]}}

    def openai(self, p, req, c, mode):
        if p == "/v1/responses":
            return self.openai_responses(req, c, mode)
        model = req.get("model", "gpt-4o")
        if not req.get("stream"):
            obj = {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": model,
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": FAKE_TEXT},
                                "finish_reason": "stop"}]}
            if mode != "omit":
                obj["usage"] = self.openai_usage(c, mode, False)
            return self.cut_json(obj) if mode == "cut" else self.send_json(200, obj)
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        ev = []
        for text in ["", "Hello", FAKE_TEXT, "!"]:
            ev.append(dict(base, choices=[{"index": 0, "delta": {"content": text}, "finish_reason": None}],
                           usage=None))
        ev.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}], usage=None))
        if mode != "omit" and (req.get("stream_options") or {}).get("include_usage"):
            ev.append(dict(base, choices=[], usage=self.openai_usage(c, mode, False)))
        self.start_stream("text/event-stream")
        self.stream([b"data: " + json.dumps(e).encode() + b"\n\n" for e in ev] + [b"data: [DONE]\n\n"], mode)

    def openai_responses(self, req, c, mode):
        # search=N: N web_search_call output items before the message (each one a billed call)
        calls = [{"id": "ws_%02d" % i, "type": "web_search_call", "status": "completed",
                  "action": {"type": "search", "query": '{"type": "web_search_call"}'}} for i in range(c["search"])]
        # files=N, code=N: file_search_call and code_interpreter_call items, as OpenAI writes them
        calls += [{"id": "fs_%02d" % i, "type": "file_search_call", "status": "completed",
                   "queries": ['{"type": "file_search_call"}'], "results": None} for i in range(c["files"])]
        calls += [{"id": "ci_%02d" % i, "type": "code_interpreter_call", "status": "completed",
                   "container_id": "cntr_%02d" % i, "code": "print(1)", "outputs": None} for i in range(c["code"])]
        calls += [{"id": "ig_%02d" % i, "type": "image_generation_call", "status": "completed",
                   "result": "aW1hZ2U="} for i in range(c["images"])]
        resp = {"id": "resp_1", "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": req.get("model", "gpt-4o"),
                "output": calls + [{"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": FAKE_TEXT}]}],
                "usage": None if mode == "omit" else self.openai_usage(c, mode, True)}
        if not req.get("stream"):
            return self.cut_json(resp) if mode == "cut" else self.send_json(200, resp)
        started = dict(resp, status="in_progress", output=[], usage=None)
        ev = [("response.created", {"type": "response.created", "sequence_number": 0, "response": started})]
        for i, call in enumerate(calls):  # each call's item, as it is added and done
            for n in ("response.output_item.added", "response.output_item.done"):
                ev.append((n, {"type": n, "sequence_number": len(ev), "output_index": i, "item": call}))
        i = len(calls)  # the message item: added, its part, the text, then each done, as the API sends them
        item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        done = dict(item, status="completed", content=[dict(part, text=FAKE_TEXT)])
        for n, e in [("response.output_item.added", {"output_index": i, "item": item}),
                     ("response.content_part.added", {"item_id": "msg_1", "output_index": i, "content_index": 0,
                                                      "part": part}),
                     ("response.output_text.delta", {"item_id": "msg_1", "output_index": i, "content_index": 0,
                                                     "delta": FAKE_TEXT}),
                     ("response.output_text.done", {"item_id": "msg_1", "output_index": i, "content_index": 0,
                                                    "text": FAKE_TEXT}),
                     ("response.content_part.done", {"item_id": "msg_1", "output_index": i, "content_index": 0,
                                                     "part": dict(part, text=FAKE_TEXT)}),
                     ("response.output_item.done", {"output_index": i, "item": done}),
                     ("response.completed", {"response": resp})]:
            ev.append((n, dict({"type": n, "sequence_number": len(ev)}, **e)))
        self.start_stream("text/event-stream")
        self.stream([b"event: %s\ndata: %s\n\n" % (n.encode(), json.dumps(e).encode()) for n, e in ev], mode)

    # ---- Anthropic

    def anthropic(self, p, req, c, mode):
        m = mode == "malformed"
        if p == "/v1/messages/count_tokens":
            return self.send_json(200, {"input_tokens": c["in"]})
        if p == "/v1/messages/batches":  # a batch is answered at once; its requests are billed later
            return self.send_json(200, {"id": "msgbatch_01", "type": "message_batch",
                                        "processing_status": "in_progress",
                                        "request_counts": {"processing": len(req.get("requests") or [])}})
        usage = {"input_tokens": num(c["in"], m), "cache_creation_input_tokens": c["cw"] + c["cw1h"],
                 "cache_read_input_tokens": c["cached"],
                 "cache_creation": {"ephemeral_5m_input_tokens": c["cw"], "ephemeral_1h_input_tokens": c["cw1h"]},
                 "output_tokens": c["out"], "service_tier": "standard"}
        searches = []
        for i in range(c["search"]):
            tid = "srvtoolu_%02d" % i
            searches += [{"type": "server_tool_use", "id": tid, "name": "web_search", "input": {"query": FAKE_TEXT}},
                         {"type": "web_search_tool_result", "tool_use_id": tid,
                          "content": [{"type": "web_search_result", "url": "https://docs.example.org/%d" % i,
                                       "title": '"server_tool_use":{"web_search_requests":0}',
                                       "encrypted_content": "EqgfCioIARgBIiQ3YTAw", "page_age": None}]}]
        if c["search"]:
            usage["server_tool_use"] = {"web_search_requests": c["search"], "web_fetch_requests": 0}
        msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": req.get("model", ""),
               "content": searches + [{"type": "text", "text": FAKE_TEXT}], "stop_reason": "end_turn",
               "stop_sequence": None}
        if not req.get("stream"):
            if mode != "omit":
                msg["usage"] = usage
            return self.cut_json(msg) if mode == "cut" else self.send_json(200, msg)
        start = dict(msg, content=[], stop_reason=None)
        if mode != "omit":  # the searches are not run yet: message_start has none
            start["usage"] = dict(usage, output_tokens=1)
            start["usage"].pop("server_tool_use", None)
        ev = [("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(searches):  # each block whole in its start event, as the API sends them
            ev += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}),
                   ("content_block_stop", {"type": "content_block_stop", "index": i})]
        t = len(searches)
        ev += [("content_block_start", {"type": "content_block_start", "index": t,
                                        "content_block": {"type": "text", "text": ""}}),
               ("ping", {"type": "ping"})]
        for text in ["Hello", FAKE_TEXT, "!"]:
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": t,
                                               "delta": {"type": "text_delta", "text": text}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": t}))
        delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
        if mode != "omit":
            delta["usage"] = {"output_tokens": num(c["out"], m)}
            if c["search"]:  # cumulative, as message_delta's usage is
                delta["usage"]["server_tool_use"] = {"web_search_requests": c["search"]}
        ev += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
        self.start_stream("text/event-stream")
        self.stream([b"event: %s\ndata: %s\n\n" % (n.encode(), json.dumps(e).encode()) for n, e in ev], mode)

    # ---- Gemini

    def gemini(self, p, c, mode):
        m = mode == "malformed"
        model = p.rsplit("/", 1)[-1].split(":")[0]

        def element(text, final):
            e = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
                 "modelVersion": model, "responseId": "r1"}
            if final:
                e["candidates"][0]["finishReason"] = "STOP"
            if c["search"] and (final or text == FAKE_TEXT):  # grounded: the queries it ran, twice in a stream
                e["candidates"][0]["groundingMetadata"] = {
                    "groundingChunks": [{"web": {"uri": "https://docs.example.org/", "title": "example"}}],
                    "webSearchQueries": ["query %d" % i for i in range(c["search"])]}
            if mode != "omit":
                # every element carries the counts so far; the last one is the bill
                e["usageMetadata"] = {"promptTokenCount": num(c["in"], m and final),
                                      "cachedContentTokenCount": c["cached"],
                                      "candidatesTokenCount": c["out"] if final else 1,
                                      "thoughtsTokenCount": c["thoughts"] if final else 0,
                                      "totalTokenCount": c["in"] + c["out"] + c["thoughts"]}
            return e
        parts = [element("Hel", False), element(FAKE_TEXT, False), element("lo", True)]
        if p.endswith(":generateContent"):
            return self.cut_json(parts[-1]) if mode == "cut" else self.send_json(200, parts[-1])
        if "alt=sse" in self.path:
            self.start_stream("text/event-stream")
            return self.stream([b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in parts], mode)
        self.start_stream("application/json")
        pieces = [b"[" + json.dumps(parts[0], indent=2).encode()]
        pieces += [b"\n,\n" + json.dumps(e, indent=2).encode() for e in parts[1:]]
        self.stream(pieces + [b"\n]"], mode)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any


def serve(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    cls = type("S", (ThreadingHTTPServer,), {"daemon_threads": True, "request_queue_size": 128})
    s = cls((a.addr, a.port), Upstream)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.log, s.log_lock, s.usage, s.provider = a.log, threading.Lock(), a.usage, a.provider
    threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    time.sleep(a.lifetime)


def request(url, key_header, method, body, headers, cut_after=0, start=None, bom=False, gz=False, chunked=False):
    hostport, _, path = url[len("http://"):].partition("/")
    host, _, port = hostport.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=15)
    data = body.encode() if body is not None else b""
    if bom:
        data = b"\xef\xbb\xbf" + data
    if gz:
        data = gzip.compress(data)
        headers = headers + ["Content-Encoding: gzip"]
    head = "%s /%s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (method, path, hostport, key_header)
    head += "".join("%s\r\n" % h for h in headers)
    if body is not None and chunked:  # as a streaming upload sends it: two chunks, no length
        head += "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        half = len(data) // 2
        data = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:half], data[half:])) + b"0\r\n\r\n"
    elif body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
    if start:
        start.wait()
    s.sendall(head.encode() + b"\r\n" + data)
    resp = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            resp += b
            head_b, sep, rest = resp.partition(b"\r\n\r\n")
            if cut_after and sep and len(rest) >= cut_after:
                s.close()  # the guest goes away mid-body
                return head_b, rest, True
            if sep and (rest.endswith(b"0\r\n\r\n") or complete(head_b, rest)):
                break
    except socket.timeout:
        pass
    s.close()
    head_b, _, rest = resp.partition(b"\r\n\r\n")
    return head_b, rest, False


def complete(head, body):
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def first_line(head, body):
    if not head:
        return "CLOSED\t"
    status = head.split(b"\r\n")[0].split(b" ")[1].decode()
    if b"transfer-encoding: chunked" in head.lower():  # the first chunk's first line
        body = body.partition(b"\r\n")[2]
    return "%s\t%s" % (status, body.split(b"\n")[0].decode("latin-1").rstrip("\r"))


def req(a):
    if a.pad:
        a.body = a.body.replace("@PAD@", base64.b64encode(os.urandom(a.pad * 3 // 4 + 3)).decode()[:a.pad])
    head, body, _ = request(a.url, a.key, a.method, a.body, a.header, a.cut_after, bom=a.bom, gz=a.gzip,
                            chunked=a.chunked)
    if a.full:  # the status, then the body as it came (a refusal's: Content-Length)
        print(head.split(b"\r\n")[0].split(b" ")[1].decode() if head else "CLOSED")
        sys.stdout.write(body.decode("latin-1"))
        return
    print(first_line(head, body))


def race(a):
    start = threading.Event()
    out = [None] * a.n

    def one(i):
        try:
            h, b, _ = request(a.url, a.key, "POST", a.body, a.header, 0, start)
            out[i] = first_line(h, b)
        except OSError as e:
            out[i] = "ERROR\t%s" % e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(a.n)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every connection open and waiting
    start.set()
    for t in threads:
        t.join(30)
    for line in out:
        print(line)


def ledger_rows(db, after):
    import sqlite3
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
    con.row_factory = sqlite3.Row
    r = con.execute("SELECT * FROM ledger WHERE kind = 'reserve' AND id > ? ORDER BY id LIMIT 1",
                    (after,)).fetchone()
    st = r and con.execute("SELECT * FROM ledger WHERE kind = 'settle' AND request = ?", (r["id"],)).fetchone()
    last = con.execute("SELECT ifnull(max(id), 0) FROM ledger").fetchone()[0]
    con.close()
    return r, st, last


def ledger(a):
    """lastid: the newest row's id; settled AFTER: the first reservation after AFTER and its settlement
    (waits for the tick that writes it) as one JSON line; sums: micros charged per (sandbox, provider)."""
    import sqlite3
    if a.what == "lastid":
        print(ledger_rows(a.db, 0)[2])
        return
    if a.what == "sums":
        con = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True, timeout=5)
        out = {}
        for sb, prov, n, micros in con.execute(
                "SELECT r.sandbox, r.provider, count(*), sum(coalesce(s.micros, r.micros)) FROM ledger r "
                "LEFT JOIN ledger s ON s.kind = 'settle' AND s.request = r.id WHERE r.kind = 'reserve' "
                "GROUP BY r.sandbox, r.provider"):
            out["%s/%s" % (sb, prov)] = {"requests": n, "micros": micros}
        print(json.dumps(out, sort_keys=True))
        return
    deadline = time.time() + a.wait
    while True:
        r, st, _ = ledger_rows(a.db, a.after)
        if (r and st) or time.time() > deadline:
            break
        time.sleep(0.05)
    print(json.dumps({"reserve": dict(r) if r else None, "settle": dict(st) if st else None}, sort_keys=True))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, default=443)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--lifetime", type=float, default=300)
    p.add_argument("--usage", default="", help="the counts a request without X-Fake-Usage reports")
    p.add_argument("--provider", default="", help="answer as this provider whatever the Host (an upstream by address)")
    for name in ("req", "race"):
        p = sub.add_parser(name)
        p.add_argument("url")
        p.add_argument("--key", required=True, help="the header line carrying the placeholder")
        p.add_argument("--header", action="append", default=[])
        p.add_argument("--body")
        p.add_argument("--method", default="POST")
        p.add_argument("--cut-after", type=int, default=0)
        p.add_argument("--n", type=int, default=32)
        p.add_argument("--full", action="store_true")
        p.add_argument("--bom", action="store_true", help="a UTF-8 BOM before the body")
        p.add_argument("--gzip", action="store_true", help="the body gzipped, with Content-Encoding: gzip")
        p.add_argument("--chunked", action="store_true", help="the body in two chunks, no Content-Length")
        p.add_argument("--pad", type=int, default=0, help="@PAD@ in the body becomes N bytes of base64")
    p = sub.add_parser("ledger")
    p.add_argument("db")
    p.add_argument("what", choices=["lastid", "settled", "sums"])
    p.add_argument("after", type=int, nargs="?", default=0)
    p.add_argument("--wait", type=float, default=4)
    a = ap.parse_args()
    {"serve": serve, "req": req, "race": race, "ledger": ledger}[a.cmd](a)


if __name__ == "__main__":
    main()
