#!/usr/bin/env bash
# Soak: everything at once on one cache for a bounded time — two `serve`s, two pull loops, `cache evict`,
# `cache clear` and `cache verify` loops, and 16 players reading random byte ranges through both serves and
# comparing every byte with the source. The budget is a third of the library, so the planner shrinks and evicts
# while players read. Reports requests, wrong bytes (must be 0), crashes (0: no process killed by a signal, both
# serves alive at the end) and hangs (0: every request answered within 30 s, every command within 120 s).
#   usage: bench/soak.sh [--quick]        SOAK_SECONDS (default 120; --quick 15)
#   A hang is listed with its track, range, serve port and time: BENCH_KEEP=1 SERVE_LOG_FLAGS=-v keeps both
#   serves' debug logs (serve.*.out.err) in the scratch directory to find out why. SOAK_FAULTS: fault rules for the
#   cloud (Tests/Fakes/files_fake.py's JSON: cuts, 503/429 with Retry-After, stalls, ignored or wrong ranges).
#   SOAK_ENCRYPT=1: the same on an encrypted cache (cache.encrypt, a random key).
source "$(dirname "$0")/lib.sh"
out=$RESULTS/soak$([ $QUICK = 1 ] && echo -quick || true).md
seconds=${SOAK_SECONDS:-$([ $QUICK = 1 ] && echo 15 || echo 120)}

lib=$WORK/lib
make_lib "$lib" 24 $((1536 * 1024)) 8
# A cloud at 8 MiB/s per connection: on-demand fills and pulls overlap with the players.
start_files_fake "$lib" --rate $((8 << 20)) ${SOAK_FAULTS:+--faults "$SOAK_FAULTS"}
cfg=$WORK/soak.toml
{ echo "[cache]"; echo "dir = \"$WORK/cache\""; echo 'max_size = "12MiB"'; echo 'min_free = "0"'; echo 'checkpoint = "256KiB"'
  [ "${SOAK_ENCRYPT:-0}" = 1 ] && { echo 'encrypt = true'; echo "key_command = \"echo $(openssl rand -hex 32)\""; }
  echo; echo "[pull]"; echo 'head_first = "64KiB"'; echo 'chunk_size = "256KiB"'
  echo; echo "[remote.lib]"; echo 'provider = "webdav"'; echo "url = \"http://127.0.0.1:$FAKE_PORT/dav/\""
  echo 'user = "demo"'; echo 'password = "demo-pass"'; } >"$cfg"
"$BIN" --config "$cfg" -q pull >/dev/null 2>&1 || die "the first pull failed"
start_serve "$cfg"; serve_a=$SERVE_PORT; pid_a=$SERVE_PID
start_serve "$cfg"; serve_b=$SERVE_PORT; pid_b=$SERVE_PID
log "soak: serves on $serve_a and $serve_b, $seconds s"

codes=$WORK/codes.txt; : >"$codes"
deadline=$(( $(date +%s) + seconds ))
# loop NAME CMD...: runs CMD until the deadline, recording "NAME exit-code seconds" per run.
loop() {
    local name=$1; shift
    while [ "$(date +%s)" -lt "$deadline" ]; do
        local t0 rc=0; t0=$(date +%s.%N)
        timeout -s KILL 120 "$BIN" --config "$cfg" -q "$@" >/dev/null 2>>"$WORK/$name.err" || rc=$?
        echo "$name $rc $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")" >>"$codes"
        sleep 0.2
    done
}
loop pull-a pull & loops=($!)
loop pull-b pull & loops+=($!)
loop evict cache evict & loops+=($!)
loop clear cache clear --yes & loops+=($!)
loop verify cache verify & loops+=($!)

players=$WORK/players.json
python3 - "$lib" "$serve_a" "$serve_b" "$seconds" "$players" <<'PY'
import http.client, json, os, random, sys, threading, time
root, ports, seconds, out = sys.argv[1], [int(sys.argv[2]), int(sys.argv[3])], float(sys.argv[4]), sys.argv[5]
tracks = sorted(os.path.relpath(os.path.join(d, n), root) for d, _, fs in os.walk(root) for n in fs)
source = {t: open(os.path.join(root, t), "rb").read() for t in tracks}
lock = threading.Lock()
stats = {"requests": 0, "bytes_compared": 0, "wrong_bytes": 0, "wrong_requests": [], "cut": 0, "status": {}, "hangs": 0,
         "hung_requests": [], "errors": []}
end = time.time() + seconds

def quote(path):
    from urllib.parse import quote as q
    return "/tracks/lib/" + "/".join(q(p, safe="") for p in path.split("/"))

def player(n):
    rng = random.Random(n)
    conns = {}
    while time.time() < end:
        track = rng.choice(tracks); data = source[track]; size = len(data); port = rng.choice(ports)
        kind = rng.random()
        if kind < 0.15: start, stop, header = 0, size, None                       # whole file
        elif kind < 0.3: start = max(0, size - 128); stop = size; header = "bytes=-128"   # a tail read
        else:
            start = rng.randrange(size); stop = min(size, start + rng.randrange(1, 512 << 10))
            header = f"bytes={start}-{stop - 1}"
        c = conns.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conns[port] = c
        try:
            asked = time.time()
            c.request("GET", quote(track), headers={"Range": header} if header else {})
            r = c.getresponse()
            body = b""
            try:
                body = r.read()
            except http.client.IncompleteRead as e:
                body = e.partial
                with lock: stats["cut"] += 1
                c.close(); conns.pop(port, None)
            with lock:
                stats["requests"] += 1
                stats["status"][str(r.status)] = stats["status"].get(str(r.status), 0) + 1
            if r.status in (200, 206):
                expect = data[start:start + len(body)]
                wrong = sum(1 for a, b in zip(body, expect) if a != b) + max(0, len(body) - len(expect))
                with lock:
                    stats["bytes_compared"] += len(body)
                    if wrong:
                        stats["wrong_bytes"] += wrong
                        stats["wrong_requests"].append(f"{track} {header} got {len(body)} bytes, {wrong} wrong")
            elif r.status not in (503, 504):
                with lock: stats["errors"].append(f"{track} {header}: HTTP {r.status} {body[:120]!r}")
            if r.getheader("Connection", "").lower() == "close": c.close(); conns.pop(port, None)
        except (TimeoutError, OSError) as e:
            with lock:
                if isinstance(e, TimeoutError) or "timed out" in str(e):
                    stats["hangs"] += 1
                    stats["hung_requests"].append(f"{track} {header or 'whole'} on port {port}, "
                                                  f"asked at {time.strftime('%H:%M:%S', time.gmtime(asked))}")
                stats["cut"] += 1
            c.close(); conns.pop(port, None)
        except http.client.HTTPException:
            with lock: stats["cut"] += 1
            c.close(); conns.pop(port, None)

threads = [threading.Thread(target=player, args=(i,)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
stats["wrong_requests"] = stats["wrong_requests"][:10]; stats["errors"] = stats["errors"][:10]
stats["hung_requests"] = stats["hung_requests"][:10]
json.dump(stats, open(out, "w"))
PY
for p in "${loops[@]}"; do wait "$p" || true; done

alive=0
kill -0 "$pid_a" 2>/dev/null && alive=$((alive + 1))
kill -0 "$pid_b" 2>/dev/null && alive=$((alive + 1))
python3 - "$players" "$codes" "$alive" "$out" "$seconds" "$(machine_line)" <<'PY'
import collections, json, sys
stats = json.load(open(sys.argv[1])); alive = int(sys.argv[3]); out = sys.argv[4]
runs = collections.defaultdict(collections.Counter); longest = collections.defaultdict(float)
crashes = 0; hung = 0
for line in open(sys.argv[2]):
    name, rc, secs = line.split()
    rc = int(rc); runs[name][rc] += 1; longest[name] = max(longest[name], float(secs))
    if rc == 137: hung += 1          # killed by the 120 s timeout
    elif rc >= 128: crashes += 1     # killed by a signal: a trap, a segfault
crashes += 2 - alive
hangs = hung + stats["hangs"]
lines = ["# Soak", "", sys.argv[6], "",
         f"{sys.argv[5]} s: two serves, two pull loops, evict/clear/verify loops, 16 players comparing every byte; "
         "budget 12 MiB for a 36 MiB library; cloud at 8 MiB/s per connection.", "",
         "| measure | value |", "|---|---|",
         f"| player requests | {stats['requests']} |", f"| bytes compared | {stats['bytes_compared']} |",
         f"| **wrong bytes** | **{stats['wrong_bytes']}** |", f"| **crashes** | **{crashes}** |", f"| **hangs** | **{hangs}** |",
         f"| statuses | {', '.join(f'{k}: {v}' for k, v in sorted(stats['status'].items()))} |",
         f"| bodies cut short (a track changed or left the cache mid-response) | {stats['cut']} |"]
for name in sorted(runs):
    lines.append(f"| {name} runs (exit code: count), longest | {', '.join(f'{k}: {v}' for k, v in sorted(runs[name].items()))}; {longest[name]:.1f} s |")
if stats["wrong_requests"]: lines += ["", "Wrong answers:", ""] + [f"- {w}" for w in stats["wrong_requests"]]
if stats["hung_requests"]: lines += ["", "Requests unanswered for 30 s:", ""] + [f"- {h}" for h in stats["hung_requests"]]
if stats["errors"]: lines += ["", "Unexpected statuses:", ""] + [f"- {e}" for e in stats["errors"]]
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
bad = stats["wrong_bytes"] or crashes or hangs or stats["errors"] or stats["requests"] == 0
# Exit codes other than these are failures too: 0 ok, 1 some file failed (a track evicted mid-pull), 75 locked.
odd = [(n, c) for n, cs in runs.items() for c in cs if c not in (0, 1, 75) and c < 128]
if odd: print("unexpected exit codes:", odd, file=sys.stderr)
sys.exit(1 if bad or odd else 0)
PY
