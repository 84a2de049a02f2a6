#!/usr/bin/env python3
"""A fake WebDAV server (python3 stdlib only) for what real servers will not do on demand.

Serves an in-memory tree under PREFIX on 127.0.0.1 and prints the port on the first stdout line.
Basic auth demo / demo-pass (or `Authorization: Bearer TOKEN` with --bearer TOKEN) is required.

  --prefix P          mount point, e.g. /dav/ or /remote.php/dav/files/u/ (default /dav/)
  --style S           plain: absolute-path hrefs, Python's quote();
                      nextcloud: sabre encoding (only A-Za-z0-9_-.~()/:@ literal), d:/oc: prefixes,
                        oc:checksums SHA1+MD5+ADLER32, 404 propstats for unknown properties;
                      fullurl: IIS style full-URL hrefs and <iscollection>
  --folders N --files M   a generated library: N folders of M files each (instead of the small tree)
  --ratelimit-first   the first PROPFIND answers 429 with Retry-After: 1
  --cut-first         the first PROPFIND of every folder gets its connection closed without an answer
  --forbidden NAME    the folder NAME (decoded, relative to PREFIX) answers 403
  --malformed NAME    the folder NAME answers a truncated body ("" = the root)
  --escape            the root listing also holds hrefs outside PREFIX
  --delay MS          every PROPFIND answer waits MS milliseconds (makes concurrency observable)
  --lie-size PATH=N   the file PATH (relative to PREFIX) is listed with getcontentlength N (its GETs still
                      answer its real bytes): a hostile or broken server's sizes
  --drip NAME         the folder NAME answers its 207 at 1,500 bytes/s (above curl's low-speed limit), for ever
  --endless FANOUT    an endless tree: every folder (the root too) holds "t.mp3" and FANOUT subfolders d0, d1, …

GET /_stats (no auth) answers JSON: {"propfind": n, "get": n, "depths": [...], "paths": {path: n},
"max_inflight": most PROPFINDs being answered at once}. The fakes' one control protocol (fake_control.py): GET /_log
(every GET and PROPFIND answered), POST /_control {"op": "modify", "path": P}: the file P (relative to PREFIX) gets
new bytes of its size, so a new ETag and checksums.
GET on a file answers its bytes, honouring a single Range.
"""
import argparse
import base64
import hashlib
import json
import re
import socket
import ssl
import sys
import threading
import time
import zlib

from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

import fake_control
import fake_range

MTIME = 1764536124  # Sun, 30 Nov 2025 20:55:24 GMT


def content_of(path):
    seed = hashlib.sha256(path.encode()).digest()
    return (seed * (1 + len(path) % 7 + 3))[: 64 + len(path) * 3]


def small_tree():
    return {
        "": ["a b.mp3", "Sub/", "Locked/", "notes.txt", "Broken/"],
        "Sub": ["c+d&e [1].flac", "it's.ogg", "Кино.mp3", "Deeper/"],
        "Sub/Deeper": ["東京 🎵.opus"],
        "Locked": ["secret.mp3"],
        "Broken": ["lost.mp3"],
    }


class EndlessTree(dict):
    """Every folder exists and holds a track and `fanout` subfolders: a server-side loop seen from outside."""

    def __init__(self, fanout):
        super().__init__()
        self.fanout = fanout

    def __contains__(self, rel):
        return all(part.startswith("d") and part[1:].isdigit() for part in rel.split("/") if part) if rel else True

    def __getitem__(self, rel):
        if rel not in self:
            raise KeyError(rel)
        return ["t.mp3"] + [f"d{i}/" for i in range(self.fanout)]

    def get(self, rel, default=None):
        return self[rel] if rel in self else default


def generated_tree(folders, files):
    tree = {"": [f"Folder {i:03d}/" for i in range(folders)]}
    for i in range(folders):
        tree[f"Folder {i:03d}"] = [f"Track {j:04d}.mp3" for j in range(files)]
    return tree


def sabre_quote(path):
    return "".join(ch if re.match(r"[A-Za-z0-9_\-.~()/:@]", ch) else "".join(f"%{b:02X}" for b in ch.encode()) for ch in path)


class State:
    def __init__(self, args):
        self.args = args
        if args.endless:
            self.tree = EndlessTree(args.endless)
        else:
            self.tree = generated_tree(args.folders, args.files) if args.folders else small_tree()
        self.lock = threading.Lock()
        self.propfind = 0
        self.get = 0
        self.depths = []
        self.paths = {}
        self.cut_done = set()
        self.port = 0
        self.inflight = 0
        self.max_inflight = 0
        self.versions = {}  # relative path → how often "modify" changed it
        self.log = fake_control.RequestLog()
        self.control = fake_control.Control({"modify": self.modify_op}, lock=self.lock)

    def modify_op(self, op):
        rel = op["path"].strip("/")
        parent, _, name = rel.rpartition("/")
        if name not in self.tree.get(parent, []):
            raise KeyError(rel)
        self.versions[rel] = self.versions.get(rel, 0) + 1

    def data(self, rel):
        """The bytes of file `rel`: content_of(rel), every byte changed by each "modify"."""
        base = content_of(rel)
        v = self.versions.get(rel, 0)
        return bytes(b ^ (v * 0x5B % 255 + 1) for b in base) if v else base


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "webdav_fake/1"

    def log_message(self, fmt, *args):
        pass

    @property
    def state(self):
        return self.server.state

    def authorized(self):
        header = self.headers.get("Authorization", "")
        if self.state.args.bearer:
            return header == f"Bearer {self.state.args.bearer}"
        return header == "Basic " + base64.b64encode(b"demo:demo-pass").decode()

    def send(self, status, body=b"", headers=()):
        self.state.log.record(self, status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def relative(self):
        """Decoded path relative to the prefix, without slashes at the ends; None outside the prefix."""
        path = unquote(urlsplit(self.path).path)
        prefix = self.state.args.prefix
        if not (path + "/").startswith(prefix):
            return None
        return path[len(prefix):].strip("/")

    def do_POST(self):
        if not fake_control.serve(self, self.state.control, self.state.log):
            self.send(405)

    def do_GET(self):
        if fake_control.serve(self, self.state.control, self.state.log):
            return
        if self.path == "/_stats":
            s = self.state
            with s.lock:
                body = json.dumps({"propfind": s.propfind, "get": s.get, "depths": s.depths, "paths": s.paths,
                                   "max_inflight": s.max_inflight}).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        with self.state.lock:
            self.state.get += 1
        if not self.authorized():
            return self.send(401, b"", [("WWW-Authenticate", 'Basic realm="fake"')])
        rel = self.relative()
        parent, _, name = (rel or "").rpartition("/")
        if rel is None or name not in self.state.tree.get(parent, []):
            return self.send(404)
        data = self.state.data(rel)
        headers = [("ETag", f'"{hashlib.md5(data).hexdigest()}"'), ("Accept-Ranges", "bytes"),
                   ("Last-Modified", formatdate(MTIME, usegmt=True))]
        status, start, end = fake_range.plan(self.headers.get("Range"), len(data), etag=headers[0][1],
                                             if_range=self.headers.get("If-Range"), suffix=False)
        if status == 416:
            return self.send(416, b"", fake_range.headers(status, start, end, len(data)))
        self.send(status, data[start:end + 1], headers + fake_range.headers(status, start, end, len(data)))

    def do_PROPFIND(self):
        s = self.state
        with s.lock:
            s.inflight += 1
            s.max_inflight = max(s.max_inflight, s.inflight)
        try:
            if s.args.delay:
                time.sleep(s.args.delay / 1000)
            self.propfind()
        finally:
            with s.lock:
                s.inflight -= 1

    def propfind(self):
        s = self.state
        length = int(self.headers.get("Content-Length", "0") or 0)
        self.rfile.read(length)
        rel = self.relative()
        with s.lock:
            s.propfind += 1
            first = s.propfind == 1
            s.depths.append(self.headers.get("Depth"))
            s.paths[rel if rel is not None else "<outside>"] = s.paths.get(rel if rel is not None else "<outside>", 0) + 1
            cut = s.args.cut_first and rel not in s.cut_done
            if cut:
                s.cut_done.add(rel)
        if not self.authorized():
            return self.send(401, b"", [("WWW-Authenticate", 'Basic realm="fake"')])
        if s.args.ratelimit_first and first:
            return self.send(429, b"slow down", [("Retry-After", "1")])
        if cut:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if rel is None or rel not in s.tree:
            return self.send(404, b"<d:error xmlns:d=\"DAV:\"/>", [("Content-Type", "application/xml")])
        if s.args.forbidden is not None and rel == s.args.forbidden:
            return self.send(403)
        if self.headers.get("Depth") != "1":
            return self.send(403, b"only Depth: 1 here")
        if s.args.malformed is not None and rel == s.args.malformed:
            return self.send(207, b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/x', [("Content-Type", "application/xml")])
        if s.args.drip is not None and rel == s.args.drip:
            # The document never closes: only a deadline on the client ends this answer.
            return self.drip(self.multistatus(rel).replace(b"</d:multistatus>", b"") + b" " * 10_000_000)
        self.send(207, self.multistatus(rel), [("Content-Type", "application/xml; charset=utf-8")])

    def drip(self, body):
        """A 207 whose body comes at 1,500 bytes/s: 150 bytes every 0.1 s, until the client gives up."""
        self.send_response(207)
        self.send_header("Content-Type", "application/xml; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for at in range(0, len(body), 150):
                self.wfile.write(body[at:at + 150])
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def href(self, rel, is_dir):
        s = self.state
        path = s.args.prefix + rel + ("/" if is_dir and rel else "")
        style = s.args.style
        if style == "nextcloud":
            return sabre_quote(path)
        encoded = quote(path, safe="/")
        if style == "fullurl":
            return f"http://127.0.0.1:{s.port}{encoded}"
        return encoded

    def entry(self, rel, is_dir):
        style = self.state.args.style
        href = self.href(rel, is_dir).replace("&", "&amp;")
        date = formatdate(MTIME, usegmt=True)
        if is_dir:
            kind = "<d:resourcetype><d:collection/></d:resourcetype>"
            if style == "fullurl":
                kind = "<d:resourcetype/><d:iscollection>1</d:iscollection>"
            ok = f"{kind}<d:getlastmodified>{date}</d:getlastmodified>"
            missing = "<d:getcontentlength/><d:getcontenttype/><oc:checksums/>"
        else:
            data = self.state.data(rel)
            etag = hashlib.md5(data).hexdigest()
            size = dict(lie.split("=", 1) for lie in self.state.args.lie_size).get(rel, str(len(data)))
            ok = (f"<d:resourcetype/><d:getcontentlength>{size}</d:getcontentlength>"
                  f"<d:getlastmodified>{date}</d:getlastmodified><d:getetag>&quot;{etag}&quot;</d:getetag>")
            missing = "<d:getcontenttype/>"
            if style == "nextcloud":
                sums = f"SHA1:{hashlib.sha1(data).hexdigest()} MD5:{hashlib.md5(data).hexdigest()} ADLER32:{zlib.adler32(data):08x}"
                ok += f"<oc:checksums><oc:checksum>{sums}</oc:checksum></oc:checksums>"
            else:
                missing += "<oc:checksums/>"
        return (f"<d:response><d:href>{href}</d:href>"
                f"<d:propstat><d:prop>{ok}</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>"
                f"<d:propstat><d:prop>{missing}</d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat>"
                f"</d:response>")

    def multistatus(self, rel):
        s = self.state
        parts = [self.entry(rel, True)]
        for child in s.tree[rel]:
            is_dir = child.endswith("/")
            child_rel = (rel + "/" if rel else "") + child.rstrip("/")
            parts.append(self.entry(child_rel, is_dir))
        if s.args.escape and rel == "":
            for href in ["/elsewhere/stolen.mp3", quote(s.args.prefix) + "../escaped.mp3",
                         quote(s.args.prefix) + "%2e%2e/dots.mp3", "http://other.example/other/far.mp3"]:
                parts.append(f"<d:response><d:href>{href}</d:href><d:propstat><d:prop><d:resourcetype/>"
                             f"<d:getcontentlength>5</d:getcontentlength></d:prop>"
                             f"<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")
        body = ('<?xml version="1.0" encoding="utf-8"?>\n'
                '<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:s="http://sabredav.org/ns">'
                + "".join(parts) + "</d:multistatus>")
        return body.encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", default="/dav/")
    p.add_argument("--style", choices=["plain", "nextcloud", "fullurl"], default="plain")
    p.add_argument("--folders", type=int, default=0)
    p.add_argument("--files", type=int, default=0)
    p.add_argument("--ratelimit-first", action="store_true")
    p.add_argument("--cut-first", action="store_true")
    p.add_argument("--forbidden")
    p.add_argument("--malformed")
    p.add_argument("--escape", action="store_true")
    p.add_argument("--bearer")
    p.add_argument("--delay", type=int, default=0)
    p.add_argument("--drip")
    p.add_argument("--endless", type=int, default=0)
    p.add_argument("--lie-size", action="append", default=[])
    # HTTPS with this certificate chain (PEM) and key, as a NAS with a certificate of its own serves.
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    args = p.parse_args()
    if not args.prefix.endswith("/"):
        args.prefix += "/"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.state = State(args)
    server.state.port = server.server_address[1]
    print(server.state.port, flush=True)
    # Stop when the test closes our stdin, so a crashed test leaves no server behind.
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
