#!/usr/bin/env python3
"""Fake Yandex.Disk REST API v1 for cloudsync's tests, written from the public documents
(https://yandex.com/dev/disk-api/doc/en/reference/meta, all-files, content, response-objects).

Usage: yandex_fake.py SPEC_JSON   (inline JSON or a path to a JSON file)

Two servers on 127.0.0.1, port 0: the API (and the OAuth token endpoint at /token) and the download host.
Hrefs name the download host as `download_host` (default "localhost"), so the client crosses hosts with its
Authorization header. The first stdout line is "API_PORT DOWNLOAD_PORT".

Spec keys:
  files: [{path: "Music/A/x.mp3", size: N, seed: S?, mime_type?, media_type?, corrupt_hashes?}]  (folders are
                                  implied; with corrupt_hashes: true the md5 and sha256 published are those of
                                  other bytes, like a provider whose copy and hash disagree)
  dirs: ["Music/Empty"]           extra empty folders
  tokens: {access, refresh, client_id, client_secret}
  href_max_uses: N                an href answers href_expired_status after N GETs (default: unlimited)
  href_expired_status: 410        (or 403, 404, 401)
  short_pages: bool               folder pages hold one item fewer than `limit` (total still counts all)
  max_limit: N                    folder/flat pages hold at most N items (the answer still says the limit asked)
  download_host: "localhost"

Validation as the API does: `Authorization: OAuth <token>` on every API and download request (Bearer, a
missing or an expired token → 401 UnauthorizedError); `path` required on resources and download (400
FieldValidationError); limit ≥ 1 and offset ≥ 0 integers (400 FieldValidationError); media_type from the
documented list; unknown paths → 404 DiskNotFoundError; `fields=` trims answers as documented (dotted keys).

Control (no auth), the fakes' one protocol (fake_control.py): GET /_log → JSON list of requests (common fields and
server, path unquoted, query parsed, auth_scheme, auth_token, host, href_id, file); POST /_log/clear; POST /_control
with an op or a list of ops:
  {"op": "expire_token"}                    the current access token starts answering 401 UnauthorizedError
  {"op": "throttle", "count": N, "status": 429, "retry_after": "1" | null, "target": "api" | "download"}
  {"op": "delete", "path": "Music/A/x.mp3"} the file is gone
  {"op": "move", "from": "Music/A/x.mp3", "to": "Moved/x.mp3"}   same resource_id and bytes at a new path
  {"op": "modify", "path": "Music/A/x.mp3", "size": N?}   new bytes (every byte differs when the size stays), a new
                                            revision, md5 and sha256; hrefs handed out before serve the new bytes
"""
import hashlib
import json
import os
import re
import sys
import threading

import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fake_control
import fake_range

MEDIA_TYPES = {"audio", "backup", "book", "compressed", "data", "development", "diskimage", "document", "encoded",
               "executable", "flash", "font", "image", "settings", "spreadsheet", "text", "unknown", "video", "web"}
AUDIO_EXT = {"mp3": "audio/mpeg", "flac": "audio/flac", "ogg": "audio/ogg", "m4a": "audio/mp4", "wav": "audio/x-wav",
             "opus": "audio/ogg", "aac": "audio/aac"}


def content_of(path, size, seed):
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{path}:{i}".encode()).digest()
        i += 1
    return bytes(out[:size])


def guess(name):
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext in AUDIO_EXT:
        return AUDIO_EXT[ext], "audio"
    if ext in ("jpg", "jpeg", "png"):
        return "image/jpeg", "image"
    if ext in ("txt", "cue", "log"):
        return "text/plain", "text"
    return "application/octet-stream", "unknown"


class State:
    def __init__(self, spec):
        self.lock = threading.Lock()
        self.spec = spec
        tokens = spec.get("tokens", {})
        self.access = tokens.get("access", "test-access-token")
        self.refresh = tokens.get("refresh", "test-refresh-token")
        self.client_id = tokens.get("client_id", "test-client")
        self.client_secret = tokens.get("client_secret", "test-secret")
        self.valid_tokens = {self.access}
        self.token_serial = 0
        self.log = fake_control.RequestLog()
        self.control = fake_control.Control({"expire_token": self.expire_op, "throttle": self.throttle_op,
                                             "delete": self.delete_op, "move": self.move_op, "modify": self.modify_op},
                                            lock=self.lock)
        self.throttle = {}
        self.hrefs = {}
        self.href_serial = 0
        self.files = {}   # "Music/A/x.mp3" -> dict
        self.dirs = {""}  # "" is the disk root
        revision = 1700000000000000
        for n, f in enumerate(spec.get("files", [])):
            path = f["path"].strip("/")
            data = content_of(path, int(f["size"]), f.get("seed", n))
            hashed = data + b"corrupt" if f.get("corrupt_hashes") else data
            name = path.rsplit("/", 1)[-1]
            mime, media = guess(name)
            revision += 1
            self.files[path] = {
                "name": name, "data": data,
                "mime_type": f.get("mime_type", mime), "media_type": f.get("media_type", media),
                "md5": hashlib.md5(hashed).hexdigest(), "sha256": hashlib.sha256(hashed).hexdigest(),
                "revision": revision, "resource_id": f"4000000001:{hashlib.sha256(path.encode()).hexdigest()}",
                "modified": f.get("modified", "2024-05-01T12:%02d:%02d+03:00" % (n // 60 % 60, n % 60)),
            }
            parts = path.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        for d in spec.get("dirs", []):
            parts = d.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))

    # ---- control ops (fake_control.Control holds the lock)
    def expire_op(self, op):
        self.valid_tokens.clear()

    def throttle_op(self, op):
        self.throttle[op.get("target", "api")] = {"count": int(op.get("count", 1)), "status": int(op.get("status", 429)),
                                                   "retry_after": op.get("retry_after")}

    def delete_op(self, op):
        self.files.pop(op["path"].strip("/"))

    def move_op(self, op):
        src, dst = op["from"].strip("/"), op["to"].strip("/")
        f = self.files.pop(src)
        f["name"] = dst.rsplit("/", 1)[-1]
        self.files[dst] = f
        parts = dst.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dirs.add("/".join(parts[:i]))

    def modify_op(self, op):
        path = op["path"].strip("/")
        f = self.files[path]
        size = int(op.get("size", len(f["data"])))
        f["data"] = bytes(b ^ 0xFF for b in f["data"]) if size == len(f["data"]) else content_of(path, size, f["revision"])
        f["md5"], f["sha256"] = hashlib.md5(f["data"]).hexdigest(), hashlib.sha256(f["data"]).hexdigest()
        f["revision"] += 1

    def resource(self, path):
        if path in self.files:
            f = self.files[path]
            return {
                "antivirus_status": "clean", "name": f["name"], "path": "disk:/" + path, "type": "file",
                "size": len(f["data"]), "md5": f["md5"], "sha256": f["sha256"], "mime_type": f["mime_type"],
                "media_type": f["media_type"], "modified": f["modified"], "created": "2024-01-01T00:00:00+00:00",
                "revision": f["revision"], "resource_id": f["resource_id"], "comment_ids": {},
                "exif": {}, "file": "https://downloader.invalid/never-used",
            }
        name = path.rsplit("/", 1)[-1] if path else "disk"
        return {"name": name, "path": "disk:/" + path, "type": "dir", "created": "2024-01-01T00:00:00+00:00",
                "modified": "2024-01-01T00:00:00+00:00", "resource_id": "4000000001:dir" + hashlib.md5(path.encode()).hexdigest(),
                "comment_ids": {}, "exif": {}}

    def children(self, path):
        prefix = path + "/" if path else ""
        names = set()
        for p in list(self.files) + list(self.dirs):
            if p and p.startswith(prefix) and "/" not in p[len(prefix):]:
                names.add(p)
        return sorted(names, key=lambda p: p.rsplit("/", 1)[-1])


def apply_fields(obj, fields):
    tree = {}
    for f in fields.split(","):
        f = f.strip()
        if not f:
            continue
        node = tree
        for part in f.split("."):
            node = node.setdefault(part.strip(), {})
    return prune(obj, tree)


def prune(obj, tree):
    if not tree:
        return obj
    if isinstance(obj, list):
        return [prune(x, tree) for x in obj]
    if isinstance(obj, dict):
        return {k: prune(v, tree[k]) for k, v in obj.items() if k in tree}
    return obj


def error_body(name, description, message):
    return {"message": message, "description": description, "error": name}


UNAUTHORIZED = error_body("UnauthorizedError", "Unauthorized", "Не авторизован.")
NOT_FOUND = error_body("DiskNotFoundError", "Resource not found.", "Не удалось найти запрошенный ресурс.")


def field_error(desc):
    return error_body("FieldValidationError", desc, "Ошибка проверки поля.")


def make_handler(state, role, ports):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, status, obj, headers=None):
            body = json.dumps(obj, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def record(self, status, extra=None):
            parsed = urllib.parse.urlsplit(self.path)
            auth = self.headers.get("Authorization")
            entry = {"server": role, "method": self.command, "path": urllib.parse.unquote(parsed.path),
                     "query": {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()},
                     "auth_scheme": auth.split(" ", 1)[0] if auth else None,
                     "auth_token": auth.split(" ", 1)[1] if auth and " " in auth else None,
                     "host": self.headers.get("Host"), "range": self.headers.get("Range"), "status": status}
            if extra:
                entry.update(extra)
            state.log.record(self, **entry)

        def authorized(self):
            auth = self.headers.get("Authorization") or ""
            m = re.fullmatch(r"OAuth (\S+)", auth)
            with state.lock:
                return bool(m) and m.group(1) in state.valid_tokens

        def throttled(self):
            with state.lock:
                t = state.throttle.get(role)
                if not t or t["count"] <= 0:
                    return None
                t["count"] -= 1
                return dict(t)

        def do_GET(self):
            parsed = urllib.parse.urlsplit(self.path)
            if fake_control.serve(self, state.control, state.log):
                return
            t = self.throttled()
            if t:
                self.record(t["status"])
                headers = {"Retry-After": t["retry_after"]} if t.get("retry_after") is not None else {}
                return self.send_json(t["status"], error_body("TooManyRequestsError", "Too Many Requests", "Слишком много запросов."), headers)
            if not self.authorized():
                self.record(401)
                return self.send_json(401, UNAUTHORIZED)
            if role == "download":
                return self.download(parsed)
            q = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
            q = {k: v[0] for k, v in q.items()}
            if parsed.path == "/v1/disk/resources":
                return self.resources(q)
            if parsed.path == "/v1/disk/resources/files":
                return self.flat(q)
            if parsed.path == "/v1/disk/resources/download":
                return self.link(q)
            self.record(404)
            return self.send_json(404, error_body("NotFoundError", "Not Found", "Не найдено."))

        def paging(self, q):
            try:
                limit = int(q.get("limit", "20"))
                offset = int(q.get("offset", "0"))
            except ValueError:
                return None, None, field_error("limit and offset must be integers")
            if limit < 1 or offset < 0:
                return None, None, field_error("limit must be positive and offset non-negative")
            return limit, offset, None

        def disk_path(self, q):
            raw = q.get("path")
            if raw is None or raw == "":
                return None, field_error("Field 'path' is required.")
            p = raw
            if p.startswith("disk:"):
                p = p[5:]
            elif ":" in p.split("/", 1)[0]:
                return None, field_error("Unknown path namespace.")
            return p.strip("/"), None

        def resources(self, q):
            path, err = self.disk_path(q)
            if err:
                self.record(400)
                return self.send_json(400, err)
            limit, offset, err = self.paging(q)
            if err:
                self.record(400)
                return self.send_json(400, err)
            if path not in state.files and path not in state.dirs:
                self.record(404)
                return self.send_json(404, NOT_FOUND)
            res = state.resource(path)
            if res["type"] == "dir":
                kids = state.children(path)
                take = limit
                if state.spec.get("short_pages") and limit > 1:
                    take = limit - 1
                if state.spec.get("max_limit"):
                    take = min(take, int(state.spec["max_limit"]))
                page = kids[offset:offset + take]
                res["_embedded"] = {"sort": "", "path": "disk:/" + path, "limit": limit, "offset": offset,
                                    "total": len(kids), "items": [state.resource(p) for p in page]}
            if "fields" in q:
                res = apply_fields(res, q["fields"])
            self.record(200)
            return self.send_json(200, res)

        def flat(self, q):
            limit, offset, err = self.paging(q)
            if err:
                self.record(400)
                return self.send_json(400, err)
            types = None
            if q.get("media_type"):
                types = {t.strip().strip('"') for t in q["media_type"].split(",")}
                if not types <= MEDIA_TYPES:
                    self.record(400)
                    return self.send_json(400, field_error("Unknown media_type."))
            paths = sorted(p for p, f in state.files.items() if types is None or f["media_type"] in types)
            take = limit
            if state.spec.get("max_limit"):
                take = min(take, int(state.spec["max_limit"]))
            res = {"items": [state.resource(p) for p in paths[offset:offset + take]], "limit": limit, "offset": offset}
            if "fields" in q:
                res = apply_fields(res, q["fields"])
            self.record(200)
            return self.send_json(200, res)

        def link(self, q):
            path, err = self.disk_path(q)
            if err:
                self.record(400)
                return self.send_json(400, err)
            if path not in state.files:
                if path in state.dirs:
                    self.record(200)
                    return self.send_json(200, {"href": "http://%s:%d/zip/%s" % (state.spec.get("download_host", "localhost"), ports["download"], "dir"),
                                                "method": "GET", "templated": False})
                self.record(404)
                return self.send_json(404, NOT_FOUND)
            with state.lock:
                state.href_serial += 1
                hid = "h%d%s" % (state.href_serial, hashlib.md5(os.urandom(8)).hexdigest()[:8])
                state.hrefs[hid] = {"path": path, "uses": 0}
            f = state.files[path]
            query = urllib.parse.urlencode({"uid": "1", "filename": f["name"], "disposition": "attachment",
                                            "hash": "", "limit": "0", "content_type": f["mime_type"], "tknv": "v2"},
                                           quote_via=urllib.parse.quote)
            href = "http://%s:%d/disk/%s?%s" % (state.spec.get("download_host", "localhost"), ports["download"], hid, query)
            self.record(200, {"href_id": hid, "file": path})
            return self.send_json(200, {"href": href, "method": "GET", "templated": False})

        def download(self, parsed):
            m = re.fullmatch(r"/disk/([A-Za-z0-9]+)", parsed.path)
            with state.lock:
                h = state.hrefs.get(m.group(1)) if m else None
                if h:
                    h["uses"] += 1
                    uses = h["uses"]
            if not h:
                self.record(404)
                return self.send_json(404, error_body("NotFound", "Link not found", "Ссылка не найдена."))
            max_uses = state.spec.get("href_max_uses")
            if max_uses is not None and uses > int(max_uses):
                status = int(state.spec.get("href_expired_status", 410))
                self.record(status, {"href_id": m.group(1), "expired": True})
                body = b"link expired"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            data = state.files[h["path"]]["data"]
            size = len(data)
            status, start, end = fake_range.plan(self.headers.get("Range"), size, suffix=False, malformed="416")
            if status == 416:
                self.record(416, {"href_id": m.group(1)})
                self.send_response(416)
                for k, v in fake_range.headers(status, start, end, size):
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.record(status, {"href_id": m.group(1)})
            self.send_response(status)
            self.send_header("Content-Type", state.files[h["path"]]["mime_type"])
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(end - start + 1))
            for k, v in fake_range.headers(status, start, end, size):
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data[start:end + 1])

        def do_POST(self):
            parsed = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if fake_control.serve(self, state.control, state.log, raw):
                return
            if parsed.path == "/token" and role == "api":
                return self.token(raw)
            self.record(404)
            return self.send_json(404, error_body("NotFoundError", "Not Found", "Не найдено."))

        def token(self, raw):
            form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode(), keep_blank_values=True).items()}
            ok_client = form.get("client_id") == state.client_id and form.get("client_secret") == state.client_secret
            if form.get("grant_type") != "refresh_token" or not form.get("refresh_token"):
                self.record(400, {"grant": form.get("grant_type")})
                return self.send_json(400, {"error": "unsupported_grant_type", "error_description": "grant_type"})
            if not ok_client:
                self.record(400, {"grant": "refresh_token"})
                return self.send_json(400, {"error": "invalid_client", "error_description": "Client not found"})
            if form["refresh_token"] != state.refresh:
                self.record(400, {"grant": "refresh_token"})
                return self.send_json(400, {"error": "invalid_grant", "error_description": "Invalid refresh token"})
            with state.lock:
                state.token_serial += 1
                state.access = "refreshed-%d-%s" % (state.token_serial, hashlib.md5(os.urandom(8)).hexdigest()[:6])
                state.valid_tokens = {state.access}
                token = state.access
            self.record(200, {"grant": "refresh_token"})
            return self.send_json(200, {"token_type": "bearer", "access_token": token, "expires_in": 31536000,
                                        "refresh_token": state.refresh})

    return Handler


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else "{}"
    spec = json.loads(open(arg, encoding="utf-8").read() if os.path.exists(arg) else arg)
    state = State(spec)
    ports = {}
    api = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, "api", ports))
    dl = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, "download", ports))
    ports["api"] = api.server_address[1]
    ports["download"] = dl.server_address[1]
    for s in (api, dl):
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("%d %d" % (ports["api"], ports["download"]), flush=True)
    try:
        sys.stdin.read()  # the test closes stdin (or kills us) to stop
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
