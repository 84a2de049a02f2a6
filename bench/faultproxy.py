#!/usr/bin/env python3
"""HTTP/1.1 fault-injecting reverse proxy for bench/torture.sh (python3 stdlib only).

Forwards every request (any method, with its body) to UPSTREAM (http://127.0.0.1:PORT) and injects one fault
into GET answers of files. Prints its port on the first stdout line; stops when stdin closes.

  faultproxy.py UPSTREAM_PORT [options]
  --status CODE --count N [--retry-after S]   the first N GETs answer CODE (with Retry-After: S if given)
  --cut-after BYTES --count N                the first N GETs send BYTES of the body, then close the connection
  --ignore-range                             drop Range/If-Range before forwarding (server answers 200 full)
  --rate BYTES_PER_S                         stream every body at this rate (a slow server)
  --latency SECONDS                          answer every request SECONDS late (a distant cloud's round trip)
  --mutate DIR --count N                     after N GETs, rewrite every served file under DIR with new bytes
                                             (same size, new mtime, so the server's ETag changes mid-download)
GET /_faults (no forwarding) answers JSON counters: {"gets": n, "faults": n}.
"""
import argparse, http.client, json, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
LOCK = threading.Lock()
STATE = {"gets": 0, "faults": 0, "mutated": False}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    opts = None

    def log_message(self, *a):
        pass

    def handle_one(self):
        o = self.opts
        if self.path == "/_faults":
            body = json.dumps(STATE).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body); return
        if o.latency: time.sleep(o.latency)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        fault = None
        if self.command == "GET":
            with LOCK:
                STATE["gets"] += 1; n = STATE["gets"]
                if o.mutate and n > o.count and not STATE["mutated"]:
                    STATE["mutated"] = True; mutate(o.mutate); STATE["faults"] += 1
                if (o.status or o.cut_after is not None) and n <= o.count:
                    fault = "status" if o.status else "cut"; STATE["faults"] += 1
            if o.ignore_range:
                headers.pop("Range", None); headers.pop("If-Range", None)
        if fault == "status":
            msg = f"injected {o.status}\n".encode()
            self.send_response(o.status)
            if o.retry_after is not None: self.send_header("Retry-After", str(o.retry_after))
            self.send_header("Content-Length", str(len(msg))); self.end_headers(); self.wfile.write(msg); return
        conn = http.client.HTTPConnection("127.0.0.1", o.upstream, timeout=60)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP: self.send_header(k, v)
        self.end_headers()
        sent = 0; start = time.monotonic()
        while True:
            chunk = resp.read(65536)
            if not chunk: break
            if fault == "cut" and sent + len(chunk) > o.cut_after:
                self.wfile.write(chunk[: o.cut_after - sent]); self.wfile.flush()
                self.close_connection = True; conn.close(); return
            self.wfile.write(chunk); sent += len(chunk)
            if o.rate:
                ahead = sent / o.rate - (time.monotonic() - start)
                if ahead > 0: time.sleep(ahead)
        conn.close()

    def do_ANY(self):
        try:
            self.handle_one()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_HEAD = do_PROPFIND = do_OPTIONS = do_PUT = do_DELETE = do_ANY


def mutate(root):
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n); size = os.path.getsize(p)
            with open(p, "r+b") as f:
                f.write(os.urandom(min(size, 4096)))   # new bytes at the start: the old prefix is now wrong
            t = time.time() + 120; os.utime(p, (t, t))  # new mtime: nginx's ETag changes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("upstream", type=int)
    p.add_argument("--status", type=int); p.add_argument("--count", type=int, default=1)
    p.add_argument("--retry-after"); p.add_argument("--cut-after", type=int)
    p.add_argument("--ignore-range", action="store_true"); p.add_argument("--rate", type=float)
    p.add_argument("--mutate"); p.add_argument("--latency", type=float)
    Proxy.opts = p.parse_args()
    # Room for every connection a pull opens at once (jobs × segments): with the default backlog of 5 a burst of
    # connects overflows it and the client's SYN is retried after 1 s, a stall no real server shows.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
