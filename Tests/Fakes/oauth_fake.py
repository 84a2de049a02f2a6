#!/usr/bin/env python3
"""A local fake of the OAuth and "who am I" endpoints of Dropbox, Google, Microsoft and Yandex, and of a
WebDAV collection, for cloudsync's login tests. Loopback only; prints its port on the first stdout line.

Endpoints (shapes follow the providers' documents, see ../shared/providers.md):
  POST /devicecode             Microsoft device authorization: verification_uri, interval, expires_in
  POST /device/code            Yandex device authorization: verification_url
  GET  /authorize              authorization page; records code_challenge (S256) with a new code.
                               Accept: application/json -> {"code", "redirect"}; with redirect_uri -> 302.
  POST /token                  grants: authorization_code (PKCE verified: challenge == BASE64URL(SHA256(verifier))),
                               refresh_token (rotates and invalidates the old one with --rotate),
                               urn:ietf:params:oauth:grant-type:device_code (device_code=), device_code (Yandex, code=)
  POST /2/users/get_current_account, GET /v1.0/me/drive, GET /drive/v3/about, GET /v1/disk/
                               200 with a valid Bearer (OAuth for /v1/disk/) token, else 401
  PROPFIND /dav/               207 with Basic --dav-user/--dav-password, else 401
  GET  /_fake/state            issued tokens, valid refresh tokens, counters (for assertions)
"""
import argparse, base64, hashlib, json, secrets, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs, urlencode

p = argparse.ArgumentParser()
p.add_argument("--interval", type=int, default=0)
p.add_argument("--pending", type=int, default=2, help="authorization_pending answers before approval")
p.add_argument("--slow-down", type=int, default=0, help="slow_down answers (after the pending ones)")
p.add_argument("--device-outcome", default="approve", choices=["approve", "deny", "expire"])
p.add_argument("--device-expires-in", type=int, default=600)
p.add_argument("--device-status", type=int, default=200, help="status of the device endpoints (e.g. 400 = unsupported)")
p.add_argument("--authorize-outcome", default="approve", choices=["approve", "deny"])
p.add_argument("--expires-in", type=int, default=3600)
p.add_argument("--rotate", action="store_true", help="rotate refresh tokens, invalidating the old one")
p.add_argument("--no-refresh-token", action="store_true")
p.add_argument("--client-id", default="test-client")
p.add_argument("--client-secret", default=None)
p.add_argument("--refresh-delay", type=float, default=0.0, help="seconds a refresh takes")
p.add_argument("--token-portal", action="store_true",
               help="POST /token answers 200 text/html, a network's login page (a captive portal) in its place")
p.add_argument("--seed-refresh-token", default=None, help="a refresh token valid from the start")
p.add_argument("--lifetime", type=float, default=300, help="seconds before the fake exits by itself")
p.add_argument("--dav-user", default="alice")
p.add_argument("--dav-password", default="s3cret pass")
args = p.parse_args()

lock = threading.Lock()
state = {
    "issued_access": [], "issued_refresh": [], "valid_access": set(), "valid_refresh": set(),
    "codes": {}, "devices": {}, "refresh_count": 0, "token_requests": 0, "polls": 0,
    "refused_refresh": 0, "grants": [],
}
if args.seed_refresh_token:
    state["valid_refresh"].add(args.seed_refresh_token)


def b64url(raw):
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def issue(with_refresh=True):
    access = "at-" + secrets.token_urlsafe(24)
    state["issued_access"].append(access)
    state["valid_access"].add(access)
    body = {"access_token": access, "token_type": "bearer", "expires_in": args.expires_in}
    if with_refresh and not args.no_refresh_token:
        refresh = "rt-" + secrets.token_urlsafe(24)
        state["issued_refresh"].append(refresh)
        state["valid_refresh"].add(refresh)
        body["refresh_token"] = refresh
    return body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, obj=None, headers=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b"")
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def form(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n).decode() if n else ""
        return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}

    def bearer(self, scheme):
        auth = self.headers.get("Authorization") or ""
        prefix = scheme + " "
        return auth.startswith(prefix) and auth[len(prefix):] in state["valid_access"]

    def check_client(self, f):
        if f.get("client_id") != args.client_id:
            return False
        if args.client_secret is not None and f.get("client_secret") != args.client_secret:
            return False
        return True

    def do_GET(self):
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.path == "/_fake/state":
            with lock:
                out = {k: (sorted(v) if isinstance(v, set) else v) for k, v in state.items() if k not in ("codes", "devices")}
            return self.reply(200, out)
        if u.path == "/authorize":
            if q.get("client_id") != args.client_id or q.get("response_type") != "code":
                return self.reply(400, {"error": "invalid_request"})
            if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
                return self.reply(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
            redirect = q.get("redirect_uri")
            extra = {"state": q["state"]} if "state" in q else {}
            if args.authorize_outcome == "deny":
                params = {"error": "access_denied", **extra}
            else:
                code = "code-" + secrets.token_urlsafe(12)
                with lock:
                    state["codes"][code] = {"challenge": q["code_challenge"], "redirect_uri": redirect,
                                            "params": q}
                params = {"code": code, **extra}
            location = (redirect + ("&" if "?" in redirect else "?") + urlencode(params)) if redirect else None
            if "application/json" in (self.headers.get("Accept") or ""):
                return self.reply(200, {**params, "redirect": location})
            if location:
                return self.reply(302, headers={"Location": location}, raw=b"")
            return self.reply(200, raw=("Your code: %s\n" % params.get("code", "denied")).encode(), ctype="text/plain")
        if u.path == "/v1.0/me/drive":
            return self.reply(200, {"driveType": "personal", "owner": {"user": {"displayName": "Ola Nordmann"}}}) \
                if self.bearer("Bearer") else self.reply(401, {"error": {"code": "InvalidAuthenticationToken"}})
        if u.path == "/drive/v3/about":
            if q.get("fields") != "user":
                return self.reply(400, {"error": {"message": "fields required"}})
            return self.reply(200, {"user": {"displayName": "Ada", "emailAddress": "ada@example.com"}}) \
                if self.bearer("Bearer") else self.reply(401, {"error": {"code": 401}})
        if u.path == "/v1/disk/":
            return self.reply(200, {"user": {"login": "ivan", "display_name": "Ivan"}, "total_space": 1}) \
                if self.bearer("OAuth") else self.reply(401, {"error": "UnauthorizedError"})
        return self.reply(404, {"error": "not_found"})

    def do_PROPFIND(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if not self.path.startswith("/dav/"):
            return self.reply(404, raw=b"")
        if self.headers.get("Depth") != "0":
            return self.reply(400, raw=b"Depth 0 expected", ctype="text/plain")
        expected = "Basic " + base64.b64encode(("%s:%s" % (args.dav_user, args.dav_password)).encode()).decode()
        if self.headers.get("Authorization") != expected:
            return self.reply(401, raw=b"", headers={"WWW-Authenticate": 'Basic realm="fake"'})
        body = b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/dav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>'
        return self.reply(207, raw=body, ctype="application/xml")

    def do_POST(self):
        u = urlparse(self.path)
        f = self.form()
        if u.path in ("/devicecode", "/device/code"):
            if args.device_status != 200:
                return self.reply(args.device_status, {"error": "unauthorized_client"})
            if f.get("client_id") != args.client_id:
                return self.reply(400, {"error": "invalid_client"})
            if u.path == "/devicecode" and f.get("scope") != "Files.Read Files.Read.All offline_access":
                return self.reply(400, {"error": "invalid_scope"})
            device = "dc-" + secrets.token_urlsafe(16)
            with lock:
                state["devices"][device] = {"pending": args.pending, "slow": args.slow_down, "style": u.path}
            body = {"device_code": device, "user_code": "ABCD-1234", "interval": args.interval,
                    "expires_in": args.device_expires_in}
            body["verification_uri" if u.path == "/devicecode" else "verification_url"] = "https://example.invalid/device"
            return self.reply(200, body)
        if u.path == "/2/users/get_current_account":
            return self.reply(200, {"email": "dee@example.com", "name": {"display_name": "Dee"}}) \
                if self.bearer("Bearer") else self.reply(401, {"error_summary": "invalid_access_token/", "error": {".tag": "invalid_access_token"}})
        if u.path != "/token":
            return self.reply(404, {"error": "not_found"})
        if args.token_portal:
            return self.reply(200, raw=b"<html><body>Log in to use this network</body></html>", ctype="text/html; charset=utf-8")
        with lock:
            state["token_requests"] += 1
        grant = f.get("grant_type")
        state["grants"].append(grant)
        if not self.check_client(f):
            return self.reply(401, {"error": "invalid_client"})
        if grant == "authorization_code":
            with lock:
                entry = state["codes"].pop(f.get("code", ""), None)
            if entry is None:
                return self.reply(400, {"error": "invalid_grant", "error_description": "unknown or used code"})
            verifier = f.get("code_verifier", "")
            if b64url(hashlib.sha256(verifier.encode()).digest()) != entry["challenge"]:
                return self.reply(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
            if entry["redirect_uri"] != f.get("redirect_uri"):
                return self.reply(400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
            with lock:
                return self.reply(200, issue())
        if grant == "refresh_token":
            if args.refresh_delay:
                time.sleep(args.refresh_delay)
            with lock:
                token = f.get("refresh_token", "")
                if token not in state["valid_refresh"]:
                    state["refused_refresh"] += 1
                    return self.reply(400, {"error": "invalid_grant", "error_description": "refresh token revoked or rotated"})
                state["refresh_count"] += 1
                if args.rotate:
                    state["valid_refresh"].discard(token)
                    return self.reply(200, issue())
                return self.reply(200, issue(with_refresh=False))
        if grant in ("urn:ietf:params:oauth:grant-type:device_code", "device_code"):
            key = "device_code" if grant.startswith("urn:") else "code"
            style = "/devicecode" if grant.startswith("urn:") else "/device/code"
            with lock:
                state["polls"] += 1
                dev = state["devices"].get(f.get(key, ""))
                if dev is None or dev["style"] != style:
                    return self.reply(400, {"error": "invalid_grant"})
                if dev["pending"] > 0:
                    dev["pending"] -= 1
                    return self.reply(400, {"error": "authorization_pending"})
                if dev["slow"] > 0:
                    dev["slow"] -= 1
                    return self.reply(400, {"error": "slow_down"})
                if args.device_outcome == "deny":
                    return self.reply(400, {"error": "authorization_declined" if style == "/devicecode" else "access_denied"})
                if args.device_outcome == "expire":
                    return self.reply(400, {"error": "expired_token"})
                del state["devices"][f[key]]
                return self.reply(200, issue())
        return self.reply(400, {"error": "unsupported_grant_type"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
# Bounded life even if the test process dies without closing our stdin.
watchdog = threading.Timer(args.lifetime, server.shutdown)
watchdog.daemon = True
watchdog.start()
server.serve_forever()
