#!/usr/bin/env bash
# Throughput: cloudsync pull vs rclone copy --transfers 4 and curl --parallel-max 4, same libraries, same loopback
# servers, in one run, with the destination (cloudsync's cache, the peers' folder) first on a disk filesystem
# (as root: a fresh journaled ext4 in an image under BENCH_DISK, default /var/tmp; see disk_dir in lib.sh) and
# then on tmpfs (/dev/shm). Every peer is followed by `sync -f` on
# its folder, so it ends with the same durability as a pull (whose tracks are on disk when it exits); every run
# starts after a `sync -f`, so none pays for the previous one's writeback. Libraries: 200 x 8 MiB, 2000 x 200 KiB,
# the same as real tagged MP3s (2000x200KiB-mp3), 1 x 1 GiB (--quick: 20 x 1 MiB, 100 x 20 KiB and as MP3s, 1 x 32 MiB). Servers: nginx (plain HTTP for curl, WebDAV dav-ext for
# cloudsync) and rclone serve webdav (for cloudsync and rclone copy :webdav:). Each tool runs RUNS times (default
# 5, --quick 1), interleaved; the first run of every tool is checked byte for byte. `uptime` is logged per run.
# Each run also times the destination's own write of as many bytes (dd conv=fdatasync, no network): on a disk
# slower than the link that is the floor of every tool, and it bounds the ratio against rclone copy + sync -f.
# --segments instead compares one big file (1 GiB; --quick: 64 MiB) over one connection and over several:
# cloudsync with pull.segments = 1 and 4, curl, aria2c -x1 and -x4 -s4, rclone copy --multi-thread-streams 1
# and 4, first on plain nginx, then on nginx with limit_rate BENCH_LIMIT_RATE (default 50m) per connection.
#   usage: bench/throughput.sh [--quick] [--segments]
#   env: BENCH_RUNS, CLOUDSYNC_BIN, BENCH_SHM, BENCH_DISK, BENCH_DISK_IMAGE (0: BENCH_DISK itself), BENCH_LIMIT_RATE,
#        BENCH_SETS (e.g. "200x8MiB 1x1GiB"), BENCH_SETTLE (seconds before each run; default 0)
source "$(dirname "$0")/lib.sh"
need rclone nginx
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
# A set named *-mp3 is real MP3s with tags (make_mp3_lib), the others random bytes (make_lib).
if [ $QUICK = 1 ]; then sets=("20x1MiB 20 1048576" "100x20KiB 100 20480" "100x20KiB-mp3 100 20480" "1x32MiB 1 33554432")
else sets=("200x8MiB 200 8388608" "2000x200KiB 2000 204800" "2000x200KiB-mp3 2000 204800" "1x1GiB 1 1073741824"); fi
if [ -n "${BENCH_SETS:-}" ]; then
    chosen=(); for set in "${sets[@]}"; do case " $BENCH_SETS " in *" ${set%% *} "*) chosen+=("$set") ;; esac; done
    sets=("${chosen[@]}")
fi
disk_dir; DISKWORK=$DISK_DIR
places=("$(fstype "$DISKWORK"):$DISKWORK" "$(fstype "$WORK"):$WORK/place")
mkdir -p "$WORK/place"
obscured=$(rclone obscure demo-pass)
failures=0
# BENCH_SETTLE: seconds to wait before each run, after the previous run's files are deleted and synced (default 0).
# On 2026-12-07 an ad-hoc A/B suggested the run after a deletion pays for it; 3 s here changed no conclusion
# (bench/README "Machine and noise").
SETTLE=${BENCH_SETTLE:-0}
{ echo "# Throughput ($(date -u +%F))"; echo; machine_line; echo "Runs per tool: $RUNS (interleaved). Destinations: ${places[*]%%:*}; peers end with \`sync -f\`; each run starts $SETTLE s after the previous run's files are deleted."
  echo "Disk destination: $DISK_NOTE."
  [ $QUICK = 1 ] && echo "Quick mode: sizes are too small for the ratios to mean anything; it checks that every tool runs and gets the right bytes."; echo; } >"$out"

for set in "${sets[@]}"; do
    read -r name count size <<<"$set"
    lib=$WORK/lib-$name
    case $name in *-mp3) make_mp3_lib "$lib" "$count" "$size" ;; *) make_lib "$lib" "$count" "$size" ;; esac
    expect=$(tree_sum "$lib")
    gib=$(python3 -c "print($count*$size/2**30)")
    start_nginx "$lib"; start_rclone_webdav "$lib"
    log "throughput $name: nginx :$NGINX_PORT, rclone serve webdav :$RCLONE_PORT"
    res=$WORK/$name.txt; : >"$res"; loads=$WORK/$name.loads; : >"$loads"
    for run in $(seq 1 "$RUNS"); do
        for place in "${places[@]}"; do
            fs=${place%%:*} dir=${place#*:}
            webdav_config "$WORK/cs-rclone.toml" "$dir/cache" "http://127.0.0.1:$RCLONE_PORT/"
            webdav_config "$WORK/cs-nginx.toml" "$dir/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
            python3 - "$lib" "$NGINX_PORT" "$dir/dst" "$WORK/curl.cfg" <<'PY'
import os, sys
from urllib.parse import quote
lib, port, dst, cfg = sys.argv[1:5]
with open(cfg, "w") as c:
    for d, _, files in os.walk(lib):
        for n in sorted(files):
            rel = os.path.relpath(os.path.join(d, n), lib)
            c.write(f'url = "http://127.0.0.1:{port}/lib/{quote(rel)}"\noutput = "{dst}/{rel}"\n')
PY
            for tool in cloudsync@rclone-dav rclone-copy@rclone-dav cloudsync@nginx-dav curl@nginx-http dd-floor; do
                rm -rf "$dir/dst" "$dir/cache"; mkdir -p "$dir/dst"; sync -f "$dir"; sleep "$SETTLE"
                echo "$tool/$fs $(cut -d' ' -f1 /proc/loadavg)" >>"$loads"
                case $tool in
                cloudsync@rclone-dav) measure "$res" "$tool/$fs" env CLOUDSYNC_CONFIG="$WORK/cs-rclone.toml" "$BIN" pull --quiet; got=$dir/cache/tracks/bench ;;
                cloudsync@nginx-dav)  measure "$res" "$tool/$fs" env CLOUDSYNC_CONFIG="$WORK/cs-nginx.toml" "$BIN" pull --quiet; got=$dir/cache/tracks/bench ;;
                rclone-copy@rclone-dav) measure "$res" "$tool/$fs" bash -c 'rclone copy :webdav: "$1" --config /dev/null --transfers 4 \
                        --webdav-url "$2" --webdav-user demo --webdav-pass "$3" && sync -f "$1"' _ "$dir/dst" "http://127.0.0.1:$RCLONE_PORT/" "$obscured"
                    got=$dir/dst ;;
                curl@nginx-http) measure "$res" "$tool/$fs" bash -c 'curl --parallel --parallel-max 4 --fail -s --create-dirs -K "$2" && sync -f "$1"' \
                        _ "$dir/dst" "$WORK/curl.cfg"; got=$dir/dst ;;
                # The destination's own speed for the same bytes: one file written and fdatasynced, no network.
                dd-floor) measure "$res" "$tool/$fs" dd if=/dev/zero of="$dir/dst/floor" bs=1M count=$(( (count * size + (1 << 20) - 1) >> 20 )) \
                        conv=fdatasync status=none; got= ;;
                esac
                [ "$run" = 1 ] && [ -n "$got" ] && check_tree "$got" "$expect" "$tool/$fs on $name"
            done
            rm -rf "$dir/dst" "$dir/cache"
        done
    done
    {
        echo "## $name ($(python3 -c "print(f'{$gib:.3f}')") GiB)"; echo
        summarize "$res" "$gib"; echo
        python3 - "$res" "$name" "$loads" "${places[@]%%:*}" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    p = l.split(); rows.setdefault(p[0], []).append(p)
loads = [float(l.split()[1]) for l in open(sys.argv[3])]
wall = {k: statistics.median(float(r[1]) for r in v) for k, v in rows.items()}
cpu = {k: statistics.median(float(r[2]) + float(r[3]) for r in v) for k, v in rows.items()}
machine = {k: statistics.median(float(r[6]) for r in v) for k, v in rows.items()}
rss = {k: max(int(r[4]) for r in v) / 1024 for k, v in rows.items()}
name = sys.argv[2]
def div(a, b): return a / b if b > 0 else float("inf")
def line(text, goal, value): print(f"- {text} = {value:.2f}" + (f" (goal ≤ {goal}): **{'met' if value <= goal else 'not met'}**" if goal else ""))
print(f"- load average (1 min) at the start of the runs: median {statistics.median(loads):.1f}, {min(loads):.1f}–{max(loads):.1f}")
for fs in sys.argv[4:]:
    g = lambda k: wall.get(f"{k}/{fs}", float("nan"))
    line(f"{fs}: wall cloudsync / rclone copy + sync -f (both on rclone serve webdav)", 0.8 if name.startswith("200x") else None,
         div(g("cloudsync@rclone-dav"), g("rclone-copy@rclone-dav")))
    line(f"{fs}: wall cloudsync@nginx-dav / curl --parallel + sync -f", 1.0 if not name.startswith("200x") else None,
         div(g("cloudsync@nginx-dav"), g("curl@nginx-http")))
    c = div(cpu.get(f"cloudsync@nginx-dav/{fs}", 0), cpu.get(f"curl@nginx-http/{fs}", 0))
    line(f"{fs}: CPU cloudsync@nginx-dav / curl", 1.0, c)
    m = div(machine.get(f"cloudsync@nginx-dav/{fs}", 0), machine.get(f"curl@nginx-http/{fs}", 0))
    line(f"{fs}: the machine's CPU during cloudsync@nginx-dav / during curl (kernel writeback and nginx included)", None, m)
    floor = g("dd-floor")
    print(f"- {fs}: the destination's own write of the same bytes (dd conv=fdatasync, no network): {floor:.2f} s; "
          f"cloudsync@rclone-dav / dd = {div(g('cloudsync@rclone-dav'), floor):.2f}, "
          f"dd / rclone copy + sync -f = {div(floor, g('rclone-copy@rclone-dav')):.2f} (where the disk, not the link, "
          f"sets the pace, no tool's ratio against rclone goes below this)")
m = max(v for k, v in rss.items() if k.startswith("cloudsync"))
line("cloudsync peak RSS MiB", 40, m)
PY
        echo
    } >>"$out"
    stop_servers
    rm -rf "$lib"
done
echo "Commands: see bench/throughput.sh (cloudsync pull --quiet with pull.jobs = 4, chunk 8 MiB, checkpoint 8 MiB; rclone copy --transfers 4 && sync -f; curl --parallel --parallel-max 4 -K list && sync -f)." >>"$out"
cat "$out"
[ "$failures" = 0 ] || { echo "bench: $failures tool runs produced wrong files" >&2; exit 1; }
