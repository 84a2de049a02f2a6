#!/usr/bin/env bash
# Encryption at rest (#26): the same pull into a plaintext and into an encrypted cache (cache.encrypt = true),
# interleaved in one run, on a disk filesystem (disk_dir in lib.sh: as root a fresh journaled ext4 in an image under
# BENCH_DISK, default /var/tmp) and on tmpfs; then `cloudsync
# serve` on each of the two caches: time to first byte of a cached track (curl -r 0-0, median of 50) and the
# throughput of reading every cached track through it (curl, one after another; the median of RUNS interleaved
# reads, with serve's CPU per GiB). Library: 60 x 8 MiB from nginx WebDAV (--quick: 10 x 1 MiB). The first run
# of each is checked byte for byte (through serve for the encrypted cache: its files are ciphertext). Then the
# same pulls (disk only) from nginx with `limit_rate BENCH_LIMIT_RATE` per connection (default 32m: with pull's
# 4 connections about 1 Gbit/s, a fast real link), where the network rather than this 2-core machine's CPU sets
# the pace. Prints the ratios encrypted / plaintext, and the cipher's own speed on one core (openssl speed) with
# the serve ratio it allows one thread; asserts no timing.
#   usage: bench/encryption.sh [--quick]
#   env: BENCH_RUNS, CLOUDSYNC_BIN, BENCH_SHM, BENCH_DISK, BENCH_DISK_IMAGE, BENCH_LIMIT_RATE
source "$(dirname "$0")/lib.sh"
need nginx curl
if [ $QUICK = 1 ]; then count=10 size=$((1 << 20)); else count=60 size=$((8 << 20)); fi
out=$RESULTS/encryption$([ $QUICK = 1 ] && echo -quick || true).md
lib=$WORK/lib; make_lib "$lib" "$count" "$size"
expect=$(tree_sum "$lib")
start_nginx "$lib"
gib=$(python3 -c "print($count * $size / 2**30)")
disk_dir; disk=$DISK_DIR
failures=0
{ echo "# Encryption at rest: plaintext vs encrypted cache ($(date -u +%F))"; echo; machine_line
  echo "Disk destination: $DISK_NOTE."
  echo "Library: $count x $((size >> 20)) MiB from nginx WebDAV; runs per mode: $RUNS (interleaved)."; echo; } >"$out"

# pulls WHERE HEADING RATIO-LABEL: a fresh folder under WHERE with a plaintext and an encrypted cache of nginx's
# library (NGINX_PORT), RUNS interleaved pulls of each, the plaintext result checked, a table and the ratio
# appended to $out. Sets base (the folder) and fs (its filesystem type).
pulls() {
    local where=$1 heading=$2 label=$3 res p e
    base=$(mktemp -d "$where/cloudsync-enc.XXXXXX")
    webdav_config "$WORK/plain.toml" "$base/plain" "http://127.0.0.1:$NGINX_PORT/dav/"
    webdav_config "$WORK/enc.toml" "$base/enc" "http://127.0.0.1:$NGINX_PORT/dav/" "encrypt = true"
    fs=$(fstype "$base")
    log "pull into $base ($fs)${heading:+, $heading}"
    res=$WORK/pull-$RANDOM.txt; : >"$res"
    for run in $(seq 1 "$RUNS"); do
        for mode in plain enc; do
            rm -rf "${base:?}/$mode"; sync -f "$base"
            measure "$res" "pull-$mode" "$BIN" --config "$WORK/$mode.toml" pull --quiet
        done
    done
    if [ "$(tree_sum "$base/plain/tracks/bench")" != "$expect" ]; then echo "bench: plaintext pull ($fs${heading:+, $heading}): files differ" >&2; failures=$((failures+1)); fi
    { echo "## pull on $fs ($where)${heading:+, $heading}"; echo; summarize "$res" "$gib"; echo
      p=$(median_of "$res" pull-plain 1); e=$(median_of "$res" pull-enc 1)
      echo "Throughput encrypted / plaintext$label: $(python3 -c "print(f'{$p/$e:.2f}')") (wall $e s vs $p s; goal >= 0.9)."; echo; } >>"$out"
}

# The cipher's own cost on this CPU, one core, hot 64 KiB blocks (0 when the openssl program is missing, and in
# --quick mode): with serve's plaintext CPU per GiB it bounds the encrypted/plaintext serve ratio of one thread.
# `openssl speed -seconds` ends on SIGALRM, which a parent may have blocked (the Swift test runner does, and the
# mask is inherited): it is unblocked first, and the run is capped anyway.
cipher=0
if [ "$QUICK" = 0 ] && command -v openssl >/dev/null 2>&1; then
    cipher=$(timeout 30 python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])
os.execvp(sys.argv[1], sys.argv[1:])' openssl speed -evp chacha20-poly1305 -bytes 65536 -seconds 2 2>/dev/null \
        | awk '/^ChaCha20-Poly1305/ {v=$NF; sub(/k$/, "", v); print v * 1000}' || true)
    cipher=${cipher:-0}
fi

for where in "$disk" "$SHM"; do
    pulls "$where" "" ""

    # serve on each cache: time to first byte of a cached track (median of 50), one checked read of every track,
    # then RUNS interleaved reads of every track (one curl over one connection, one after another, to /dev/null)
    # timed, with serve's own CPU time.
    first=$(cd "$lib" && find . -type f | sort | head -1 | sed 's|^\./||')
    reads=$WORK/serve-$RANDOM.txt; : >"$reads"
    for mode in plain enc; do
        start_serve "$WORK/$mode.toml"
        eval "pid_$mode=$SERVE_PID"
        url="http://127.0.0.1:$SERVE_PORT/tracks/bench/$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1]))' "$first")"
        curl -s -o /dev/null "$url"
        ttfb=$(for _ in $(seq 1 50); do curl -s -o /dev/null -r 0-0 -w '%{time_starttransfer}\n' "$url"; done | median)
        eval "ttfb_$mode=$ttfb"
        rm -rf "$WORK/got"; mkdir -p "$WORK/got"
        python3 - "$lib" "$WORK/got" "http://127.0.0.1:$SERVE_PORT/tracks/bench/" "$WORK/$mode" <<'PY'
import os, sys, urllib.parse
root, got, base, cfg = sys.argv[1:5]
with open(cfg + ".check.cfg", "w") as check, open(cfg + ".read.cfg", "w") as read:
    for d, _, files in sorted(os.walk(root)):
        for n in sorted(files):
            rel = os.path.relpath(os.path.join(d, n), root)
            os.makedirs(os.path.dirname(os.path.join(got, rel)), exist_ok=True)
            url = f'url = "{base}{urllib.parse.quote(rel)}"\n'
            check.write(url + f'output = "{os.path.join(got, rel)}"\n')
            read.write(url + 'output = "/dev/null"\n')
PY
        curl -s --fail -K "$WORK/$mode.check.cfg"
        if [ "$(tree_sum "$WORK/got")" != "$expect" ]; then echo "bench: serve ($mode): bytes differ" >&2; failures=$((failures+1)); fi
    done
    for run in $(seq 1 "$RUNS"); do
        for mode in plain enc; do
            eval "pid=\$pid_$mode"
            c0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); start=$(date +%s.%N)
            curl -s --fail -K "$WORK/$mode.read.cfg"
            end=$(date +%s.%N); c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            echo "$mode $(python3 -c "print(f'{$end-$start:.4f}')") $(python3 -c "print(($c1-$c0)/$(getconf CLK_TCK))")" >>"$reads"
        done
    done
    stop_pid "$pid_plain"; stop_pid "$pid_enc"
    { echo "serve on $fs: time to first byte of a cached track, median of 50: plaintext $(python3 -c "print(f'{$ttfb_plain*1000:.2f}')") ms, encrypted $(python3 -c "print(f'{$ttfb_enc*1000:.2f}')") ms (goal <= 2 ms)."
      python3 - "$reads" "$count" "$size" "$fs" "$cipher" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
count, size, fs, cipher = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
gib = count * size / 2**30
def med(mode, field): return statistics.median(float(r[field]) for r in rows if r[0] == mode)
p, e = med("plain", 1), med("enc", 1)
print(f"serve on {fs}: every track read through it ({count} files, one curl over one connection, one after another; "
      f"median of {len(rows) // 2}): plaintext {p:.3f} s ({count * size / p / 1e6:.0f} MB/s, serve CPU {med('plain', 2) / gib:.2f} s/GiB), "
      f"encrypted {e:.3f} s ({count * size / e / 1e6:.0f} MB/s, serve CPU {med('enc', 2) / gib:.2f} s/GiB), "
      f"throughput encrypted / plaintext {p / e:.2f} (goal >= 0.8).")
if cipher > 0:
    c, plain_cpu = 2**30 / cipher, med("plain", 2) / gib
    print(f"The cipher alone (`openssl speed -evp chacha20-poly1305 -bytes 65536`, one core): {cipher / 1e9:.2f} GB/s, "
          f"{c:.2f} s/GiB; with plaintext serve's {plain_cpu:.2f} s/GiB, one thread that reads, opens and sends "
          f"reaches at most {plain_cpu / (plain_cpu + c):.2f} of plaintext where serve's thread is the bottleneck.")
PY
      echo; } >>"$out"
    rm -rf "$base"
done

# The same pulls at a link rate: loopback above is CPU-bound (nginx, the network thread and the cipher share two
# cores); a real cloud link is not.
rate=${BENCH_LIMIT_RATE:-32m}
NGINX_LIMIT_RATE=$rate start_nginx "$lib"
pulls "$disk" "nginx limit_rate $rate per connection (4 connections)" " at this link rate"
rm -rf "$base"
cat "$out"
[ "$failures" = 0 ] || die "$failures check(s) failed"
