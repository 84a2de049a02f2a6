#!/usr/bin/env python3
"""A fake Microsoft Graph (OneDrive) server, python3 stdlib only, written from the Graph documents
(driveitem-delta, driveitem-get, driveitem-get-content, errors, throttling) and ../shared/providers.md §3.

Usage: onedrive_fake.py SPEC_JSON     (prints "API_PORT CONTENT_PORT" on the first stdout line)

Three roles on 127.0.0.1:
  * Graph on API_PORT: GET /v1.0/me/drive/root/delta (and /v1.0/drives/{d}/root/delta), GET
    /v1.0/me/drive/items/{id}[/content] (and /v1.0/drives/{d}/items/{id}[/content]); every request needs
    `Authorization: Bearer <current access token>` or gets 401 InvalidAuthenticationToken with
    `WWW-Authenticate: Bearer ... error="expired_token"`. `$select` is validated against driveItem's
    properties (400 invalidRequest otherwise) and applied to the answer.
  * the token endpoint on API_PORT: POST /common/oauth2/v2.0/token (refresh_token grant; rotates the refresh
    token: the old one is refused with 400 invalid_grant afterwards).
  * a content host on CONTENT_PORT (another origin) serving pre-authenticated URLs: it answers 401 to any
    request carrying Authorization, honours one absolute Range (206 + Content-Range), refuses suffix ranges,
    and after `link_uses` requests on one URL answers `link_status`.

Spec keys (all optional but "items"):
  items: [{"path": "Music/A/x.mp3", "size": 1000, "mime": "audio/mpeg", "audio": true, "package": true,
           "malware": true}]  -- a path ending in "/" is a folder; parents are created implicitly
  page_size (3), style ("personal" | "business": deleted items lack size | name, business omits cTag
  and sha1Hash), access_token ("at-0"), refresh_token ("rt-0"), client_id ("cid"), download_url (true: item
  GET carries @microsoft.graph.downloadUrl), link_uses (0 = unlimited), link_status (410), ratelimit (0: the
  first N Graph calls answer 429 Retry-After: 1), token_uses (0 = unlimited: the access token expires after
  N Graph calls), duplicate (false: every delta answer repeats its first changed item at the end).

Control (no auth), the fakes' one protocol (fake_control.py): POST /_control with an op or a list of ops,
  {"op": "add"|"modify"|"delete"|"move"|"expire_tokens"|"set", ...} (the answer's "result": the item id or "ok")
  add {path, size, mime?}; modify {path, size}; delete {path}; move {path, to} (files and folders, also
  renames); expire_tokens: every earlier delta token answers 410 resyncRequired; set {key: value}.
GET /_log: JSON list of the common fields and {srv, path (unquoted), query}. GET /_bytes?id=ID: a file's bytes.
GET /_items: JSON {path: id} of live items.
"""
import base64
import hashlib
import json
import re
import sys
import threading
import time
import uuid

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

import fake_control
import fake_range

DRIVE_ID = "b!fakeDrive0123"
# driveItem properties (driveitem resource page) plus baseItem's; $select must name only these.
SELECTABLE = {
    "audio", "bundle", "content", "createdBy", "createdDateTime", "cTag", "deleted", "description", "eTag", "file",
    "fileSystemInfo", "folder", "id", "image", "lastModifiedBy", "lastModifiedDateTime", "location", "malware", "name",
    "package", "parentReference", "pendingOperations", "photo", "publication", "remoteItem", "root", "searchResult",
    "shared", "sharepointIds", "size", "specialFolder", "video", "webDavUrl", "webUrl",
}
ANNOTATION = "@microsoft.graph.downloadUrl"
LOCK = threading.RLock()


def quickxor(data):
    width, shift = 160, 11
    buf = bytearray(1760)
    for i, b in enumerate(data):
        buf[i % 1760] ^= b
    h = 0
    mask = (1 << width) - 1
    for j, b in enumerate(buf):
        if b:
            v = b << ((j * shift) % width)
            h ^= (v & mask) ^ (v >> width)
    out = bytearray(h.to_bytes(20, "little"))
    for k, b in enumerate(len(data).to_bytes(8, "little")):
        out[12 + k] ^= b
    return base64.b64encode(bytes(out)).decode()


class State:
    def __init__(self, spec):
        self.spec = spec
        self.conf = {
            "page_size": 3, "style": "personal", "access_token": "at-0", "refresh_token": "rt-0", "client_id": "cid",
            "download_url": True, "link_uses": 0, "link_status": 410, "ratelimit": 0, "token_uses": 0,
            "duplicate": False,
        }
        self.conf.update({k: v for k, v in spec.items() if k != "items"})
        self.seq = 0
        self.floor = 0  # delta tokens below this answer 410
        self.items = {"ROOT": {"id": "ROOT", "name": "root", "parent": None, "folder": True, "seq": 0, "root": True}}
        # (parent id, lower-cased name) -> id of the live item there: a path is found in O(depth), so a spec
        # of 50,000 items builds in seconds, not minutes.
        self.children = {}
        self.kids = {}  # parent id -> ids of its live children (a folder's childCount)
        self.sessions = {}
        self.links = {}
        self.log = fake_control.RequestLog()
        self.controller = fake_control.Control({name: self.control for name in
                                                ("add", "modify", "delete", "move", "expire_tokens", "set")}, lock=LOCK)
        self.token_calls = 0
        self.token_n = 0
        self.content_port = 0
        for entry in spec.get("items", []):
            self.add(entry)

    # --- tree -----------------------------------------------------------------------------------------
    def live(self):
        return {i: it for i, it in self.items.items() if not it.get("deleted")}

    def path_of(self, item):
        parts = []
        while item and not item.get("root"):
            parts.append(item["name"])
            item = self.items.get(item["parent"])
        return "/".join(reversed(parts))

    def find(self, path):
        path = path.strip("/")
        if path == "":
            return self.items["ROOT"]
        for it in self.live().values():
            if not it.get("root") and self.path_of(it).lower() == path.lower():
                return it
        return None

    def bump(self, item):
        self.seq += 1
        item["seq"] = self.seq

    def link(self, item):
        self.children[(item["parent"], item["name"].lower())] = item["id"]
        self.kids.setdefault(item["parent"], set()).add(item["id"])

    def unlink(self, item):
        if self.children.get((item["parent"], item["name"].lower())) == item["id"]:
            del self.children[(item["parent"], item["name"].lower())]
        self.kids.get(item["parent"], set()).discard(item["id"])

    def folder_for(self, path):
        parent = self.items["ROOT"]
        for name in [p for p in path.split("/") if p]:
            child = self.items.get(self.children.get((parent["id"], name.lower())))
            if child is None:
                child = {"id": "F" + uuid.uuid4().hex[:10].upper(), "name": name, "parent": parent["id"], "folder": True}
                self.items[child["id"]] = child
                self.link(child)
                self.bump(child)
            parent = child
        return parent

    def add(self, entry):
        path = entry["path"]
        if path.endswith("/"):
            return self.folder_for(path)
        folder, _, name = path.rpartition("/")
        parent = self.folder_for(folder)
        item = {"id": "I" + uuid.uuid4().hex[:10].upper(), "name": name, "parent": parent["id"], "folder": False,
                "size": entry.get("size", 1000), "mime": entry.get("mime", "application/octet-stream"),
                "audio": entry.get("audio", False), "package": entry.get("package", False),
                "malware": entry.get("malware", False), "version": 1, "etag_version": 1}
        self.items[item["id"]] = item
        self.link(item)
        self.set_content(item)
        self.bump(item)
        return item

    def set_content(self, item):
        seed = hashlib.sha256(f"{item['id']}:{item['version']}".encode()).digest()
        item["content"] = (seed * (item["size"] // 32 + 1))[: item["size"]]
        item["mtime"] = 1764536124 + item["version"] * 60
        item["qxh"] = quickxor(item["content"])
        item["sha1"] = hashlib.sha1(item["content"]).hexdigest().upper()

    def control(self, op):
        kind = op["op"]
        if kind == "add":
            return self.add(op)["id"]
        if kind == "set":
            self.conf.update(op["values"])
            return "ok"
        if kind == "expire_tokens":
            self.floor = self.seq + 1
            return "ok"
        item = self.find(op["path"])
        if item is None:
            raise KeyError(op["path"])
        if kind == "modify":
            item["size"] = int(op.get("size", item["size"]))
            item["version"] += 1
            item["etag_version"] += 1
            self.set_content(item)
        elif kind == "delete":
            item["deleted"] = True
            self.unlink(item)
        elif kind == "move":
            folder, _, name = op["to"].strip("/").rpartition("/")
            self.unlink(item)
            item["parent"] = self.folder_for(folder)["id"]
            item["name"] = name
            self.link(item)
            item["etag_version"] = item.get("etag_version", 1) + 1
        self.bump(item)
        return item["id"]

    # --- JSON -----------------------------------------------------------------------------------------
    def item_json(self, it, select, base, with_path=False):
        business = self.conf["style"] == "business"
        d = {"id": it["id"]}
        if it.get("root"):
            d.update({"name": "root", "root": {}, "folder": {"childCount": 0},
                      "parentReference": {"driveId": DRIVE_ID, "driveType": business and "business" or "personal"}})
        elif it.get("deleted"):
            d["deleted"] = {"state": "deleted"}
            if not business:
                d["name"] = it["name"]
            else:
                d["size"] = it.get("size", 0)
            d["parentReference"] = {"driveId": DRIVE_ID, "id": "ROOT"}
            if it["folder"]:
                d["folder"] = {}
            else:
                d["file"] = {}
        else:
            d["name"] = it["name"]
            d["parentReference"] = {"driveId": DRIVE_ID, "driveType": business and "business" or "personal",
                                    "id": it["parent"]}
            if with_path:
                parent_path = self.path_of(self.items[it["parent"]])
                d["parentReference"]["path"] = "/drive/root:" + ("/" + parent_path if parent_path else "")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(it.get("mtime", 1764536124))) + ".123Z"
            d["lastModifiedDateTime"] = stamp
            d["fileSystemInfo"] = {"createdDateTime": stamp, "lastModifiedDateTime": stamp}
            d["eTag"] = f'"{{{it["id"]}}},{it.get("etag_version", 1)}"'
            if it["folder"]:
                d["folder"] = {"childCount": len(self.kids.get(it["id"], ()))}
                d["size"] = 0
            elif it.get("package"):
                d["package"] = {"type": "oneNote"}
                d["size"] = it["size"]
            else:
                d["size"] = it["size"]
                if not business:
                    d["cTag"] = f'"c:{{{it["id"]}}},{it["version"]}"'
                hashes = {"quickXorHash": it["qxh"]}
                if not business:
                    hashes["sha1Hash"] = it["sha1"]
                d["file"] = {"mimeType": it["mime"], "hashes": hashes}
                if it.get("audio"):
                    d["audio"] = {"title": it["name"], "duration": 1000}
                if it.get("malware"):
                    d["malware"] = {"description": "Trojan:Fake"}
        if select is not None:
            d = {k: v for k, v in d.items() if k in select or k == "id"}
        return d

    def new_link(self, item):
        secret = uuid.uuid4().hex
        self.links[secret] = {"id": item["id"], "uses": 0}
        return f"http://127.0.0.1:{self.content_port}/dl/{secret}/{quote(item['name'])}?tempauth={uuid.uuid4().hex}"


def select_query(select):
    return "?$select=" + ",".join(sorted(select)) if select else ""


def graph_error(status, code, message, headers=None):
    body = {"error": {"code": code, "message": message,
                      "innerError": {"date": "2025-11-30T20:55:24", "request-id": str(uuid.uuid4()),
                                     "client-request-id": str(uuid.uuid4())}}}
    return status, headers or {}, json.dumps(body).encode(), "application/json"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None
    role = "api"

    def log_message(self, *args):
        pass

    def send(self, status, headers, body, ctype="application/json"):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def record(self):
        parts = urlsplit(self.path)
        self.state.log.record(self, srv=self.role, path=unquote(parts.path), query=parts.query)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        path = urlsplit(self.path).path
        if fake_control.serve(self, self.state.controller, self.state.log, body):
            return
        self.record()
        if path.endswith("/oauth2/v2.0/token"):
            return self.send(*self.token(body))
        return self.send(*graph_error(404, "itemNotFound", "no such endpoint"))

    def token(self, body):
        st = self.state
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return 400, {}, json.dumps({"error": "invalid_request", "error_description": "form body required"}).encode(), "application/json"
        if not form.get("client_id") or form.get("client_id") != st.conf["client_id"]:
            return 400, {}, json.dumps({"error": "invalid_client", "error_description": "AADSTS700016: unknown client_id"}).encode(), "application/json"
        if form.get("grant_type") != "refresh_token" or "scope" not in form:
            return 400, {}, json.dumps({"error": "invalid_request", "error_description": "AADSTS900144: grant_type and scope are required"}).encode(), "application/json"
        with LOCK:
            if form.get("refresh_token") != st.conf["refresh_token"]:
                return 400, {}, json.dumps({"error": "invalid_grant", "error_codes": [70000],
                                            "error_description": "AADSTS70000: the refresh token was already used or revoked"}).encode(), "application/json"
            st.token_n += 1
            st.conf["access_token"] = f"at-{st.token_n}"
            st.conf["refresh_token"] = f"rt-{st.token_n}"
            st.token_calls = 0
            answer = {"token_type": "Bearer", "scope": form["scope"], "expires_in": 3600, "ext_expires_in": 3600,
                      "access_token": st.conf["access_token"], "refresh_token": st.conf["refresh_token"]}
        return 200, {}, json.dumps(answer).encode(), "application/json"

    def do_GET(self):
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        st = self.state
        if fake_control.serve(self, st.controller, st.log):
            return
        if path == "/_bytes":
            with LOCK:
                item = st.items[parse_qs(parts.query)["id"][0]]
                return self.send(200, {}, item["content"], "application/octet-stream")
        if path == "/_items":
            with LOCK:
                return self.send(200, {}, json.dumps({st.path_of(i): i["id"] for i in st.live().values()}).encode())
        self.record()
        if self.role == "content":
            return self.send(*self.content(path))
        return self.send(*self.graph(path, parts.query))

    # --- Graph ----------------------------------------------------------------------------------------
    def graph(self, path, query):
        st = self.state
        with LOCK:
            if st.conf["ratelimit"] > 0:
                st.conf["ratelimit"] -= 1
                return graph_error(429, "activityLimitReached", "The request has been throttled",
                                   {"Retry-After": "1"})
            auth = self.headers.get("Authorization", "")
            scheme, _, token = auth.partition(" ")
            expired = st.conf["token_uses"] and st.token_calls >= st.conf["token_uses"]
            if scheme.lower() != "bearer" or token != st.conf["access_token"] or expired:
                return graph_error(401, "InvalidAuthenticationToken",
                                   "Access token has expired or is not yet valid." if token else "Access token is empty.",
                                   {"WWW-Authenticate": 'Bearer realm="OneDriveAPI", error="expired_token", error_description="Auth token expired. Try refreshing."'})
            st.token_calls += 1
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        select = None
        raw_select = params.get("$select", params.get("select"))
        if raw_select is not None:
            select = set(s.strip() for s in raw_select.split(",") if s.strip())
            allowed = SELECTABLE | ({ANNOTATION} if "/items/" in path else set())
            unknown = sorted(select - allowed)
            if unknown:
                return graph_error(400, "invalidRequest",
                                   f"Could not find a property named '{unknown[0]}' on type 'microsoft.graph.driveItem'.")
        base = f"http://{self.headers.get('Host')}"
        m = re.fullmatch(r"/v1\.0/(?:me/drive|drives/[^/]+)/root/delta(?:\(token='([^']*)'\))?", path)
        if m:
            return self.delta(m.group(1) or params.get("token"), params, select, base)
        m = re.fullmatch(r"/v1\.0/(?:me/drive|drives/[^/]+)/items/([^/]+)(/content)?", path)
        if m:
            with LOCK:
                item = st.items.get(m.group(1))
                if item is None or item.get("deleted"):
                    return graph_error(404, "itemNotFound", "The resource could not be found.")
                if m.group(2):
                    if item["folder"]:
                        return graph_error(400, "invalidRequest", "Only files have content")
                    return 302, {"Location": st.new_link(item)}, b"", None
                d = st.item_json(item, None, base, with_path=True)
                if not item["folder"] and st.conf["download_url"]:
                    d[ANNOTATION] = st.new_link(item)
                if select is not None:
                    d = {k: v for k, v in d.items() if k in select or k == "id"}
                return 200, {}, json.dumps(d).encode(), "application/json"
        return graph_error(400, "invalidRequest", f"Unsupported segment in {path}")

    def delta(self, token, params, select, base):
        st = self.state
        with LOCK:
            skip = params.get("$skiptoken")
            if skip is not None:
                session = st.sessions.get(skip.split(".")[0])
                if session is None:
                    return graph_error(400, "invalidRequest", "unknown $skiptoken")
                offset = int(skip.split(".")[1])
            else:
                if token is not None and token != "latest":
                    if not token.isdigit():
                        return graph_error(400, "invalidRequest", "malformed delta token")
                    if int(token) < st.floor:
                        return graph_error(410, "resyncRequired", "Resync required. Replace any local items with the server's version.",
                                           {"Location": f"{base}/v1.0/me/drive/root/delta" + select_query(select)})
                if token == "latest":
                    items = []
                elif token is None:
                    def depth(it):
                        return 0 if it.get("root") else len(st.path_of(it).split("/"))
                    items = sorted(st.live().values(), key=lambda it: (depth(it), st.path_of(it)))
                else:
                    items = sorted((it for it in st.items.values() if it.get("seq", 0) > int(token)), key=lambda it: it["seq"])
                if st.conf["duplicate"] and items:
                    items = items + [items[0]]
                payload = [st.item_json(it, select, base) for it in items]
                sid = uuid.uuid4().hex[:12]
                session = {"items": payload, "token": st.seq, "select": select}
                st.sessions[sid] = session
                skip = sid + ".0"
                offset = 0
            size = st.conf["page_size"]
            if params.get("$top", "").isdigit():
                size = min(size, int(params["$top"]))
            page = session["items"][offset: offset + size]
            body = {"@odata.context": f"{base}/v1.0/$metadata#Collection(driveItem)", "value": page}
            if offset + size < len(session["items"]):
                body["@odata.nextLink"] = f"{base}/v1.0/drives/{DRIVE_ID}/root/delta?$skiptoken={skip.split('.')[0]}.{offset + size}"
            else:
                # Like Graph's, the deltaLink keeps the query options ($select) of the enumeration.
                body["@odata.deltaLink"] = f"{base}/v1.0/me/drive/root/delta(token='{session['token']}')" + select_query(session["select"])
            return 200, {}, json.dumps(body).encode(), "application/json"

    # --- content host -----------------------------------------------------------------------------------
    def content(self, path):
        st = self.state
        if self.headers.get("Authorization") is not None:
            return 401, {}, json.dumps({"error": {"code": "unauthenticated", "message": "pre-authenticated URLs must not carry an Authorization header"}}).encode(), "application/json"
        m = re.fullmatch(r"/dl/([0-9a-f]+)/.*", path)
        with LOCK:
            link = st.links.get(m.group(1)) if m else None
            if link is None:
                return 404, {}, b"no such link", "text/plain"
            link["uses"] += 1
            if st.conf["link_uses"] and link["uses"] > st.conf["link_uses"]:
                return st.conf["link_status"], {}, b"link expired", "text/plain"
            item = st.items[link["id"]]
            data = item["content"]
            etag = f'"{item["id"]}.{item["version"]}"'
        headers = {"ETag": etag, "Accept-Ranges": "bytes"}
        status, start, end = fake_range.plan(self.headers.get("Range"), len(data), etag=etag,
                                             if_range=self.headers.get("If-Range"), suffix=False, malformed="400")
        if status == 400:
            return 400, {}, b"only absolute byte ranges are supported", "text/plain"
        if status == 416:
            return 416, dict(fake_range.headers(status, start, end, len(data))), b"", "text/plain"
        headers.update(fake_range.headers(status, start, end, len(data)))
        return status, headers, data[start: end + 1], "application/octet-stream"


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else "{}"
    spec = json.loads(open(arg[1:]).read() if arg.startswith("@") else arg)
    state = State(spec)
    api_handler = type("ApiHandler", (Handler,), {"state": state, "role": "api"})
    content_handler = type("ContentHandler", (Handler,), {"state": state, "role": "content"})
    api = ThreadingHTTPServer(("127.0.0.1", 0), api_handler)
    content = ThreadingHTTPServer(("127.0.0.1", 0), content_handler)
    api.daemon_threads = content.daemon_threads = True
    state.content_port = content.server_address[1]
    threading.Thread(target=content.serve_forever, daemon=True).start()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    print(f"{api.server_address[1]} {content.server_address[1]}", flush=True)
    # Exit when the parent closes stdin (test ended or crashed).
    try:
        sys.stdin.read()
    finally:
        api.shutdown()
        content.shutdown()


if __name__ == "__main__":
    main()
