"""One control protocol and one request log for every API fake (dropbox, gdrive, onedrive, yandex, webdav), so the
tests drive and observe them alike (TestSupport's `PythonFake.control` and `PythonFake.log` speak it).

    LOG = fake_control.RequestLog()
    CONTROL = fake_control.Control({"modify": modify, "delete": delete, ...}, lock=STATE_LOCK)
    ...first thing for every request (body: the request body already read, or None):
    if fake_control.serve(self, CONTROL, LOG, body):
        return
    ...for every API request the fake answers:
    entry = LOG.record(self, status, route="files/download")    # the fake's own fields beside the common ones

POST /_control    one op {"op": NAME, ...} or a JSON list of them, applied in order under the fake's lock.
                  200 {"ok": true, "result": <the last op's result>, "results": [...]};
                  404 {"control_error": "..."} when an op names an item the fake does not hold (KeyError);
                  400 {"control_error": "..."} for an unknown op or a bad argument (ValueError, TypeError).
                  Ops before a failing one stay applied.
GET  /_log        the requests answered, oldest first: {"method", "path", "range", "if_range", "auth", "status"}
                  plus the fake's own fields (which may refine a common one, e.g. an unquoted path).
POST /_log/clear  forgets them.

Every fake's ops include "modify": new bytes of the same size (or `size`), a new version (ETag, rev, hashes) —
what a file changed in the middle of a download looks like.
"""

import json
import threading
from urllib.parse import urlsplit


class RequestLog:
    """The requests a fake answered, safe to record from any handler thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = []

    def record(self, handler, status=0, **fields):
        """Appends the request `handler` is answering and returns the entry (a dict the fake may still update,
        e.g. its status once known)."""
        entry = {"method": handler.command, "path": urlsplit(handler.path).path,
                 "range": handler.headers.get("Range"), "if_range": handler.headers.get("If-Range"),
                 "auth": handler.headers.get("Authorization") is not None, "status": status}
        entry.update(fields)
        with self._lock:
            self._entries.append(entry)
        return entry

    def entries(self):
        with self._lock:
            return [dict(e) for e in self._entries]

    def clear(self):
        with self._lock:
            self._entries.clear()


class Control:
    """The fake's ops by name, each called with the op's dict and returning a JSON-able result."""

    def __init__(self, ops, lock=None):
        self.ops = dict(ops)
        self.lock = lock if lock is not None else threading.RLock()

    def apply(self, body):
        """(status, answer) for a POST /_control body."""
        try:
            parsed = json.loads(body or b"null")
        except ValueError as e:
            return 400, {"control_error": f"not JSON: {e}"}
        ops = parsed if isinstance(parsed, list) else [parsed]
        results = []
        with self.lock:
            for op in ops:
                try:
                    if not isinstance(op, dict) or op.get("op") not in self.ops:
                        raise ValueError(f"unknown op {op!r}; this fake knows {sorted(self.ops)}")
                    results.append(self.ops[op["op"]](op))
                except KeyError as e:
                    return 404, {"control_error": f"no such item or argument {e}", "results": results}
                except (ValueError, TypeError) as e:
                    return 400, {"control_error": str(e), "results": results}
        return 200, {"ok": True, "result": results[-1] if results else None, "results": results}


def send_json(handler, status, obj):
    body = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=utf-8")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def serve(handler, control, log, body=None):
    """Answers the control routes; False for any other request (the fake's API then answers it)."""
    path = urlsplit(handler.path).path
    if handler.command == "POST" and path == "/_control":
        if body is None:
            n = int(handler.headers.get("Content-Length") or 0)
            body = handler.rfile.read(n) if n else b""
        send_json(handler, *control.apply(body))
        return True
    if handler.command == "GET" and path == "/_log":
        send_json(handler, 200, log.entries())
        return True
    if handler.command == "POST" and path == "/_log/clear":
        log.clear()
        send_json(handler, 200, {"ok": True})
        return True
    return False


if __name__ == "__main__":
    # Self-check: python3 Tests/Fakes/fake_control.py (ProviderTests run it too).
    state = {"n": 0}

    def bump(op):
        state["n"] += int(op.get("by", 1))
        return state["n"]

    def missing(op):
        raise KeyError(op["id"])

    c = Control({"bump": bump, "missing": missing})
    assert c.apply(b'{"op": "bump"}') == (200, {"ok": True, "result": 1, "results": [1]})
    assert c.apply(b'[{"op": "bump", "by": 2}, {"op": "bump"}]') == (200, {"ok": True, "result": 4, "results": [3, 4]})
    assert c.apply(b'{"op": "nope"}')[0] == 400
    assert c.apply(b'{"nope": 1}')[0] == 400
    assert c.apply(b"[1]")[0] == 400
    assert c.apply(b"{")[0] == 400
    assert c.apply(b'[{"op": "bump"}, {"op": "missing", "id": "x"}]') == (404, {"control_error": "no such item or argument 'x'", "results": [5]})
    assert state["n"] == 5
    print("fake_control: ok")
