#!/usr/bin/env bash
# What `cloudsync serve` asks a slow cloud for when a player reads a tag at the end or seeks: bytes fetched
# for a 128-byte tail read of an uncached track (from the fake's request log), and the time to the first
# byte of a seek to the middle, beside the same range asked straight from the cloud (one round trip).
# Cloud: Tests/Fakes/files_fake.py throttled to RATE bytes/s per GET. Reports medians; asserts nothing.
#
#   usage: bench/serve-seek.sh [--quick] [TRACKS]     (default 10 tracks of 8 MiB; --quick: 3 tracks of 2 MiB)
#   env:   CLOUDSYNC_BIN=path/to/cloudsync            (default .build/release/cloudsync)
#          RATE=307200                                (the cloud's bytes/s per GET; default 300 KiB/s)
source "$(dirname "$0")/lib.sh"
tracks=10; size=$((8 << 20))
[ "$QUICK" = 1 ] && { tracks=3; size=$((2 << 20)); }
for arg in "$@"; do case "$arg" in [0-9]*) tracks=$arg ;; esac; done
rate=${RATE:-307200}

mkdir -p "$WORK/library/bench"
for i in $(seq 1 "$tracks"); do head -c "$size" /dev/urandom >"$WORK/library/bench/track-$i.mp3"; done
start_files_fake "$WORK/library" --rate "$rate"
webdav_config "$WORK/config.toml" "$WORK/cache" "http://127.0.0.1:$FAKE_PORT/dav/"
"$BIN" --config "$WORK/config.toml" -q ls --remote bench >/dev/null
start_serve "$WORK/config.toml"
base="http://127.0.0.1:$SERVE_PORT/tracks/bench/bench"

ms() { awk '{printf "%.1f\n", $1*1000}'; }
# cloud_bytes NAME: body bytes the fake sent for GETs of that track so far.
cloud_bytes() {
    curl -s "http://127.0.0.1:$FAKE_PORT/_log" | python3 -c 'import json,sys; n=sys.argv[1]; print(sum(r["bytes"] for r in json.load(sys.stdin) if r["path"].endswith("/"+n)))' "$1"
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
        "http://127.0.0.1:$FAKE_PORT/dav/bench/track-$i.mp3" || true; } | ms)")
done

echo "binary: $BIN; cloud: files_fake.py at $((rate >> 10)) KiB/s per GET; $tracks uncached tracks of $((size >> 20)) MiB"
echo "tail read (Range: bytes=-128): median $(printf '%s\n' "${tail_bytes[@]}" | median) bytes from the cloud (max $(printf '%s\n' "${tail_bytes[@]}" | sort -n | tail -1); goal <= 65536), median $(printf '%s\n' "${tail_ms[@]}" | median) ms"
echo "seek to the middle: first byte after median $(printf '%s\n' "${seek_ms[@]}" | median) ms (the cloud's own first byte: $(printf '%s\n' "${direct_ms[@]}" | median) ms; goal: one round trip + 50 ms)"
