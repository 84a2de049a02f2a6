#!/usr/bin/env python3
"""Loopback HTTP/1.1 fault server for transport tests (stdlib only).

Binds 127.0.0.1 on the port given as argv[1] (default 0) and prints "PORT <n>" on stdout once listening.
Content of /data-like paths is deterministic: byte i of a file of version v is (i * 7 + v * 13) % 256.

Routes (GET unless said):
  /data/<size>                 honours Range (bytes=a-b, a-), strong ETag "v1-<size>", If-Range
  /norange/<size>              ignores Range: always 200 with the whole body
  /badrange/<size>             206 with a Content-Range shifted by one byte
  /cut/<size>?after=K          honours Range, announces the full length, sends K bytes of the body, closes
  /stall/<size>?after=K        sends K bytes then stalls for 30 s (cancellation tests)
  /drip/<size>?rate=B          any method: 200 with a body of <size> bytes sent at B bytes/s in 10 pieces a second
                               (above curl's low-speed limit, so only a deadline ends it)
  /changing/<size>             ETag changes with every request (version = request count); If-Range
                               with an old ETag gets 200 and the whole new version
  /ratelimit?id=X&n=N&after=S  first N requests of id X get 429 Retry-After: S; then 200 "ok"
  /status/<code>?retry_after=S answers <code> with body "status <code>"
  /redirect?to=URL&status=C    answers C with Location: URL (relative allowed)
  /loop                        302 to itself, forever
  /echo                        any method: JSON {method, path, query, headers, body}
  /token                       POST form: refresh_token=bad (invalid_grant) | rotate* (new refresh token) | anything
                               else (ok); counts per refresh token in /stats as token:<rt>
  /stats                       JSON counters
  /portal                      any method: 200 text/html, a network's login page (what a captive portal sends)
"""
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fake_range


LOCK = threading.Lock()
COUNTERS = {}


def bump(key):
    with LOCK:
        COUNTERS[key] = COUNTERS.get(key, 0) + 1
        return COUNTERS[key]


def content(size, version=1, start=0, end=None):
    end = size if end is None else end
    return bytes(((i * 7 + version * 13) % 256) for i in range(start, end))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def serve_file(self, size, version, etag, honour=True, shift=0, after=None, stall=False):
        status, start, last = fake_range.plan(self.headers.get("Range") if honour else None, size, etag=etag,
                                              if_range=self.headers.get("If-Range"), suffix=False)
        if status == 416:
            return self.reply(416, b"", fake_range.headers(status, start, last, size))
        end = last + 1
        extra = fake_range.headers(status, start, last, size, shift=shift)
        data = content(size, version, start, end)
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if after is not None:
            self.wfile.write(data[:after])
            self.wfile.flush()
            if stall:
                time.sleep(30)
            self.close_connection = True
            return
        self.wfile.write(data)

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        self.dispatch()

    def do_GET(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PROPFIND(self):
        self.dispatch()

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        route = parts[0]
        bump("requests")
        bump("route:" + route)
        if route == "data":
            size = int(parts[1])
            return self.serve_file(size, 1, '"v1-%d"' % size)
        if route == "norange":
            size = int(parts[1])
            return self.serve_file(size, 1, '"v1-%d"' % size, honour=False)
        if route == "badrange":
            size = int(parts[1])
            return self.serve_file(size, 1, '"v1-%d"' % size, shift=1)
        if route == "cut":
            size = int(parts[1])
            return self.serve_file(size, 1, '"v1-%d"' % size, after=int(q.get("after", "0")))
        if route == "stall":
            size = int(parts[1])
            return self.serve_file(size, 1, '"v1-%d"' % size, after=int(q.get("after", "0")), stall=True)
        if route == "drip":
            self.body()
            size, rate = int(parts[1]), int(q.get("rate", "2000"))
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            piece, sent = max(1, rate // 10), 0
            try:
                while sent < size:
                    n = min(piece, size - sent)
                    self.wfile.write(b"x" * n)
                    self.wfile.flush()
                    sent += n
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        if route == "changing":
            size = int(parts[1])
            v = bump("changing:%d" % size)
            return self.serve_file(size, v, '"v%d-%d"' % (v, size))
        if route == "ratelimit":
            n = bump("ratelimit:" + q.get("id", ""))
            if n <= int(q.get("n", "1")):
                return self.reply(429, b"slow down", [("Retry-After", q.get("after", "1"))])
            return self.reply(200, b"ok")
        if route == "status":
            headers = [("Retry-After", q["retry_after"])] if "retry_after" in q else []
            return self.reply(int(parts[1]), b"status " + parts[1].encode(), headers)
        if route == "redirect":
            self.body()
            return self.reply(int(q.get("status", "302")), b"moved", [("Location", q["to"])])
        if route == "loop":
            return self.reply(302, b"again", [("Location", "/loop")])
        if route == "echo":
            payload = {
                "method": self.command,
                "path": url.path,
                "query": url.query,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.body().decode("utf-8", "replace"),
                "host": self.headers.get("Host"),
            }
            return self.reply(200, json.dumps(payload).encode(), [("Content-Type", "application/json")])
        if route == "token":
            form = dict(urllib.parse.parse_qsl(self.body().decode()))
            n = bump("token")
            rt = form.get("refresh_token") or ""
            bump("token:" + rt)
            time.sleep(0.2)  # widen the window in which concurrent callers could race
            if form.get("grant_type") != "refresh_token" or rt == "bad":
                return self.reply(400, json.dumps({"error": "invalid_grant", "error_description": "expired"}).encode(),
                                  [("Content-Type", "application/json")])
            answer = {"access_token": "at-%d" % n, "expires_in": 3600, "token_type": "Bearer",
                      "client_id_seen": form.get("client_id", "")}
            if rt.startswith("rotate"):
                answer["refresh_token"] = "rotated-%d" % n
            return self.reply(200, json.dumps(answer).encode(), [("Content-Type", "application/json")])
        if route == "portal":
            self.body()
            return self.reply(200, b"<html><body>Log in to use this network</body></html>",
                              [("Content-Type", "text/html; charset=utf-8")])
        if route == "stats":
            with LOCK:
                return self.reply(200, json.dumps(COUNTERS).encode(), [("Content-Type", "application/json")])
        return self.reply(404, b"no such route")


def exit_when_parent_goes():
    """The parent keeps our stdin open; EOF means it is gone, so no server outlives its tests."""
    try:
        sys.stdin.buffer.read()
    finally:
        os._exit(0)


def main():
    # A parent may have blocked or ignored these; make SIGTERM/SIGINT stop us.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    threading.Thread(target=exit_when_parent_goes, daemon=True).start()
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    ThreadingHTTPServer.request_queue_size = 64
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
