#!/usr/bin/env bash
# Time to first byte of `cloudsync serve` on loopback, for a cached track and for uncached ones (one
# provider round trip to a local `rclone serve webdav`), and for the cached track again while a `pull` of
# 100 x 8 MiB fills the same cache (on /tmp, a disk here); and whole uncached tracks read as fast as they come
# (`rclone copy` of a folder from serve's /dav/ against the same copy straight from the cloud). Reports
# medians; asserts nothing.
#
#   usage: bench/serve-ttfb.sh [RUNS]        (default 50 cached requests, 15 uncached tracks)
#   env:   CLOUDSYNC=path/to/cloudsync       (default: .build/release/cloudsync, else .build/debug/cloudsync)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
uncached=15
bin=${CLOUDSYNC:-}
if [[ -z "$bin" ]]; then
    if [[ -x .build/release/cloudsync ]]; then bin=.build/release/cloudsync; else bin=.build/debug/cloudsync; fi
fi
[[ -x "$bin" ]] || { echo "serve-ttfb: build first (swift build -c release --static-swift-stdlib --product cloudsync)" >&2; exit 2; }
for p in curl rclone python3; do command -v $p >/dev/null || { echo "serve-ttfb: $p is not installed (scripts/install-deps.sh)" >&2; exit 3; }; done

work=$(mktemp -d /tmp/cloudsync-ttfb-XXXXXX)
server_pid=""; dav_pid=""; dav_state=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    [[ -n "$dav_pid" ]] && kill "$dav_pid" 2>/dev/null || true
    [[ -n "$dav_state" ]] && rm -rf "$dav_state"
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/library/bench"
head -c $((4 * 1024 * 1024)) /dev/urandom >"$work/library/bench/cached.flac"
for i in $(seq 1 $uncached); do head -c $((4 * 1024 * 1024)) /dev/urandom >"$work/library/bench/uncached-$i.flac"; done
mkdir -p "$work/library/bench/whole"
for i in $(seq 1 20); do head -c $((2 * 1024 * 1024)) /dev/urandom >"$work/library/bench/whole/track-$i.mp3"; done
mkdir -p "$work/library/bench/load"
head -c $((8 * 1024 * 1024)) /dev/urandom >"$work/load.bin"
for i in $(seq 1 100); do { printf '%08d' "$i"; tail -c +9 "$work/load.bin"; } >"$work/library/bench/load/track-$i.flac"; done
read -r dav_port dav_pid dav_state < <(Tests/servers/start-webdav.sh rclone "$work/library")
cat >"$work/config.toml" <<TOML
[cache]
dir = "$work/cache"

[remote.bench]
provider = "webdav"
url = "http://127.0.0.1:$dav_port/dav/"
user = "demo"
password = "demo-pass"
TOML
cs() { "$bin" --config "$work/config.toml" "$@"; }
cs -q ls --remote bench >/dev/null
cs -q pull --remote bench bench/cached.flac >/dev/null

# Not through `cs`: a function in the background is a subshell, and killing it would leave serve running.
"$bin" --config "$work/config.toml" -q serve --port 0 >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$work/serve.out")
[[ -n "$port" ]] || { echo "serve-ttfb: serve did not start:" >&2; cat "$work/serve.err" >&2; exit 4; }
base="http://127.0.0.1:$port/tracks/bench/bench"

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ttfb() { curl -s -o /dev/null -H "Range: bytes=0-65535" -w '%{time_starttransfer}\n' "$1" | awk '{printf "%.3f\n", $1*1000}'; }

curl -s -o /dev/null "$base/cached.flac"   # warm up
cached=$(for _ in $(seq 1 "$runs"); do ttfb "$base/cached.flac"; done | median)
miss=$(for i in $(seq 1 $uncached); do ttfb "$base/uncached-$i.flac"; done | median)
# For scale: the same range straight from the WebDAV server (one round trip, no cache).
direct=$(for i in $(seq 1 $uncached); do curl -s -o /dev/null -u demo:demo-pass -H "Range: bytes=0-65535" \
    -w '%{time_starttransfer}\n' "http://127.0.0.1:$dav_port/dav/bench/uncached-$i.flac" | awk '{printf "%.3f\n", $1*1000}'; done | median)

# Whole uncached tracks for a fast reader: rclone copies the folder through serve's /dav/ (every byte fetched on
# demand, written, hashed and promoted by serve), then straight from the cloud; three rounds, the cache emptied of
# that folder before each.
copy_via=(); copy_direct=()
for round in 1 2 3; do
    cs -q cache rm bench/whole >/dev/null 2>&1 || true
    rm -rf "$work/copy"
    start=$(date +%s.%N)
    rclone copy --config /dev/null --webdav-url "http://127.0.0.1:$port/dav/bench/bench/whole" :webdav: "$work/copy"
    copy_via+=("$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')")
    rm -rf "$work/copy"
    start=$(date +%s.%N)
    rclone copy --config /dev/null --webdav-url "http://127.0.0.1:$dav_port/dav/bench/whole" --webdav-user demo \
        --webdav-pass "$(rclone obscure demo-pass)" :webdav: "$work/copy"
    copy_direct+=("$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')")
done
via=$(printf '%s\n' "${copy_via[@]}" | median)
straight=$(printf '%s\n' "${copy_direct[@]}" | median)

# While a pull fills the same cache: as many cached requests as fit in the pull, at least $runs (then the pull is
# still running for every one of them, or the figure says how many it covered).
cs -q pull --remote bench bench/load >/dev/null 2>"$work/pull.err" &
pull_pid=$!
sleep 0.3
: >"$work/during.txt"; during_runs=0
while kill -0 "$pull_pid" 2>/dev/null; do ttfb "$base/cached.flac" >>"$work/during.txt"; during_runs=$((during_runs + 1)); done
wait "$pull_pid" || { echo "serve-ttfb: the pull failed:" >&2; cat "$work/pull.err" >&2; exit 5; }
during=$(median <"$work/during.txt")
p90=$(sort -n "$work/during.txt" | awk '{a[NR]=$1} END {print a[int(NR*0.9)+ (NR*0.9>int(NR*0.9))]}')

echo "binary: $bin"
echo "cached track   TTFB median over $runs: ${cached} ms   (goal <= 2 ms)"
echo "uncached track TTFB median over $uncached: ${miss} ms   (one provider round trip; rclone direct: ${direct} ms)"
echo "whole uncached tracks: rclone copy of 20 x 2 MiB from serve's /dav/ ${via} s, straight from the cloud ${straight} s (medians of 3)"
echo "cached track   TTFB median over $during_runs during a pull of 100 x 8 MiB on the same cache: ${during} ms, p90 ${p90} ms   (goal <= 2 ms)"
