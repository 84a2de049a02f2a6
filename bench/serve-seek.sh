#!/usr/bin/env bash
# What `cloudsync serve` asks a slow cloud for when a player reads a tag at the end or seeks: bytes fetched
# for a 128-byte tail read of an uncached track (from the fake's request log), and the time to the first
# byte of a seek to the middle, beside the same range asked straight from the cloud (one round trip).
# Cloud: Tests/Fakes/files_fake.py throttled to RATE bytes/s per GET. Reports medians; asserts nothing.
#
#   usage: bench/serve-seek.sh [--quick] [TRACKS]     (default 10 tracks of 8 MiB; --quick: 3 tracks of 2 MiB)
#   env:   CLOUDSYNC=path/to/cloudsync                (default: .build/release/cloudsync, else .build/debug/cloudsync)
#          RATE=307200                                (the cloud's bytes/s per GET; default 300 KiB/s)
set -euo pipefail
cd "$(dirname "$0")/.."
tracks=10; size=$((8 << 20))
for arg in "$@"; do
    case "$arg" in
    --quick) tracks=3; size=$((2 << 20)) ;;
    [0-9]*) tracks=$arg ;;
    esac
done
rate=${RATE:-307200}
bin=${CLOUDSYNC:-${CLOUDSYNC_BIN:-}}
if [[ -z "$bin" ]]; then
    if [[ -x .build/release/cloudsync ]]; then bin=.build/release/cloudsync; else bin=.build/debug/cloudsync; fi
fi
[[ -x "$bin" ]] || { echo "serve-seek: build first (swift build -c release)" >&2; exit 2; }
for p in curl python3; do command -v $p >/dev/null || { echo "serve-seek: $p is not installed (scripts/install-deps.sh)" >&2; exit 3; }; done

work=$(mktemp -d /tmp/cloudsync-seek-XXXXXX)
server_pid=""; fake_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    [[ -n "$fake_pid" ]] && kill "$fake_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/library/bench"
for i in $(seq 1 "$tracks"); do head -c "$size" /dev/urandom >"$work/library/bench/track-$i.mp3"; done
# The fake exits when its stdin closes: keep a pipe open to it for the run.
mkfifo "$work/fake.in"
python3 Tests/Fakes/files_fake.py --root "$work/library" --rate "$rate" <"$work/fake.in" >"$work/fake.out" 2>"$work/fake.err" &
fake_pid=$!
exec 3>"$work/fake.in"
for _ in $(seq 1 100); do [[ -s "$work/fake.out" ]] && break; sleep 0.05; done
fake_port=$(head -1 "$work/fake.out")
[[ -n "$fake_port" ]] || { echo "serve-seek: files_fake.py did not start:" >&2; cat "$work/fake.err" >&2; exit 4; }
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
[[ -n "$port" ]] || { echo "serve-seek: serve did not start:" >&2; cat "$work/serve.err" >&2; exit 4; }
base="http://127.0.0.1:$port/tracks/bench/bench"

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk '{printf "%.1f\n", $1*1000}'; }
# cloud_bytes NAME: body bytes the fake sent for GETs of that track so far.
cloud_bytes() {
    curl -s "http://127.0.0.1:$fake_port/_log" | python3 -c 'import json,sys; n=sys.argv[1]; print(sum(r["bytes"] for r in json.load(sys.stdin) if r["path"].endswith("/"+n)))' "$1"
}

tail_bytes=(); tail_ms=(); seek_ms=(); direct_ms=()
middle=$((size / 2))
for i in $(seq 1 "$tracks"); do
    tail_ms+=("$(curl -s -o /dev/null -H "Range: bytes=-128" -w '%{time_total}\n' "$base/track-$i.mp3" | ms)")
    tail_bytes+=("$(cloud_bytes "track-$i.mp3")")
    # The seek reads the first byte of an open-ended range, then hangs up (as a player does on the next seek).
    # (curl exits 63 for --max-filesize once the head has come: the time to it is what counts.)
    seek_ms+=("$({ curl -s -o /dev/null -r "$middle-" --max-filesize 1 -w '%{time_starttransfer}\n' "$base/track-$i.mp3" || true; } | ms)")
    direct_ms+=("$({ curl -s -o /dev/null -u demo:demo-pass -r "$((middle + 4096))-" --max-filesize 1 -w '%{time_starttransfer}\n' \
        "http://127.0.0.1:$fake_port/dav/bench/track-$i.mp3" || true; } | ms)")
done

echo "binary: $bin; cloud: files_fake.py at $((rate >> 10)) KiB/s per GET; $tracks uncached tracks of $((size >> 20)) MiB"
echo "tail read (Range: bytes=-128): median $(printf '%s\n' "${tail_bytes[@]}" | median) bytes from the cloud (max $(printf '%s\n' "${tail_bytes[@]}" | sort -n | tail -1); goal <= 65536), median $(printf '%s\n' "${tail_ms[@]}" | median) ms"
echo "seek to the middle: first byte after median $(printf '%s\n' "${seek_ms[@]}" | median) ms (the cloud's own first byte: $(printf '%s\n' "${direct_ms[@]}" | median) ms; goal: one round trip + 50 ms)"
