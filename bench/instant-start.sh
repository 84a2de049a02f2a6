#!/usr/bin/env bash
# Instant start (issue #17): the ten files of #17 (Tests/TestSupport/make-audio-fixtures.sh: MP3 with a 2 MB ID3v2
# cover, MP3 with ID3v1 only, FLAC with a 2 MB PICTURE, M4A with moov at the end, M4A +faststart, M4A with a 2 MB
# covr, Ogg Vorbis, Opus, Opus with a 2 MB picture, WAV; 3 minutes each) on nginx WebDAV; a pull whose budget holds
# the start sets and no whole track (`pull --head-first` on a library bigger than the cache); then, with the cloud
# stopped, per format the time ffmpeg takes through `cloudsync serve` to its first 0.1 s of decoded audio (start,
# probe, first packets) next to the same on the local complete file, a 5 s decode that must succeed, and the bytes
# kept per track. ffmpeg runs with `-map 0:a`: an attached cover is a video stream that never reaches -t, so
# ffmpeg would otherwise read the audio on past the start set. Goal: ≤ 0.2 s to first audio.
# --quick: 20 s files, one run.   usage: bench/instant-start.sh [--quick]    env: BENCH_RUNS (default 5)
source "$(dirname "$0")/lib.sh"
need nginx ffmpeg ffprobe
if [ $QUICK = 1 ]; then seconds=20; else seconds=180; fi
out=$RESULTS/instant-start$([ $QUICK = 1 ] && echo -quick || true).md
res=$WORK/instant.txt; : >"$res"
failures=0
formats="mp3-cover.mp3 mp3-id3v1.mp3 flac-cover.flac m4a-end.m4a m4a-faststart.m4a m4a-cover.m4a vorbis.ogg opus.opus opus-cover.opus wav.wav"

log "instant-start: making the ten fixtures ($seconds s each)"
"$TOP/Tests/TestSupport/make-audio-fixtures.sh" "$WORK/fixtures" "$seconds"
mkdir -p "$WORK/lib"
for f in $formats; do cp "$WORK/fixtures/$f" "$WORK/lib/$f"; done
start_nginx "$WORK/lib"
url="http://127.0.0.1:$NGINX_PORT/dav/"

# The start sets' sizes from a scratch cache that pulls everything; then the measured cache, whose budget holds
# the start sets (and 16 KiB) and no whole track.
webdav_config "$WORK/scratch.toml" "$WORK/scratch" "$url"
CLOUDSYNC_CONFIG=$WORK/scratch.toml "$BIN" pull --quiet || die "the scratch pull failed"
heads=$(CLOUDSYNC_CONFIG=$WORK/scratch.toml "$BIN" ls --offline --json | python3 -c 'import json,sys; print(sum(r["head_bytes"] or 0 for r in json.load(sys.stdin)))')
budget=$((heads + 16384))
webdav_config "$WORK/cs.toml" "$WORK/cache" "$url"
sed -i "s/^max_size = .*/max_size = \"${budget}B\"\nmin_free = \"0B\"/" "$WORK/cs.toml"
: >"$NGINX_LOG"
measure "$res" pull-head-first env CLOUDSYNC_CONFIG="$WORK/cs.toml" "$BIN" pull --quiet --head-first
gets=$(grep -c '^GET ' "$NGINX_LOG" || true)
CLOUDSYNC_CONFIG=$WORK/cs.toml "$BIN" ls --offline --json >"$WORK/ls.json"
stop_servers   # the cloud is gone from here on

CLOUDSYNC_CONFIG=$WORK/cs.toml "$BIN" -q serve --port 0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
_pids+=($!)
for _ in $(seq 1 100); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$WORK/serve.out")
[ -n "$port" ] || { cat "$WORK/serve.err" >&2; die "serve did not start"; }

# first_audio WHERE: seconds ffmpeg takes to decode the first 0.1 s of WHERE (a URL or a path), or "fail".
first_audio() {
    local t0 t1
    t0=$(date +%s.%N)
    if ffmpeg -nostdin -v error -i "$1" -map 0:a -t 0.1 -f null - >/dev/null 2>"$WORK/ff.err" && [ ! -s "$WORK/ff.err" ]; then
        t1=$(date +%s.%N); python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$t0" "$t1"
    else echo fail; fi
}
log "instant-start: time to first audio, $RUNS runs per format, cloud stopped"
for run in $(seq 1 "$RUNS"); do
    for f in $formats; do
        echo "$f serve $(first_audio "http://127.0.0.1:$port/tracks/bench/$f")" >>"$res.first"
        echo "$f local $(first_audio "$WORK/lib/$f")" >>"$res.first"
    done
done
for f in $formats; do
    if ffmpeg -nostdin -v error -i "http://127.0.0.1:$port/tracks/bench/$f" -map 0:a -t 5 -f null - >/dev/null 2>"$WORK/ff.err" && [ ! -s "$WORK/ff.err" ]
    then echo "$f ok" >>"$res.decode"
    else echo "$f failed" >>"$res.decode"; echo "bench: $f: 5 s through serve offline failed: $(head -3 "$WORK/ff.err")" >&2; failures=$((failures+1)); fi
done
grep -q ' fail$' "$res.first" && { echo "bench: a first-audio run failed" >&2; failures=$((failures+1)); }
{
    echo "# Instant start"; echo; machine_line; echo
    echo "Ten files of $seconds s made by ffmpeg (Tests/TestSupport/make-audio-fixtures.sh), on nginx WebDAV; a pull with"
    echo "\`cache.max_size\` = the start sets + 16 KiB ($budget B) and \`--head-first\` (it made $gets GETs), then nginx stopped."
    echo "Time to first audio: wall time of \`ffmpeg -i URL -map 0:a -t 0.1 -f null -\` through \`cloudsync serve\` (debug or release as built), and"
    echo "on the local complete file for comparison (ffmpeg's own start). Runs: $RUNS. Goal: ≤ 0.2 s through serve."; echo
    python3 - "$res.first" "$res.decode" "$WORK/ls.json" <<'PY'
import json, statistics, sys
first = {}
for line in open(sys.argv[1]):
    f, where, t = line.split()
    first.setdefault((f, where), []).append(t)
decode = dict(line.split() for line in open(sys.argv[2]))
rows = {r["path"]: r for r in json.load(open(sys.argv[3]))}
def med(ts):
    ok = [float(t) for t in ts if t != "fail"]
    return (f"{statistics.median(ok):.3f}" if ok else "fail") + ("" if len(ok) == len(ts) else f" ({len(ts) - len(ok)} failed)")
print("| format | first audio via serve, offline, median s | local file, median s | serve − local s | 5 s offline | state | kept per track | of size | duration_s | tags |")
print("|---|---|---|---|---|---|---|---|---|---|")
total_kept = total = 0
for f in sorted({k[0] for k in first}, key=lambda n: list(rows).index(n) if n in rows else 0):
    r = rows.get(f, {})
    kept, size = r.get("cached_bytes", 0), r.get("size", 0)
    total_kept += kept; total += size
    tags = r.get("tags", {})
    label = f"{tags.get('artist', '-')} – {tags.get('title', '-')}"
    a, b = med(first[(f, 'serve')]), med(first[(f, 'local')])
    diff = f"{float(a) - float(b):+.3f}" if " " not in a + b and "fail" not in a + b else "-"
    print(f"| {f} | {a} | {b} | {diff} | {decode.get(f, '?')} | {r.get('state', '?')} | "
          f"{kept / 1e6:.2f} MB | {100 * kept / size if size else 0:.0f} % | {r.get('duration_s')} | {label} |")
print()
print(f"Kept: {total_kept / 1e6:.1f} MB of {total / 1e6:.1f} MB ({100 * total_kept / total if total else 0:.0f} %).")
PY
} >"$out"
cat "$out"
[ "$failures" = 0 ]
