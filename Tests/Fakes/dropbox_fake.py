#!/usr/bin/env python3
"""A fake Dropbox API v2 (python3 stdlib only), written from the public documents (dossier §1).

Usage: dropbox_fake.py SPEC_JSON    (or @file). Listens on 127.0.0.1, port 0, prints the port on the first
stdout line. One server plays the API host (/2/files/list_folder[/continue]), the content host
(/2/files/download) and the token endpoint (/oauth2/token).

SPEC: {"page_size": 3,                      entries per list_folder page (limit is approximate anyway)
       "files": [{"path": "/Music/a.mp3", "size": 10, "downloadable": true}, ...],   folders are implied
       "folders": ["/Empty"],
       "token": "access-1", "refresh_token": "refresh-1", "client_id": "app-key",
       "expired": false,                    the initial token answers 401 expired_access_token
       "list_non_downloadable": false}      list is_downloadable=false files even when not asked to

What it checks, as the real API does: `Authorization: Bearer <token>` (400 plain text when missing or another
scheme, 401 JSON `invalid_access_token` / `expired_access_token`); RPC Content-Type application/json (else 400
plain text); list_folder arguments (path "" not "/", limit 1..2000, recursive a bool); Dropbox-API-Arg present,
pure ASCII with no 0x7F (else 400 plain text), valid JSON; download Content-Type absent, empty,
application/octet-stream or text/plain; charset=dropbox-cors-hack, and no body.

Control (no auth), the fakes' one protocol (fake_control.py): GET /_log → JSON list of requests (common fields and
route, content_type, arg, body_length); GET /_content?path=<lower>|rev:<rev> → raw bytes; POST /_control with one op
or a list of them:
  {"op": "add", "path": "/Music/new.mp3", "size": 10}      creates folders as needed
  {"op": "modify", "path": "/Music/a.mp3", "size": 12}     new rev and content (old rev stays downloadable)
  {"op": "delete", "path": "/Music/Folder", "children": false}   one `deleted` entry (plus children if true)
  {"op": "move", "from": "/Music/A", "to": "/Music/B"}    a file or a folder with its contents: `deleted` for each
                                                           old path, then each at its new path with its id, bytes,
                                                           content_hash and client_modified, and a new rev
  {"op": "reset"}                                          every cursor answers 409 reset
  {"op": "expire_token"}                                   the current token answers expired_access_token
  {"op": "fail", "route": "files/list_folder/continue", "status": 429, "count": 1,
   "retry_after": 1, "where": "body"|"header"|"text"}       next COUNT calls of ROUTE fail
"""
import base64
import hashlib
import json
import sys
import threading

from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import fake_control
import fake_range

BLOCK = 4 * 1024 * 1024


def content_hash(data):
    digests = b"".join(hashlib.sha256(data[i:i + BLOCK]).digest() for i in range(0, len(data), BLOCK))
    return hashlib.sha256(digests).hexdigest()


def make_content(lower, rev, size):
    seed = hashlib.sha256(f"{lower}|{rev}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def header_safe_json(obj):
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).replace("\x7f", "\\u007f")


def parent_of(path):
    return path.rsplit("/", 1)[0]


class State:
    def __init__(self, spec):
        self.lock = threading.Lock()
        self.page_size = int(spec.get("page_size", 2000))
        self.token = spec.get("token", "access-1")
        self.refresh_token = spec.get("refresh_token", "refresh-1")
        self.client_id = spec.get("client_id")
        self.expired = {self.token} if spec.get("expired") else set()
        self.list_non_downloadable = bool(spec.get("list_non_downloadable"))
        self.token_counter = 1
        self.counter = 0
        self.seq = 0
        self.epoch = 0
        self.entries = {}   # path_lower → metadata dict
        self.revs = {}      # rev → bytes
        self.events = []    # (seq, metadata)
        self.snapshots = {}
        self.fail = []
        self.log = fake_control.RequestLog()
        self.control = fake_control.Control({
            "add": self.put_op, "modify": self.put_op, "delete": self.delete_op, "move": self.move_op, "reset": self.reset_op,
            "expire_token": self.expire_op, "fail": self.fail_op}, lock=self.lock)
        for folder in spec.get("folders", []):
            self.ensure_folder(folder)
        for f in spec.get("files", []):
            self.put_file(f["path"], int(f.get("size", 100)), f.get("downloadable", True))
        self.events.clear()

    # ---- control ops (fake_control.Control holds the lock)
    def put_op(self, op):
        self.put_file(op["path"], int(op.get("size", 100)), op.get("downloadable", True))

    def delete_op(self, op):
        if not self.delete(op["path"], bool(op.get("children"))):
            raise KeyError(op["path"])

    def move_op(self, op):
        src, dst = op["from"].rstrip("/"), op["to"].rstrip("/")
        lower = src.lower()
        moving = sorted(k for k in self.entries if k == lower or k.startswith(lower + "/"))
        if not moving:
            raise KeyError(src)
        olds = [self.entries[k] for k in moving]
        for m in reversed(olds):
            self.emit({".tag": "deleted", "name": m["name"], "path_lower": m["path_lower"], "path_display": m["path_display"]})
            del self.entries[m["path_lower"]]
        self.ensure_folder(parent_of(dst))
        for m in olds:
            path = dst + m["path_display"][len(src):]
            meta = dict(m, name=path.rsplit("/", 1)[1], path_lower=path.lower(), path_display=path)
            if m[".tag"] == "file":
                rev = f"{0x5a0000000 + self.next_id():x}"
                self.revs[rev] = self.revs[m["rev"]]
                meta["rev"] = rev
            self.entries[meta["path_lower"]] = meta
            self.emit(meta)

    def reset_op(self, op):
        self.epoch += 1

    def expire_op(self, op):
        self.expired.add(self.token)

    def fail_op(self, op):
        self.fail.append({"route": op["route"], "status": op.get("status", 429), "count": op.get("count", 1),
                          "retry_after": op.get("retry_after", 1), "where": op.get("where", "body")})

    def next_id(self):
        self.counter += 1
        return self.counter

    def emit(self, meta):
        self.seq += 1
        self.events.append((self.seq, meta))

    def ensure_folder(self, path):
        if path in ("", "/"):
            return
        self.ensure_folder(parent_of(path))
        lower = path.lower()
        if lower not in self.entries:
            meta = {".tag": "folder", "name": path.rsplit("/", 1)[1], "path_lower": lower, "path_display": path,
                    "id": f"id:fold{self.next_id():08d}"}
            self.entries[lower] = meta
            self.emit(meta)

    def put_file(self, path, size, downloadable=True):
        self.ensure_folder(parent_of(path))
        lower = path.lower()
        old = self.entries.get(lower)
        n = self.next_id()
        rev = f"{0x5a0000000 + n:x}"
        data = make_content(lower, rev, size)
        self.revs[rev] = data
        when = datetime.fromtimestamp(1764536124 + n, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta = {".tag": "file", "name": path.rsplit("/", 1)[1], "path_lower": lower, "path_display": path,
                "id": old["id"] if old else f"id:file{n:08d}", "client_modified": when, "server_modified": when,
                "rev": rev, "size": size, "is_downloadable": downloadable, "content_hash": content_hash(data)}
        self.entries[lower] = meta
        self.emit(meta)

    def delete(self, path, children):
        lower = path.lower()
        gone = sorted(k for k in self.entries if k == lower or k.startswith(lower + "/"))
        if lower not in self.entries:
            return False
        if children:
            for k in reversed(gone):
                if k != lower:
                    m = self.entries[k]
                    self.emit({".tag": "deleted", "name": m["name"], "path_lower": k, "path_display": m["path_display"]})
        m = self.entries[lower]
        self.emit({".tag": "deleted", "name": m["name"], "path_lower": lower, "path_display": m["path_display"]})
        for k in gone:
            del self.entries[k]
        return True


def under(lower, root):
    return root == "" or lower == root or lower.startswith(root + "/")


def encode_cursor(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()


def decode_cursor(text):
    try:
        return json.loads(base64.urlsafe_b64decode(text.encode()))
    except Exception:
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    # ---- answers
    def answer(self, status, body=b"", content_type=None, headers=()):
        self.status_sent = status
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def text(self, status, message):
        self.answer(status, message.encode(), "text/plain; charset=utf-8")

    def json(self, status, obj, headers=()):
        self.answer(status, json.dumps(obj).encode(), "application/json", headers)

    def endpoint_error(self, summary, error):
        self.json(409, {"error_summary": summary, "error": error})

    def bad_request(self, message):
        self.text(400, f'Error in call to API function "{self.route}": {message}')

    # ---- dispatch
    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def dispatch(self):
        self.status_sent = 0
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        self.route = url.path[3:] if url.path.startswith("/2/") else url.path
        try:
            self.handle_route(url)
        finally:
            if not url.path.startswith("/_"):
                self.state.log.record(self, self.status_sent, route=self.route, content_type=self.headers.get("Content-Type"),
                                      arg=self.headers.get("Dropbox-API-Arg"), body_length=len(self.body))

    def handle_route(self, url):
        s = self.state
        if fake_control.serve(self, s.control, s.log, self.body):
            return
        if url.path == "/_content":
            key = parse_qs(url.query).get("path", [""])[0]
            with s.lock:
                data = s.revs.get(key[4:]) if key.startswith("rev:") else \
                    (s.revs.get(s.entries[key]["rev"]) if key in s.entries and s.entries[key][".tag"] == "file" else None)
            return self.answer(200, data, "application/octet-stream") if data is not None else self.text(404, "no such file")
        if url.path == "/oauth2/token" and self.command == "POST":
            return self.token_endpoint()
        if self.command != "POST" and self.route != "files/download":
            return self.text(405, "method not allowed")
        if self.route not in ("files/list_folder", "files/list_folder/continue", "files/download"):
            return self.text(404, "Unknown API function: " + repr(self.route))
        if not self.authorized():
            return
        if self.inject_failure():
            return
        if self.route == "files/download":
            return self.download()
        ctype = (self.headers.get("Content-Type") or "").strip()
        if ctype.split(";")[0].strip() != "application/json" and ctype != "text/plain; charset=dropbox-cors-hack":
            return self.bad_request(f'Bad HTTP "Content-Type" header: "{ctype}".  Expecting one of "application/json", '
                                    f'"application/json; charset=utf-8", "text/plain; charset=dropbox-cors-hack".')
        try:
            arg = json.loads(self.body)
            assert isinstance(arg, dict)
        except Exception:
            return self.bad_request("request body: could not decode input as JSON")
        if self.route == "files/list_folder":
            return self.list_folder(arg)
        return self.list_continue(arg)

    def authorized(self):
        s = self.state
        auth = self.headers.get("Authorization")
        if auth is None:
            self.bad_request('Must provide HTTP header "Authorization" or URL parameter "authorization".')
            return False
        if not auth.startswith("Bearer "):
            self.bad_request(f'Invalid authorization value in HTTP header "Authorization": "{auth.split(" ")[0]} ...".  '
                             f'Expecting "Bearer <oauth2-access-token>".')
            return False
        token = auth[len("Bearer "):]
        with s.lock:
            if token == s.token and token not in s.expired:
                return True
            tag = "expired_access_token" if token in s.expired else "invalid_access_token"
        self.json(401, {"error_summary": tag + "/..", "error": {".tag": tag}})
        return False

    def inject_failure(self):
        s = self.state
        with s.lock:
            rule = next((r for r in s.fail if r["route"] == self.route and r["count"] > 0), None)
            if rule is None:
                return False
            rule["count"] -= 1
        status = int(rule.get("status", 429))
        wait = rule.get("retry_after", 1)
        where = rule.get("where", "body")
        if status == 429:
            headers = [("Retry-After", str(wait))] if where in ("header", "text") else []
            if where == "text":
                self.answer(429, b"Too many requests", "text/plain; charset=utf-8", headers)
            else:
                body = {"error_summary": "too_many_requests/..", "error": {"reason": {".tag": "too_many_requests"}}}
                if where == "body":
                    body["error"]["retry_after"] = wait
                self.json(429, body, headers)
        else:
            self.text(status, "Internal server error")
        return True

    # ---- listing
    def list_folder(self, arg):
        s = self.state
        path = arg.get("path")
        if not isinstance(path, str):
            return self.bad_request('request body: missing required field "path"')
        if path == "/":
            return self.bad_request('request body: path: Specify the root folder as an empty string rather than as "/".')
        if path and not path.startswith("/"):
            return self.bad_request(f"request body: path: '{path}' did not match pattern '(/(.|[\\r\\n])*)?|id:.*|(ns:[0-9]+(/.*)?)'")
        limit = arg.get("limit", 2000)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 2000:
            return self.bad_request(f"request body: limit: {limit!r} is not a valid value (1..2000)")
        if not isinstance(arg.get("recursive", False), bool):
            return self.bad_request("request body: recursive: expected a boolean")
        root = path.lower()
        with s.lock:
            if root and root not in s.entries:
                return self.endpoint_error("path/not_found/..", {".tag": "path", "path": {".tag": "not_found"}})
            if root and s.entries[root][".tag"] != "folder":
                return self.endpoint_error("path/not_folder/..", {".tag": "path", "path": {".tag": "not_folder"}})
            include_nd = arg.get("include_non_downloadable_files", True) or s.list_non_downloadable
            recursive = arg.get("recursive", False)
            items = []
            for k in sorted(s.entries):
                m = s.entries[k]
                if not under(k, root) or (not recursive and k != root and parent_of(k) != root):
                    continue
                if k == root and not recursive:
                    continue
                if m[".tag"] == "file" and not m["is_downloadable"] and not include_nd:
                    continue
                items.append(m)
            snap = s.next_id()
            s.snapshots[snap] = (items, s.seq)
            return self.list_page(snap, 0, root)

    def list_page(self, snap, offset, root):
        s = self.state
        items, seq = s.snapshots[snap]
        page = items[offset:offset + s.page_size]
        more = offset + s.page_size < len(items)
        cursor = {"k": "list", "snap": snap, "off": offset + s.page_size, "root": root, "epoch": s.epoch} if more else \
            {"k": "feed", "seq": seq, "root": root, "epoch": s.epoch}
        self.json(200, {"entries": page, "cursor": encode_cursor(cursor), "has_more": more})

    def list_continue(self, arg):
        s = self.state
        c = decode_cursor(arg.get("cursor", "")) if isinstance(arg.get("cursor"), str) else None
        if not isinstance(c, dict) or c.get("k") not in ("list", "feed"):
            return self.bad_request("request body: cursor: invalid cursor")
        with s.lock:
            if c["epoch"] != s.epoch:
                return self.endpoint_error("reset/..", {".tag": "reset"})
            if c["k"] == "list":
                return self.list_page(c["snap"], c["off"], c["root"])
            pending = [(q, m) for q, m in s.events if q > c["seq"] and under(m["path_lower"], c["root"])]
            page = pending[:s.page_size]
            more = len(pending) > s.page_size
            seq = page[-1][0] if more else s.seq
            cursor = {"k": "feed", "seq": seq, "root": c["root"], "epoch": s.epoch}
            self.json(200, {"entries": [m for _, m in page], "cursor": encode_cursor(cursor), "has_more": more})

    # ---- download
    def download(self):
        s = self.state
        raw = self.headers.get("Dropbox-API-Arg")
        if raw is None:
            return self.bad_request('Must provide HTTP header "Dropbox-API-Arg" or URL parameter "arg".')
        if any(ord(ch) > 0x7E or ord(ch) < 0x20 for ch in raw):
            return self.bad_request('HTTP header "Dropbox-API-Arg": could not decode input as JSON (non-ASCII or '
                                    'control character; see https://www.dropbox.com/developers/reference/json-encoding)')
        try:
            arg = json.loads(raw)
            assert isinstance(arg, dict) and isinstance(arg.get("path"), str)
        except Exception:
            return self.bad_request('HTTP header "Dropbox-API-Arg": could not decode input as JSON')
        ctype = self.headers.get("Content-Type")
        if ctype is not None and ctype.strip() not in ("", "application/octet-stream", "text/plain; charset=dropbox-cors-hack"):
            return self.bad_request(f'Bad HTTP "Content-Type" header: "{ctype}".  Expecting one of '
                                    f'"application/octet-stream", "text/plain; charset=dropbox-cors-hack".')
        if self.body:
            return self.bad_request("this function takes no request body; arguments go in Dropbox-API-Arg")
        path = arg["path"]
        with s.lock:
            meta = None
            if path.startswith("rev:"):
                rev = path[4:]
                data = s.revs.get(rev)
                meta = next((m for m in s.entries.values() if m.get("rev") == rev), None)
                if data is not None and meta is None:
                    meta = {"rev": rev, "size": len(data)}
            elif path.startswith("id:"):
                meta = next((m for m in s.entries.values() if m["id"] == path), None)
            elif path.startswith("/"):
                meta = s.entries.get(path.lower())
            else:
                return self.bad_request(f"path: '{path}' did not match pattern")
            if meta is not None and meta.get(".tag") == "folder":
                return self.endpoint_error("path/not_file/..", {".tag": "path", "path": {".tag": "not_file"}})
            if meta is None or meta["rev"] not in s.revs:
                return self.endpoint_error("path/not_found/..", {".tag": "path", "path": {".tag": "not_found"}})
            data = s.revs[meta["rev"]]
        result = [("Dropbox-API-Result", header_safe_json({k: v for k, v in meta.items() if k != ".tag"})),
                  ("Accept-Ranges", "bytes")]
        size = len(data)
        status, start, end = fake_range.plan(self.headers.get("Range"), size, malformed="416")
        if status == 416:
            return self.answer(416, b"", "text/plain", fake_range.headers(status, start, end, size))
        self.answer(status, data[start:end + 1], "application/octet-stream", result + fake_range.headers(status, start, end, size))

    # ---- token endpoint and control
    def token_endpoint(self):
        s = self.state
        form = {k: v[0] for k, v in parse_qs(self.body.decode()).items()}
        with s.lock:
            s.log.record(self, 0, route="oauth2/token", content_type=self.headers.get("Content-Type"), arg=None,
                         body_length=len(self.body))
            ok = form.get("grant_type") == "refresh_token" and form.get("refresh_token") == s.refresh_token and \
                (s.client_id is None or form.get("client_id") == s.client_id)
            if not ok:
                return self.json(400, {"error": "invalid_grant", "error_description": "refresh token is invalid or revoked"})
            s.token_counter += 1
            s.token = f"access-{s.token_counter}"
            token = s.token
        self.json(200, {"access_token": token, "token_type": "bearer", "expires_in": 14400})


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else "{}"
    spec = json.load(open(arg[1:])) if arg.startswith("@") else json.loads(arg)
    Handler.state = State(spec)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    # Stop when the test closes our stdin (or dies).
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
