#!/usr/bin/env python3
"""Fake Google Drive API v3 + OAuth token endpoint for cloudsync's tests (python3 stdlib only).

Usage: gdrive_fake.py SPEC   (SPEC = path to a JSON file, or a JSON object starting with '{')
Prints the port it listens on (127.0.0.1, port 0) as the first stdout line. Stops when stdin closes.

Follows the Drive v3 reference: files.list (q subset parsed properly, pageSize 1..1000, pageToken,
fields projection, size as a string), files.get (+ 'root' alias, alt=media with Range/206/416,
acknowledgeAbuse), changes.getStartPageToken, changes.list (includeRemoved, newStartPageToken),
error bodies {"error": {"code", "message", "errors": [{"domain", "reason", "message", "location",
"locationType"}]}}, 401 authError, token refresh at POST /token (grant_type=refresh_token).

Spec keys: rootId, items[{id,name,parents,mimeType,size,modifiedTime,trashed,hashes}], generate{files,
perFolder,parent}, accessToken, refreshToken, clientId, clientSecret, quirks{emptyPageAfterFirst,shortPages}.
Control: the fakes' one protocol (fake_control.py): POST /_control with an op or a list of ops (see apply_op;
"modify" {"id"} gives a file new bytes of its size, a new md5 and headRevisionId); GET /_log returns every API
request (common fields and the parsed query).
"""
import base64
import hashlib
import json
import random
import re
import sys
import threading

import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fake_control
import fake_range

FOLDER = "application/vnd.google-apps.folder"
FILE_FIELDS = {"kind", "id", "name", "parents", "mimeType", "size", "md5Checksum", "sha1Checksum",
               "sha256Checksum", "modifiedTime", "createdTime", "headRevisionId", "trashed",
               "explicitlyTrashed", "shortcutDetails", "webViewLink", "driveId", "resourceKey"}
LOCK = threading.Lock()


def error_body(code, reason, message, location=None, location_type="parameter", domain="global"):
    item = {"domain": domain, "reason": reason, "message": message}
    if location:
        item["location"] = location
        item["locationType"] = location_type
    status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
              429: "RESOURCE_EXHAUSTED"}.get(code)
    e = {"code": code, "message": message, "errors": [item]}
    if status:
        e["status"] = status
    return {"error": e}


class ApiError(Exception):
    def __init__(self, code, reason, message, location=None, location_type="parameter", domain="global",
                 headers=None):
        super().__init__(message)
        self.code = code
        self.body = error_body(code, reason, message, location, location_type, domain)
        self.headers = headers or {}


def invalid(location, message="Invalid Value"):
    return ApiError(400, "invalid", message, location)


# ---------------------------------------------------------------- q parser

class Tok:
    def __init__(self, kind, value):
        self.kind, self.value = kind, value

    def __repr__(self):
        return f"{self.kind}:{self.value}"


def tokenize(q):
    toks, i = [], 0
    while i < len(q):
        c = q[i]
        if c.isspace():
            i += 1
        elif c == "'":
            i += 1
            s = []
            while True:
                if i >= len(q):
                    raise invalid("q")
                if q[i] == "\\":
                    if i + 1 >= len(q) or q[i + 1] not in "\\'":
                        raise invalid("q")
                    s.append(q[i + 1])
                    i += 2
                elif q[i] == "'":
                    i += 1
                    break
                else:
                    s.append(q[i])
                    i += 1
            toks.append(Tok("str", "".join(s)))
        elif c in "()":
            toks.append(Tok(c, c))
            i += 1
        elif q.startswith("!=", i):
            toks.append(Tok("op", "!="))
            i += 2
        elif c == "=":
            toks.append(Tok("op", "="))
            i += 1
        elif c in "<>":
            raise invalid("q")  # comparison operators are valid Drive syntax, but not on the fields we support
        elif c.isalpha():
            j = i
            while j < len(q) and (q[j].isalnum() or q[j] in "_"):
                j += 1
            toks.append(Tok("word", q[i:j]))
            i = j
        else:
            raise invalid("q")
    return toks


class Parser:
    """expr := term ('or' term)* ; term := factor ('and' factor)* ;
    factor := 'not' factor | '(' expr ')' | STRING 'in' 'parents' | FIELD ('='|'!='|'contains') VALUE"""

    def __init__(self, q):
        self.toks = tokenize(q)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        t = self.peek()
        if t is None:
            raise invalid("q")
        self.i += 1
        return t

    def parse(self):
        if not self.toks:
            raise invalid("q")
        e = self.expr()
        if self.peek() is not None:
            raise invalid("q")
        return e

    def expr(self):
        left = self.term()
        while self.peek() and self.peek().kind == "word" and self.peek().value == "or":
            self.take()
            right = self.term()
            left = (lambda a, b: lambda f: a(f) or b(f))(left, right)
        return left

    def term(self):
        left = self.factor()
        while self.peek() and self.peek().kind == "word" and self.peek().value == "and":
            self.take()
            right = self.factor()
            left = (lambda a, b: lambda f: a(f) and b(f))(left, right)
        return left

    def factor(self):
        t = self.take()
        if t.kind == "word" and t.value == "not":
            inner = self.factor()
            return lambda f: not inner(f)
        if t.kind == "(":
            e = self.expr()
            if self.take().kind != ")":
                raise invalid("q")
            return e
        if t.kind == "str":
            w1, w2 = self.take(), self.take()
            if w1.kind == "word" and w1.value == "in" and w2.kind == "word" and w2.value == "parents":
                pid = t.value
                return lambda f, pid=pid: pid in f.get("_parents_resolved", [])
            raise invalid("q")
        if t.kind == "word" and t.value in ("name", "mimeType", "trashed"):
            field = t.value
            op = self.take()
            if op.kind == "op":
                val = self.take()
                if field == "trashed":
                    if val.kind != "word" or val.value not in ("true", "false"):
                        raise invalid("q")
                    want = val.value == "true"
                    test = lambda f, want=want: bool(f.get("trashed", False)) == want
                else:
                    if val.kind != "str":
                        raise invalid("q")
                    v = val.value
                    if field == "name":  # '=' on name is case-insensitive (rclone drive.go)
                        test = lambda f, v=v: f.get("name", "").lower() == v.lower()
                    else:
                        test = lambda f, v=v, field=field: f.get(field, "") == v
                if op.value == "!=":
                    return lambda f, test=test: not test(f)
                return test
            if op.kind == "word" and op.value == "contains" and field != "trashed":
                val = self.take()
                if val.kind != "str":
                    raise invalid("q")
                v = val.value
                if field == "name":  # prefix match on the name (Drive search docs)
                    return lambda f, v=v: f.get("name", "").lower().startswith(v.lower())
                return lambda f, v=v: v in f.get("mimeType", "")
            raise invalid("q")
        raise invalid("q")


# ---------------------------------------------------------------- fields projection

def parse_fields(text):
    """'a,b(c,d(e))' -> {'a': None, 'b': {'c': None, 'd': {'e': None}}}"""
    pos = 0

    def parse_list():
        nonlocal pos
        out = {}
        while pos < len(text):
            j = pos
            while j < len(text) and text[j] not in ",()":
                j += 1
            name = text[pos:j].strip()
            if not name:
                raise ApiError(400, "invalidParameter", "Invalid field selection", "fields")
            pos = j
            sub = None
            if pos < len(text) and text[pos] == "(":
                pos += 1
                sub = parse_list()
                if pos >= len(text) or text[pos] != ")":
                    raise ApiError(400, "invalidParameter", "Invalid field selection", "fields")
                pos += 1
            out[name] = sub
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            break
        return out

    tree = parse_list()
    if pos != len(text):
        raise ApiError(400, "invalidParameter", f"Invalid field selection {text}", "fields")
    return tree


def check_file_fields(sel):
    for k in sel or {}:
        if k not in FILE_FIELDS:
            raise ApiError(400, "invalidParameter", f"Invalid field selection {k}", "fields")


def project(obj, sel):
    if sel is None:
        return obj
    if isinstance(obj, list):
        return [project(o, sel) for o in obj]
    out = {}
    for k, sub in sel.items():
        if k in obj:
            out[k] = project(obj[k], sub) if sub is not None else obj[k]
    return out


# ---------------------------------------------------------------- state

class Drive:
    def __init__(self, spec):
        self.root_id = spec.get("rootId", "0AROOTFOLDERID")
        self.items = {}
        self.children = {}  # parent id -> set of child ids (to answer "'x' in parents and ..." quickly)
        self.changes = []  # list of file ids, change n = index+1
        self.min_token = 1
        self.access_token = spec.get("accessToken", "tok-0")
        self.refresh_token = spec.get("refreshToken", "refresh-0")
        self.client_id = spec.get("clientId", "client-id")
        self.client_secret = spec.get("clientSecret", "client-secret")
        self.token_count = 0
        self.quirks = spec.get("quirks", {})
        self.failures = []
        self.log = fake_control.RequestLog()
        self.control = fake_control.Control({name: control_op(self) for name in CONTROL_OPS}, lock=LOCK)
        self.revision = 0
        self.expire_after = None
        self.items[self.root_id] = {"id": self.root_id, "name": "My Drive", "mimeType": FOLDER,
                                    "modifiedTime": "2020-01-01T00:00:00.000Z"}
        for it in spec.get("items", []):
            self.put(dict(it), record=False)
        gen = spec.get("generate")
        if gen:
            self.generate(gen)

    def generate(self, gen):
        n, per = gen["files"], gen.get("perFolder", 10)
        parent = gen.get("parent", self.root_id)
        rnd = random.Random(gen.get("seed", 7))
        artists = max(1, n // (per * 5))
        folder_ids = []
        for a in range(artists):
            aid = f"art{a:05d}{rnd.randrange(1 << 30):x}"
            self.put({"id": aid, "name": f"Artist {a}", "mimeType": FOLDER, "parents": [parent]}, record=False)
            for b in range(5):
                bid = f"alb{a:05d}{b}{rnd.randrange(1 << 30):x}"
                self.put({"id": bid, "name": f"Album {b}", "mimeType": FOLDER, "parents": [aid]}, record=False)
                folder_ids.append(bid)
        for i in range(n):
            fid = f"f{i:06d}{rnd.randrange(1 << 30):x}"
            self.put({"id": fid, "name": f"Track {i}.mp3", "mimeType": "audio/mpeg", "size": 64 + i % 50,
                      "parents": [folder_ids[i % len(folder_ids)]]}, record=False)
        for k, fid in enumerate(folder_ids[: max(1, len(folder_ids) // 10)]):
            self.put({"id": f"cov{k}", "name": "cover.jpg", "mimeType": "image/jpeg", "size": 10, "parents": [fid]},
                     record=False)

    def content(self, it):
        size = int(it.get("size", 0))
        seed = (it["id"] + ":" + str(it.get("version", 0)) + ";").encode()
        return (seed * (size // len(seed) + 1))[:size]

    def put(self, it, record=True):
        if it.get("mimeType") != FOLDER and not it.get("mimeType", "").startswith("application/vnd.google-apps."):
            it.setdefault("size", 0)
        it.setdefault("modifiedTime", "2024-05-06T07:08:09.123Z")
        it.setdefault("parents", [self.root_id])
        self.revision += 1
        it["headRevisionId"] = f"rev{self.revision}"
        self.unlink(it["id"])
        self.items[it["id"]] = it
        for p in it.get("parents", []):
            self.children.setdefault(p, set()).add(it["id"])
        if record:
            self.changes.append((it["id"], False))

    def public(self, it):
        f = {"kind": "drive#file", "id": it["id"], "name": it["name"], "mimeType": it.get("mimeType", ""),
             "trashed": bool(it.get("trashed", False)), "modifiedTime": it["modifiedTime"]}
        if it["id"] != self.root_id:
            f["parents"] = list(it.get("parents", []))
        if "size" in it and it.get("mimeType") != FOLDER:
            data = self.content(it)
            f["size"] = str(len(data))  # int64 as a JSON string
            hashes = it.get("hashes", "both")
            if hashes in ("both", "md5"):
                f["md5Checksum"] = hashlib.md5(data).hexdigest()
            if hashes in ("both", "sha256"):
                f["sha256Checksum"] = hashlib.sha256(data).hexdigest()
            f["headRevisionId"] = it["headRevisionId"]
        return f

    def unlink(self, fid):
        old = self.items.get(fid)
        for p in (old or {}).get("parents", []):
            self.children.get(p, set()).discard(fid)

    def lookup(self, fid):
        if fid == "root":
            fid = self.root_id
        it = self.items.get(fid)
        if it is None:
            raise ApiError(404, "notFound", f"File not found: {fid}.", "fileId")
        return it


def apply_op(d, op):
    kind = op["op"]
    if kind == "expireToken":
        d.access_token = None
    elif kind == "expireTokenAfter":  # the token dies after this many more authorized API requests
        d.expire_after = op["requests"]
    elif kind == "fail":
        d.failures.append(dict(op))
    elif kind == "add":
        d.put(dict(op["item"]))
    elif kind == "update":
        it = dict(d.lookup(op["id"]))
        for k, v in op.items():
            if k not in ("op", "id"):
                it[k] = v
        if "size" in op or "bump" in op:
            it["version"] = it.get("version", 0) + 1
        d.put(it)
    elif kind == "modify":
        apply_op(d, {"op": "update", "id": op["id"], "bump": True, **({"size": op["size"]} if "size" in op else {})})
    elif kind == "delete":
        d.unlink(op["id"])
        d.items.pop(op["id"], None)
        d.changes.append((op["id"], True))
    elif kind == "invalidateChangeTokens":
        d.min_token = len(d.changes) + 1
    elif kind == "clearLog":
        d.log.clear()
    else:
        raise ValueError(kind)


def control_op(d):
    def run(op):
        try:
            apply_op(d, op)
        except ApiError as e:
            raise KeyError(str(e.body)) from e
    return run


CONTROL_OPS = ("expireToken", "expireTokenAfter", "fail", "add", "update", "modify", "delete", "invalidateChangeTokens",
               "clearLog")


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    drive = None

    def log_message(self, *args):
        pass

    def send_json(self, code, obj, headers=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        body = self.read_body()
        d = self.drive
        if fake_control.serve(self, d.control, d.log, body):
            return
        with LOCK:
            if url.path == "/token":
                form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
                entry = d.log.record(self, 0, query={})
                ok = (self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded")
                      and form.get("grant_type") == ["refresh_token"] and form.get("refresh_token") == [d.refresh_token]
                      and form.get("client_id") == [d.client_id] and form.get("client_secret") == [d.client_secret])
                if not ok:
                    entry["status"] = 400
                    return self.send_json(400, {"error": "invalid_grant", "error_description": "Bad Request"})
                d.token_count += 1
                d.access_token = f"tok-{d.token_count}"
                entry["status"] = 200
                return self.send_json(200, {"access_token": d.access_token, "expires_in": 3599, "token_type": "Bearer",
                                            "scope": "https://www.googleapis.com/auth/drive.readonly"})
        self.send_json(404, error_body(404, "notFound", "Not Found"))

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        q1 = {k: v[-1] for k, v in query.items()}
        d = self.drive
        if fake_control.serve(self, d.control, d.log):
            return
        with LOCK:
            entry = d.log.record(self, 0, query=q1)
            try:
                self.check_auth(d)
                for f in d.failures:
                    if f["count"] > 0 and url.path.startswith(f.get("path", "/")) and \
                            (f.get("media") is None or f.get("media") == (q1.get("alt") == "media")):
                        f["count"] -= 1
                        hdrs = {"Retry-After": str(f["retryAfter"])} if f.get("retryAfter") is not None else {}
                        raise ApiError(f["status"], f["reason"], f.get("message", f["reason"]), domain="usageLimits",
                                       headers=hdrs)
                if url.path == "/drive/v3/files":
                    status, obj, hdrs = 200, self.files_list(d, q1), {}
                elif url.path == "/drive/v3/changes/startPageToken":
                    status, obj, hdrs = 200, {"kind": "drive#startPageToken",
                                              "startPageToken": str(len(d.changes) + 1)}, {}
                elif url.path == "/drive/v3/changes":
                    status, obj, hdrs = 200, self.changes_list(d, q1), {}
                elif url.path.startswith("/drive/v3/files/"):
                    fid = urllib.parse.unquote(url.path[len("/drive/v3/files/"):])
                    it = d.lookup(fid)
                    if q1.get("alt") == "media":
                        entry["status"] = self.media(d, it, q1)
                        return
                    f = d.public(it)
                    if "fields" in q1:
                        sel = parse_fields(q1["fields"])
                        check_file_fields(sel)
                        f = project(f, sel)
                    else:
                        f = {k: f[k] for k in ("kind", "id", "name", "mimeType") if k in f}
                    status, obj, hdrs = 200, f, {}
                else:
                    raise ApiError(404, "notFound", "Not Found")
            except ApiError as e:
                status, obj, hdrs = e.code, e.body, e.headers
                if e.code == 401:
                    hdrs = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"'}
            entry["status"] = status
        self.send_json(status, obj, hdrs)

    def check_auth(self, d):
        auth = self.headers.get("Authorization", "")
        if d.access_token is None or auth != f"Bearer {d.access_token}":
            raise ApiError(401, "authError", "Invalid Credentials", "Authorization", "header")
        if d.expire_after is not None:
            if d.expire_after <= 0:
                d.access_token, d.expire_after = None, None
                raise ApiError(401, "authError", "Invalid Credentials", "Authorization", "header")
            d.expire_after -= 1

    @staticmethod
    def page_size(q1):
        try:
            n = int(q1.get("pageSize", "100"))
        except ValueError:
            raise invalid("pageSize")
        if not 1 <= n <= 1000:
            raise invalid("pageSize", f"Invalid value '{n}'. Values must be within the range: [1, 1000]")
        return n

    def files_list(self, d, q1):
        size = self.page_size(q1)
        sel = parse_fields(q1["fields"]) if "fields" in q1 else None
        if sel is not None:
            for k in sel:
                if k not in ("kind", "nextPageToken", "files", "incompleteSearch"):
                    raise ApiError(400, "invalidParameter", f"Invalid field selection {k}", "fields")
            check_file_fields(sel.get("files"))
        pred = Parser(q1["q"]).parse() if "q" in q1 else (lambda f: True)
        # Shared drives need both flags together; the listing of the user's drive accepts them.
        if q1.get("includeItemsFromAllDrives") == "true" and q1.get("supportsAllDrives") != "true":
            raise ApiError(403, "teamDrivesParameterRequiresSupportsAllDrives",
                           "The includeItemsFromAllDrives parameter requires supportsAllDrives", "supportsAllDrives")
        matches = []
        candidates = d.items.values()
        # "'<id>' in parents and ..." can only match children of <id>: a shortcut, the predicate still decides.
        head = re.match(r"^\s*'((?:[^'\\]|\\.)*)'\s+in\s+parents\s+and\s", q1.get("q", ""))
        if head and not any(t.kind == "word" and t.value == "or" for t in tokenize(q1["q"])):
            pid = re.sub(r"\\(.)", r"\1", head.group(1))
            pid = d.root_id if pid == "root" else pid
            candidates = [d.items[c] for c in d.children.get(pid, ()) if c in d.items]
        for it in candidates:
            if it["id"] == d.root_id:
                continue
            view = dict(it)
            view["_parents_resolved"] = list(it.get("parents", [])) + \
                (["root"] if d.root_id in it.get("parents", []) else [])
            if pred(view):
                matches.append(it)
        # No documented default order is relied on: a stable shuffle puts children before parents.
        matches.sort(key=lambda it: hashlib.md5(it["id"].encode()).hexdigest())
        tok = q1.get("pageToken")
        offset, pageno = 0, 0
        if tok:
            try:
                offset, pageno, qh = base64.urlsafe_b64decode(tok.encode()).decode().split(":")
                offset, pageno = int(offset), int(pageno)
            except Exception:
                raise invalid("pageToken")
            if qh != hashlib.md5(q1.get("q", "").encode()).hexdigest()[:8]:
                raise invalid("pageToken")
        take = size
        if self.quirks_get(d, "emptyPageAfterFirst") and pageno == 1:
            take = 0
        elif self.quirks_get(d, "shortPages") and pageno % 2 == 1 and size > 1:
            take = size - 1
        page = matches[offset:offset + take]
        nxt = offset + take
        out = {"kind": "drive#fileList", "incompleteSearch": False, "files": [d.public(it) for it in page]}
        if nxt < len(matches):
            qh = hashlib.md5(q1.get("q", "").encode()).hexdigest()[:8]
            out["nextPageToken"] = base64.urlsafe_b64encode(f"{nxt}:{pageno + 1}:{qh}".encode()).decode()
        if sel is None:
            out["files"] = [{k: f[k] for k in ("kind", "id", "name", "mimeType")} for f in out["files"]]
            return out
        return project(out, sel)

    @staticmethod
    def quirks_get(d, name):
        return bool(d.quirks.get(name))

    def changes_list(self, d, q1):
        if "pageToken" not in q1:
            raise ApiError(400, "required", "Required parameter: pageToken", "pageToken")
        size = self.page_size(q1)
        try:
            start = int(q1["pageToken"])
        except ValueError:
            raise invalid("pageToken")
        if start < d.min_token or start > len(d.changes) + 1:
            raise invalid("pageToken")
        sel = parse_fields(q1["fields"]) if "fields" in q1 else None
        if sel is not None:
            for k in sel:
                if k not in ("kind", "nextPageToken", "newStartPageToken", "changes"):
                    raise ApiError(400, "invalidParameter", f"Invalid field selection {k}", "fields")
            check_file_fields((sel.get("changes") or {}).get("file"))
        include_removed = q1.get("includeRemoved", "true") == "true"
        out_changes = []
        i = start
        while i <= len(d.changes) and len(out_changes) < size:
            fid, removed = d.changes[i - 1]
            i += 1
            it = d.items.get(fid)
            if removed or it is None:
                if include_removed:
                    out_changes.append({"kind": "drive#change", "changeType": "file", "fileId": fid, "removed": True,
                                        "time": "2024-06-01T00:00:00.000Z"})
                continue
            out_changes.append({"kind": "drive#change", "changeType": "file", "fileId": fid, "removed": False,
                                "time": "2024-06-01T00:00:00.000Z", "file": d.public(it)})
        out = {"kind": "drive#changeList", "changes": out_changes}
        if i <= len(d.changes):
            out["nextPageToken"] = str(i)
        else:
            out["newStartPageToken"] = str(len(d.changes) + 1)
        return project(out, sel) if sel is not None else out

    def media(self, d, it, q1):
        mime = it.get("mimeType", "")
        if mime.startswith("application/vnd.google-apps."):
            raise ApiError(403, "fileNotDownloadable",
                           "Only files with binary content can be downloaded. Use Export with Docs Editors files.",
                           "alt")
        if it.get("quotaExceeded"):
            raise ApiError(403, "downloadQuotaExceeded", "The download quota for this file has been exceeded.")
        if it.get("abusive") and q1.get("acknowledgeAbuse") != "true":
            raise ApiError(403, "cannotDownloadAbusiveFile",
                           "This file has been identified as malware or spam and cannot be downloaded.",
                           "acknowledgeAbuse")
        data = d.content(it)
        status, start, end = fake_range.plan(self.headers.get("Range"), len(data), suffix=False)
        if status == 416:
            self.send_response(416)
            for k, v in fake_range.headers(status, start, end, len(data)):
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return 416
        body = data[start:end + 1]
        self.send_response(status)
        self.send_header("Content-Type", it.get("mimeType", "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        for k, v in fake_range.headers(status, start, end, len(data)):
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        return status


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else "{}"
    spec = json.loads(arg) if arg.lstrip().startswith("{") else json.load(open(arg))
    Handler.drive = Drive(spec)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # the test closes stdin (or exits) to stop us
    server.shutdown()


if __name__ == "__main__":
    main()
