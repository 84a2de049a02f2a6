#!/usr/bin/env bash
# How fast serve's WebDAV face lists a big folder: PROPFIND Depth 1 (mpd's body) of one folder holding
# FILES tracks, and of the remote's root above it, timed with curl (median of RUNS). Asserts nothing.
# The index comes from `cloudsync ls` over Tests/Fakes/files_fake.py serving FILES 1-byte files.
#
#   usage: bench/serve-dav.sh [--quick] [FILES [RUNS]]   (default 20000 files, 5 runs; --quick: 2000 files, 2 runs)
#   env:   CLOUDSYNC=path/to/cloudsync                  (default: .build/release/cloudsync, else .build/debug/cloudsync)
set -euo pipefail
cd "$(dirname "$0")/.."
files=20000; runs=5; n=0
for arg in "$@"; do
    case "$arg" in
    --quick) files=2000; runs=2 ;;
    [0-9]*) if [[ $n -eq 0 ]]; then files=$arg; else runs=$arg; fi; n=$((n + 1)) ;;
    esac
done
bin=${CLOUDSYNC:-${CLOUDSYNC_BIN:-}}
if [[ -z "$bin" ]]; then
    if [[ -x .build/release/cloudsync ]]; then bin=.build/release/cloudsync; else bin=.build/debug/cloudsync; fi
fi
[[ -x "$bin" ]] || { echo "serve-dav: build first (swift build -c release)" >&2; exit 2; }
for p in curl python3; do command -v $p >/dev/null || { echo "serve-dav: $p is not installed (scripts/install-deps.sh)" >&2; exit 3; }; done

work=$(mktemp -d /tmp/cloudsync-dav-XXXXXX)
server_pid=""; fake_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    [[ -n "$fake_pid" ]] && kill "$fake_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

python3 - "$work/library/Big Folder" "$files" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
for i in range(count):
    with open(os.path.join(root, f"Track {i:06d} – Ёлка.flac"), "wb") as f:
        f.write(b"x")
PY
mkfifo "$work/fake.in"
python3 Tests/Fakes/files_fake.py --root "$work/library" <"$work/fake.in" >"$work/fake.out" 2>"$work/fake.err" &
fake_pid=$!
exec 3>"$work/fake.in"
for _ in $(seq 1 100); do [[ -s "$work/fake.out" ]] && break; sleep 0.05; done
fake_port=$(head -1 "$work/fake.out")
[[ -n "$fake_port" ]] || { echo "serve-dav: files_fake.py did not start:" >&2; cat "$work/fake.err" >&2; exit 4; }
cat >"$work/config.toml" <<TOML
[cache]
dir = "$work/cache"

[remote.bench]
provider = "webdav"
url = "http://127.0.0.1:$fake_port/dav/"
user = "demo"
password = "demo-pass"
TOML
cs() { "$bin" --config "$work/config.toml" "$@"; }
cs -q ls --remote bench >/dev/null
"$bin" --config "$work/config.toml" -q serve --port 0 >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$work/serve.out")
[[ -n "$port" ]] || { echo "serve-dav: serve did not start:" >&2; cat "$work/serve.err" >&2; exit 4; }

body='<a:propfind xmlns:a="DAV:"><a:prop><a:resourcetype/><a:getcontenttype/><a:getcontentlength/><a:getlastmodified/></a:prop></a:propfind>'
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
propfind() { curl -s -o "$work/answer.xml" -X PROPFIND -H "Depth: 1" -H "Content-Type: application/xml" --data "$body" \
    -w '%{time_total}\n' "http://127.0.0.1:$port$1" | awk '{printf "%.1f\n", $1*1000}'; }
folder=/dav/bench/Big%20Folder/
# cpu_ms: user+system CPU time serve has used so far, in ms (what a listing costs, whatever the machine's load).
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000 / hz}' "/proc/$server_pid/stat"; }
propfind "$folder" >/dev/null   # warm up (page cache, SQLite)
cpu_before=$(cpu_ms)
big=$(for _ in $(seq 1 "$runs"); do propfind "$folder"; done | median)
cpu_each=$(awk -v a="$cpu_before" -v b="$(cpu_ms)" -v n="$runs" 'BEGIN {printf "%.0f", (b - a) / n}')
listed=$(grep -o '<D:response>' "$work/answer.xml" | wc -l)
size_kib=$(($(stat -c %s "$work/answer.xml") / 1024))
top=$(for _ in $(seq 1 "$runs"); do propfind /dav/bench/; done | median)
echo "binary: $bin"
echo "PROPFIND Depth 1 of a folder of $files tracks: median ${big} ms over $runs, serve's CPU ${cpu_each} ms each ($listed responses, $size_kib KiB)"
echo "PROPFIND Depth 1 of the remote's root above it: median ${top} ms"
