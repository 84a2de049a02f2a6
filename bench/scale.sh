#!/usr/bin/env bash
# Scale: (1) `cloudsync pull` of a 20,000-track library of small files (32 KiB) from nginx WebDAV — wall time,
# CPU, peak RSS, index size — then an unchanged re-pull; (2) `cloudsync ls --offline` over 100,000 indexed
# tracks, the index filled by a real pull of 100,000 tiny files (16 bytes) from nginx WebDAV, then again with tags
# and durations in every row (written into the index as the engine records them: JSON of TrackInfo), which must
# stay under the untagged time; (3) a pull of 20,000 tagged MP3s (made by ffmpeg, 1 s each, ID3v2 tags): GETs
# per track from nginx's log against the untagged pull of (1) — tags are read from the start sets, no request
# more — and every row's tags in `ls --json`.
# --quick: 2,000 and 5,000 tracks.   usage: bench/scale.sh [--quick]    env: BENCH_RUNS (default 5)
source "$(dirname "$0")/lib.sh"
need nginx ffmpeg
if [ $QUICK = 1 ]; then n1=2000 n2=5000; else n1=20000 n2=100000; fi
out=$RESULTS/scale$([ $QUICK = 1 ] && echo -quick || true).md
res=$WORK/scale.txt; : >"$res"
failures=0

lib=$WORK/lib; make_lib "$lib" "$n1" 32768
expect=$(tree_sum "$lib")
start_nginx "$lib"
webdav_config "$WORK/cs.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
log "scale: pull of $n1 tracks x 32 KiB, $RUNS runs"
index_sizes=()
for run in $(seq 1 "$RUNS"); do
    rm -rf "$WORK/cache"
    [ "$run" = 1 ] && : >"$NGINX_LOG"
    measure "$res" "pull-$n1-first" env CLOUDSYNC_CONFIG="$WORK/cs.toml" "$BIN" pull --quiet
    if [ "$run" = 1 ]; then
        plain_gets=$(grep -c '^GET ' "$NGINX_LOG" || true)
        [ "$(tree_sum "$WORK/cache/tracks/bench")" = "$expect" ] || { echo "bench: scale pull: files differ" >&2; failures=$((failures+1)); }
    fi
    index_sizes+=("$(du -cb "$WORK"/cache/index.sqlite* | tail -1 | cut -f1)")
    measure "$res" "pull-$n1-unchanged" env CLOUDSYNC_CONFIG="$WORK/cs.toml" "$BIN" pull --quiet
done
stop_servers
rm -rf "$lib" "$WORK/cache"

lib=$WORK/lib2; make_lib "$lib" "$n2" 16
start_nginx "$lib"
webdav_config "$WORK/cs2.toml" "$WORK/cache2" "http://127.0.0.1:$NGINX_PORT/dav/"
log "scale: populating the index with a pull of $n2 tiny tracks"
measure "$res" "pull-$n2-tiny" env CLOUDSYNC_CONFIG="$WORK/cs2.toml" "$BIN" pull --quiet
index2=$(du -cb "$WORK"/cache2/index.sqlite* | tail -1 | cut -f1)
stop_servers   # offline means offline: server gone
for run in $(seq 1 "$RUNS"); do
    measure "$res" "ls-offline-$n2" env CLOUDSYNC_CONFIG="$WORK/cs2.toml" "$BIN" ls --offline
    [ "$run" = 1 ] && lines=$(wc -l <"$WORK/last.out")
    measure "$res" "ls-offline-json-$n2" env CLOUDSYNC_CONFIG="$WORK/cs2.toml" "$BIN" ls --offline --json
done
[ "$lines" -ge "$n2" ] || { echo "bench: ls --offline printed $lines lines for $n2 tracks" >&2; failures=$((failures+1)); }
# Every row tagged, as StartSets records it (sorted-key JSON of TrackInfo) with a duration.
python3 - "$WORK/cache2/index.sqlite" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ids = [r[0] for r in db.execute("SELECT id FROM files")]
rows = []
for i in ids:
    info = {"album": f"Album {i % 977:03d} — Ünïcode", "albumArtist": f"Artist {i % 311:03d}", "artist": f"Artist {i % 311:03d} & Björk",
            "bitrate": 320000, "channels": 2, "date": "2019", "discNumber": 1, "discTotal": 2, "durationSeconds": 180.5 + i % 60,
            "genre": "Jazz", "sampleRate": 44100, "title": f"Track {i} — Пётр 東京", "trackNumber": i % 12 + 1, "trackTotal": 12}
    rows.append((json.dumps(info, sort_keys=True, ensure_ascii=False, separators=(",", ":")), 180.5 + i % 60, i))
db.executemany("UPDATE files SET tags = ?, duration = ? WHERE id = ?", rows)
db.commit()
PY
for run in $(seq 1 "$RUNS"); do
    measure "$res" "ls-offline-tagged-$n2" env CLOUDSYNC_CONFIG="$WORK/cs2.toml" "$BIN" ls --offline
    [ "$run" = 1 ] && tagged_lines=$(grep -c ' – Track ' "$WORK/last.out" || true)
    measure "$res" "ls-offline-json-tagged-$n2" env CLOUDSYNC_CONFIG="$WORK/cs2.toml" "$BIN" ls --offline --json
done
[ "$tagged_lines" -ge "$n2" ] || { echo "bench: ls --offline showed tags on $tagged_lines lines of $n2" >&2; failures=$((failures+1)); }
rm -rf "$lib" "$WORK/cache2"

# Tagged MP3s: the same count as (1), GETs per track from nginx's log, tags of every row.
lib=$WORK/lib3; mkdir -p "$lib"
ffmpeg -v error -nostdin -f lavfi -i "sine=frequency=440:duration=1" -c:a libmp3lame -b:a 128k \
    -metadata "title=Café — Пётр" -metadata "artist=Mötley Crüe" -metadata "album=Ünïcode" "$WORK/one.mp3"
python3 - "$lib" "$n1" "$WORK/one.mp3" <<'PY'
import os, sys
root, count, one = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
for i in range(count):
    d = os.path.join(root, f"Artist {i // 100:03d}", f"Album {i // 10 % 10:02d}")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, f"Track {i:06d}.mp3"), "wb").write(one)
PY
start_nginx "$lib"
webdav_config "$WORK/cs3.toml" "$WORK/cache3" "http://127.0.0.1:$NGINX_PORT/dav/"
log "scale: pull of $n1 tagged MP3s"
measure "$res" "pull-$n1-tagged" env CLOUDSYNC_CONFIG="$WORK/cs3.toml" "$BIN" pull --quiet
tagged_gets=$(grep -c '^GET ' "$NGINX_LOG" || true)
stop_servers
with_tags=$(CLOUDSYNC_CONFIG=$WORK/cs3.toml "$BIN" ls --offline --json | python3 -c 'import json,sys; print(sum(r["tags"].get("title") == "Café — Пётр" and r["duration_s"] is not None for r in json.load(sys.stdin)))')
[ "$with_tags" = "$n1" ] || { echo "bench: $with_tags of $n1 tagged MP3s show their tags and duration" >&2; failures=$((failures+1)); }
[ "$tagged_gets" -le "$plain_gets" ] || { echo "bench: the tagged pull made $tagged_gets GETs, the untagged one $plain_gets" >&2; failures=$((failures+1)); }
{
    echo "# Scale"; echo; machine_line; echo
    echo "Runs: $RUNS. nginx WebDAV (dav-ext) on 127.0.0.1, files on tmpfs; cloudsync defaults (jobs 4)."; echo
    python3 - "$res" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    p = l.split(); rows.setdefault(p[0], []).append(p)
print("| what | wall median (min–max) s | CPU median s | peak RSS MiB | runs | failed |")
print("|---|---|---|---|---|---|")
for k, rs in rows.items():
    w = [float(r[1]) for r in rs]; c = [float(r[2]) + float(r[3]) for r in rs]
    print(f"| {k} | {statistics.median(w):.2f} ({min(w):.2f}–{max(w):.2f}) | {statistics.median(c):.2f} | {max(int(r[4]) for r in rs)/1024:.1f} | {len(rs)} | {sum(r[5] != '0' for r in rs)} |")
PY
    echo
    echo "- index size after the $n1-track pull: $(( ${index_sizes[0]} / 1024 )) KiB (index.sqlite + WAL; $(( ${index_sizes[0]} / n1 )) bytes per track)"
    echo "- index size after the $n2-track pull: $(( index2 / 1024 )) KiB ($(( index2 / n2 )) bytes per track); \`ls --offline\` printed $lines lines"
    echo "- GETs: $plain_gets for the $n1 untagged tracks of 32 KiB, $tagged_gets for $n1 tagged MP3s ($with_tags of them with tags and duration in \`ls --json\`)"
} >"$out"
cat "$out"
[ "$failures" = 0 ]
