#!/usr/bin/env bash
# Throughput: cloudsync pull vs rclone copy --transfers 4, aria2c -j4 and curl --parallel-max 4, same libraries,
# same loopback servers, in one run. Libraries: 200 x 8 MiB, 2000 x 200 KiB, 1 x 1 GiB (--quick: 20 x 1 MiB,
# 100 x 20 KiB, 1 x 32 MiB). Servers: nginx (plain HTTP for curl/aria2c/rclone :http:, WebDAV dav-ext for
# cloudsync) and rclone serve webdav (for cloudsync and rclone copy :webdav:). Each tool runs RUNS times
# (default 5, --quick 1), interleaved; the first run of every tool is checked byte for byte.
# --segments instead compares one big file (1 GiB; --quick: 64 MiB) over one connection and over several:
# cloudsync with pull.segments = 1 and 4, curl, aria2c -x1 and -x4 -s4, rclone copy --multi-thread-streams 1
# and 4, first on plain nginx, then on nginx with limit_rate BENCH_LIMIT_RATE (default 50m) per connection.
#   usage: bench/throughput.sh [--quick] [--segments]    env: BENCH_RUNS, CLOUDSYNC_BIN, BENCH_SHM, BENCH_LIMIT_RATE
source "$(dirname "$0")/lib.sh"
need rclone aria2c nginx
SEGMENTS=0; for arg in "$@"; do [ "$arg" = --segments ] && SEGMENTS=1; done

# check_tree DIR EXPECTED WHAT: counts a failure when DIR's tree_sum is not EXPECTED.
check_tree() {
    local have; have=$(tree_sum "$1")
    if [ "$have" != "$2" ]; then echo "bench: $3: files differ ($have vs $2)" >&2; failures=$((failures+1)); fi
    return 0
}

if [ $SEGMENTS = 1 ]; then
    out=$RESULTS/throughput-segments$([ $QUICK = 1 ] && echo -quick || true).md
    if [ $QUICK = 1 ]; then name=1x64MiB size=$((64 << 20)); else name=1x1GiB size=$((1 << 30)); fi
    limit=${BENCH_LIMIT_RATE:-50m}
    lib=$WORK/lib-$name; make_lib "$lib" 1 "$size"
    expect=$(tree_sum "$lib")
    gib=$(python3 -c "print($size/2**30)")
    failures=0
    { echo "# Throughput of one big file: segments ($(date -u +%F))"; echo; machine_line; echo "Runs per tool: $RUNS (interleaved)."; echo; } >"$out"
    for server in plain "limit_rate $limit"; do
        if [ "$server" = plain ]; then NGINX_LIMIT_RATE="" start_nginx "$lib"; else NGINX_LIMIT_RATE=$limit start_nginx "$lib"; fi
        log "segments $name, nginx ($server) :$NGINX_PORT"
        webdav_config "$WORK/cs-seg1.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/" "[pull]" "segments = 1"
        webdav_config "$WORK/cs-seg4.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/" "[pull]" "segments = 4"
        url=http://127.0.0.1:$NGINX_PORT/lib/Big/One/track.flac
        quiet_aria=(--file-allocation=none --console-log-level=error --summary-interval=0 --download-result=hide --allow-overwrite=true)
        res=$WORK/segments-$RANDOM.txt; : >"$res"
        tools=(cloudsync-seg1 cloudsync-seg4 curl aria2c-x1 aria2c-x4 rclone-streams1 rclone-streams4)
        for run in $(seq 1 "$RUNS"); do
            for tool in "${tools[@]}"; do
                rm -rf "$WORK/dst" "$WORK/cache"; mkdir -p "$WORK/dst/Big/One"
                got=$WORK/dst
                case $tool in
                cloudsync-seg1) measure "$res" "$tool" env CLOUDSYNC_CONFIG="$WORK/cs-seg1.toml" "$BIN" pull --quiet; got=$WORK/cache/tracks/bench ;;
                cloudsync-seg4) measure "$res" "$tool" env CLOUDSYNC_CONFIG="$WORK/cs-seg4.toml" "$BIN" pull --quiet; got=$WORK/cache/tracks/bench ;;
                curl) measure "$res" "$tool" curl --fail -s -o "$WORK/dst/Big/One/track.flac" "$url" ;;
                aria2c-x1) measure "$res" "$tool" aria2c -x1 -s1 -d "$WORK/dst/Big/One" -o track.flac "${quiet_aria[@]}" "$url" ;;
                aria2c-x4) measure "$res" "$tool" aria2c -x4 -s4 -d "$WORK/dst/Big/One" -o track.flac "${quiet_aria[@]}" "$url" ;;
                rclone-streams1) measure "$res" "$tool" rclone copy :http: "$WORK/dst" --config /dev/null \
                        --http-url "http://127.0.0.1:$NGINX_PORT/lib/" --multi-thread-streams 1 ;;
                rclone-streams4) measure "$res" "$tool" rclone copy :http: "$WORK/dst" --config /dev/null \
                        --http-url "http://127.0.0.1:$NGINX_PORT/lib/" --multi-thread-streams 4 --multi-thread-cutoff 64M ;;
                esac
                [ "$run" = 1 ] && check_tree "$got" "$expect" "$tool on $server"
            done
        done
        rm -rf "$WORK/dst" "$WORK/cache"
        {
            echo "## $name, nginx $server"; echo
            summarize "$res" "$gib"; echo
            python3 - "$res" <<'PY2'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    p = l.split(); rows.setdefault(p[0], []).append(p)
wall = {k: statistics.median(float(r[1]) for r in v) for k, v in rows.items()}
cpu = {k: statistics.median(float(r[2]) + float(r[3]) for r in v) for k, v in rows.items()}
def div(a, b): return a / b if b > 0 else float("inf")
print(f"- wall cloudsync segments 4 / segments 1 = {div(wall['cloudsync-seg4'], wall['cloudsync-seg1']):.2f}; "
      f"CPU {div(cpu['cloudsync-seg4'], cpu['cloudsync-seg1']):.2f}")
print(f"- wall cloudsync segments 4 / aria2c -x4 = {div(wall['cloudsync-seg4'], wall['aria2c-x4']):.2f}, "
      f"/ rclone --multi-thread-streams 4 = {div(wall['cloudsync-seg4'], wall['rclone-streams4']):.2f}")
print(f"- wall cloudsync segments 1 / curl = {div(wall['cloudsync-seg1'], wall['curl']):.2f}")
PY2
            echo
        } >>"$out"
        stop_servers
    done
    echo "Commands: see bench/throughput.sh --segments (cloudsync pull --quiet, chunk 8 MiB, checkpoint 8 MiB, segment_threshold 64 MiB; aria2c -x1 -s1 / -x4 -s4 --file-allocation=none; rclone copy :http: --multi-thread-streams 1 / 4 --multi-thread-cutoff 64M; curl -o)." >>"$out"
    cat "$out"
    [ "$failures" = 0 ] || { echo "bench: $failures tool runs produced wrong files" >&2; exit 1; }
    exit 0
fi
out=$RESULTS/throughput$([ $QUICK = 1 ] && echo -quick || true).md
if [ $QUICK = 1 ]; then sets=("20x1MiB 20 1048576" "100x20KiB 100 20480" "1x32MiB 1 33554432")
else sets=("200x8MiB 200 8388608" "2000x200KiB 2000 204800" "1x1GiB 1 1073741824"); fi
obscured=$(rclone obscure demo-pass)
failures=0
{ echo "# Throughput ($(date -u +%F))"; echo; machine_line; echo "Runs per tool: $RUNS (interleaved)."; [ $QUICK = 1 ] && echo "Quick mode: sizes are too small for the ratios to mean anything; it checks that every tool runs and gets the right bytes."; echo; } >"$out"

for set in "${sets[@]}"; do
    read -r name count size <<<"$set"
    lib=$WORK/lib-$name; make_lib "$lib" "$count" "$size"
    expect=$(tree_sum "$lib")
    gib=$(python3 -c "print($count*$size/2**30)")
    start_nginx "$lib"; start_rclone_webdav "$lib"
    log "throughput $name: nginx :$NGINX_PORT, rclone serve webdav :$RCLONE_PORT"
    webdav_config "$WORK/cs-rclone.toml" "$WORK/cache" "http://127.0.0.1:$RCLONE_PORT/"
    webdav_config "$WORK/cs-nginx.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
    # aria2c input file and curl config over the same URLs.
    python3 - "$lib" "$NGINX_PORT" "$WORK/dst" "$WORK/aria2.txt" "$WORK/curl.cfg" <<'PY'
import os, sys
from urllib.parse import quote
lib, port, dst, aria, cfg = sys.argv[1:6]
with open(aria, "w") as a, open(cfg, "w") as c:
    for d, _, files in os.walk(lib):
        for n in sorted(files):
            rel = os.path.relpath(os.path.join(d, n), lib)
            url = f"http://127.0.0.1:{port}/lib/" + quote(rel)
            a.write(f"{url}\n  out={rel}\n")
            c.write(f'url = "{url}"\noutput = "{dst}/{rel}"\n')
PY
    res=$WORK/$name.txt; : >"$res"
    tools=(cloudsync@rclone-dav rclone-copy@rclone-dav cloudsync@nginx-dav rclone-copy@nginx-http aria2c@nginx-http curl@nginx-http)
    for run in $(seq 1 "$RUNS"); do
        for tool in "${tools[@]}"; do
            rm -rf "$WORK/dst" "$WORK/cache"; mkdir -p "$WORK/dst"
            case $tool in
            cloudsync@rclone-dav) measure "$res" "$tool" env CLOUDSYNC_CONFIG="$WORK/cs-rclone.toml" "$BIN" pull --quiet; got=$WORK/cache/tracks/bench ;;
            cloudsync@nginx-dav)  measure "$res" "$tool" env CLOUDSYNC_CONFIG="$WORK/cs-nginx.toml" "$BIN" pull --quiet; got=$WORK/cache/tracks/bench ;;
            rclone-copy@rclone-dav) measure "$res" "$tool" rclone copy :webdav: "$WORK/dst" --config /dev/null --transfers 4 \
                    --webdav-url "http://127.0.0.1:$RCLONE_PORT/" --webdav-user demo --webdav-pass "$obscured"; got=$WORK/dst ;;
            rclone-copy@nginx-http) measure "$res" "$tool" rclone copy :http: "$WORK/dst" --config /dev/null --transfers 4 \
                    --http-url "http://127.0.0.1:$NGINX_PORT/lib/"; got=$WORK/dst ;;
            aria2c@nginx-http) measure "$res" "$tool" aria2c -j4 -i "$WORK/aria2.txt" -d "$WORK/dst" --file-allocation=none \
                    --console-log-level=error --summary-interval=0 --download-result=hide --allow-overwrite=true; got=$WORK/dst ;;
            curl@nginx-http) measure "$res" "$tool" curl --parallel --parallel-max 4 --fail -s --create-dirs -K "$WORK/curl.cfg"; got=$WORK/dst ;;
            esac
            [ "$run" = 1 ] && check_tree "$got" "$expect" "$tool on $name"
        done
    done
    rm -rf "$WORK/dst" "$WORK/cache"
    {
        echo "## $name ($(python3 -c "print(f'{$gib:.3f}')") GiB)"; echo
        summarize "$res" "$gib"; echo
        python3 - "$res" "$name" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    p = l.split(); rows.setdefault(p[0], []).append(p)
wall = {k: statistics.median(float(r[1]) for r in v) for k, v in rows.items()}
cpu = {k: statistics.median(float(r[2]) + float(r[3]) for r in v) for k, v in rows.items()}
rss = {k: max(int(r[4]) for r in v) / 1024 for k, v in rows.items()}
goal = {"200x8MiB": 0.8, "2000x200KiB": 0.5, "1x1GiB": 1.0}.get(sys.argv[2])
def div(a, b): return a / b if b > 0 else float("inf")
def line(text, ok): print(f"- {text}: **{'met' if ok else 'not met'}**")
r = div(wall["cloudsync@rclone-dav"], wall["rclone-copy@rclone-dav"])
line(f"wall cloudsync / rclone copy (both on rclone serve webdav) = {r:.2f}" + (f" (goal ≤ {goal})" if goal else ""), goal is None or r <= goal)
r2 = div(wall["cloudsync@nginx-dav"], wall["rclone-copy@nginx-http"])
print(f"- wall cloudsync@nginx-dav / rclone copy :http: on nginx = {r2:.2f}")
for k in ("cloudsync@nginx-dav", "cloudsync@rclone-dav"):
    r3 = div(wall[k], wall["curl@nginx-http"])
    line(f"wall {k} / curl@nginx-http = {r3:.2f} (goal ≤ 1.0, never behind curl)", r3 <= 1.0)
c = div(cpu["cloudsync@nginx-dav"], cpu["curl@nginx-http"])
line(f"CPU cloudsync@nginx-dav / curl = {c:.2f} (goal ≤ 1.0)", c <= 1.0)
m = max(rss["cloudsync@nginx-dav"], rss["cloudsync@rclone-dav"])
line(f"cloudsync peak RSS = {m:.1f} MiB (goal ≤ 40)", m <= 40)
PY
        echo
    } >>"$out"
    stop_servers
    rm -rf "$lib"
done
echo "Commands: see bench/throughput.sh (cloudsync pull --quiet with pull.jobs = 4, chunk 8 MiB, checkpoint 8 MiB; rclone copy --transfers 4; aria2c -j4 --file-allocation=none; curl --parallel --parallel-max 4 -K list)." >>"$out"
cat "$out"
[ "$failures" = 0 ] || { echo "bench: $failures tool runs produced wrong files" >&2; exit 1; }
