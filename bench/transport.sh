#!/usr/bin/env bash
# Side-by-side transport benchmark on loopback: curl (4 parallel, one process) vs CurlTransport
# (transport-bench, 4 concurrent, pwrite into files; its tasks run on Swift's cooperative pool, like the
# engine's). nginx serves files from tmpfs on a free port.
# Prints MiB/s, CPU seconds per GiB and peak RSS for each workload. QUICK=1 uses smaller workloads;
# RUNS (default 5) repetitions per client, interleaved, give medians; BUFFERS="16 100" adds buffer-size rows.
# Usage: bench/transport.sh            (from the repository root; builds transport-bench in release)
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in nginx curl python3; do
    command -v "$tool" >/dev/null || { echo "transport.sh: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "transport.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }

swift build -c release --product transport-bench >&2
BENCH="$(swift build -c release --show-bin-path)/transport-bench"

SHM=${SHM:-/dev/shm}
WORK=$(mktemp -d "$SHM/cloudsync-bench.XXXXXX")
chmod 755 "$WORK"  # nginx workers may run as another user
NGINX_PID=""
cleanup() {
    if [ -n "$NGINX_PID" ]; then kill "$NGINX_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ "${QUICK:-0}" = 1 ]; then
    WORKLOADS=("50 8388608 8MiB" "500 204800 200KiB" "1 268435456 256MiB")
else
    WORKLOADS=("200 8388608 8MiB" "2000 204800 200KiB" "1 1073741824 1GiB")
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/www" "$WORK/nginx" "$WORK/out"
chmod 755 "$WORK/www"
cat > "$WORK/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $WORK/www;
    }
}
CONF
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" 2>"$WORK/nginx/stderr" &
NGINX_PID=$!
for _ in $(seq 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" || true)
    [ "$code" != "000" ] && break
    sleep 0.1
done

# measure CLIENT BYTES CMD...: runs CMD under /usr/bin/time -v and appends "CLIENT MiB/s CPU-s/GiB RSS-MiB" to $ROWS.
measure() {
    local client=$1 bytes=$2; shift 2
    rm -rf "$WORK/out"; mkdir -p "$WORK/out"
    /usr/bin/time -v -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/stderr.txt" || { cat "$WORK/stderr.txt" >&2; exit 1; }
    python3 - "$WORK/time.txt" "$bytes" "$client" >>"$ROWS" <<'PY'
import sys, re
t = open(sys.argv[1]).read()
b = int(sys.argv[2])
def f(key):
    return re.search(re.escape(key) + r": (.*)", t).group(1).strip()
user, sys_ = float(f("User time (seconds)")), float(f("System time (seconds)"))
el = f("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(el)))
rss = int(f("Maximum resident set size (kbytes)")) / 1024
print("%s\t%.1f\t%.3f\t%.1f" % (sys.argv[3], b / 2**20 / max(secs, 0.01), (user + sys_) / (b / 2**30), rss))
PY
}

RUNS=${RUNS:-5}
echo "Each client runs $RUNS times, interleaved; medians of MiB/s and CPU-s/GiB, peak RSS of any run."
printf "%-16s %-16s %9s %9s %8s\n" workload client "MiB/s" "CPU-s/GiB" "RSS-MiB"
for w in "${WORKLOADS[@]}"; do
    set -- $w
    count=$1 size=$2 label=$3
    rm -rf "$WORK/www"/*
    mkdir -p "$WORK/www/$label"
    head -c "$size" /dev/urandom > "$WORK/www/$label/f0"
    for i in $(seq 1 $((count - 1))); do ln "$WORK/www/$label/f0" "$WORK/www/$label/f$i"; done
    : > "$WORK/list.txt"; : > "$WORK/curl.cfg"
    for i in $(seq 0 $((count - 1))); do
        echo "$label/f$i" >> "$WORK/list.txt"
        printf 'url = "http://127.0.0.1:%s/%s/f%s"\noutput = "%s/out/f%s"\n' "$PORT" "$label" "$i" "$WORK" "$i" >> "$WORK/curl.cfg"
    done
    total=$((count * size))
    # Warm the page cache and nginx once.
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/$label/f0"
    ROWS=$WORK/rows.txt; : > "$ROWS"
    ct=("$BENCH" --base "http://127.0.0.1:$PORT/" --list "$WORK/list.txt" --out "$WORK/out" --jobs 4)
    for _ in $(seq "$RUNS"); do
        measure "curl -Z (4)" $total curl -fsS -Z --parallel-max 4 -K "$WORK/curl.cfg"
        measure "CurlTransport(4)" $total "${ct[@]}"
        for kib in ${BUFFERS:-}; do measure "CT buf ${kib}KiB" $total "${ct[@]}" --buffer-kib "$kib"; done
    done
    python3 - "$ROWS" "$count x $label" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    client, rate, cpu, rss = line.rstrip("\n").split("\t")
    rows.setdefault(client, []).append((float(rate), float(cpu), float(rss)))
for client, v in rows.items():
    print("%-16s %-16s %9.0f %9.2f %8.1f" % (sys.argv[2], client, statistics.median(r[0] for r in v),
          statistics.median(r[1] for r in v), max(r[2] for r in v)))
PY
done
