#!/usr/bin/env bash
# Torture: a fault matrix for `cloudsync pull`. WebDAV download faults go through bench/faultproxy.py in front
# of nginx dav-ext; listing faults use Tests/Fakes/webdav_fake.py; token, link and rate faults use the Dropbox,
# OneDrive and Yandex.Disk fakes; disk full uses a small tmpfs as the cache dir (needs root for mount).
# Each row: the fault, the exit code expected and got, the outcome, and whether the files in tracks/ are right
# (compared byte for byte with what the server serves at the end). Chunks and checkpoints are 256 KiB so every
# file takes several ranged GETs. --quick runs the same matrix (it is small already).
#   usage: bench/torture.sh [--quick]
source "$(dirname "$0")/lib.sh"
need nginx
fakes=$TOP/Tests/Fakes
out=$RESULTS/torture$([ $QUICK = 1 ] && echo -quick || true).md
rows=$WORK/rows.txt; : >"$rows"
failures=0

stop_all() { stop_servers; }
# config FILE CACHE RETRIES REMOTE-LINES...
config() {
    local file=$1 cache=$2 retries=$3; shift 3
    { printf '[cache]\ndir = "%s"\ncheckpoint = "256KiB"\n\n[pull]\nchunk_size = "256KiB"\nretries = %s\njobs = 2\n\n[remote.bench]\n' "$cache" "$retries"
      for l in "$@"; do echo "$l"; done; } >"$file"
}
# compare EXPECT_DIR GOT_DIR: "all N/N" | "partial k/N, 0 wrong" | "WRONG k of N"
compare() {
    python3 - "$1" "$2" <<'PY'
import os, sys
exp, got = sys.argv[1], sys.argv[2]
total = present = wrong = 0
for d, _, fs in os.walk(exp):
    for n in fs:
        rel = os.path.relpath(os.path.join(d, n), exp); total += 1
        g = os.path.join(got, rel)
        if os.path.exists(g):
            present += 1
            if open(g, "rb").read() != open(os.path.join(d, n), "rb").read(): wrong += 1
extra = sum(len(fs) for _, _, fs in os.walk(got)) - present if os.path.isdir(got) else 0
if wrong or extra: print(f"WRONG {wrong} of {total}" + (f", {extra} unexpected" if extra else ""))
elif present == total: print(f"all {present}/{total}")
else: print(f"partial {present}/{total}, 0 wrong")
PY
}
# row NAME FAULT EXPECTED_RC CONFIG EXPECT_DIR: runs the pull and records the row. An expected 0 also expects
# every file, unless ROW_ALLOW_PARTIAL=1.
row() {
    local name=$1 fault=$2 want=$3 cfg=$4 expect=$5 rc=0 t0 files outcome secs
    t0=$(date +%s.%N)
    # Each row is a fresh account on a fresh fake: no tokens stored by an earlier row.
    rm -rf "$WORK/state-$name"
    timeout 300 env CLOUDSYNC_CONFIG="$cfg" XDG_STATE_HOME="$WORK/state-$name" "$BIN" pull >"$WORK/pull.out" 2>"$WORK/pull.err" || rc=$?
    secs=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    local cache; cache=$(sed -n 's/^dir = "\(.*\)"/\1/p' "$cfg" | head -1)
    files=$(compare "$expect" "$cache/tracks/bench")
    if [ $rc = 0 ]; then outcome="completed"; else
        outcome=$(grep -iE "error|fail|refus|full|space|unavailable|auth" "$WORK/pull.err" | tail -1 | cut -c1-110 | tr '|' '/')
        [ -n "$outcome" ] || outcome=$(tail -1 "$WORK/pull.err" | cut -c1-110 | tr '|' '/')
    fi
    local verdict=ok
    if [ "$rc" != "$want" ] || [[ $files == WRONG* ]] || { [ "$want" = 0 ] && [ "${ROW_ALLOW_PARTIAL:-0}" = 0 ] && [[ $files != all* ]]; }; then verdict=UNEXPECTED; failures=$((failures + 1)); fi
    echo "$name|$fault|$want|$rc|$outcome|$files|${secs}s|$verdict" >>"$rows"
    log "torture: $name: exit $rc (want $want), files $files, $verdict"
}

# ---------- WebDAV download faults: nginx dav-ext behind the fault proxy
lib=$WORK/lib; make_lib "$lib" 6 $((1536 * 1024))
start_nginx "$lib"
proxy_row() { # proxy_row NAME FAULT WANT RETRIES PROXY-ARGS...
    local name=$1 fault=$2 want=$3 retries=$4; shift 4
    start_fifo "proxy-$name" python3 "$BENCH/faultproxy.py" "$NGINX_PORT" "$@"
    rm -rf "$WORK/cache"
    config "$WORK/$name.toml" "$WORK/cache" "$retries" 'provider = "webdav"' "url = \"http://127.0.0.1:$LINE/dav/\"" 'user = "demo"' 'password = "demo-pass"'
    row "$name" "$fault" "$want" "$WORK/$name.toml" "${expect_dir:-$lib}"
    stop_pid "${_pids[-1]}"; unset '_pids[-1]'
}
proxy_row webdav-429 "GET: 429 + Retry-After: 1 on the first 3 downloads" 0 10 --status 429 --retry-after 1 --count 3
proxy_row webdav-503 "GET: 503 + Retry-After: 1 on the first 3 downloads" 0 10 --status 503 --retry-after 1 --count 3
proxy_row webdav-5xx-burst "GET: 500 on the first 6 downloads (no Retry-After)" 0 10 --status 500 --count 6
proxy_row webdav-5xx-forever "GET: 502 on every download, retries = 2" 5 2 --status 502 --count 1000000
proxy_row webdav-cut "GET: connection cut after 100 KiB, first 8 downloads" 0 10 --cut-after 102400 --count 8
proxy_row webdav-range-ignored "server ignores Range (200 + whole body)" 0 10 --ignore-range
proxy_row webdav-slow "slow server: 2 MiB/s per connection" 0 10 --rate 2097152
cp -a "$lib" "$WORK/lib-mutate"
# mid-download change: the proxy rewrites every file after the 3rd GET (new bytes, new mtime → new ETag).
stop_all; start_nginx "$WORK/lib-mutate"
expect_dir=$WORK/lib-mutate proxy_row webdav-changed-mid-download "every file rewritten after the 3rd GET (new ETag)" 0 10 --mutate "$WORK/lib-mutate" --count 3
stop_all

# ---------- disk full: a 24 MiB tmpfs as the cache dir for a 9 MiB library (16 MiB of it the budget keeps free for the index)
start_nginx "$lib"
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$WORK/small"; mount -t tmpfs -o size=24m tmpfs "$WORK/small" && _mounts+=("$WORK/small")
    config "$WORK/full.toml" "$WORK/small/cache" 10 'provider = "webdav"' "url = \"http://127.0.0.1:$NGINX_PORT/dav/\"" 'user = "demo"' 'password = "demo-pass"'
    # With the default cache.min_free (1 GiB) the budget is 0 on this disk: nothing is fetched, a warning says why.
    ROW_ALLOW_PARTIAL=1 row disk-nearly-full "cache dir on a 24 MiB tmpfs, default min_free: budget 0" 0 "$WORK/full.toml" "$lib"
    grep -q "the disk of the cache is nearly full" "$WORK/pull.err" || { echo "disk-nearly-full: no warning" >&2; failures=$((failures + 1)); }
    rm -rf "$WORK/small/cache"
    # The budget keeps the pull itself within the disk; another program filling it meanwhile meets ENOSPC.
    start_fifo proxy-full python3 "$BENCH/faultproxy.py" "$NGINX_PORT" --rate 1048576
    config "$WORK/full.toml" "$WORK/small/cache" 10 'provider = "webdav"' "url = \"http://127.0.0.1:$LINE/dav/\"" 'user = "demo"' 'password = "demo-pass"'
    sed -i 's/^checkpoint = "256KiB"$/checkpoint = "256KiB"\nmin_free = "0"/' "$WORK/full.toml"
    ( sleep 0.8; dd if=/dev/zero of="$WORK/small/filler" bs=64k 2>/dev/null || true ) & filler=$!
    row disk-full "another program fills the 24 MiB tmpfs of the cache during the pull (min_free 0)" 74 "$WORK/full.toml" "$lib"
    wait "$filler"; rm -f "$WORK/small/filler"
else
    echo "disk-full|cache dir on a small tmpfs|74|-|skipped: mount needs root|-|-|skipped" >>"$rows"
fi
stop_all

# ---------- WebDAV listing faults: webdav_fake.py
fake_dump_webdav() { # fake_dump_webdav PORT DIR: fetch every listed track from the fake as the expected tree
    python3 - "$1" "$2" "$WORK/cache/tracks/bench" <<'PY'
import base64, os, sys, urllib.request
from urllib.parse import quote
port, dest, got = sys.argv[1:4]
auth = "Basic " + base64.b64encode(b"demo:demo-pass").decode()
for d, _, fs in os.walk(got):
    for n in fs:
        rel = os.path.relpath(os.path.join(d, n), got)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/dav/" + quote(rel), headers={"Authorization": auth})
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        open(os.path.join(dest, rel), "wb").write(urllib.request.urlopen(req).read())
PY
}
for mode in ratelimit-first cut-first; do
    start_fifo "wd-$mode" python3 "$fakes/webdav_fake.py" --folders 3 --files 4 "--$mode"
    port=$(echo "$LINE" | grep -o '[0-9]\+' | head -1)
    rm -rf "$WORK/cache" "$WORK/exp-$mode"; mkdir -p "$WORK/exp-$mode"
    config "$WORK/wd.toml" "$WORK/cache" 10 'provider = "webdav"' "url = \"http://127.0.0.1:$port/dav/\"" 'user = "demo"' 'password = "demo-pass"'
    # The expected tree: the fake's 12 tracks, fetched directly after the pull (a missing track shows as partial).
    timeout 300 env CLOUDSYNC_CONFIG="$WORK/wd.toml" "$BIN" pull --dry-run >/dev/null 2>&1 || true
    python3 - "$port" "$WORK/exp-$mode" <<'PY'
import base64, os, sys, urllib.request
from urllib.parse import quote
port, dest = sys.argv[1:3]
auth = "Basic " + base64.b64encode(b"demo:demo-pass").decode()
for i in range(3):
    for j in range(4):
        rel = f"Folder {i:03d}/Track {j:04d}.mp3"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/dav/" + quote(rel), headers={"Authorization": auth})
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        open(os.path.join(dest, rel), "wb").write(urllib.request.urlopen(req).read())
PY
    what="PROPFIND: 429 + Retry-After: 1 on the first listing"; [ $mode = cut-first ] && what="PROPFIND: connection cut on the first listing of every folder"
    row "webdav-list-$mode" "$what" 0 "$WORK/wd.toml" "$WORK/exp-$mode"
    stop_all
done

# ---------- Dropbox fake
dropbox_row() { # dropbox_row NAME FAULT WANT SPEC-EXTRA CONTROL-JSON|"" CONFIG-EXTRA...
    local name=$1 fault=$2 want=$3 extra=$4 control=$5; shift 5
    python3 -c "import json; s={'page_size': 3, 'token': 'at-1', 'refresh_token': 'rt-1', 'client_id': 'app', 'files': [{'path': f'/Music/Album {i}/Track {i}.mp3', 'size': 700000 + i} for i in range(4)]}; s.update(json.loads('$extra' or '{}')); print(json.dumps(s))" >"$WORK/db.json"
    start_fifo "db-$name" python3 "$fakes/dropbox_fake.py" "@$WORK/db.json"; local port=$LINE
    [ -n "$control" ] && curl -s -X POST -H 'Content-Type: application/json' -d "$control" "http://127.0.0.1:$port/_control" >/dev/null
    rm -rf "$WORK/cache" "$WORK/exp"; mkdir -p "$WORK/exp"
    python3 - "$port" "$WORK/exp" <<'PY'
import os, sys, urllib.request
from urllib.parse import quote
port, dest = sys.argv[1:3]
for i in range(4):
    rel = f"Music/Album {i}/Track {i}.mp3"
    os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
    data = urllib.request.urlopen(f"http://127.0.0.1:{port}/_content?path=" + quote("/" + rel.lower())).read()
    open(os.path.join(dest, rel), "wb").write(data)
PY
    config "$WORK/db.toml" "$WORK/cache" 10 'provider = "dropbox"' "api_url = \"http://127.0.0.1:$port\"" "content_url = \"http://127.0.0.1:$port\"" \
        "token_url = \"http://127.0.0.1:$port/oauth2/token\"" 'access_token = "at-1"' 'client_id = "app"' "$@"
    row "$name" "$fault" "$want" "$WORK/db.toml" "$WORK/exp"
    stop_all
}
dropbox_row dropbox-429-list "list_folder/continue: 429 Retry-After: 1 (JSON body), twice" 0 '' \
    '{"op": "fail", "route": "files/list_folder/continue", "status": 429, "count": 2, "retry_after": 1, "where": "header"}'
dropbox_row dropbox-503-download "files/download: 503 Retry-After: 1, three times" 0 '' \
    '{"op": "fail", "route": "files/download", "status": 503, "count": 3, "retry_after": 1, "where": "header"}'
dropbox_row dropbox-token-expired "access token expired at start; refresh token present" 0 '{"expired": true}' '' 'refresh_token = "rt-1"'
dropbox_row dropbox-token-expired-no-refresh "access token expired at start; no refresh token" 4 '{"expired": true}' ''

# ---------- OneDrive fake
onedrive_row() { # onedrive_row NAME FAULT WANT SPEC-EXTRA CONFIG-EXTRA...
    local name=$1 fault=$2 want=$3 extra=$4; shift 4
    python3 -c "import json; s={'page_size': 3, 'access_token': 'at-0', 'refresh_token': 'rt-0', 'client_id': 'cid', 'items': [{'path': f'Music/Album {i}/Track {i}.mp3', 'size': 700000 + i, 'mime': 'audio/mpeg'} for i in range(4)]}; s.update(json.loads('$extra' or '{}')); print(json.dumps(s))" >"$WORK/od.json"
    start_fifo "od-$name" python3 "$fakes/onedrive_fake.py" "@$WORK/od.json"; local port; port=$(echo "$LINE" | cut -d' ' -f1)
    rm -rf "$WORK/cache" "$WORK/exp"; mkdir -p "$WORK/exp"
    python3 - "$port" "$WORK/exp" <<'PY'
import json, os, sys, urllib.request
port, dest = sys.argv[1:3]
items = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/_items"))
for path, ident in items.items():
    if not path.endswith(".mp3"): continue
    os.makedirs(os.path.join(dest, os.path.dirname(path)), exist_ok=True)
    open(os.path.join(dest, path), "wb").write(urllib.request.urlopen(f"http://127.0.0.1:{port}/_bytes?id={ident}").read())
PY
    config "$WORK/od.toml" "$WORK/cache" 10 'provider = "onedrive"' "api_url = \"http://127.0.0.1:$port\"" \
        "token_url = \"http://127.0.0.1:$port/common/oauth2/v2.0/token\"" 'access_token = "at-0"' 'client_id = "cid"' "$@"
    row "$name" "$fault" "$want" "$WORK/od.toml" "$WORK/exp"
    stop_all
}
onedrive_row onedrive-429 "Graph: 429 Retry-After: 1 on the first 3 calls" 0 '{"ratelimit": 3}'
onedrive_row onedrive-token-expiry "access token expires after 2 Graph calls; refresh token present" 0 '{"token_uses": 2}' 'refresh_token = "rt-0"'
onedrive_row onedrive-link-expiry "download URL answers 410 after 1 use (files need 3 ranged GETs)" 0 '{"link_uses": 1, "link_status": 410}'

# ---------- Yandex.Disk fake
yandex_row() { # yandex_row NAME FAULT WANT SPEC-EXTRA CONTROL-JSON|""
    local name=$1 fault=$2 want=$3 extra=$4 control=$5
    python3 -c "import json; s={'tokens': {'access': 'at', 'refresh': 'rt', 'client_id': 'c', 'client_secret': 's'}, 'download_host': '127.0.0.1', 'files': [{'path': f'Music/Album {i}/Track {i}.mp3', 'size': 700000 + i} for i in range(4)]}; s.update(json.loads('$extra' or '{}')); print(json.dumps(s))" >"$WORK/yd.json"
    start_fifo "yd-$name" python3 "$fakes/yandex_fake.py" "$WORK/yd.json"; local port; port=$(echo "$LINE" | cut -d' ' -f1)
    [ -n "$control" ] && curl -s -X POST -H 'Content-Type: application/json' -d "$control" "http://127.0.0.1:$port/_control" >/dev/null
    rm -rf "$WORK/cache" "$WORK/exp"; mkdir -p "$WORK/exp"
    python3 - "$fakes" "$WORK/exp" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1]); import yandex_fake
for i in range(4):
    rel = f"Music/Album {i}/Track {i}.mp3"
    os.makedirs(os.path.join(sys.argv[2], os.path.dirname(rel)), exist_ok=True)
    open(os.path.join(sys.argv[2], rel), "wb").write(yandex_fake.content_of(rel, 700000 + i, i))
PY
    config "$WORK/yd.toml" "$WORK/cache" 10 'provider = "yandex"' "api_url = \"http://127.0.0.1:$port\"" 'access_token = "at"'
    row "$name" "$fault" "$want" "$WORK/yd.toml" "$WORK/exp"
    stop_all
}
yandex_row yandex-429-download "download host: 429 Retry-After: 1, three times" 0 '' '{"op": "throttle", "count": 3, "status": 429, "retry_after": "1", "target": "download"}'
yandex_row yandex-503-api "API: 503 (no Retry-After), three times" 0 '' '{"op": "throttle", "count": 3, "status": 503, "retry_after": null, "target": "api"}'
yandex_row yandex-link-expiry "download href answers 410 after 1 use" 0 '{"href_max_uses": 1, "href_expired_status": 410}' ''

{
    echo "# Torture"; echo; machine_line; echo
    echo "cloudsync pull with chunk_size = checkpoint = 256 KiB, jobs = 2, retries = 10 unless said. \"files\" compares tracks/ with what the server serves at the end."; echo
    echo "| row | fault | expected exit | exit | outcome | files in tracks/ | time | verdict |"
    echo "|---|---|---|---|---|---|---|---|"
    while IFS='|' read -r a b c d e f g h; do echo "| $a | $b | $c | $d | $e | $f | $g | $h |"; done <"$rows"
} >"$out"
cat "$out"
[ "$failures" = 0 ] || { echo "bench: $failures torture rows did not behave as expected" >&2; exit 1; }
