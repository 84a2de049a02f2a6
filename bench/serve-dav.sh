#!/usr/bin/env bash
# How fast serve's WebDAV face lists a big folder: PROPFIND Depth 1 (mpd's body) of one folder holding
# FILES tracks, and of the remote's root above it, timed with curl (median of RUNS), with serve's CPU per
# listing (what it costs whatever the machine's load). Asserts nothing.
# The index comes from `cloudsync ls` over Tests/Fakes/files_fake.py serving FILES 1-byte files.
#
#   usage: bench/serve-dav.sh [--quick] [FILES [RUNS]]   (default 20000 files, 5 runs; --quick: 2000 files, 2 runs)
#   env:   CLOUDSYNC_BIN=path/to/cloudsync              (default .build/release/cloudsync)
source "$(dirname "$0")/lib.sh"
files=20000; runs=5; n=0
[ "$QUICK" = 1 ] && { files=2000; runs=2; }
for arg in "$@"; do
    case "$arg" in [0-9]*) if [ $n -eq 0 ]; then files=$arg; else runs=$arg; fi; n=$((n + 1)) ;; esac
done

python3 - "$WORK/library/Big Folder" "$files" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
for i in range(count):
    with open(os.path.join(root, f"Track {i:06d} – Ёлка.flac"), "wb") as f:
        f.write(b"x")
PY
start_files_fake "$WORK/library"
webdav_config "$WORK/config.toml" "$WORK/cache" "http://127.0.0.1:$FAKE_PORT/dav/"
"$BIN" --config "$WORK/config.toml" -q ls --remote bench >/dev/null
start_serve "$WORK/config.toml"

body='<a:propfind xmlns:a="DAV:"><a:prop><a:resourcetype/><a:getcontenttype/><a:getcontentlength/><a:getlastmodified/></a:prop></a:propfind>'
propfind() { curl -s -o "$WORK/answer.xml" -X PROPFIND -H "Depth: 1" -H "Content-Type: application/xml" --data "$body" \
    -w '%{time_total}\n' "http://127.0.0.1:$SERVE_PORT$1" | awk '{printf "%.1f\n", $1*1000}'; }
# cpu_ms: user+system CPU time serve has used so far, in ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$SERVE_PID/stat"; }
folder=/dav/bench/Big%20Folder/
propfind "$folder" >/dev/null   # warm up (page cache, SQLite)
cpu_before=$(cpu_ms)
big=$(for _ in $(seq 1 "$runs"); do propfind "$folder"; done | median)
cpu_each=$(awk -v a="$cpu_before" -v b="$(cpu_ms)" -v n="$runs" 'BEGIN {printf "%.0f", (b - a) / n}')
listed=$(grep -o '<D:response>' "$WORK/answer.xml" | wc -l)
size_kib=$(($(stat -c %s "$WORK/answer.xml") / 1024))
top=$(for _ in $(seq 1 "$runs"); do propfind /dav/bench/; done | median)
echo "binary: $BIN"
echo "PROPFIND Depth 1 of a folder of $files tracks: median ${big} ms over $runs, serve's CPU ${cpu_each} ms each ($listed responses, $size_kib KiB)"
echo "PROPFIND Depth 1 of the remote's root above it: median ${top} ms"
