#!/usr/bin/env python3
"""A fault-injecting WebDAV file server (python3 stdlib only) for the engine's acceptance tests.

Serves the files of a real directory under /dav/ on 127.0.0.1 like a plain WebDAV server (PROPFIND
Depth 1 multistatus, GET with a single Range and If-Range, strong ETags = MD5 of the bytes), requires
Basic auth demo / demo-pass, keeps connections alive (HTTP/1.1), and prints its port on the first stdout
line. It stops when its stdin closes, so a crashed test leaves nothing behind.

  files_fake.py --root DIR [--rate BYTES_PER_S] [--delay MS] [--faults JSON]
  files_fake.py --proxy-to http://127.0.0.1:PORT   a counting pass-through in front of a real server

Faults (a JSON list on the command line, or POST /_faults with the same JSON to replace them) are rules
applied to GETs of files, first match wins. Each rule: {"path": substring of the decoded path or omitted
for any file, "count": answers it applies to (default 1, -1 = forever), "from": only GETs whose Range
starts at or after this byte (omitted: any GET), "kind": ...} where kind is
  "none"          serve normally (with a count: lets that many answers through before the rules after it)
  "status"        answer `status` (e.g. 429, 503, 401, 404) with `retry_after` as Retry-After when set
  "redirect"      answer `status` (default 302) with `Location: location` (e.g. file:///etc/passwd, gopher://…)
  "cut"           send the head and `after` bytes of the body, then close the connection
  "stall"         send the head and `after` bytes of the body, hold the connection `seconds` (default 30)
                  without sending, then close it
  "ignore_range"  answer 200 with the whole body whatever Range says
  "wrong_range"   answer 206 whose Content-Range is shifted by `shift` bytes (body of the requested size)
  "mutate"        serve this answer normally, then replace the file: every byte XOR 0x5A (size kept)
  "portal"        answer 200 text/html with a short login page (and its own ETag), as a captive portal or a
                  proxy does in the server's place
  "ignore_if_range"  serve the requested range even when If-Range no longer matches
  "propfind_status"  (PROPFIND of a folder whose path matches) answer `status` instead of the listing
  "only"          the server holds only `ranges` of the file (a list of [start, end) byte offsets): a GET
                  whose first byte is outside them gets 503; otherwise the head announces the whole
                  requested range, the body stops at the first byte outside them and the connection closes
                  there (a player that reads one byte too far sees the stream end early)
Also: --rate limits every GET body to BYTES_PER_S (sent in 16 KiB pieces), --delay waits MS before
answering every GET.

Observation (no auth): GET /_log → JSON list of GETs {t, method, path, range, if_range, status,
bytes, done, end, start, answered} where t is the server's time.time() when the request was received, end
when its answer was over, answered when an injected status was sent, and bytes the body
bytes actually handed to the kernel; GET /_stats → {"get": n, "propfind": n, "bytes": n, "active": n,
"max_active": n} (active = GETs still being answered, max_active = most GETs answered at once).
POST /_reset clears the log and counters.
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import re
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

import fake_range


# Every byte XOR 0x5A, as a translation table: at C speed, so a "mutate" replaces even a big file at once
# (a byte-by-byte generator took ~0.7 s for 4 MiB, long enough for a whole download to finish meanwhile).
FLIP = bytes(i ^ 0x5A for i in range(256))

PREFIX = "/dav/"
PIECE = 16 * 1024
AUTH = "Basic " + base64.b64encode(b"demo:demo-pass").decode()


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.faults = json.loads(args.faults) if args.faults else []
        self.reset()

    def reset(self):
        self.log = []
        self.get = 0
        self.propfind = 0
        self.bytes = 0
        self.active = 0
        self.max_active = 0

    def take_fault(self, path, propfind=False, start=0):
        """The first rule matching `path` (and, for rules with "from", a GET whose Range starts at `start` or
        later), with its count consumed; None when no rule applies. Rules of kind "propfind_status" apply to
        PROPFINDs only, every other kind to GETs only."""
        with self.lock:
            for rule in self.faults:
                if (rule.get("kind") == "propfind_status") != propfind:
                    continue
                if rule.get("path") and rule["path"] not in path:
                    continue
                if "from" in rule and start < rule["from"]:
                    continue
                count = rule.get("count", 1)
                if count == 0:
                    continue
                if count > 0:
                    rule["count"] = count - 1
                return dict(rule)
        return None


def etag_of(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "files_fake/1"

    def log_message(self, fmt, *args):
        pass

    @property
    def state(self):
        return self.server.state

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self):
        s = self.state
        path = urlsplit(self.path).path
        if path == "/_log":
            with s.lock:
                body = json.dumps(s.log).encode()
            self.send(200, body, [("Content-Type", "application/json")])
            return True
        if path == "/_stats":
            with s.lock:
                body = json.dumps({"get": s.get, "propfind": s.propfind, "bytes": s.bytes, "active": s.active,
                                   "max_active": s.max_active}).encode()
            self.send(200, body, [("Content-Type", "application/json")])
            return True
        if path == "/_reset":
            with s.lock:
                s.reset()
            self.send(200)
            return True
        if path == "/_faults":
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            with s.lock:
                s.faults = json.loads(body or b"[]")
            self.send(200)
            return True
        return False

    def do_POST(self):
        if not self.control():
            self.send(405)

    # MARK: proxy mode

    def proxy(self):
        s = self.state
        upstream = urlsplit(s.args.proxy_to)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "keep-alive")}
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
        conn.request(self.command, self.path, body=body if body else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        with s.lock:
            if self.command == "GET":
                s.get += 1
                s.bytes += len(data)
                s.log.append({"t": time.time(), "method": "GET", "path": unquote(urlsplit(self.path).path),
                              "range": self.headers.get("Range"), "status": resp.status, "bytes": len(data)})
            elif self.command == "PROPFIND":
                s.propfind += 1
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    # MARK: files

    def relative(self):
        path = unquote(urlsplit(self.path).path)
        if not (path + "/").startswith(PREFIX):
            return None
        rel = path[len(PREFIX):].strip("/")
        if any(part in ("..", ".") for part in rel.split("/")):
            return None
        return rel

    def local(self, rel):
        return os.path.join(self.state.args.root, rel) if rel else self.state.args.root

    def authorized(self):
        if self.headers.get("Authorization", "") == AUTH:
            return True
        self.send(401, b"", [("WWW-Authenticate", 'Basic realm="files_fake"')])
        return False

    def do_GET(self):
        if self.control():
            return
        if self.state.args.proxy_to:
            return self.proxy()
        s = self.state
        entry = {"t": time.time(), "method": "GET", "path": unquote(urlsplit(self.path).path),
                 "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                 "status": 0, "bytes": 0, "done": False, "end": None, "start": None}
        with s.lock:
            s.get += 1
            s.active += 1
            s.max_active = max(s.max_active, s.active)
            s.log.append(entry)
        try:
            self.get(entry)
        finally:
            with s.lock:
                s.active -= 1
                entry["done"] = True
                entry["end"] = time.time()

    def get(self, entry):
        s = self.state
        if not self.authorized():
            entry["status"] = 401
            return
        rel = self.relative()
        if rel is None or not os.path.isfile(self.local(rel)):
            entry["status"] = 404
            return self.send(404)
        if s.args.delay:
            time.sleep(s.args.delay / 1000)
        asked = re.match(r"bytes=(\d+)-", self.headers.get("Range", ""))
        fault = s.take_fault(rel, start=int(asked.group(1)) if asked else 0) or {}
        kind = fault.get("kind")
        if kind == "status":
            status = fault["status"]
            entry["status"] = status
            entry["answered"] = time.time()
            headers = [("Retry-After", str(fault["retry_after"]))] if "retry_after" in fault else []
            if status == 401:
                headers.append(("WWW-Authenticate", 'Basic realm="files_fake"'))
            return self.send(status, b"fault injected by files_fake", headers)
        if kind == "portal":
            entry["status"] = 200
            page = b"<html><body><h1>Welcome</h1><p>Log in to use this network.</p></body></html>"
            return self.send(200, page, [("Content-Type", "text/html; charset=utf-8"), ("ETag", etag_of(page))])
        if kind == "redirect":
            status = fault.get("status", 302)
            entry["status"] = status
            return self.send(status, b"moved by files_fake", [("Location", fault["location"])])
        with open(self.local(rel), "rb") as f:
            data = f.read()
        if kind == "mutate":
            # Replaced atomically, as a server's upload does: a concurrent GET sees the old or the new file.
            temporary = self.local(rel) + ".mutating"
            with open(temporary, "wb") as f:
                f.write(data.translate(FLIP))
            os.replace(temporary, self.local(rel))
        size = len(data)
        etag = etag_of(data)
        headers = [("ETag", etag), ("Accept-Ranges", "bytes"),
                   ("Last-Modified", formatdate(os.stat(self.local(rel)).st_mtime, usegmt=True)),
                   ("Content-Type", "application/octet-stream")]
        status, start, end = fake_range.plan(None if kind == "ignore_range" else self.headers.get("Range"), size,
                                             etag=None if kind == "ignore_if_range" else etag,
                                             if_range=self.headers.get("If-Range"), suffix=False)
        if status == 416:
            entry["status"] = 416
            return self.send(416, b"", fake_range.headers(status, start, end, size))
        headers += fake_range.headers(status, start, end, size, shift=fault.get("shift", 0) if kind == "wrong_range" else 0)
        limit_end = None
        if kind == "only":
            held = next((b for a, b in fault.get("ranges", []) if a <= start < b), None)
            if held is None:
                entry["status"] = 503
                entry["answered"] = time.time()
                return self.send(503, b"not held by this server (only)")
            limit_end = held
        entry["status"] = status
        entry["start"] = start
        body = data[start:end + 1]
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        limit = len(body) if kind not in ("cut", "stall") else min(len(body), fault.get("after", 0))
        if limit_end is not None:
            limit = min(limit, limit_end - start)
        sent = 0
        began = time.monotonic()
        try:
            while sent < limit:
                piece = body[sent:min(limit, sent + PIECE)]
                if s.args.rate:
                    # Pace the body: piece k leaves no earlier than k·PIECE/rate after the first.
                    due = began + sent / s.args.rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                with s.lock:
                    entry["bytes"] += len(piece)
                    s.bytes += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        if kind == "stall":
            time.sleep(fault.get("seconds", 30))
        if kind in ("cut", "stall") or (limit_end is not None and limit < len(body)):
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)

    def do_PROPFIND(self):
        if self.state.args.proxy_to:
            return self.proxy()
        s = self.state
        self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        with s.lock:
            s.propfind += 1
        if not self.authorized():
            return
        rel = self.relative()
        if rel is None or not os.path.isdir(self.local(rel)):
            return self.send(404)
        rule = s.take_fault(rel, propfind=True)
        if rule:
            return self.send(rule.get("status", 403), b"refused by a fault rule")
        if self.headers.get("Depth") != "1":
            return self.send(403, b"only Depth: 1 here")
        parts = [self.entry(rel, True)]
        for name in sorted(os.listdir(self.local(rel))):
            child = (rel + "/" if rel else "") + name
            parts.append(self.entry(child, os.path.isdir(self.local(child))))
        body = ('<?xml version="1.0" encoding="utf-8"?>\n<d:multistatus xmlns:d="DAV:">'
                + "".join(parts) + "</d:multistatus>").encode()
        self.send(207, body, [("Content-Type", "application/xml; charset=utf-8")])

    def entry(self, rel, is_dir):
        path = PREFIX + rel + ("/" if is_dir and rel else "")
        href = quote(path, safe="/").replace("&", "&amp;")
        st = os.stat(self.local(rel))
        date = formatdate(st.st_mtime, usegmt=True)
        if is_dir:
            prop = f"<d:resourcetype><d:collection/></d:resourcetype><d:getlastmodified>{date}</d:getlastmodified>"
        else:
            with open(self.local(rel), "rb") as f:
                tag = etag_of(f.read()).replace('"', "&quot;")
            prop = (f"<d:resourcetype/><d:getcontentlength>{st.st_size}</d:getcontentlength>"
                    f"<d:getlastmodified>{date}</d:getlastmodified><d:getetag>{tag}</d:getetag>")
        return (f"<d:response><d:href>{href}</d:href><d:propstat><d:prop>{prop}</d:prop>"
                f"<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root")
    p.add_argument("--proxy-to")
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--delay", type=int, default=0)
    p.add_argument("--faults")
    p.add_argument("--port", type=int, default=0, help="the port to listen on (0: a free one); a cloud that comes back")
    args = p.parse_args()
    if not args.root and not args.proxy_to:
        p.error("--root DIR or --proxy-to URL is required")
    # Room for every connection a pull opens at once (jobs × segments): with the default backlog of 5 a burst of
    # connects overflows it and the client's SYN is retried after 1 s, a stall no real server shows.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = State(args)
    print(server.server_address[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
