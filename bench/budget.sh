#!/usr/bin/env bash
# Budget: (1) a library ten times the cache's budget (40 × 4 MiB in 16 MiB), five pulls in a row: body bytes
# each pull transfers (nginx's access log), files shrunk or evicted, states after; then a play-like change (a
# track's last play recorded by reading it through serve) and the bytes of the pull after it; (2) planning time
# over a 20,000-track index: `cache evict --dry-run` (index read + plan, no listing, no fetch); (3) every track
# ready behind a cloud's round trip: 100 × 1 MiB through bench/faultproxy.py --latency 0.05 with a budget of the
# start sets, the pull's wall time with a start set's parts asked for at once (default) and one after the other
# (`--segments 1`), next to the floor of ceil(tracks / jobs) round trips; (4) heads shortened to fit: 60 real
# 256 kbit/s MP3s of 4 MiB at budgets from room for every default head down to a sixth of it, the head settings a
# pull chose, the mean head, tracks with a head and the bytes held, then back to a roomy budget (bytes fetched).
#   usage: bench/budget.sh [--quick]        --quick: 2,000 tracks for (2), 20 tracks and one run for (3)
source "$(dirname "$0")/lib.sh"
need nginx
out=$RESULTS/budget$([ $QUICK = 1 ] && echo -quick || true).md
n2=$([ $QUICK = 1 ] && echo 2000 || echo 20000)
failures=0

# ---------- (1) ten times the budget
lib=$WORK/lib; make_lib "$lib" 40 $((4 << 20)) 10
start_nginx "$lib"
cfg=$WORK/budget.toml
webdav_config "$cfg" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
# Start sets of 64 KiB minimum audio: these random files are no known format, so each keeps its first 128 KiB and
# its last 128 KiB (with the default 512 KiB, 40 heads would not fit in 16 MiB, and the plan would keep the
# heads of the first tracks only).
sed -i 's/^max_size = "100GiB"$/max_size = "16MiB"\nmin_free = "0"\n\n[pull]\nhead_first = "64KiB"/' "$cfg"
rows=$WORK/rows.txt; : >"$rows"
# body_bytes: the bytes nginx sent for GETs since the log was last cut.
body_bytes() { awk '$1 == "GET" { s += $3 } END { print s + 0 }' "$NGINX_LOG"; }
for run in 1 2 3 4 5; do
    : >"$NGINX_LOG"
    t0=$(date +%s.%N)
    "$BIN" --config "$cfg" pull >"$WORK/pull.out" 2>"$WORK/pull.err" || { cat "$WORK/pull.err" >&2; failures=$((failures + 1)); }
    secs=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
    bytes=$(body_bytes)
    reduced=$(grep -cE '^(shrunk|evicted) ' "$WORK/pull.err" || true)
    states=$("$BIN" --config "$cfg" ls --offline --json | python3 -c 'import collections, json, sys; c = collections.Counter(r["state"] for r in json.load(sys.stdin)); print(", ".join(f"{k} {v}" for k, v in sorted(c.items())))')
    held=$("$BIN" --config "$cfg" cache status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bytes"])')
    echo "pull $run|$bytes|$reduced|$states|$held|$secs" >>"$rows"
    if [ "$run" -gt 1 ] && [ "$bytes" != 0 ]; then echo "bench: pull $run transferred $bytes bytes" >&2; failures=$((failures + 1)); fi
    [ "$held" -le $((16 << 20)) ] || { echo "bench: pull $run left $held bytes, over the budget" >&2; failures=$((failures + 1)); }
done
line=$(grep -E '^library ' "$WORK/pull.err" | tail -1 || true)
# A play: read one head-only track to its end through serve, then pull.
played=$("$BIN" --config "$cfg" ls --offline --json | python3 -c 'import json, sys; print(next(r["path"] for r in json.load(sys.stdin) if r["state"] == "head"))')
start_serve "$cfg"
curl -sf -o /dev/null "http://127.0.0.1:$SERVE_PORT/tracks/bench/$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$played")" \
    || { echo "bench: playing $played through serve failed" >&2; failures=$((failures + 1)); }
stop_pid "$SERVE_PID"
: >"$NGINX_LOG"
"$BIN" --config "$cfg" pull >"$WORK/pull.out" 2>"$WORK/pull.err" || failures=$((failures + 1))
after_play=$(body_bytes)
played_state=$("$BIN" --config "$cfg" ls --offline --json | python3 -c 'import json, sys; p = sys.argv[1]; print(next(r["state"] for r in json.load(sys.stdin) if r["path"] == p))' "$played")
[ "$played_state" = cached ] || { echo "bench: the played track is $played_state after the pull" >&2; failures=$((failures + 1)); }
stop_servers
rm -rf "$lib" "$WORK/cache"

# ---------- (2) planning a 20,000-track index
lib=$WORK/lib2; make_lib "$lib" "$n2" 16
start_nginx "$lib"
cfg2=$WORK/budget2.toml
webdav_config "$cfg2" "$WORK/cache2" "http://127.0.0.1:$NGINX_PORT/dav/"
log "budget: indexing $n2 tracks"
"$BIN" --config "$cfg2" pull --quiet || failures=$((failures + 1))
stop_servers
res=$WORK/plan.txt; : >"$res"
for _ in $(seq 1 "$RUNS"); do
    measure "$res" "cache-evict-dry-run-$n2" "$BIN" --config "$cfg2" cache evict --dry-run
done
plan_wall=$(median_of "$res" "cache-evict-dry-run-$n2" 1)

# ---------- (3) every track ready behind a round trip of 50 ms
n3=$([ $QUICK = 1 ] && echo 20 || echo 100); latency=0.05
lib=$WORK/lib3; make_lib "$lib" "$n3" $((1 << 20)) 25
start_nginx "$lib"
webdav_config "$WORK/scratch3.toml" "$WORK/scratch3" "http://127.0.0.1:$NGINX_PORT/dav/"
"$BIN" --config "$WORK/scratch3.toml" pull --quiet || failures=$((failures + 1))
heads=$("$BIN" --config "$WORK/scratch3.toml" ls --offline --json | python3 -c 'import json, sys; print(sum(r["head_bytes"] or 0 for r in json.load(sys.stdin)))')
rm -rf "$WORK/scratch3"
start_fifo proxy python3 "$BENCH/faultproxy.py" "$NGINX_PORT" --latency "$latency"; proxy=$LINE
cfg3=$WORK/budget3.toml
webdav_config "$cfg3" "$WORK/cache3" "http://127.0.0.1:$proxy/dav/"
sed -i "s/^max_size = .*/max_size = \"$((heads + 16384))B\"\nmin_free = \"0\"/" "$cfg3"
res3=$WORK/ready.txt; : >"$res3"
gets() { curl -sf "http://127.0.0.1:$proxy/_faults" | python3 -c 'import json, sys; print(json.load(sys.stdin)["gets"])'; }
# One pull unmeasured first: the first pull through a fresh proxy and nginx pays their warm-up (threads,
# connections, page cache), which in --quick mode's one run fell on the first variant only.
"$BIN" --config "$cfg3" pull --quiet || failures=$((failures + 1))
for _ in $(seq 1 "$RUNS"); do
    for segments in 4 1; do
        rm -rf "$WORK/cache3"
        before=$(gets)
        measure "$res3" "segments-$segments" "$BIN" --config "$cfg3" pull --quiet --jobs 4 --segments "$segments"
        echo "gets-$segments $(( $(gets) - before ))" >>"$res3.gets"
        ready=$("$BIN" --config "$cfg3" ls --offline --json | python3 -c 'import json, sys; print(sum(r["state"] in ("head", "cached") for r in json.load(sys.stdin)))')
        [ "$ready" = "$n3" ] || { echo "bench: $ready of $n3 tracks ready after the pull (--segments $segments)" >&2; failures=$((failures + 1)); }
    done
done
stop_servers
at_once=$(median_of "$res3" segments-4 1); one_by_one=$(median_of "$res3" segments-1 1)
gets_at_once=$(awk '$1 == "gets-4" { print $2; exit }' "$res3.gets"); gets_one=$(awk '$1 == "gets-1" { print $2; exit }' "$res3.gets")
floor=$(python3 -c "import math; print(f'{math.ceil($n3 / 4) * $latency:.2f}')")

# ---------- (4) heads shortened to fit the budget
lib=$WORK/lib4; make_mp3_lib "$lib" 60 $((4 << 20))
start_nginx "$lib"
rows4=$WORK/rows4.txt; : >"$rows4"
for budget in 60MiB 30MiB 20MiB 10MiB 60MiB; do
    cfg4=$WORK/budget4.toml
    webdav_config "$cfg4" "$WORK/cache4" "http://127.0.0.1:$NGINX_PORT/dav/"
    sed -i "s/^max_size = .*/max_size = \"$budget\"\nmin_free = \"0\"/" "$cfg4"
    : >"$NGINX_LOG"
    "$BIN" --config "$cfg4" pull --json >"$WORK/pull4.json" 2>"$WORK/pull4.err" || { cat "$WORK/pull4.err" >&2; failures=$((failures + 1)); }
    summary=$(python3 - "$WORK/pull4.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["remotes"][0]["budget"]
h = b["heads"]
print(f'{h["first"] // 1024} KiB, {h["seconds"]:g} s, tail {h["tail"] // 1024} KiB|{"shortened" if b["full_heads_bytes"] is not None else "as configured"}|{b["none"]}')
PY
)
    "$BIN" --config "$cfg4" ls --offline --json >"$WORK/ls4.json"
    listing=$(python3 - "$WORK/ls4.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
heads = [r["head_bytes"] or 0 for r in rows]
ready = sum(r["state"] in ("head", "cached") for r in rows)
complete = sum(r["state"] == "cached" for r in rows)
print(f"{sum(heads) // len(heads)}|{ready}|{complete}")
PY
)
    held=$("$BIN" --config "$cfg4" cache status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bytes"])')
    echo "$budget|$summary|$listing|$held|$(body_bytes)" >>"$rows4"
    IFS="|" read -r _ _ _ none _ ready _ <<<"$budget|$summary|$listing"
    [ "$none" = 0 ] && [ "$ready" = 60 ] || { echo "bench: at $budget, $none tracks without a head ($ready ready)" >&2; failures=$((failures + 1)); }
done
stop_servers

{
    echo "# Budget"; echo; machine_line; echo
    echo "40 random tracks of 4 MiB (160 MiB) from nginx WebDAV, \`cache.max_size = \"16MiB\"\`, \`min_free = \"0\"\`,"
    echo "\`pull.head_first = \"64KiB\"\` (start sets of a file that is not recognised audio: its first 128 KiB and its last 128 KiB)."; echo
    echo "| pull | body bytes transferred | tracks shrunk or evicted | states after | bytes held | wall s |"
    echo "|---|---|---|---|---|---|"
    while IFS='|' read -r a b c d e f; do echo "| $a | $b | $c | $d | $e | $f |"; done <"$rows"
    echo
    echo "- the run's one line: \`${line:-none}\`"
    echo "- $played read through serve to its end, then a pull: $after_play body bytes transferred; the track is now $played_state"
    echo "- planning $n2 tracks (\`cache evict --dry-run\`: index read + plan + dry reduction, whole process): median ${plan_wall} s over $RUNS runs"
    echo "- every track ready behind ${latency} s per request ($n3 random tracks of 1 MiB, nginx behind \`bench/faultproxy.py --latency $latency\`,"
    echo "  \`max_size\` = the start sets + 16 KiB, jobs 4, median of $RUNS): a start set's parts at once ${at_once} s ($gets_at_once GETs),"
    echo "  one after the other (\`--segments 1\`) ${one_by_one} s ($gets_one GETs); the floor, ceil($n3 / 4) round trips: ${floor} s"
    echo
    echo "Heads shortened to fit (\`pull.shorten_heads\`): 60 MP3s of 4 MiB at 256 kbit/s with small tags from nginx WebDAV,"
    echo "one cache, a pull at each budget in turn (the last back at 60 MiB):"; echo
    echo "| max_size | heads kept | settings | tracks without a head | mean head, bytes | tracks with a head | complete | bytes held | body bytes fetched |"
    echo "|---|---|---|---|---|---|---|---|---|"
    while IFS='|' read -r a b c d e f g h i; do echo "| $a | $b | $c | $d | $e | $f | $g | $h | $i |"; done <"$rows4"
} >"$out"
cat "$out"
[ "$failures" = 0 ] || { echo "bench: $failures budget checks failed" >&2; exit 1; }
