#!/usr/bin/env bash
# API economy: listing requests made by `cloudsync pull` for libraries of 1k/10k/50k tracks (--quick: 200),
# on a first pull and on a second pull in which nothing changed. WebDAV: PROPFINDs in nginx's access log
# (dav-ext, 10 tracks per album, 10 albums per artist), with rclone copy :webdav: through the same two runs for
# comparison. Dropbox, OneDrive and Yandex.Disk: the request logs of their fakes (Tests/Fakes/*_fake.py).
# Files are tiny (64 bytes) so the listing dominates; GETs of content are counted separately. Fake libraries
# above BENCH_API_FAKE_PULL_MAX (1000) tracks are listed with `cloudsync ls` only (first listing).
#   usage: bench/api-economy.sh [--quick]        env: BENCH_API_SIZES="1000 10000 50000"
source "$(dirname "$0")/lib.sh"
need nginx rclone
sizes=${BENCH_API_SIZES:-$([ $QUICK = 1 ] && echo "200" || echo "1000 10000 50000")}
out=$RESULTS/api-economy$([ $QUICK = 1 ] && echo -quick || true).md
fakes=$TOP/Tests/Fakes
obscured=$(rclone obscure demo-pass)
res=$WORK/api.txt; : >"$res"

# start_fake NAME SPECFILE: starts Tests/Fakes/NAME_fake.py, sets FAKE_LINE (its first stdout line).
start_fake() {
    local fifo=$WORK/fake.out.$RANDOM
    local arg="@$2"; [ "$1" = yandex ] && arg=$2
    # The fakes stop when their stdin closes: hand them a FIFO this shell keeps open.
    rm -f "$WORK/fake.in"; mkfifo "$WORK/fake.in"
    python3 "$fakes/$1_fake.py" "$arg" >"$fifo" 2>"$WORK/fake.err" <"$WORK/fake.in" &
    _pids+=($!)
    exec 9>"$WORK/fake.in"
    for _ in $(seq 1 1800); do [ -s "$fifo" ] && break; sleep 0.1; done  # a 50k-item fake takes a while to build
    FAKE_LINE=$(head -1 "$fifo"); [ -n "$FAKE_LINE" ] || { cat "$WORK/fake.err" >&2; die "$1 fake did not start"; }
}
fake_config() { # fake_config FILE PROVIDER LINES...
    local file=$1 provider=$2; shift 2
    { echo "[cache]"; echo "dir = \"$WORK/cache\""; echo; echo "[remote.bench]"; echo "provider = \"$provider\""
      for l in "$@"; do echo "$l"; done; } >"$file"
}
# pull_twice LABEL N CONFIG COUNTER: first pull, then an unchanged pull; COUNTER prints "listing other" requests.
pull_twice() {
    local label=$1 n=$2 cfg=$3 counter=$4 pass rc t0 t1
    rm -rf "$WORK/cache"
    for pass in first unchanged; do
        $counter reset
        rc=0; t0=$(date +%s.%N)
        CLOUDSYNC_CONFIG=$cfg "$BIN" pull --quiet >/dev/null 2>"$WORK/pull.err" || rc=$?
        t1=$(date +%s.%N)
        [ $rc = 0 ] || { echo "bench: $label $n $pass pull exited $rc:" >&2; tail -3 "$WORK/pull.err" >&2; }
        echo "$label $n $pass $($counter count) $rc $(python3 -c "print(f'{$t1 - $t0:.2f}')")" >>"$res"
    done
}

# ls_once LABEL N CONFIG COUNTER: one live `cloudsync ls` (a first listing without downloads), for fake libraries
# too large to pull through a single-threaded Python fake in reasonable time.
ls_once() {
    local label=$1 n=$2 cfg=$3 counter=$4 rc=0 t0
    rm -rf "$WORK/cache"; $counter reset; t0=$(date +%s.%N)
    CLOUDSYNC_CONFIG=$cfg "$BIN" ls >/dev/null 2>"$WORK/pull.err" || rc=$?
    echo "$label $n ls(first) $($counter count) $rc $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")" >>"$res"
}
# Pulls through the fakes up to this many tracks; above it, `ls` only (downloads through a Python fake cost ~10 ms each).
fake_pull_max=${BENCH_API_FAKE_PULL_MAX:-1000}
fake_run() { if [ "$2" -le "$fake_pull_max" ]; then pull_twice "$@"; else ls_once "$@"; fi; }

for n in $sizes; do
    # --- WebDAV on nginx dav-ext
    lib=$WORK/lib-$n; make_lib "$lib" "$n" 64
    start_nginx "$lib"
    webdav_config "$WORK/webdav.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
    nginx_counter() { case $1 in reset) : >"$NGINX_LOG" ;; count) echo "$(grep -c '^PROPFIND ' "$NGINX_LOG") $(grep -vc '^PROPFIND ' "$NGINX_LOG")" ;; esac; }
    log "api-economy: $n tracks, webdav"
    pull_twice cloudsync-webdav "$n" "$WORK/webdav.toml" nginx_counter
    rm -rf "$WORK/dst"
    # rclone copy lists and copies about 70 small files a second here: compared up to BENCH_API_RCLONE_MAX tracks.
    [ "$n" -le "${BENCH_API_RCLONE_MAX:-1000}" ] && for pass in first unchanged; do
        nginx_counter reset; t0=$(date +%s.%N); rc=0
        rclone copy :webdav: "$WORK/dst" --config /dev/null --transfers 4 -q --webdav-url "http://127.0.0.1:$NGINX_PORT/dav/" \
            --webdav-user demo --webdav-pass "$obscured" || rc=$?
        echo "rclone-copy-webdav $n $pass $(nginx_counter count) $rc $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")" >>"$res"
    done
    stop_servers; rm -rf "$lib" "$WORK/dst"

    # --- Dropbox fake (page_size 2000, the documented maximum `limit`)
    log "api-economy: $n tracks, dropbox fake"
    python3 - "$n" >"$WORK/spec.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"page_size": 2000, "token": "bench-token", "files": [
    {"path": f"/Music/Artist {i//100:03d}/Album {(i//10)%10:02d}/Track {i:06d}.mp3", "size": 64} for i in range(n)]}))
PY
    start_fake dropbox "$WORK/spec.json"; port=$FAKE_LINE
    fake_config "$WORK/dropbox.toml" dropbox "api_url = \"http://127.0.0.1:$port\"" "content_url = \"http://127.0.0.1:$port\"" \
        "token_url = \"http://127.0.0.1:$port/oauth2/token\"" 'access_token = "bench-token"'
    dropbox_counter() { case $1 in reset) curl -s "http://127.0.0.1:$port/_log" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' >"$WORK/db.mark" ;;
        count) curl -s "http://127.0.0.1:$port/_log" | python3 -c '
import json,sys; log=json.load(sys.stdin)[int(open(sys.argv[1]).read()):]
l=sum(1 for r in log if r.get("route","").startswith("files/list_folder")); print(l, len(log)-l)' "$WORK/db.mark" ;; esac; }
    fake_run cloudsync-dropbox "$n" "$WORK/dropbox.toml" dropbox_counter
    stop_servers

    # --- OneDrive fake (Graph delta, 200 items per page as Graph answers by default)
    log "api-economy: $n tracks, onedrive fake"
    python3 - "$n" >"$WORK/spec.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"page_size": 200, "access_token": "bench-token", "items": [
    {"path": f"Music/Artist {i//100:03d}/Album {(i//10)%10:02d}/Track {i:06d}.mp3", "size": 64, "mime": "audio/mpeg"} for i in range(n)]}))
PY
    start_fake onedrive "$WORK/spec.json"; read -r port cport <<<"$FAKE_LINE"
    fake_config "$WORK/onedrive.toml" onedrive "api_url = \"http://127.0.0.1:$port\"" \
        "token_url = \"http://127.0.0.1:$port/common/oauth2/v2.0/token\"" 'access_token = "bench-token"'
    onedrive_counter() { case $1 in reset) curl -s "http://127.0.0.1:$port/_log" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' >"$WORK/od.mark" ;;
        count) curl -s "http://127.0.0.1:$port/_log" | python3 -c '
import json,sys; log=json.load(sys.stdin)[int(open(sys.argv[1]).read()):]
l=sum(1 for r in log if "delta" in r.get("path","")); print(l, len(log)-l)' "$WORK/od.mark" ;; esac; }
    fake_run cloudsync-onedrive "$n" "$WORK/onedrive.toml" onedrive_counter
    stop_servers

    # --- Yandex.Disk fake
    log "api-economy: $n tracks, yandex fake"
    python3 - "$n" >"$WORK/spec.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"tokens": {"access": "bench-token", "refresh": "r", "client_id": "c", "client_secret": "s"},
    "download_host": "127.0.0.1", "files": [
    {"path": f"Music/Artist {i//100:03d}/Album {(i//10)%10:02d}/Track {i:06d}.mp3", "size": 64} for i in range(n)]}))
PY
    start_fake yandex "$WORK/spec.json"; read -r port dport <<<"$FAKE_LINE"
    fake_config "$WORK/yandex.toml" yandex "api_url = \"http://127.0.0.1:$port\"" 'access_token = "bench-token"'
    yandex_counter() { case $1 in reset) curl -s -X POST "http://127.0.0.1:$port/_log/clear" >/dev/null ;;
        count) curl -s "http://127.0.0.1:$port/_log" | python3 -c '
import json,sys; log=json.load(sys.stdin)
l=sum(1 for r in log if "/resources" in r.get("path","") and "/download" not in r.get("path","")); print(l, len(log)-l)' ;; esac; }
    fake_run cloudsync-yandex "$n" "$WORK/yandex.toml" yandex_counter
    stop_servers
done
python3 - "$res" "$(machine_line)" >"$out" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"# API economy\n\n{sys.argv[2]}\n")
print("Listing requests (WebDAV: PROPFIND; Dropbox: list_folder[/continue]; OneDrive: delta; Yandex: /resources*), other requests (downloads, token), exit code, wall seconds.\n")
print("| client / server | tracks | pull | listing requests | other requests | exit | wall s |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} |")
sys.exit(1 if any(r[5] != "0" for r in rows) else 0)
PY
rc=$?
cat "$out"
exit $rc
