#!/usr/bin/env bash
# Scale: (1) `cloudsync pull` of a 20,000-track library of small files (32 KiB) from nginx WebDAV — wall time,
# CPU, peak RSS, index size — then an unchanged re-pull; (2) `cloudsync ls --offline` over 100,000 indexed
# tracks, the index filled by a real pull of 100,000 tiny files (16 bytes) from nginx WebDAV.
# --quick: 2,000 and 5,000 tracks.   usage: bench/scale.sh [--quick]    env: BENCH_RUNS (default 5)
source "$(dirname "$0")/lib.sh"
need nginx
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
    measure "$res" "pull-$n1-first" env CLOUDSYNC_CONFIG="$WORK/cs.toml" "$BIN" pull --quiet
    if [ "$run" = 1 ]; then
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
} >"$out"
cat "$out"
[ "$failures" = 0 ]
